// Times tcc's flash-attention launchers (the CUDA prelude's
// launch_attention_forward / launch_attention_backward) in bf16 with CUDA
// events: `warmup` launches, then `iters` timed one by one; the median is
// reported. Built by bench/attention/run.sh (nvcc, sm_90a + sm_80).
//
//   attention_bench [--iters N] [--warmup N] [--deterministic]
//                   [B H T D causal]...   (default: the run.sh shapes)
//
// FLOPs (the FlashAttention papers' convention): forward 4 * B * H * T * S
// * D (two products of 2 * T * S * D per head), halved when causal;
// backward 2.5 x forward (five products). One line a shape:
//   RESULT tcc B H T D causal fwd_ms bwd_ms fwd_tflops bwd_tflops
#include "compiler/codegen/cuda/cuda_prelude.cuh"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#define CUDA_CHECK(call)                                                       \
  do {                                                                         \
    cudaError_t err_ = (call);                                                 \
    if (err_ != cudaSuccess) {                                                 \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__,       \
                   #call, cudaGetErrorString(err_));                           \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

using tcc_cuda::bf16;

__global__ void fill_random(bf16 *x, int64_t n, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const uint64_t z = tcc_cuda::detail::attn_mix64(seed + uint64_t(i) * 0x9E3779B97F4A7C15ull);
    const float u = float(z >> 40) * (1.0f / 16777216.0f) * 2.f - 1.f;
    x[i] = tcc_cuda::Elem<bf16>::store(u);
  }
}

struct Shape {
  int64_t B, H, T, D;
  bool causal;
};

template <class F> double median_ms(F launch, int warmup, int iters) {
  for (int i = 0; i < warmup; ++i)
    launch();
  CUDA_CHECK(cudaDeviceSynchronize());
  cudaEvent_t a, b;
  CUDA_CHECK(cudaEventCreate(&a));
  CUDA_CHECK(cudaEventCreate(&b));
  std::vector<float> ms(iters);
  for (int i = 0; i < iters; ++i) {
    CUDA_CHECK(cudaEventRecord(a));
    launch();
    CUDA_CHECK(cudaEventRecord(b));
    CUDA_CHECK(cudaEventSynchronize(b));
    CUDA_CHECK(cudaEventElapsedTime(&ms[i], a, b));
  }
  CUDA_CHECK(cudaGetLastError());
  std::sort(ms.begin(), ms.end());
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms[iters / 2];
}

int main(int argc, char **argv) {
  int iters = 30, warmup = 5;
  bool deterministic = false;
  std::vector<Shape> shapes;
  for (int a = 1; a < argc; ++a) {
    std::string s = argv[a];
    if (s == "--iters" && a + 1 < argc)
      iters = std::atoi(argv[++a]);
    else if (s == "--warmup" && a + 1 < argc)
      warmup = std::atoi(argv[++a]);
    else if (s == "--deterministic")
      deterministic = true;
    else {
      if (a + 4 >= argc) {
        std::fprintf(stderr, "shape needs B H T D causal\n");
        return 2;
      }
      shapes.push_back({std::atoll(argv[a]), std::atoll(argv[a + 1]),
                        std::atoll(argv[a + 2]), std::atoll(argv[a + 3]),
                        std::atoi(argv[a + 4]) != 0});
      a += 4;
    }
  }
  if (shapes.empty())
    shapes = {{16, 12, 1024, 64, true}, {8, 16, 2048, 128, true}};
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, bf16, median of %d after %d warmup%s\n", prop.name,
              iters, warmup, deterministic ? ", deterministic backward" : "");
  for (const Shape &sh : shapes) {
    const int64_t n = sh.B * sh.H * sh.T * sh.D, rows = sh.B * sh.H * sh.T;
    bf16 *q, *k, *v, *out, *dout, *dq, *dk, *dv;
    float *lse, *ws;
    for (bf16 **p : {&q, &k, &v, &out, &dout, &dq, &dk, &dv})
      CUDA_CHECK(cudaMalloc(p, n * sizeof(bf16)));
    CUDA_CHECK(cudaMalloc(&lse, rows * sizeof(float)));
    const int64_t wsn = tcc_cuda::attention_backward_workspace_floats(
        sh.B, sh.H, sh.H, sh.T, sh.T, sh.D, deterministic);
    CUDA_CHECK(cudaMalloc(&ws, wsn * sizeof(float)));
    uint64_t seed = 1;
    for (bf16 *p : {q, k, v, dout})
      fill_random<<<1024, 256>>>(p, n, seed++);
    const float scale = 1.f / std::sqrt(float(sh.D));
    auto fwd = [&] {
      CUDA_CHECK(tcc_cuda::launch_attention_forward<bf16>(
          q, k, v, out, lse, sh.B, sh.H, sh.H, sh.T, sh.T, sh.D, scale,
          sh.causal, 0.f, 0, 0, nullptr));
    };
    auto bwd = [&] {
      CUDA_CHECK(tcc_cuda::launch_attention_backward<bf16>(
          q, k, v, out, lse, dout, dq, dk, dv, ws, sh.B, sh.H, sh.H, sh.T,
          sh.T, sh.D, scale, sh.causal, 0.f, 0, 0, deterministic, nullptr));
    };
    const double fwd_ms = median_ms(fwd, warmup, iters);
    const double bwd_ms = median_ms(bwd, warmup, iters);
    const double flops =
        4.0 * sh.B * sh.H * sh.T * sh.T * sh.D * (sh.causal ? 0.5 : 1.0);
    std::printf("RESULT tcc %lld %lld %lld %lld %d %.4f %.4f %.1f %.1f\n",
                (long long)sh.B, (long long)sh.H, (long long)sh.T,
                (long long)sh.D, sh.causal ? 1 : 0, fwd_ms, bwd_ms,
                flops / fwd_ms * 1e-9, 2.5 * flops / bwd_ms * 1e-9);
    for (void *p : {(void *)q, (void *)k, (void *)v, (void *)out, (void *)dout,
                    (void *)dq, (void *)dk, (void *)dv, (void *)lse, (void *)ws})
      cudaFree(p);
  }
  return 0;
}
