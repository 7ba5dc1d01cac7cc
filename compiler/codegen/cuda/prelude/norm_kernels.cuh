//===--------------------------------------------------------------------===//
// Fused normalization (kern.layer_norm), and the rows' helpers the
// backward (norm_backward_kernels.cuh) shares
//===--------------------------------------------------------------------===//

// One warp per row (rows grid-stride over the warps of the grid). A lane
// owns the chunks of V consecutive columns starting at (k * 32 + lane) * V;
// the first kNormCachedChunks of them stay in registers for the whole row
// (every row up to 32 * V * kNormCachedChunks columns: 1024 f32, 2048
// bf16), any further chunk is re-read (from L1). V is the number of
// elements of the widest type involved in 16 bytes when every pointer is
// 16-byte aligned and the row length a multiple of V, else 1 (scalar path).
// Statistics: two passes over the cached row (mean, then the centered sum
// of squares) in acc_t<T>, warp shuffles in a fixed order.
constexpr int kNormCachedChunks = 8;
constexpr int kNormWarps = 8; // warps per block (forward, and backward at most)
// Shared memory of a backward block's per-warp sums. A constant, not the
// device's limit, so the warps (and the order of the sums) are the same on
// every GPU; 64 KiB is within every sm_70+ opt-in limit. 48 KiB gave width
// 2048's f32 sums one warp per block (two per SM: 1.2 TB/s on an H200).
constexpr int64_t kNormBackwardSharedBudget = 64 * 1024;

template <int Bytes> struct NormChunkBits;
template <> struct NormChunkBits<2> { using type = uint16_t; };
template <> struct NormChunkBits<4> { using type = uint32_t; };
template <> struct NormChunkBits<8> { using type = uint2; };
template <> struct NormChunkBits<16> { using type = uint4; };

// V elements of T as loaded (one access's bits), widened to A.
template <int V, class T, class A>
__device__ __forceinline__ void
norm_unpack(const typename NormChunkBits<V * sizeof(T)>::type &bits, A (&out)[V]) {
  T t[V];
  memcpy(t, &bits, sizeof(bits));
#pragma unroll
  for (int i = 0; i < V; ++i)
    out[i] = static_cast<A>(Elem<T>::load(t[i]));
}

// V elements at p (aligned to their size), widened to A.
template <int V, class T, class A>
__device__ __forceinline__ void norm_load(const T *__restrict__ p, A (&out)[V]) {
  using Bits = typename NormChunkBits<V * sizeof(T)>::type;
  const Bits bits = *reinterpret_cast<const Bits *>(p); // one access
  norm_unpack<V, T>(bits, out);
}

// V values rounded to T (once each) and stored at p in one access.
template <int V, class T, class A>
__device__ __forceinline__ void norm_store(T *__restrict__ p, const A (&in)[V]) {
  using Bits = typename NormChunkBits<V * sizeof(T)>::type;
  T t[V];
#pragma unroll
  for (int i = 0; i < V; ++i)
    t[i] = Elem<T>::store(static_cast<acc_t<T>>(in[i]));
  Bits bits;
  memcpy(&bits, t, sizeof(Bits));
  *reinterpret_cast<Bits *>(p) = bits;
}

// p[i] += v[i] for V consecutive shared-memory values of the calling lane,
// in 16-byte (or narrower) pieces: a warp's lanes touch consecutive pieces,
// so an access costs the minimum of shared-memory wavefronts (scalar
// accesses V apart would be V-way bank conflicts). p is aligned to the
// piece (the caller's offsets are multiples of V, its slices of V * 2).
template <int V, class A>
__device__ __forceinline__ void norm_shared_add(A *p, const A (&v)[V]) {
  constexpr int kPieceBytes = V * sizeof(A) < 16 ? V * sizeof(A) : 16;
  constexpr int kPerPiece = kPieceBytes / sizeof(A);
  struct alignas(kPieceBytes) Piece {
    A e[kPerPiece];
  };
#pragma unroll
  for (int q = 0; q < V; q += kPerPiece) {
    Piece piece = *reinterpret_cast<Piece *>(p + q);
#pragma unroll
    for (int i = 0; i < kPerPiece; ++i)
      piece.e[i] += v[q + i];
    *reinterpret_cast<Piece *>(p + q) = piece;
  }
}

// Asks L2 for the `bytes` at p (one 128-byte line per lane and step), so a
// later load of them waits for L2, not for DRAM; no registers held.
__device__ __forceinline__ void norm_prefetch_l2(const void *p, int64_t bytes, int lane) {
  const char *base = static_cast<const char *>(p);
  for (int64_t off = static_cast<int64_t>(lane) * 128; off < bytes; off += 32 * 128)
    asm volatile("prefetch.global.L2 [%0];" ::"l"(base + off));
}

template <class A> __device__ __forceinline__ A norm_warp_sum(A v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// x of one row in registers (the first N chunks of a lane; N is
// kNormCachedChunks but for kernels that can spend more registers on it).
// A narrower T (bf16 under f32 math) is kept as loaded: half the registers
// of its f32 values, widened again at each use (a shift); a T as wide as A
// is kept as values (the same registers; the compiler schedules it better).
template <int V, class T, class A, int N = kNormCachedChunks> struct NormRow {
  using Bits = typename NormChunkBits<V * sizeof(T)>::type;
  static constexpr bool kRaw = sizeof(T) < sizeof(A);
  Bits raw[kRaw ? N : 1];
  A v[kRaw ? 1 : N][V];
  __device__ __forceinline__ void load(const T *__restrict__ xr, int64_t c, int lane) {
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const int64_t j = (static_cast<int64_t>(k) * 32 + lane) * V;
      if (j < c) {
        if constexpr (kRaw)
          raw[k] = *reinterpret_cast<const Bits *>(xr + j);
        else
          norm_load<V>(xr + j, v[k]);
      }
    }
  }
  __device__ __forceinline__ void get(int k, A (&out)[V]) const {
    if constexpr (kRaw) {
      norm_unpack<V, T>(raw[k], out);
    } else {
#pragma unroll
      for (int i = 0; i < V; ++i)
        out[i] = v[k][i];
    }
  }
};

// f(x chunk, j) for every chunk of the lane, in column order: the cached
// ones (constant indices: the array stays in registers), then the rest.
template <int V, class T, class A, int N, class F>
__device__ __forceinline__ void norm_for_chunks(const NormRow<V, T, A, N> &row,
                                                const T *__restrict__ xr, int64_t c, int lane,
                                                F &&f) {
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const int64_t j = (static_cast<int64_t>(k) * 32 + lane) * V;
    if (j < c) {
      A t[V];
      row.get(k, t);
      f(t, j);
    }
  }
  for (int64_t k = N; k * 32 * V < c; ++k) {
    const int64_t j = (k * 32 + lane) * V;
    if (j < c) {
      A t[V];
      norm_load<V>(xr + j, t);
      f(t, j);
    }
  }
}

// f(x chunk, grad chunk, j) for every chunk of the lane, as norm_for_chunks;
// the grad row cached in registers too (CacheGrad: both rows' loads are in
// flight at once) or read per chunk.
template <bool CacheGrad, int V, class T, class G, class A, class F>
__device__ __forceinline__ void norm_for_chunk_pairs(const NormRow<V, T, A> &xrow,
                                                     const NormRow<V, G, A> &grow,
                                                     const T *__restrict__ xr,
                                                     const G *__restrict__ gr, int64_t c,
                                                     int lane, F &&f) {
#pragma unroll
  for (int k = 0; k < kNormCachedChunks; ++k) {
    const int64_t j = (static_cast<int64_t>(k) * 32 + lane) * V;
    if (j < c) {
      A x[V], g[V];
      xrow.get(k, x);
      if constexpr (CacheGrad)
        grow.get(k, g);
      else
        norm_load<V>(gr + j, g);
      f(x, g, j);
    }
  }
  for (int64_t k = kNormCachedChunks; k * 32 * V < c; ++k) {
    const int64_t j = (k * 32 + lane) * V;
    if (j < c) {
      A x[V], g[V];
      norm_load<V>(xr + j, x);
      norm_load<V>(gr + j, g);
      f(x, g, j);
    }
  }
}

// f(x chunk, grad chunk, addend chunk, j), as norm_for_chunk_pairs, with a
// third row (of T) cached (CacheAddend) or read per chunk; ar null: no
// third row (the addend chunk passed is unset, unread by f).
template <bool CacheGrad, bool CacheAddend, int V, class T, class G, class A, class F>
__device__ __forceinline__ void
norm_for_chunk_triples(const NormRow<V, T, A> &xrow, const NormRow<V, G, A> &grow,
                       const NormRow<V, T, A> &arow, const T *__restrict__ xr,
                       const G *__restrict__ gr, const T *__restrict__ ar, int64_t c, int lane,
                       F &&f) {
#pragma unroll
  for (int k = 0; k < kNormCachedChunks; ++k) {
    const int64_t j = (static_cast<int64_t>(k) * 32 + lane) * V;
    if (j < c) {
      A x[V], g[V], a[V];
      xrow.get(k, x);
      if constexpr (CacheGrad)
        grow.get(k, g);
      else
        norm_load<V>(gr + j, g);
      if (ar) {
        if constexpr (CacheAddend)
          arow.get(k, a);
        else
          norm_load<V>(ar + j, a);
      }
      f(x, g, a, j);
    }
  }
  for (int64_t k = kNormCachedChunks; k * 32 * V < c; ++k) {
    const int64_t j = (k * 32 + lane) * V;
    if (j < c) {
      A x[V], g[V], a[V];
      norm_load<V>(xr + j, x);
      norm_load<V>(gr + j, g);
      if (ar)
        norm_load<V>(ar + j, a);
      f(x, g, a, j);
    }
  }
}

// Mean (0 for rms) and 1 / sqrt(var + eps) of a row, on every lane.
template <int V, class T, class A, int N>
__device__ __forceinline__ void norm_statistics(const NormRow<V, T, A, N> &row,
                                                const T *__restrict__ xr, int64_t c, int lane,
                                                A eps, bool rms, A &mean, A &rstd) {
  A m = 0;
  if (!rms) {
    A s = 0;
    norm_for_chunks(row, xr, c, lane, [&](const A(&x)[V], int64_t) {
#pragma unroll
      for (int i = 0; i < V; ++i)
        s += x[i];
    });
    m = norm_warp_sum(s) / static_cast<A>(c);
  }
  A sq = 0;
  norm_for_chunks(row, xr, c, lane, [&](const A(&x)[V], int64_t) {
#pragma unroll
    for (int i = 0; i < V; ++i)
      sq += (x[i] - m) * (x[i] - m);
  });
  mean = m;
  rstd = static_cast<A>(1) / sqrt(norm_warp_sum(sq) / static_cast<A>(c) + eps);
}

// One row's outputs, chunk by chunk: the row's statistics, then f(y, j)
// for each chunk of the lane with y = (x - mean) * rstd * weight + bias in
// acc_t<T>, not yet rounded: the values layer_norm_forward_kernel stores,
// which the FP8 norm cast (norm_fp8_kernels.cuh) rounds and casts. (The
// forward kernel keeps its own copy of these lines: through this helper
// nvcc gave it 56 more instructions, 2248 against 2192 at f32 -> bf16,
// not measured; norm_fp8_test checks the two agree bit for bit.)
template <int V, class T, int N = kNormCachedChunks, class F>
__device__ __forceinline__ void norm_row_outputs(const T *__restrict__ xr,
                                                 const T *__restrict__ weight,
                                                 const T *__restrict__ bias, int64_t c, int lane,
                                                 acc_t<T> eps, bool rms, F &&f) {
  using A = acc_t<T>;
  NormRow<V, T, A, N> row;
  row.load(xr, c, lane);
  A mean, rstd;
  norm_statistics(row, xr, c, lane, eps, rms, mean, rstd);
  norm_for_chunks(row, xr, c, lane, [&](const A(&xv)[V], int64_t j) {
    A y[V], w[V], b[V];
    if (weight)
      norm_load<V>(weight + j, w);
    if (bias)
      norm_load<V>(bias + j, b);
#pragma unroll
    for (int i = 0; i < V; ++i) {
      y[i] = (xv[i] - mean) * rstd;
      if (weight)
        y[i] *= w[i];
      if (bias)
        y[i] += b[i];
    }
    f(y, j);
  });
}

template <int V, class T, class Y>
__global__ void __launch_bounds__(kNormWarps * 32)
    layer_norm_forward_kernel(const T *__restrict__ x, const T *__restrict__ weight,
                              const T *__restrict__ bias, Y *__restrict__ out, int64_t rows,
                              int64_t c, acc_t<T> eps, bool rms) {
  using A = acc_t<T>;
  const int lane = threadIdx.x & 31;
  for (int64_t r = blockIdx.x * static_cast<int64_t>(kNormWarps) + (threadIdx.x >> 5); r < rows;
       r += static_cast<int64_t>(gridDim.x) * kNormWarps) {
    const T *xr = x + r * c;
    NormRow<V, T, A> row;
    row.load(xr, c, lane);
    A mean, rstd;
    norm_statistics(row, xr, c, lane, eps, rms, mean, rstd);
    Y *o = out + r * c;
    norm_for_chunks(row, xr, c, lane, [&](const A(&xv)[V], int64_t j) {
      A y[V], w[V], b[V];
      if (weight)
        norm_load<V>(weight + j, w);
      if (bias)
        norm_load<V>(bias + j, b);
#pragma unroll
      for (int i = 0; i < V; ++i) {
        y[i] = (xv[i] - mean) * rstd;
        if (weight)
          y[i] *= w[i];
        if (bias)
          y[i] += b[i];
      }
      norm_store<V>(o + j, y);
    });
  }
}
