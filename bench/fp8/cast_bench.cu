// FP8 casts that compute their input (issue 37), kernel by kernel, on the
// 1B decoder's SwiGLU (8192 x 5632, bf16), beside what they replace:
//
//   fp8_cast_bench            (built and run by bench/fp8/cast_bench.sh)
//
// Rows (GB/s = bytes read plus written, once each, over the median of 20
// timed calls after 3, CUDA events):
//   copy            cudaMemcpyAsync of one bf16 operand: the memory's rate
//   plain cast      launch_fp8_quantize_delayed of a bf16 buffer (E4M3,
//                   both layouts): 2 B read, 2 written an element
//   fwd write       silu(g) * u written in bf16 (the unfused kernel's work)
//   fwd cast        the same computed by the cast (the step's
//                   fp8_quantize_e4m3_delayed_ew): 4 B read, 2 written
//   bwd write       dG and dU written in bf16 (the unfused kernel)
//   bwd cast        both computed and cast by one launch_fp8_quantize_multi
//                   (fp8_quantize_e5m2_delayed_ew2): 6 B read, 4 written
//   ... bound B     the cast kernel alone (a given scale, no amax launch)
//                   held to B blocks an SM by __launch_bounds__, at a grid
//                   of the blocks that stay resident and at the launcher's
//                   kFp8GridBlocks; once without the transposed outputs
// Each computing row twice: the body's bf16 roundings by a lone
// cvt.rn.bf16.f32 and a shift back to float (round_bf16 until
// 2026-12-02), and by the prelude's round_bf16 (one packed conversion
// whose upper half is the rounded float). A check first: the two agree on
// all 2^32 float bit patterns.
//
// The bodies are those tcc generates for the 1B decoder (kernels_N.cu of
// `tcc compile --precision fp8 --dump-dir`), each op rounded to bf16.
#include "tcc/step_abi.h"
#define TCC_STEP_ARCH "sm_90"
#include "compiler/codegen/cuda/cuda_prelude.cuh"

#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>

namespace {
using tcc_cuda::bf16;
using tcc_cuda::e4m3;
using tcc_cuda::e5m2;

#define CHECK(x)                                                                              \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      std::printf("%s: %s\n", #x, cudaGetErrorString(e_));                                    \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)

struct RoundCvt { // cvt.rn.bf16.f32, then back to float (round_bf16 before)
  static __device__ __forceinline__ float r(float f) {
    return tcc_cuda::bf16_to_float(tcc_cuda::float_to_bf16(f));
  }
};
struct RoundPack { // the prelude's round_bf16: one packed conversion
  static __device__ __forceinline__ float r(float f) { return tcc_cuda::round_bf16(f); }
};

__global__ void roundAgreeKernel(uint32_t hi, unsigned long long *wrong) {
  const uint32_t u = (hi << 24) | (blockIdx.x * blockDim.x + threadIdx.x);
  const float f = __uint_as_float(u);
  const uint32_t a = __float_as_uint(RoundCvt::r(f)), b = __float_as_uint(RoundPack::r(f));
  if (a != b)
    atomicAdd(wrong, 1ull);
}

// SwiGLU forward: h = silu(g) * u (in0 = u, in1 = g, as generated).
template <class R> struct SwigluSrc {
  const uint16_t *in0, *in1;
  using Element = bf16;
  static constexpr int kOutputs = 1;
  struct Raw {
    uint4 x0, x1;
  };
  __device__ __forceinline__ Raw fetch8(int64_t i) const {
    return {__ldg(reinterpret_cast<const uint4 *>(in0 + i)),
            __ldg(reinterpret_cast<const uint4 *>(in1 + i))};
  }
  static __device__ __forceinline__ float body(float a0, float a1) {
    const float s3 = R::r(-a1);
    const float s4 = R::r(tcc_cuda::exp(s3));
    const float s6 = R::r(1.0f + s4);
    const float s7 = R::r(a1 / s6);
    return R::r(s7 * a0);
  }
  __device__ __forceinline__ void compute8(const Raw &raw, int64_t, uint4 *out) const {
    const uint16_t *x0 = reinterpret_cast<const uint16_t *>(&raw.x0);
    const uint16_t *x1 = reinterpret_cast<const uint16_t *>(&raw.x1);
    alignas(16) uint16_t y0[8];
#pragma unroll
    for (int k = 0; k < 8; ++k)
      y0[k] = tcc_cuda::float_to_bf16(
          body(tcc_cuda::bf16_to_float(x0[k]), tcc_cuda::bf16_to_float(x1[k])));
    out[0] = *reinterpret_cast<const uint4 *>(y0);
  }
  __device__ __forceinline__ uint4 load8(int64_t i) const {
    uint4 out;
    compute8(fetch8(i), i, &out);
    return out;
  }
  __device__ __forceinline__ Element load(int64_t i) const {
    return {tcc_cuda::float_to_bf16(
        body(tcc_cuda::bf16_to_float(in0[i]), tcc_cuda::bf16_to_float(in1[i])))};
  }
  __host__ __device__ bool aligned16() const {
    return (reinterpret_cast<uintptr_t>(in0) | reinterpret_cast<uintptr_t>(in1)) % 16 == 0;
  }
};

// SwiGLU backward: dG, dU from dH (in0), u (in1), g (in2), as generated.
template <class R> struct SwigluGradSrc {
  const uint16_t *in0, *in1, *in2;
  using Element = bf16;
  static constexpr int kOutputs = 2;
  struct Raw {
    uint4 x0, x1, x2;
  };
  __device__ __forceinline__ Raw fetch8(int64_t i) const {
    return {__ldg(reinterpret_cast<const uint4 *>(in0 + i)),
            __ldg(reinterpret_cast<const uint4 *>(in1 + i)),
            __ldg(reinterpret_cast<const uint4 *>(in2 + i))};
  }
  static __device__ __forceinline__ void body(float a0, float a1, float a2, float &o0,
                                              float &o1) {
    const float s4 = R::r(-a2);
    const float s5 = R::r(tcc_cuda::exp(s4));
    const float s7 = R::r(1.0f + s5);
    const float s8 = R::r(a2 / s7);
    const float s9 = R::r(a0 * s8);
    const float s14 = R::r(1.0f / s7);
    const float s16 = R::r(1.0f - s14);
    const float s17 = R::r(a2 * s16);
    const float s19 = R::r(1.0f + s17);
    const float s25 = R::r(s14 * s19);
    const float s26 = R::r(a0 * a1);
    o0 = R::r(s26 * s25);
    o1 = s9;
  }
  __device__ __forceinline__ void compute8(const Raw &raw, int64_t, uint4 *out) const {
    const uint16_t *x0 = reinterpret_cast<const uint16_t *>(&raw.x0);
    const uint16_t *x1 = reinterpret_cast<const uint16_t *>(&raw.x1);
    const uint16_t *x2 = reinterpret_cast<const uint16_t *>(&raw.x2);
    alignas(16) uint16_t y0[8], y1[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      float o0, o1;
      body(tcc_cuda::bf16_to_float(x0[k]), tcc_cuda::bf16_to_float(x1[k]),
           tcc_cuda::bf16_to_float(x2[k]), o0, o1);
      y0[k] = tcc_cuda::float_to_bf16(o0);
      y1[k] = tcc_cuda::float_to_bf16(o1);
    }
    out[0] = *reinterpret_cast<const uint4 *>(y0);
    out[1] = *reinterpret_cast<const uint4 *>(y1);
  }
  __device__ __forceinline__ void load8(int64_t i, uint4 *out) const {
    compute8(fetch8(i), i, out);
  }
  __device__ __forceinline__ void load(int64_t i, Element *out) const {
    float o0, o1;
    body(tcc_cuda::bf16_to_float(in0[i]), tcc_cuda::bf16_to_float(in1[i]),
         tcc_cuda::bf16_to_float(in2[i]), o0, o1);
    out[0] = {tcc_cuda::float_to_bf16(o0)};
    out[1] = {tcc_cuda::float_to_bf16(o1)};
  }
  __host__ __device__ bool aligned16() const {
    return (reinterpret_cast<uintptr_t>(in0) | reinterpret_cast<uintptr_t>(in1) |
            reinterpret_cast<uintptr_t>(in2)) % 16 == 0;
  }
};

// The unfused kernel's work: the source's results written in bf16, 8
// elements a thread, grid-stride.
template <class Src>
__global__ void __launch_bounds__(256) writeKernel(int64_t n, const Src src, uint4 *o0, uint4 *o1) {
  for (int64_t v = blockIdx.x * int64_t{256} + threadIdx.x; v < n / 8;
       v += int64_t{gridDim.x} * 256) {
    uint4 out[Src::kOutputs];
    src.compute8(src.fetch8(v * 8), v * 8, out);
    o0[v] = out[0];
    if constexpr (Src::kOutputs > 1)
      o1[v] = out[1];
  }
}

// The cast kernel held to MinBlocks blocks an SM (registers capped by
// ptxas); the prelude's own kernels: 1 for the single-result form, 3 for
// the multi-result one.
template <class Src, class F8, int K, int MinBlocks>
__global__ void __launch_bounds__(256, MinBlocks)
    boundedCast(int64_t rows, int64_t cols, const Src in,
                const tcc_cuda::detail::Fp8CastTargets<F8, K> to) {
  tcc_cuda::detail::fp8_cast_transpose_vec8_multi<bf16, F8, Src, K>(rows, cols, in, to,
                                                                    blockIdx.x, gridDim.x);
}

struct Buf {
  void *p = nullptr;
  explicit Buf(size_t bytes) { CHECK(cudaMalloc(&p, bytes)); }
  ~Buf() { cudaFree(p); }
  template <class T> T *as() const { return static_cast<T *>(p); }
};

cudaStream_t stream;
template <class F> float timeIt(F &&call) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  for (int i = 0; i < 3; ++i)
    call();
  std::vector<float> ms;
  for (int i = 0; i < 20; ++i) {
    cudaEventRecord(a, stream);
    call();
    cudaEventRecord(b, stream);
    CHECK(cudaEventSynchronize(b));
    float t = 0;
    cudaEventElapsedTime(&t, a, b);
    ms.push_back(t);
  }
  CHECK(cudaGetLastError());
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

void row(const char *name, double bytes, float ms) {
  std::printf("%-28s %9.4f ms %8.0f GB/s\n", name, ms, bytes / (ms * 1e6));
}

// The cast kernel alone (a given scale: no amax pass) held to 3..5 blocks
// an SM, each at a grid of what stays resident (one wave of persistent
// blocks) and at the launcher's kFp8GridBlocks; one row without the
// transposed outputs.
template <class Src, class F8, int K, int B>
void boundRow(const char *what, const Src &src, F8 *const *outs, F8 *const *outsT,
              tcc_cuda::Fp8TensorScale *const *qs, double bytes, const float *scale,
              bool transposed) {
  tcc_cuda::detail::Fp8CastTargets<F8, K> to{};
  for (int k = 0; k < K; ++k) {
    to.out[k] = outs[k];
    to.out_t[k] = transposed ? outsT[k] : nullptr;
    to.stats[k] = &qs[k]->stats;
    to.scale[k] = scale;
  }
  auto kernel = boundedCast<Src, F8, K, B>;
  int resident = 0, sms = 0;
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, kernel, 256, 0));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaFuncAttributes attr{};
  CHECK(cudaFuncGetAttributes(&attr, kernel));
  for (int grid : {sms * resident, static_cast<int>(tcc_cuda::kFp8GridBlocks)}) {
    char name[96];
    std::snprintf(name, sizeof name, "%s bound %d (%d regs) %d blocks%s", what, B,
                  attr.numRegs, grid, transposed ? "" : " no T");
    row(name, bytes, timeIt([&] {
          kernel<<<grid, 256, 0, stream>>>(8192, 5632, src, to);
        }));
  }
}
template <class Src, class F8, int K>
void boundsRows(const char *what, const Src &src, F8 *const *outs, F8 *const *outsT,
                tcc_cuda::Fp8TensorScale *const *qs, double bytes) {
  Buf scale(4);
  const float one = 1.0f;
  CHECK(cudaMemcpy(scale.p, &one, 4, cudaMemcpyHostToDevice));
  const float *sp = scale.as<float>();
  boundRow<Src, F8, K, 3>(what, src, outs, outsT, qs, bytes, sp, true);
  boundRow<Src, F8, K, 4>(what, src, outs, outsT, qs, bytes, sp, true);
  boundRow<Src, F8, K, 5>(what, src, outs, outsT, qs, bytes, sp, true);
  boundRow<Src, F8, K, 3>(what, src, outs, outsT, qs, bytes - K * 8192.0 * 5632, sp, false);
}

} // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no GPU: skipped\n");
    return 77;
  }
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s, %d SMs\n", prop.name, prop.multiProcessorCount);
  CHECK(cudaStreamCreate(&stream));

  { // The two roundings on every float.
    Buf wrong(8);
    CHECK(cudaMemset(wrong.p, 0, 8));
    for (uint32_t hi = 0; hi < 256; ++hi)
      roundAgreeKernel<<<65536, 256, 0, stream>>>(hi, wrong.as<unsigned long long>());
    unsigned long long w = 0;
    CHECK(cudaMemcpy(&w, wrong.p, 8, cudaMemcpyDeviceToHost));
    std::printf("round_bf16 (cvt) and the packed rounding differ on %llu of 2^32 floats\n", w);
  }

  const int64_t rows = 8192, cols = 5632, n = rows * cols;
  std::vector<uint16_t> host(static_cast<size_t>(n));
  std::mt19937_64 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Buf in[3] = {Buf(n * 2), Buf(n * 2), Buf(n * 2)};
  for (Buf &b : in) {
    for (uint16_t &h : host)
      h = tcc_cuda::float_to_bf16(normal(rng) * 2.0f);
    CHECK(cudaMemcpy(b.p, host.data(), n * 2, cudaMemcpyHostToDevice));
  }
  Buf w0(n * 2), w1(n * 2), o[2] = {Buf(n), Buf(n)}, ot[2] = {Buf(n), Buf(n)};
  Buf q[2] = {Buf(tcc_cuda::kFp8ScaleBytes), Buf(tcc_cuda::kFp8ScaleBytes)};
  Buf rec[2] = {Buf(sizeof(tcc_cuda::Fp8ScalingRecord)),
                Buf(sizeof(tcc_cuda::Fp8ScalingRecord))};
  for (Buf &r : rec)
    CHECK(cudaMemset(r.p, 0, sizeof(tcc_cuda::Fp8ScalingRecord)));
  auto qOf = [&](int k) { return q[k].as<tcc_cuda::Fp8TensorScale>(); };
  auto recOf = [&](int k) { return rec[k].as<tcc_cuda::Fp8ScalingRecord>(); };
  const uint16_t *g = in[0].as<uint16_t>(), *u = in[1].as<uint16_t>(),
                 *dh = in[2].as<uint16_t>();
  const int blocks = prop.multiProcessorCount * 16;

  std::printf("\n8192 x 5632 bf16 (SwiGLU of the 1B decoder, B4 T2048)\n");
  row("copy", 2.0 * n * 2, timeIt([&] {
        cudaMemcpyAsync(w0.p, in[0].p, n * 2, cudaMemcpyDeviceToDevice, stream);
      }));
  row("plain cast (both layouts)", n * 4.0, timeIt([&] {
        tcc_cuda::launch_fp8_quantize_delayed<bf16, e4m3>(
            rows, cols, in[0].as<bf16>(), o[0].as<e4m3>(), ot[0].as<e4m3>(), qOf(0), recOf(0),
            stream);
      }));
  e4m3 *outs[1] = {o[0].as<e4m3>()}, *outsT[1] = {ot[0].as<e4m3>()};
  tcc_cuda::Fp8TensorScale *qs[1] = {qOf(0)};
  boundsRows<tcc_cuda::detail::Fp8Plain<bf16>, e4m3, 1>(
      "plain cast", tcc_cuda::detail::Fp8Plain<bf16>(in[0].as<bf16>()), outs, outsT, qs, n * 4.0);
  auto forward = [&](auto round, const char *what) {
    using Src = SwigluSrc<decltype(round)>;
    const Src src{u, g};
    char name[64];
    std::snprintf(name, sizeof name, "fwd write (%s)", what);
    row(name, n * 6.0, timeIt([&] {
          writeKernel<Src><<<blocks, 256, 0, stream>>>(n, src, w0.as<uint4>(), nullptr);
        }));
    std::snprintf(name, sizeof name, "fwd cast (%s)", what);
    row(name, n * 6.0, timeIt([&] {
          tcc_cuda::launch_fp8_quantize_delayed<bf16, e4m3, Src>(
              rows, cols, src, o[0].as<e4m3>(), ot[0].as<e4m3>(), qOf(0), recOf(0), stream);
        }));
    if (std::is_same<decltype(round), RoundPack>::value)
      boundsRows<Src, e4m3, 1>("fwd cast", src, outs, outsT, qs, n * 6.0);
  };
  forward(RoundCvt{}, "cvt");
  forward(RoundPack{}, "pack");

  auto backward = [&](auto round, const char *what) {
    using Src = SwigluGradSrc<decltype(round)>;
    const Src src{dh, u, g};
    char name[64];
    std::snprintf(name, sizeof name, "bwd write (%s)", what);
    row(name, n * 10.0, timeIt([&] {
          writeKernel<Src><<<blocks, 256, 0, stream>>>(n, src, w0.as<uint4>(), w1.as<uint4>());
        }));
    e5m2 *outs[2] = {o[0].as<e5m2>(), o[1].as<e5m2>()};
    e5m2 *outsT[2] = {ot[0].as<e5m2>(), ot[1].as<e5m2>()};
    tcc_cuda::Fp8TensorScale *qs[2] = {qOf(0), qOf(1)};
    tcc_cuda::Fp8ScalingRecord *recs[2] = {recOf(0), recOf(1)};
    std::snprintf(name, sizeof name, "bwd cast (%s)", what);
    row(name, n * 10.0, timeIt([&] {
          tcc_cuda::launch_fp8_quantize_multi<bf16, e5m2, Src>(rows, cols, src, outs, outsT,
                                                               qs, recs, stream);
        }));
    if (std::is_same<decltype(round), RoundPack>::value)
      boundsRows<Src, e5m2, 2>("bwd cast", src, outs, outsT, qs, n * 10.0);
  };
  backward(RoundCvt{}, "cvt");
  backward(RoundPack{}, "pack");
  CHECK(cudaDeviceSynchronize());
  return 0;
}
