// Times kern.reduce's planned phases (compiler/codegen/cuda/ReducePlan.h,
// run as generated steps run them: tests/cuda/reduce_plan_runner.cuh) on the
// shapes of bench/reduce/shapes.txt, next to a cudaMemcpy of the same input
// on the same GPU, and prints one JSON line per shape (kind sum):
//
//   reduce_bench [shapes.txt] [--iters N]
//
// ms: the median over 7 repeats of (N calls captured in a CUDA graph, as
// trun runs steps, launched between two events) / N; stream_ms: the same
// calls issued one by one on the stream (with the host's launch overhead). read_gbps: input bytes / ms. copy_gbps: a device-to-device
// cudaMemcpy of the input's bytes, counted as bytes read + written (what a
// copy moves) / time: the bandwidth a kernel streaming through memory can
// reach. frac_of_copy = read_gbps / copy_gbps: the fraction of that rate
// the reduction sustains on its one stream of reads. floor_ms /
// floor_frac: one launch that only streams through the input (16-byte
// loads, grid-stride), the best of two grid sizes: about what any
// one-launch reduction of these bytes could reach.
#include "compiler/codegen/cuda/cuda_prelude.cuh"
#include "tests/cuda/reduce_plan_runner.cuh"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

#define CHECK_CUDA(call)                                                                  \
  do {                                                                                    \
    cudaError_t e_ = (call);                                                              \
    if (e_ != cudaSuccess) {                                                              \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,                 \
                   cudaGetErrorString(e_));                                               \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)

std::vector<int64_t> parseList(const std::string &s) {
  std::vector<int64_t> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty() && item != "-")
      v.push_back(std::stoll(item));
  return v;
}

// Reads n16 16-byte words, nothing written but (almost never) a word: the floor.
__global__ void __launch_bounds__(256) one_pass_read_kernel(const uint4 *__restrict__ in,
                                                            int64_t n16, unsigned *out) {
  unsigned acc = 0;
#pragma unroll 4
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n16;
       i += int64_t(gridDim.x) * blockDim.x) {
    const uint4 v = in[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  acc = __reduce_xor_sync(0xffffffffu, acc);
  if ((threadIdx.x & 31) == 0 && acc == 0x9e3779b9u) // keeps the loads
    out[blockIdx.x] = acc;
}

// The median over 7 repeats of `iters` calls of `launch` / iters: issued
// one by one on the stream (graph false), or captured once into a CUDA
// graph that is then launched (graph true: how trun runs a step's kernels,
// without the host's launch overhead between them).
template <class F> double timeMs(F launch, int iters, cudaStream_t s, bool graph) {
  // launch(k): call k of the iters; it picks its buffers by k.
  cudaEvent_t a, b;
  CHECK_CUDA(cudaEventCreate(&a));
  CHECK_CUDA(cudaEventCreate(&b));
  cudaGraphExec_t exec = nullptr;
  if (graph) {
    cudaGraph_t g;
    CHECK_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int k = 0; k < iters; ++k)
      launch(k);
    CHECK_CUDA(cudaStreamEndCapture(s, &g));
    CHECK_CUDA(cudaGraphInstantiate(&exec, g, 0));
    CHECK_CUDA(cudaGraphDestroy(g));
  }
  auto run = [&] {
    if (graph)
      CHECK_CUDA(cudaGraphLaunch(exec, s));
    else
      for (int k = 0; k < iters; ++k)
        launch(k);
  };
  run();
  std::vector<double> t;
  for (int rep = 0; rep < 7; ++rep) {
    CHECK_CUDA(cudaEventRecord(a, s));
    run();
    CHECK_CUDA(cudaEventRecord(b, s));
    CHECK_CUDA(cudaEventSynchronize(b));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms / iters);
  }
  CHECK_CUDA(cudaGetLastError());
  if (exec)
    cudaGraphExecDestroy(exec);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

template <class T>
void bench(const std::string &dtype, const std::vector<int64_t> &shape,
           const std::vector<int64_t> &axes, int iters, cudaStream_t s) {
  namespace rp = tcc::codegen::cuda;
  using A = tcc_cuda::acc_t<T>;
  rp::ReducePlan plan = rp::planReduce(rp::reduceRuns(shape, axes), sizeof(T));
  int64_t n = 1, out = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    n *= shape[d];
    if (std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) == axes.end())
      out *= shape[d];
  }
  // Enough copies of the input (and of the copy's destination) that calls
  // rotating through them read from HBM, not from the 50 MB L2 that kept
  // the previous call's data.
  const size_t bytesIn = static_cast<size_t>(n) * sizeof(T);
  const int copies = static_cast<int>(std::min<size_t>(64, (512u << 20) / bytesIn + 1));
  std::vector<T *> ins(copies), copyTo(copies);
  for (int k = 0; k < copies; ++k) {
    CHECK_CUDA(cudaMalloc(&ins[k], bytesIn));
    CHECK_CUDA(cudaMalloc(&copyTo[k], bytesIn));
    CHECK_CUDA(cudaMemset(ins[k], 0x3c, bytesIn)); // small finite values
  }
  T *o = nullptr;
  char *scratch = nullptr;
  CHECK_CUDA(cudaMalloc(&o, out * sizeof(T)));
  CHECK_CUDA(cudaMalloc(&scratch, plan.scratchBytes(sizeof(A)) + 256));
  auto reduce = [&](int k) {
    tcc_test::runReducePlan<T, 0>(plan, ins[k % copies], o, scratch, s);
  };
  auto memcpy = [&](int k) {
    CHECK_CUDA(cudaMemcpyAsync(copyTo[k % copies], ins[k % copies], bytesIn,
                               cudaMemcpyDeviceToDevice, s));
  };
  double ms = timeMs(reduce, iters, s, true), copyMs = timeMs(memcpy, iters, s, true);
  unsigned *sink = nullptr;
  CHECK_CUDA(cudaMalloc(&sink, 132 * 16 * sizeof(unsigned)));
  double floorMs = 1e30;
  for (int perSm : {4, 8}) {
    auto read = [&](int k) {
      const int64_t n16 = static_cast<int64_t>(bytesIn / 16);
      one_pass_read_kernel<<<132 * perSm, 256, 0, s>>>(
          reinterpret_cast<const uint4 *>(ins[k % copies]), n16, sink);
    };
    floorMs = std::min(floorMs, timeMs(read, iters, s, true));
  }
  cudaFree(sink);
  double streamMs = timeMs(reduce, iters, s, false);
  double bytes = static_cast<double>(n) * sizeof(T);
  double readGbps = bytes / (ms * 1e6), copyGbps = 2 * bytes / (copyMs * 1e6);
  std::string dims, ax, phases;
  for (int64_t d : shape)
    dims += (dims.empty() ? "" : ",") + std::to_string(d);
  for (int64_t a : axes)
    ax += (ax.empty() ? "" : ",") + std::to_string(a);
  for (const auto &p : plan.phases)
    phases += (phases.empty() ? "" : " -> ") + p.describe();
  std::printf("{\"system\": \"tcc\", \"dtype\": \"%s\", \"shape\": \"%s\", \"axes\": \"%s\", "
              "\"mb\": %.3f, \"ms\": %.5f, \"read_gbps\": %.1f, \"copy_ms\": %.5f, "
              "\"copy_gbps\": %.1f, \"frac_of_copy\": %.3f, \"floor_ms\": %.5f, "
              "\"floor_frac\": %.3f, \"stream_ms\": %.5f, \"phases\": \"%s\"}\n",
              dtype.c_str(), dims.c_str(), ax.c_str(), bytes / 1e6, ms, readGbps, copyMs,
              copyGbps, readGbps / copyGbps, floorMs, bytes / (floorMs * 1e6) / copyGbps, streamMs,
              phases.c_str());
  std::fflush(stdout);
  for (int k = 0; k < copies; ++k) {
    cudaFree(ins[k]);
    cudaFree(copyTo[k]);
  }
  cudaFree(o);
  cudaFree(scratch);
}

} // namespace

int main(int argc, char **argv) {
  std::string file = "bench/reduce/shapes.txt";
  int iters = 50;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--iters" && i + 1 < argc)
      iters = std::atoi(argv[++i]);
    else if (a == "--help" || a == "-h") {
      std::printf("usage: reduce_bench [shapes.txt] [--iters N]\n");
      return 0;
    } else
      file = a;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "reduce_bench: no GPU\n");
    return 77;
  }
  std::ifstream f(file);
  if (!f) {
    std::fprintf(stderr, "reduce_bench: cannot read %s\n", file.c_str());
    return 2;
  }
  cudaStream_t s;
  CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#')
      continue;
    std::stringstream ss(line);
    std::string dtype, shape, axes = "-";
    ss >> dtype >> shape >> axes;
    if (dtype == "bf16")
      bench<tcc_cuda::bf16>(dtype, parseList(shape), parseList(axes), iters, s);
    else if (dtype == "f32")
      bench<float>(dtype, parseList(shape), parseList(axes), iters, s);
    else {
      std::fprintf(stderr, "reduce_bench: %s: dtype must be bf16 or f32\n", line.c_str());
      return 2;
    }
  }
  return 0;
}
