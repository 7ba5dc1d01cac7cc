// tcc CUDA kernel prelude — pasted by the CUDA code generator at the top of
// every generated kernel translation unit (.cu), so the generated source is
// self-contained. The CPU counterpart is cpu_prelude.h: same semantics,
// kernel for kernel. Elementwise kernels, transposes, slices and concats are
// generated per op; these are the fixed kernel families (reductions, the
// softmax cross-entropy pair, embedding gather / scatter-add) and the scalar
// helpers the generated bodies call.
//
// Rules every launcher follows:
// - it only enqueues work on `stream` and never synchronizes; launch errors
//   are left for the caller's cudaGetLastError / cudaPeekAtLastError after
//   the step's launches. The one allocation is launch_reduce_rows'
//   stream-ordered scratch (cudaMallocAsync / cudaFreeAsync) for few long
//   rows;
// - all buffers are device pointers, row-major and contiguous; sizes are
//   int64_t and every index is 64-bit, so any size works;
// - grids are capped (grid_for) and every kernel loops grid-stride, so a
//   launch is always valid; 0 rows / 0 ids launch nothing (rows of 0
//   elements still have their ids / labels checked, as on the CPU);
// - T is float, double, bf16 or f16 unless a launcher says otherwise (the
//   16-bit types load into float, compute and accumulate in float, and
//   round once per output element: Elem / acc_t), I (ids and labels) is
//   int32_t or int64_t;
// - a bad id or label never reads out of bounds: the row gets NaN (or
//   zeros, or is skipped, as each launcher says) and fail(status, code)
//   records `code` in *status unless an earlier failure is already there.
// - everything except launch_scatter_add_rows is deterministic: the same
//   sizes and the same buffer addresses give bit-identical results run to
//   run (the launch shape depends only on the sizes and on whether the base
//   pointers are 16-byte aligned, which selects the vectorized path; and
//   for split rows in launch_reduce_rows, on the scratch allocation
//   succeeding);
// - build without --use_fast_math / -ftz=true: the f16 conversion of
//   subnormals and exp / tanh accuracy rely on IEEE float behaviour.
//
// Kernels are templates (no non-inline, non-template definitions), so
// several TUs that each paste this text link into one .so without clashes.
#ifndef TCC_CUDA_PRELUDE_CUH
#define TCC_CUDA_PRELUDE_CUH

#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace tcc_cuda {

//===--------------------------------------------------------------------===//
// Launch shapes
//===--------------------------------------------------------------------===//

// The most blocks any launch here uses: 132 SMs (H100 SXM, H200) x 32, the
// most resident blocks an SM holds on sm_80/sm_90. With the smallest blocks
// used here (32 threads) that is still one full wave; bigger blocks get
// several waves' worth and the grid-stride loops cover the rest. Keeping the
// grid bounded also keeps it far below the 2^31 - 1 grid.x limit.
constexpr int64_t kMaxGridBlocks = 132 * 32;

// Blocks for a grid-stride loop over n items with `threads` threads per
// block: ceil(n / threads), capped at kMaxGridBlocks; 0 when n <= 0.
inline int64_t grid_for(int64_t n, int threads) {
  if (n <= 0)
    return 0;
  int64_t blocks = (n + threads - 1) / threads;
  return blocks < kMaxGridBlocks ? blocks : kMaxGridBlocks;
}

//===--------------------------------------------------------------------===//
// Scalars
//===--------------------------------------------------------------------===//

template <class To, class From>
__host__ __device__ __forceinline__ To bit_cast(From from) {
  static_assert(sizeof(To) == sizeof(From), "bit_cast needs equal sizes");
  To to;
  memcpy(&to, &from, sizeof(To));
  return to;
}

// Special values by bit pattern (no constexpr limits in device code).
template <class T> __host__ __device__ __forceinline__ T quiet_nan();
template <> __host__ __device__ __forceinline__ float quiet_nan<float>() {
  return bit_cast<float>(0x7fc00000u);
}
template <> __host__ __device__ __forceinline__ double quiet_nan<double>() {
  return bit_cast<double>(0x7ff8000000000000ull);
}
template <class T> __host__ __device__ __forceinline__ T infinity();
template <> __host__ __device__ __forceinline__ float infinity<float>() {
  return bit_cast<float>(0x7f800000u);
}
template <> __host__ __device__ __forceinline__ double infinity<double>() {
  return bit_cast<double>(0x7ff0000000000000ull);
}
__host__ __device__ __forceinline__ bool sign_bit(float x) {
  return (bit_cast<uint32_t>(x) >> 31) != 0;
}
__host__ __device__ __forceinline__ bool sign_bit(double x) {
  return (bit_cast<uint64_t>(x) >> 63) != 0;
}

// bf16 and f16 are stored as their 16 bits and computed in float; every
// operation producing one rounds to nearest even. Bit for bit the same as
// cpu_prelude.h (the code is the same, std::nearbyint -> rintf, which also
// rounds ties to even in the default rounding mode).
__host__ __device__ __forceinline__ float bf16_to_float(uint16_t h) {
  return bit_cast<float>(static_cast<uint32_t>(h) << 16);
}
// Every NaN becomes the canonical 0x7fff (as the hardware conversion and
// PyTorch's CUDA bf16 do): on sm_80+ one cvt, which generated elementwise
// chains run once per operation (rounding by integer arithmetic and a NaN
// test was half of a SwiGLU backward's instructions).
__host__ __device__ __forceinline__ uint16_t float_to_bf16(float f) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  uint16_t h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
#else
  uint32_t u = bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return 0x7fffu;
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
#endif
}
// The float nearest f in bf16 (ties to even, NaN canonical: the same bits
// as bf16_to_float(float_to_bf16(f)) for all 2^32 floats, checked on the
// H200 by bench/fp8/cast_bench.cu). On sm_80+ one packed conversion whose
// upper half is bf16(f) and lower half zero, which is that float: a lone
// cvt.rn.bf16.f32 runs on a slow conversion pipe (F2F) and needs a shift
// back, and generated chains round once per operation; the packed form
// (F2FP) took a SwiGLU backward kernel from 2314 to 3743 GB/s on the
// H200 (2026-12-02).
__host__ __device__ __forceinline__ float round_bf16(float f) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  uint32_t u;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(u) : "f"(f), "f"(0.0f));
  return bit_cast<float>(u);
#else
  return bf16_to_float(float_to_bf16(f));
#endif
}

__host__ __device__ __forceinline__ float f16_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0x1f) // inf or NaN
    return bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) { // zero or subnormal: mant * 2^-24
    float v = static_cast<float>(mant) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  return bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
}
__host__ __device__ __forceinline__ uint16_t float_to_f16(float f) {
  uint32_t u = bit_cast<uint32_t>(f);
  uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) // NaN
    return sign | 0x7e00u;
  if (a >= 0x477ff000u) // rounds to >= 65520: infinity
    return sign | 0x7c00u;
  if (a < 0x38800000u) { // below 2^-14: subnormal half, a multiple of 2^-24
    float v = bit_cast<float>(a) * 16777216.0f;      // exact
    return sign | static_cast<uint16_t>(::rintf(v)); // ties to even
  }
  // Normal: drop 13 mantissa bits with round to nearest even.
  uint32_t r = a + 0xfffu + ((a >> 13) & 1u);
  return sign | static_cast<uint16_t>((r - 0x38000000u) >> 13);
}
__host__ __device__ __forceinline__ float round_f16(float f) {
  return f16_to_float(float_to_f16(f));
}

// bf16 and f16 elements of the fixed kernel families. Generated code
// stores both as uint16_t; the families take these distinct types (the
// family wrappers cast the pointers), so a template can never mistake
// their bits for integers or one format for the other.
struct bf16 {
  uint16_t bits;
};
struct f16 {
  uint16_t bits;
};
// Hopper's FP8 formats (tg-amp's fp8 precision): E4M3 (largest finite 448,
// no infinity) for values, E5M2 (57344) for gradients; one byte each,
// distinct types for the same reason.
struct e4m3 {
  uint8_t bits;
};
struct e5m2 {
  uint8_t bits;
};
// Fp8Format<F8>: the largest finite value, and the conversions (nearest
// even, saturating to +-kMax; NaN stays NaN).
template <__nv_fp8_interpretation_t Kind, int Max> struct Fp8FormatOf {
  static constexpr float kMax = static_cast<float>(Max);
  __host__ __device__ __forceinline__ static uint8_t from_float(float x) {
    return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, Kind);
  }
  // Two at once (one cvt ...x2 on sm_89+): a in the low byte.
  __host__ __device__ __forceinline__ static uint32_t from_float2(float a, float b) {
    return __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, Kind);
  }
  __host__ __device__ __forceinline__ static float to_float(uint8_t b) {
    return __half2float(__half(__nv_cvt_fp8_to_halfraw(b, Kind)));
  }
};
template <class F8> struct Fp8Format;
template <> struct Fp8Format<e4m3> : Fp8FormatOf<__NV_E4M3, 448> {};
template <> struct Fp8Format<e5m2> : Fp8FormatOf<__NV_E5M2, 57344> {};
// What one scaled cast saw, accumulated over launches (zero it per step):
// the input's largest |x| as float bits (atomicMax on the bits orders
// non-negative floats, and a NaN's bits win, so a NaN anywhere shows), the
// elements saturated to the format's largest finite value, and the non-zero
// elements that became zero.
struct Fp8CastStats {
  uint32_t amax_bits;
  uint32_t unused;
  unsigned long long overflows;
  unsigned long long underflows;
};

// One FP8 operand's scale under current scaling (tg-amp's fp8 precision:
// the scale comes from this very tensor's amax), 48 bytes in the step's
// shared workspace. scale_inv comes first: cuBLASLt reads it as the
// operand's dequantization scale and takes only 16-byte aligned scale
// pointers.
struct alignas(16) Fp8TensorScale {
  float scale_inv; // 1 / scale
  float scale;     // Fp8Format<F8>::kMax / amax (1 for an all-zero or non-finite tensor)
  uint32_t unused[2];
  Fp8CastStats stats; // the input's amax; the cast's saturated and flushed elements
};
// Delayed scaling's record of one cast site, 32 floats: the step ABI's
// tcc_fp8_scaling_record (runtime/include/tcc/step_abi.h; the step state
// "fp8_scaling" holds one per site). scale 0: no cast yet, the next one
// scales by its own amax.
constexpr int kFp8AmaxHistory = 16;
struct Fp8ScalingRecord {
  float scale, next, amax, elements, saturated, flushed, casts, reserved0;
  float amax_history[kFp8AmaxHistory];
  float reserved1[8];
};
static_assert(sizeof(Fp8ScalingRecord) == 32 * sizeof(float),
              "tcc_fp8_scaling_record is 32 floats");
// Delayed scaling's amax launch (needed only by a site's first cast) keeps
// to one block per SM, so that on the later casts, where every block
// returns at once, it costs little more than a launch.
constexpr int64_t kFp8DelayedAmaxBlocks = 132;

// Current scaling keeps an Fp8TensorScale and the amax kernel's per-block
// maxima (at most kFp8AmaxPartials floats) in kFp8ScaleBytes
// (compiler/codegen/cuda/Fp8Gemm.h reserves as much per slot).
// The casts' grid: 8 blocks of 256 threads per SM of an H100 / H200 (a full
// GPU of warps), each looping over tiles, so that the statistics take one
// set of atomics per block, not per tile; the amax kernel's grid too, one
// partial maximum per block.
constexpr int64_t kFp8GridBlocks = 132 * 8;
constexpr int64_t kFp8AmaxPartials = kFp8GridBlocks;
constexpr int64_t kFp8ScaleBytes = 8192;
static_assert(sizeof(Fp8TensorScale) + 4 * kFp8AmaxPartials <= kFp8ScaleBytes,
              "the partial maxima must fit after the record");

// Element traits of the fixed families: Acc is the type a kernel computes
// and accumulates in (float for the 16-bit types), load widens an element
// to it, store rounds an Acc to the element type (nearest even), once per
// output element.
template <class T> struct Elem {
  using Acc = T;
  __host__ __device__ __forceinline__ static T load(T x) { return x; }
  __host__ __device__ __forceinline__ static T store(T x) { return x; }
};
template <> struct Elem<bf16> {
  using Acc = float;
  __host__ __device__ __forceinline__ static float load(bf16 x) {
    return bf16_to_float(x.bits);
  }
  __host__ __device__ __forceinline__ static bf16 store(float x) {
    return bf16{float_to_bf16(x)};
  }
};
template <> struct Elem<f16> {
  using Acc = float;
  __host__ __device__ __forceinline__ static float load(f16 x) {
    return f16_to_float(x.bits);
  }
  __host__ __device__ __forceinline__ static f16 store(float x) {
    return f16{float_to_f16(x)};
  }
};
template <class T> using acc_t = typename Elem<T>::Acc;

// arith.maximumf / minimumf: NaN propagates, -0 < +0.
template <class T> __host__ __device__ __forceinline__ T maximumf(T a, T b) {
  if (a != a || b != b)
    return a + b;
  if (a == b)
    return sign_bit(a) ? b : a;
  return a > b ? a : b;
}
template <class T> __host__ __device__ __forceinline__ T minimumf(T a, T b) {
  if (a != a || b != b)
    return a + b;
  if (a == b)
    return sign_bit(a) ? a : b;
  return a < b ? a : b;
}

// Accurate libm versions (expf is within 2 ulp, like cpu_prelude's
// polynomial); never the __expf intrinsic, whose error grows with |x|.
// e^-inf is exactly 0, so a causal mask's -inf gives 0.
__host__ __device__ __forceinline__ float exp(float x) { return ::expf(x); }
__host__ __device__ __forceinline__ double exp(double x) { return ::exp(x); }
__host__ __device__ __forceinline__ float tanh(float x) { return ::tanhf(x); }
__host__ __device__ __forceinline__ double tanh(double x) { return ::tanh(x); }
__host__ __device__ __forceinline__ float log(float x) { return ::logf(x); }
__host__ __device__ __forceinline__ double log(double x) { return ::log(x); }

// Records `code` in *status if nothing was recorded yet (first failure
// wins, the step reports it after the stream is synchronized). A null
// status records nothing.
__device__ __forceinline__ void fail(int32_t *status, int32_t code) {
  if (status != nullptr)
    atomicCAS(reinterpret_cast<int *>(status), 0, static_cast<int>(code));
}

namespace detail {

// 16-byte vectors: four floats, two doubles or eight bf16 / f16 per load.
template <class T> struct Vec16;
template <> struct Vec16<float> {
  using type = float4;
  static constexpr int n = 4;
};
template <> struct Vec16<double> {
  using type = double2;
  static constexpr int n = 2;
};
template <> struct Vec16<bf16> {
  using type = uint4;
  static constexpr int n = 8;
};
template <> struct Vec16<f16> {
  using type = uint4;
  static constexpr int n = 8;
};

// The element types the floating-point families take.
template <class T> struct IsFloating {
  static constexpr bool value = false;
};
template <> struct IsFloating<float> {
  static constexpr bool value = true;
};
template <> struct IsFloating<double> {
  static constexpr bool value = true;
};
template <> struct IsFloating<bf16> {
  static constexpr bool value = true;
};
template <> struct IsFloating<f16> {
  static constexpr bool value = true;
};

inline bool aligned16(const void *p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

// Smallest power of two >= n (1 for n <= 1), at most 2^30.
inline int64_t pow2_at_least(int64_t n) {
  int64_t p = 1;
  while (p < n && p < (int64_t(1) << 30))
    p <<= 1;
  return p;
}

template <class T> __host__ __device__ __forceinline__ bool is_inf(T x) {
  return x == infinity<T>() || x == -infinity<T>();
}

// Kind 0 sum, 1 mean, 2 max, with the CPU code generator's semantics
// (CpuCodegen emitReduce): max keeps `v > acc ? v : acc` from -inf, so a NaN
// element never wins (a row's NaNs are ignored; an all-NaN or empty row
// gives -inf); mean multiplies the sum by (1 / count), so an empty mean is
// 0 * inf = NaN. T is the accumulator (acc_t of the element type: float
// for bf16 / f16). Sums accumulate in T (the CPU's row sums use double):
// per-thread chains of a few hundred elements at most, then a tree, so the
// rounding error stays near u * sqrt(chain) * ||x||_2.
template <class T, int Kind> struct Reducer {
  static_assert(Kind >= 0 && Kind <= 2, "reduce kind: 0 sum, 1 mean, 2 max");
  __device__ __forceinline__ static T init() {
    return Kind == 2 ? -infinity<T>() : T(0);
  }
  __device__ __forceinline__ static T combine(T acc, T v) {
    return Kind == 2 ? (v > acc ? v : acc) : acc + v;
  }
  __device__ __forceinline__ static T finish(T acc, int64_t count) {
    return Kind == 1 ? acc * (T(1) / static_cast<T>(count)) : acc;
  }
};

// Combine across the 32 lanes; every lane ends with the result (the same
// on every lane for sums, which commute exactly).
template <class R, class T> __device__ __forceinline__ T warp_reduce(T v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1)
    v = R::combine(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Combine across a block whose size is a multiple of 32 (at most 1024);
// the result is valid in thread 0. `scratch` holds 32 values; the leading
// barrier lets a grid-stride loop reuse it.
template <class R, class T>
__device__ __forceinline__ T block_reduce(T v, T *scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps = blockDim.x >> 5;
  v = warp_reduce<R>(v);
  __syncthreads();
  if (lane == 0)
    scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < warps ? scratch[lane] : R::init();
    v = warp_reduce<R>(v);
  }
  return v;
}

