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
// - T is float or double unless a launcher says otherwise, I (ids and
//   labels) is int32_t or int64_t;
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

#include <cuda_runtime.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>

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
__host__ __device__ __forceinline__ uint16_t float_to_bf16(float f) {
  uint32_t u = bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) // NaN: keep it a (quiet) NaN
    return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
__host__ __device__ __forceinline__ float round_bf16(float f) {
  return bf16_to_float(float_to_bf16(f));
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

// 16-byte vectors: four floats or two doubles per load.
template <class T> struct Vec16;
template <> struct Vec16<float> {
  using type = float4;
  static constexpr int n = 4;
};
template <> struct Vec16<double> {
  using type = double2;
  static constexpr int n = 2;
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
// 0 * inf = NaN. Sums accumulate in T (the CPU's row sums use double):
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

//===--------------------------------------------------------------------===//
// Row reductions: out[r] = reduce(in[r, 0..cols))
//===--------------------------------------------------------------------===//

// Warp per row (cols <= 1024: at most 32 loads per lane), 8 warps a block.
// `count` is what a mean divides by: cols, except when combining the
// per-segment partials of a split row (launch_reduce_rows).
template <class T, int Kind>
__global__ void __launch_bounds__(256)
    reduce_rows_warp_kernel(const T *__restrict__ in, T *__restrict__ out,
                            int64_t rows, int64_t cols, int64_t count) {
  using R = Reducer<T, Kind>;
  const int lane = threadIdx.x & 31;
  const int64_t warpsPerBlock = blockDim.x >> 5;
  for (int64_t r = blockIdx.x * warpsPerBlock + (threadIdx.x >> 5); r < rows;
       r += gridDim.x * warpsPerBlock) {
    const T *row = in + r * cols;
    T acc = R::init();
    for (int64_t c = lane; c < cols; c += 32)
      acc = R::combine(acc, row[c]);
    acc = warp_reduce<R>(acc);
    if (lane == 0)
      out[r] = R::finish(acc, count);
  }
}

// Block per (row, segment): the block folds in[r, g*chunk .. +chunk) and
// writes out[r * segs + g], finished (mean scaled) only when the segment
// is the whole row (segs == 1); split rows leave raw partials for
// reduce_rows_warp_kernel. Vec: 16-byte loads (rows and segments are
// 16-byte aligned: aligned base, cols and chunk multiples of the width).
template <class T, int Kind, bool Vec>
__global__ void __launch_bounds__(1024)
    reduce_rows_block_kernel(const T *__restrict__ in, T *__restrict__ out,
                             int64_t rows, int64_t cols, int64_t segs,
                             int64_t chunk) {
  using R = Reducer<T, Kind>;
  using V = Vec16<T>;
  __shared__ T scratch[32];
  for (int64_t item = blockIdx.x; item < rows * segs; item += gridDim.x) {
    const int64_t r = item / segs, g = item - r * segs;
    const int64_t begin = g * chunk;
    const int64_t end = begin + chunk < cols ? begin + chunk : cols;
    const T *row = in + r * cols;
    T acc = R::init();
    if (Vec) {
      const typename V::type *vrow =
          reinterpret_cast<const typename V::type *>(row);
#pragma unroll 4
      for (int64_t c = begin / V::n + threadIdx.x; c < end / V::n;
           c += blockDim.x) {
        typename V::type v = vrow[c];
        const T *e = reinterpret_cast<const T *>(&v);
#pragma unroll
        for (int k = 0; k < V::n; ++k)
          acc = R::combine(acc, e[k]);
      }
    } else {
#pragma unroll 2
      for (int64_t c = begin + threadIdx.x; c < end; c += blockDim.x)
        acc = R::combine(acc, row[c]);
    }
    acc = block_reduce<R>(acc, scratch);
    if (threadIdx.x == 0)
      out[item] = segs == 1 ? R::finish(acc, cols) : acc;
  }
}

//===--------------------------------------------------------------------===//
// Middle-axis reductions: out[o, i] = reduce_r in[o, r, i]
//===--------------------------------------------------------------------===//

// N consecutive elements, loaded as one access (16 bytes for N = 16 /
// sizeof(T)).
template <class T, int N> struct alignas(sizeof(T) * N) Pack { T v[N]; };

// Block = (W threads across) x (Y row groups), W * Y <= 1024, Y a power of
// two; each thread owns N consecutive columns (N > 1: 16-byte loads). A
// block owns a tile of W * N consecutive inner columns of one outer index:
// thread (x, y) folds rows y, y + Y, ... of its columns (a warp reads
// 32 / W rows of W * N consecutive elements: whole 32-byte sectors for
// tiles of >= 8 floats), then the Y partials combine in a fixed
// shared-memory tree. No atomics, so the result is deterministic.
template <class T, int Kind, int N>
__global__ void __launch_bounds__(1024)
    reduce_middle_kernel(const T *__restrict__ in, T *__restrict__ out,
                         int64_t outer, int64_t reduced, int64_t inner,
                         int64_t tilesPerOuter) {
  using R = Reducer<T, Kind>;
  using P = Pack<T, N>;
  __shared__ P partial[1024];
  const int W = blockDim.x, Y = blockDim.y;
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t innerP = inner / N; // packs per row (inner % N == 0)
  const int64_t tiles = outer * tilesPerOuter;
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int64_t o = tile / tilesPerOuter;
    const int64_t i = (tile - o * tilesPerOuter) * W + tx; // pack column
    P acc;
#pragma unroll
    for (int k = 0; k < N; ++k)
      acc.v[k] = R::init();
    if (i < innerP) {
      const P *col = reinterpret_cast<const P *>(in + o * reduced * inner) + i;
#pragma unroll 4
      for (int64_t r = ty; r < reduced; r += Y) {
        const P v = col[r * innerP];
#pragma unroll
        for (int k = 0; k < N; ++k)
          acc.v[k] = R::combine(acc.v[k], v.v[k]);
      }
    }
    partial[ty * W + tx] = acc;
    __syncthreads();
    for (int half = Y >> 1; half > 0; half >>= 1) {
      if (ty < half) {
        P a = partial[ty * W + tx];
        const P b = partial[(ty + half) * W + tx];
#pragma unroll
        for (int k = 0; k < N; ++k)
          a.v[k] = R::combine(a.v[k], b.v[k]);
        partial[ty * W + tx] = a;
      }
      __syncthreads();
    }
    if (ty == 0 && i < innerP) {
      const P a = partial[tx];
#pragma unroll
      for (int k = 0; k < N; ++k)
        out[o * inner + i * N + k] = R::finish(a.v[k], reduced);
    }
    __syncthreads(); // partial is reused by the next tile
  }
}

//===--------------------------------------------------------------------===//
// Softmax cross-entropy
//===--------------------------------------------------------------------===//

// Online logsumexp state: m = running max, s = sum of e^(x - m). A NaN
// element makes s NaN (as the CPU's sum of exps); -inf elements are exact
// (e^-inf = 0) even while m is still -inf, where (x == m) counts 1 instead
// of e^(-inf - -inf) = NaN. A +inf or all -inf row is NaN at the end
// (finish_lse), as on the CPU, whose e^(x - max) is NaN there.
template <class T> __device__ __forceinline__ void lse_add(T &m, T &s, T x) {
  if (x > m) {
    s = s * tcc_cuda::exp(m - x) + T(1);
    m = x;
  } else {
    s += x == m ? T(1) : tcc_cuda::exp(x - m);
  }
}
template <class T>
__device__ __forceinline__ void lse_combine(T &m, T &s, T m2, T s2) {
  if (m2 > m) {
    s = s * tcc_cuda::exp(m - m2) + s2;
    m = m2;
  } else if (m2 == m) {
    s += s2;
  } else {
    s += s2 * tcc_cuda::exp(m2 - m);
  }
}
template <class T> __device__ __forceinline__ T finish_lse_sum(T m, T s) {
  return is_inf(m) ? quiet_nan<T>() : s;
}

// This thread's share of row[0..classes), threads striding; Vec: 16-byte
// loads (one max update per vector, then one exp per element).
template <class T, bool Vec>
__device__ __forceinline__ void lse_row_partial(const T *__restrict__ row,
                                                int64_t classes, T &m, T &s) {
  m = -infinity<T>();
  s = T(0);
  if (Vec) {
    using V = Vec16<T>;
    const typename V::type *vrow =
        reinterpret_cast<const typename V::type *>(row);
    const int64_t nv = classes / V::n;
#pragma unroll 2
    for (int64_t c = threadIdx.x; c < nv; c += blockDim.x) {
      typename V::type v = vrow[c];
      const T *e = reinterpret_cast<const T *>(&v);
      T vm = -infinity<T>();
#pragma unroll
      for (int k = 0; k < V::n; ++k)
        vm = e[k] > vm ? e[k] : vm;
      if (vm > m) {
        s = s * tcc_cuda::exp(m - vm);
        m = vm;
      }
#pragma unroll
      for (int k = 0; k < V::n; ++k)
        s += e[k] == m ? T(1) : tcc_cuda::exp(e[k] - m);
    }
  } else {
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
      lse_add(m, s, row[c]);
  }
}

// Block-wide (m, s); every thread gets the result. Block size a multiple
// of 32.
template <class T>
__device__ __forceinline__ void lse_block_reduce(T &m, T &s, T *sm, T *ss) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps = blockDim.x >> 5;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    T m2 = __shfl_down_sync(0xffffffffu, m, offset);
    T s2 = __shfl_down_sync(0xffffffffu, s, offset);
    lse_combine(m, s, m2, s2);
  }
  __syncthreads(); // sm / ss reused across rows
  if (lane == 0) {
    sm[warp] = m;
    ss[warp] = s;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < warps; ++w)
      lse_combine(m, s, sm[w], ss[w]);
    sm[0] = m;
    ss[0] = s;
  }
  __syncthreads();
  m = sm[0];
  s = ss[0];
}

template <class I>
__device__ __forceinline__ bool label_ok(I label, int64_t limit) {
  return label >= 0 && static_cast<int64_t>(label) < limit;
}

// Block per row: loss[n] = log(s) + m - logits[n, label].
template <class T, class I, bool Vec>
__global__ void __launch_bounds__(256)
    softmax_xent_forward_kernel(const T *__restrict__ logits,
                                const I *__restrict__ labels,
                                T *__restrict__ loss, int64_t rows,
                                int64_t classes, int32_t *status,
                                int32_t code) {
  __shared__ T sm[32], ss[32];
  for (int64_t n = blockIdx.x; n < rows; n += gridDim.x) {
    const I label = labels[n]; // block-uniform branch below
    if (!label_ok(label, classes)) {
      if (threadIdx.x == 0) {
        loss[n] = quiet_nan<T>();
        fail(status, code);
      }
      continue;
    }
    const T *row = logits + n * classes;
    T m, s;
    lse_row_partial<T, Vec>(row, classes, m, s);
    lse_block_reduce(m, s, sm, ss);
    if (threadIdx.x == 0)
      loss[n] = tcc_cuda::log(finish_lse_sum(m, s)) + m -
                row[static_cast<int64_t>(label)];
  }
}

// Block per row: pass 1 the online (m, s), pass 2 writes
// out = e^(x - m) * (grad / s), minus grad at the label (the CPU's order of
// operations). Reads the row twice (the second read mostly hits L2).
template <class T, class I, bool Vec>
__global__ void __launch_bounds__(256)
    softmax_xent_backward_kernel(const T *__restrict__ logits,
                                 const I *__restrict__ labels,
                                 const T *__restrict__ grad,
                                 T *__restrict__ out, int64_t rows,
                                 int64_t classes, int32_t *status,
                                 int32_t code) {
  __shared__ T sm[32], ss[32];
  for (int64_t n = blockIdx.x; n < rows; n += gridDim.x) {
    T *orow = out + n * classes;
    const I label = labels[n]; // block-uniform branch below
    if (!label_ok(label, classes)) {
      for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
        orow[c] = quiet_nan<T>();
      if (threadIdx.x == 0)
        fail(status, code);
      continue;
    }
    const T *row = logits + n * classes;
    T m, s;
    lse_row_partial<T, Vec>(row, classes, m, s);
    lse_block_reduce(m, s, sm, ss);
    const T g = grad[n];
    const T scale = g / finish_lse_sum(m, s);
    const int64_t lab = static_cast<int64_t>(label);
    if (Vec) {
      using V = Vec16<T>;
      const typename V::type *vrow =
          reinterpret_cast<const typename V::type *>(row);
      typename V::type *vout = reinterpret_cast<typename V::type *>(orow);
      const int64_t nv = classes / V::n;
      for (int64_t c = threadIdx.x; c < nv; c += blockDim.x) {
        typename V::type v = vrow[c];
        T *e = reinterpret_cast<T *>(&v);
#pragma unroll
        for (int k = 0; k < V::n; ++k) {
          T o = tcc_cuda::exp(e[k] - m) * scale;
          e[k] = c * V::n + k == lab ? o - g : o;
        }
        vout[c] = v;
      }
    } else {
      for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) {
        T o = tcc_cuda::exp(row[c] - m) * scale;
        orow[c] = c == lab ? o - g : o;
      }
    }
  }
}

//===--------------------------------------------------------------------===//
// Embeddings
//===--------------------------------------------------------------------===//

// out[n, j] = table[ids[n], j] in copy units U (1 to 16 bytes; a row is a
// whole number of units). One thread per unit, grid-stride over all units
// of all ids, so short rows (even one element) keep every lane busy.
template <class U, class I>
__global__ void __launch_bounds__(256)
    gather_rows_kernel(const U *__restrict__ table, const I *__restrict__ ids,
                       U *__restrict__ out, int64_t n_ids, int64_t vocab,
                       int64_t row_units, U fill, int32_t *status,
                       int32_t code) {
  const int64_t total = n_ids * row_units;
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       k < total; k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t n = k / row_units, j = k - n * row_units;
    const I id = ids[n];
    if (!label_ok(id, vocab)) {
      out[k] = fill;
      if (j == 0)
        fail(status, code);
    } else {
      out[k] = table[static_cast<int64_t>(id) * row_units + j];
    }
  }
}

template <class T, class U, class I>
inline void launch_gather_units(const T *table, const I *ids, T *out,
                                int64_t n_ids, int64_t vocab, int64_t row_elems,
                                const unsigned char *fill16, int32_t *status,
                                int32_t code, cudaStream_t stream) {
  const int64_t rowUnits = row_elems * static_cast<int64_t>(sizeof(T)) /
                           static_cast<int64_t>(sizeof(U));
  U fill;
  memcpy(&fill, fill16, sizeof(U));
  const int threads = 256;
  gather_rows_kernel<U, I>
      <<<static_cast<unsigned>(grid_for(n_ids * rowUnits, threads)), threads, 0,
         stream>>>(reinterpret_cast<const U *>(table), ids,
                   reinterpret_cast<U *>(out), n_ids, vocab, rowUnits, fill,
                   status, code);
}

// out[ids[n], j] += updates[n, j]; one thread per element, atomics.
template <class T, class I>
__global__ void __launch_bounds__(256)
    scatter_add_rows_kernel(const T *__restrict__ updates,
                            const I *__restrict__ ids, T *out, int64_t n_ids,
                            int64_t vocab, int64_t row_elems, int32_t *status,
                            int32_t code) {
  const int64_t total = n_ids * row_elems;
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       k < total; k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t n = k / row_elems, j = k - n * row_elems;
    const I id = ids[n];
    if (!label_ok(id, vocab)) {
      if (j == 0)
        fail(status, code);
      continue;
    }
    atomicAdd(out + static_cast<int64_t>(id) * row_elems + j, updates[k]);
  }
}

// Only the id check (rows of zero elements: nothing to copy, but a bad id
// still fails the step, as on the CPU).
template <class I>
__global__ void __launch_bounds__(256)
    check_ids_kernel(const I *__restrict__ ids, int64_t n_ids, int64_t vocab,
                     int32_t *status, int32_t code) {
  for (int64_t n = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       n < n_ids; n += static_cast<int64_t>(gridDim.x) * blockDim.x)
    if (!label_ok(ids[n], vocab))
      fail(status, code);
}

template <class T> struct IsFloatOrDouble {
  static constexpr bool value = false;
};
template <> struct IsFloatOrDouble<float> {
  static constexpr bool value = true;
};
template <> struct IsFloatOrDouble<double> {
  static constexpr bool value = true;
};
template <class I> struct IsIndex { static constexpr bool value = false; };
template <> struct IsIndex<int32_t> { static constexpr bool value = true; };
template <> struct IsIndex<int64_t> { static constexpr bool value = true; };

} // namespace detail

//===--------------------------------------------------------------------===//
// Launchers
//===--------------------------------------------------------------------===//

// out (rows) = reduce(in (rows, cols) over cols); Kind 0 sum, 1 mean, 2 max
// (semantics: detail::Reducer). Sums accumulate in T. Launch shapes:
// - cols <= 1024: a warp per row, 8 rows a block;
// - few long rows (rows < 264, two per SM, and cols >= 65536, e.g. one row
//   of a whole tensor): each row is split into segments of >= 32768
//   elements (about 528 blocks in all), one 1024-thread block per segment
//   writes a partial, then a warp per row combines the partials in order.
//   The partials live in a stream-ordered cudaMallocAsync buffer freed
//   right after (no host synchronization); if that allocation fails, or an
//   earlier error is pending, it falls back to the next shape;
// - otherwise a block per row (256 threads; 1024 for rows >= 16384 long).
// Block shapes use 16-byte loads when in is 16-byte aligned and cols a
// multiple of the vector width. Warp shuffles, then a shared-memory combine
// across warps. Deterministic for given sizes and alignment (and, for
// split rows, as long as the scratch allocation succeeds).
template <class T, int Kind>
inline void launch_reduce_rows(const T *in, T *out, int64_t rows, int64_t cols,
                               cudaStream_t stream) {
  static_assert(detail::IsFloatOrDouble<T>::value, "reduce: float or double");
  if (rows <= 0)
    return;
  if (cols <= 1024) {
    const int threads = 256; // 8 warps = 8 rows a block
    detail::reduce_rows_warp_kernel<T, Kind>
        <<<static_cast<unsigned>(grid_for(rows, threads / 32)), threads, 0,
           stream>>>(in, out, rows, cols, cols);
    return;
  }
  const bool vec = detail::aligned16(in) && cols % detail::Vec16<T>::n == 0;
  auto blockKernel = [&](T *dst, int threads, int64_t segs, int64_t chunk) {
    const unsigned blocks = static_cast<unsigned>(grid_for(rows * segs, 1));
    if (vec)
      detail::reduce_rows_block_kernel<T, Kind, true>
          <<<blocks, threads, 0, stream>>>(in, dst, rows, cols, segs, chunk);
    else
      detail::reduce_rows_block_kernel<T, Kind, false>
          <<<blocks, threads, 0, stream>>>(in, dst, rows, cols, segs, chunk);
  };
  const int64_t fewRows = 2 * 132, targetBlocks = 4 * 132;
  if (rows < fewRows && cols >= 65536 && cudaPeekAtLastError() == cudaSuccess) {
    int64_t segs = (cols + 32767) / 32768;
    const int64_t perRow = (targetBlocks + rows - 1) / rows;
    segs = segs < perRow ? segs : perRow;
    // Chunks of whole 1024-element groups keep every segment aligned.
    const int64_t chunk = ((cols + segs - 1) / segs + 1023) / 1024 * 1024;
    segs = (cols + chunk - 1) / chunk;
    T *partial = nullptr;
    if (segs > 1 &&
        cudaMallocAsync(reinterpret_cast<void **>(&partial),
                        static_cast<size_t>(rows * segs) * sizeof(T),
                        stream) == cudaSuccess) {
      blockKernel(partial, 1024, segs, chunk);
      detail::reduce_rows_warp_kernel<T, Kind>
          <<<static_cast<unsigned>(grid_for(rows, 8)), 256, 0, stream>>>(
              partial, out, rows, segs, cols);
      cudaFreeAsync(partial, stream);
      return;
    }
    (void)cudaGetLastError(); // only our failed allocation: none was pending
  }
  // Few rows: give each row more threads.
  blockKernel(out, rows < fewRows && cols >= 16384 ? 1024 : 256, 1, cols);
}

// out (outer, inner) = reduce(in (outer, reduced, inner) over reduced),
// e.g. a bias gradient: outer 1, reduced B*T = 16384, inner 768. inner 1
// is a row reduction (launch_reduce_rows). Otherwise tiles of TW columns
// x Y row groups (detail::reduce_middle_kernel), each thread N columns
// (16-byte loads when in is 16-byte aligned and inner a multiple of the
// vector width, else N = 1): TW starts at min(32, inner) rounded up to a
// power of two and halves down to 8 while there are fewer than two tiles
// per SM (the bias gradient: 96 tiles of 2 x 512 threads reading float4s,
// not 24 of 32 columns); Y = min(1024 / (TW / N), reduced) rounded up to a
// power of two; a small `reduced` widens TW so blocks keep >= 256 threads.
// Deterministic.
template <class T, int Kind>
inline void launch_reduce_middle(const T *in, T *out, int64_t outer,
                                 int64_t reduced, int64_t inner,
                                 cudaStream_t stream) {
  static_assert(detail::IsFloatOrDouble<T>::value, "reduce: float or double");
  if (outer <= 0 || inner <= 0)
    return;
  if (inner == 1) {
    launch_reduce_rows<T, Kind>(in, out, outer, reduced, stream);
    return;
  }
  constexpr int64_t kVec = detail::Vec16<T>::n;
  const int64_t n = detail::aligned16(in) && inner % kVec == 0 ? kVec : 1;
  const int64_t minTiles = 2 * 132;
  auto tilesFor = [&](int64_t width) {
    return outer * ((inner + width - 1) / width);
  };
  const int64_t innerP2 = detail::pow2_at_least(inner);
  const int64_t reducedP2 = detail::pow2_at_least(reduced);
  auto rowGroups = [&](int64_t width) {
    const int64_t most = 1024 / (width / n);
    return reducedP2 < most ? reducedP2 : most;
  };
  int64_t tw = innerP2 < 32 ? innerP2 : 32; // >= n: inner % n == 0
  while (tw > 8 && tilesFor(tw) < minTiles)
    tw /= 2;
  int64_t y = rowGroups(tw);
  while ((tw / n) * y < 256 && tw < innerP2) {
    tw *= 2;
    y = rowGroups(tw);
  }
  const int64_t tilesPerOuter = (inner + tw - 1) / tw;
  const unsigned blocks =
      static_cast<unsigned>(grid_for(outer * tilesPerOuter, 1));
  const dim3 threads(static_cast<unsigned>(tw / n), static_cast<unsigned>(y));
  if (n == kVec && kVec > 1)
    detail::reduce_middle_kernel<T, Kind, kVec><<<blocks, threads, 0, stream>>>(
        in, out, outer, reduced, inner, tilesPerOuter);
  else
    detail::reduce_middle_kernel<T, Kind, 1><<<blocks, threads, 0, stream>>>(
        in, out, outer, reduced, inner, tilesPerOuter);
}

// Block size for a block-per-row kernel over rows of `classes` elements:
// one warp for short rows, up to 256 threads (a few hundred elements
// each at 50304 classes).
inline int row_block_threads(int64_t classes) {
  return classes <= 256 ? 32 : classes <= 4096 ? 128 : 256;
}

// loss (rows) = logsumexp(logits (rows, classes)[n]) - logits[n, labels[n]].
// Block per row, one read pass (online max / sum of exps), 16-byte loads
// when classes is a multiple of the vector width and logits is 16-byte
// aligned. Accumulates in T. A label outside [0, classes): loss[n] = NaN and
// fail(status, code). NaN / +inf logits, or a row all -inf, give NaN (as
// the CPU).
template <class T, class I>
inline void launch_softmax_xent_forward(const T *logits, const I *labels,
                                        T *loss, int64_t rows, int64_t classes,
                                        int32_t *status, int32_t code,
                                        cudaStream_t stream) {
  static_assert(detail::IsFloatOrDouble<T>::value, "xent: float or double");
  static_assert(detail::IsIndex<I>::value, "labels: int32_t or int64_t");
  if (rows <= 0)
    return;
  const int threads = row_block_threads(classes);
  const unsigned blocks = static_cast<unsigned>(grid_for(rows, 1));
  if (detail::aligned16(logits) && classes % detail::Vec16<T>::n == 0)
    detail::softmax_xent_forward_kernel<T, I, true>
        <<<blocks, threads, 0, stream>>>(logits, labels, loss, rows, classes,
                                         status, code);
  else
    detail::softmax_xent_forward_kernel<T, I, false>
        <<<blocks, threads, 0, stream>>>(logits, labels, loss, rows, classes,
                                         status, code);
}

// out (rows, classes) = (softmax(logits[n]) - onehot(labels[n])) * grad[n];
// grad is (rows). Block per row, two reads of the row (online max / sum,
// then the write pass). A label outside [0, classes): that row of out is
// NaN and fail(status, code). out must NOT alias logits (the pointers are
// __restrict__).
template <class T, class I>
inline void launch_softmax_xent_backward(const T *logits, const I *labels,
                                         const T *grad, T *out, int64_t rows,
                                         int64_t classes, int32_t *status,
                                         int32_t code, cudaStream_t stream) {
  static_assert(detail::IsFloatOrDouble<T>::value, "xent: float or double");
  static_assert(detail::IsIndex<I>::value, "labels: int32_t or int64_t");
  if (rows <= 0)
    return; // classes 0 still launches: every label is out of range
  const int threads = row_block_threads(classes);
  const unsigned blocks = static_cast<unsigned>(grid_for(rows, 1));
  if (detail::aligned16(logits) && detail::aligned16(out) &&
      classes % detail::Vec16<T>::n == 0)
    detail::softmax_xent_backward_kernel<T, I, true>
        <<<blocks, threads, 0, stream>>>(logits, labels, grad, out, rows,
                                         classes, status, code);
  else
    detail::softmax_xent_backward_kernel<T, I, false>
        <<<blocks, threads, 0, stream>>>(logits, labels, grad, out, rows,
                                         classes, status, code);
}

// out (n_ids, row_elems) = table (vocab, row_elems)[ids[n]]. T is any
// trivially copyable type of 1, 2, 4 or 8 bytes (float, double, int32_t,
// int64_t, bf16/f16 as uint16_t, uint8_t / bool): rows are copied in the
// widest unit (16, 8, 4, 2 or 1 bytes, never narrower than T) that divides
// a row and to which both table and out are aligned. An id outside
// [0, vocab): that row of out is NaN (float, double) or zero bytes (other
// types) and fail(status, code). Bit-exact copy.
template <class T, class I>
inline void launch_gather_rows(const T *table, const I *ids, T *out,
                               int64_t n_ids, int64_t vocab, int64_t row_elems,
                               int32_t *status, int32_t code,
                               cudaStream_t stream) {
  static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 ||
                    sizeof(T) == 8,
                "gather: elements of 1, 2, 4 or 8 bytes");
  static_assert(detail::IsIndex<I>::value, "ids: int32_t or int64_t");
  if (n_ids <= 0)
    return;
  if (row_elems <= 0) {
    detail::check_ids_kernel<I>
        <<<static_cast<unsigned>(grid_for(n_ids, 256)), 256, 0, stream>>>(
            ids, n_ids, vocab, status, code);
    return;
  }
  // The bad-id fill, repeated to 16 bytes.
  unsigned char fill16[16] = {};
  if (std::numeric_limits<T>::has_quiet_NaN) {
    T nan = std::numeric_limits<T>::quiet_NaN();
    for (size_t k = 0; k < 16; k += sizeof(T))
      memcpy(fill16 + k, &nan, sizeof(T));
  }
  const int64_t rowBytes = row_elems * static_cast<int64_t>(sizeof(T));
  const uintptr_t addr =
      reinterpret_cast<uintptr_t>(table) | reinterpret_cast<uintptr_t>(out);
  auto fits = [&](int64_t unit) {
    return unit >= static_cast<int64_t>(sizeof(T)) && rowBytes % unit == 0 &&
           addr % static_cast<uintptr_t>(unit) == 0;
  };
  if (fits(16))
    detail::launch_gather_units<T, uint4>(
        table, ids, out, n_ids, vocab, row_elems, fill16, status, code, stream);
  else if (fits(8))
    detail::launch_gather_units<T, unsigned long long>(
        table, ids, out, n_ids, vocab, row_elems, fill16, status, code, stream);
  else if (fits(4))
    detail::launch_gather_units<T, uint32_t>(
        table, ids, out, n_ids, vocab, row_elems, fill16, status, code, stream);
  else if (fits(2))
    detail::launch_gather_units<T, uint16_t>(
        table, ids, out, n_ids, vocab, row_elems, fill16, status, code, stream);
  else
    detail::launch_gather_units<T, uint8_t>(
        table, ids, out, n_ids, vocab, row_elems, fill16, status, code, stream);
}

// out (vocab, row_elems) = 0 (cudaMemsetAsync on stream), then
// out[ids[n], :] += updates (n_ids, row_elems)[n, :] with atomicAdd, so
// repeated ids accumulate. An id outside [0, vocab): that update row is
// skipped and fail(status, code). NOT deterministic: the order in which
// repeated ids' atomics land varies run to run, so float sums may differ in
// the last bits (the CPU adds in order of n).
template <class T, class I>
inline void launch_scatter_add_rows(const T *updates, const I *ids, T *out,
                                    int64_t n_ids, int64_t vocab,
                                    int64_t row_elems, int32_t *status,
                                    int32_t code, cudaStream_t stream) {
  static_assert(detail::IsFloatOrDouble<T>::value,
                "scatter_add: float or double");
  static_assert(detail::IsIndex<I>::value, "ids: int32_t or int64_t");
  if (vocab > 0 && row_elems > 0)
    cudaMemsetAsync(out, 0, static_cast<size_t>(vocab) * row_elems * sizeof(T),
                    stream);
  if (n_ids <= 0)
    return;
  const int threads = 256;
  if (row_elems <= 0) {
    detail::check_ids_kernel<I>
        <<<static_cast<unsigned>(grid_for(n_ids, threads)), threads, 0,
           stream>>>(ids, n_ids, vocab, status, code);
    return;
  }
  detail::scatter_add_rows_kernel<T, I>
      <<<static_cast<unsigned>(grid_for(n_ids * row_elems, threads)), threads,
         0, stream>>>(updates, ids, out, n_ids, vocab, row_elems, status, code);
}

} // namespace tcc_cuda

#endif // TCC_CUDA_PRELUDE_CUH
