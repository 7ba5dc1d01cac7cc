//===--------------------------------------------------------------------===//
// Fused normalization (kern.layer_norm / kern.layer_norm_grad)
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

// p[0, n) = 0 by the calling warp's lanes, 16 bytes a store where p and n
// allow.
template <class A>
__device__ __forceinline__ void norm_shared_fill_zero(A *p, int n, int lane) {
  constexpr int kPer = 16 / sizeof(A);
  if (n % kPer == 0 && reinterpret_cast<uintptr_t>(p) % 16 == 0) {
    for (int j = lane * kPer; j < n; j += 32 * kPer)
      *reinterpret_cast<uint4 *>(p + j) = make_uint4(0, 0, 0, 0);
  } else {
    for (int j = lane; j < n; j += 32)
      p[j] = 0;
  }
}

// out[j] = sum over w < warps of in[w * stride + j] in warp order, j < n,
// by the block's threads (in null: zeros); 16 bytes a load and store where
// the pointers, n and stride allow (c a multiple of 4 at f32, as GPT-2's).
template <class A>
__device__ __forceinline__ void norm_flush_warp_sums(const A *in, int stride, int warps, int n,
                                                     A *__restrict__ out) {
  constexpr int kPer = 16 / sizeof(A);
  struct alignas(16) Piece {
    A e[kPer];
  };
  const bool vector = n % kPer == 0 && stride % kPer == 0 &&
                      reinterpret_cast<uintptr_t>(out) % 16 == 0 &&
                      reinterpret_cast<uintptr_t>(in) % 16 == 0;
  if (vector) {
    for (int j = threadIdx.x * kPer; j < n; j += blockDim.x * kPer) {
      Piece s{};
      if (in)
        for (int w = 0; w < warps; ++w) {
          const Piece v = *reinterpret_cast<const Piece *>(in + w * stride + j);
#pragma unroll
          for (int i = 0; i < kPer; ++i)
            s.e[i] += v.e[i];
        }
      *reinterpret_cast<Piece *>(out + j) = s;
    }
  } else {
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
      A s = 0;
      if (in)
        for (int w = 0; w < warps; ++w)
          s += in[w * stride + j];
      out[j] = s;
    }
  }
}

// What the backward knows at compile time of its call: nothing here (the
// row length, the sums wanted and rms are the kernel's arguments);
// tcc_cuda::NormGradFixed is the generated step's, which knows them all.
struct NormGradRuntime {
  static constexpr bool kKnown = false;
  static constexpr int64_t kC = 0;
  static constexpr bool kWeightSum = false, kBiasSum = false, kDxSum = false,
                        kSumOfCast = false, kRms = false;
};

// The backward's FP8 part, called by every thread of the block: none here
// (the plain backward). norm_fp8_kernels.cuh's NormGradFp8Cast writes
// dx's 16-bit values as FP8 bytes instead of a dx_cast copy, and
// NormGradFp8Amax is the amax pass before it (nothing written).
// begin(band memory after the sums, c): false when the block has nothing
// to do; chunk<V, Y>(d, r, j, c, warp): d (dx's stored values) at row r,
// columns j..j+V-1; band(r0, rows, c, warps): after each band of rows
// (kBands: the rows loop goes band by band); finish(elements): at the end.
struct NormGradNoFp8 {
  static constexpr bool kBands = false, kWritesDx = true, kCasts = false;
  __device__ __forceinline__ bool begin(unsigned char *, int64_t) { return true; }
  template <int V, class Y, class A>
  __device__ __forceinline__ void chunk(const A (&)[V], int64_t, int64_t, int64_t, int) {}
  __device__ __forceinline__ void band(int64_t, int64_t, int64_t, int) {}
  __device__ __forceinline__ void finish(int64_t) {}
};

// Whether the backward keeps the addend row in registers too (loaded with
// x and grad, so the row's last pass waits on no memory): only with the
// grad row cached and when the three rows' cached chunks fit 80 registers a
// lane (GPT-2's f32 x and addend with a bf16 grad: 8 chunks of 4 + 2 + 4),
// which with the rest stays within 128 (two 256-thread blocks per SM).
template <int V, class G, class T, bool CacheGrad>
__host__ __device__ constexpr bool norm_cache_addend() {
  return CacheGrad && kNormCachedChunks * V * (2 * sizeof(T) + sizeof(G)) <= 80 * 4;
}

// The backward: block b of the grid (exactly `parts` blocks, `warps` warps
// each) takes rows b * warps + w + k * parts * warps, warp w one row at a
// time: dx per row, and the row's grad * x_hat (with dw_sums) and grad
// (with db_sums) added to the warp's own slice of shared memory (c of A for
// each of the two wanted; a lane owns its columns, so no two threads add to
// one place). At the end the block adds its warps' slices in warp order
// into its part of the workspace, (parts, 2, c); a sum not wanted is
// written as zeros. RMSNorm wants no bias sum: half the shared memory per
// warp, so twice the warps per block at width 2048.
// CacheGrad keeps the grad row in registers too (more registers, fewer
// loads in the second pass). addend (of T, or null): added to dx as it is
// written (the residual stream's gradient): kept in registers with x and
// grad when norm_cache_addend says so, else asked of L2 when the row's x
// and grad loads are issued (its loads in the last pass then wait for L2,
// not DRAM). Two blocks per SM (at most 128 registers a thread): fewer
// registers spill, more blocks did not run faster on an H200. dx_cast (of
// Y, or null): dx's stored values converted to Y as well (a folded cast:
// the f32 residual gradient also written as the bf16 matmul operand).
// dx_sums: the column sums of dx as stored (of dx_cast's values with
// sum_of_cast) go to a third slice and the workspace's third row, parts
// (parts, 3, c): the bias gradient of the products that write the
// residual stream, added up here instead of by their GEMM's epilogue.
// Fixed (NormGradRuntime or a tcc_cuda::NormGradFixed): with kKnown, c,
// the three sum flags, sum_of_cast and rms are the constants it names (the
// launcher checks the arguments agree), so the chunk guards, the branches
// and the index math fold away: GPT-2's case ran 14.1 M instructions
// instead of 20.6 M, 70 us instead of 77 us under ncu on an H100.
// Fp8: NormGradNoFp8, or the FP8 cast of dx's Y values (or its amax pass)
// in the same pass (norm_fp8_kernels.cuh); the rows, sums and dx are the
// same either way.
template <int V, class G, class T, class Y, bool CacheGrad, class Fixed = NormGradRuntime,
          class Fp8 = NormGradNoFp8>
__global__ void __launch_bounds__(kNormWarps * 32, 2)
    layer_norm_backward_kernel(const G *__restrict__ grad, const T *__restrict__ x,
                               const T *__restrict__ weight, const T *__restrict__ addend,
                               T *__restrict__ dx, Y *__restrict__ dx_cast,
                               acc_t<T> *__restrict__ workspace, bool dw_sums, bool db_sums,
                               bool dx_sums, bool sum_of_cast, int64_t rows, int64_t c,
                               acc_t<T> eps, bool rms, Fp8 fp8 = {}) {
  using A = acc_t<T>;
  if constexpr (Fixed::kKnown) {
    c = Fixed::kC;
    dw_sums = Fixed::kWeightSum;
    db_sums = Fixed::kBiasSum;
    dx_sums = Fixed::kDxSum;
    sum_of_cast = Fixed::kSumOfCast;
    rms = Fixed::kRms;
  }
  constexpr bool kCacheAddend = norm_cache_addend<V, G, T, CacheGrad>();
  extern __shared__ __align__(16) unsigned char norm_shared[];
  // (warps, slices, c) when workspace: the dw slice, the db slice, then the
  // dx slice, each only when wanted.
  A *sums = reinterpret_cast<A *>(norm_shared);
  const int64_t slices = (dw_sums ? 1 : 0) + (db_sums ? 1 : 0) + (dx_sums ? 1 : 0);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  // Shared-memory offsets fit an int (a warp's slices are within the
  // shared budget): 32-bit index math in the zeroing and the flush.
  const int sliced = static_cast<int>(slices * c);
  A *mine = sums + warp * sliced;
  A *mine_db = mine + (dw_sums ? c : 0);
  A *mine_dx = mine_db + (db_sums ? c : 0);
  if (!fp8.begin(norm_shared + static_cast<size_t>(warps) * sliced * sizeof(A), c))
    return;
  if (workspace)
    norm_shared_fill_zero(mine, sliced, lane);
  __syncwarp();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * warps;
  // Row by row; with Fp8::kBands band by band (rb: the band's first row,
  // each warp one row of it, then the band's turn, a __syncthreads every
  // thread reaches). The same loop either way, so the plain kernel's code
  // is what it was before the FP8 part (its SASS is unchanged).
  for (int64_t rb = blockIdx.x * static_cast<int64_t>(warps) + (Fp8::kBands ? 0 : warp);
       rb < rows; rb += stride) {
    const int64_t r = Fp8::kBands ? rb + warp : rb;
    if (Fp8::kBands && r >= rows) {
      fp8.band(rb, rows, c, warps);
      continue;
    }
    const T *xr = x + r * c;
    const G *gr = grad + r * c;
    const T *addr = addend ? addend + r * c : nullptr;
    NormRow<V, T, A> row;
    row.load(xr, c, lane);
    NormRow<V, G, A> grow;
    NormRow<V, T, A> arow;
    if constexpr (CacheGrad)
      grow.load(gr, c, lane);
    if constexpr (kCacheAddend)
      if (addr)
        arow.load(addr, c, lane);
    if (!kCacheAddend && addr)
      norm_prefetch_l2(addr, c * static_cast<int64_t>(sizeof(T)), lane);
    A mean, rstd;
    norm_statistics(row, xr, c, lane, eps, rms, mean, rstd);
    A sum_dxhat = 0, sum_dot = 0;
    norm_for_chunk_pairs<CacheGrad>(
        row, grow, xr, gr, c, lane, [&](const A(&xv)[V], const A(&g)[V], int64_t j) {
          A w[V], dw[V];
          if (weight)
            norm_load<V>(weight + j, w);
#pragma unroll
          for (int i = 0; i < V; ++i) {
            const A xhat = (xv[i] - mean) * rstd;
            const A dxhat = weight ? g[i] * w[i] : g[i];
            sum_dxhat += dxhat;
            sum_dot += dxhat * xhat;
            dw[i] = g[i] * xhat;
          }
          if (workspace) {
            if (dw_sums)
              norm_shared_add(mine + j, dw);
            if (db_sums)
              norm_shared_add(mine_db + j, g);
          }
        });
    const A mean_dxhat = rms ? static_cast<A>(0) : norm_warp_sum(sum_dxhat) / static_cast<A>(c);
    const A mean_dot = norm_warp_sum(sum_dot) / static_cast<A>(c);
    T *dxr = dx + r * c;
    norm_for_chunk_triples<CacheGrad, kCacheAddend>(
        row, grow, arow, xr, gr, addr, c, lane,
        [&](const A(&xv)[V], const A(&g)[V], const A(&a)[V], int64_t j) {
          A w[V], d[V];
          if (weight)
            norm_load<V>(weight + j, w);
#pragma unroll
          for (int i = 0; i < V; ++i) {
            const A xhat = (xv[i] - mean) * rstd;
            const A dxhat = weight ? g[i] * w[i] : g[i];
            d[i] = rstd * (dxhat - mean_dxhat - xhat * mean_dot);
          }
          if (addr) {
#pragma unroll
            for (int i = 0; i < V; ++i)
              d[i] += a[i];
          }
          if constexpr (Fp8::kWritesDx)
            norm_store<V>(dxr + j, d);
          if (dx_cast || dx_sums || Fp8::kCasts) {
            // From the value dx holds (T rounds first), as a separate cast
            // kernel (or reduction) reading dx would convert it.
#pragma unroll
            for (int i = 0; i < V; ++i)
              d[i] = static_cast<A>(Elem<T>::load(Elem<T>::store(static_cast<acc_t<T>>(d[i]))));
          }
          fp8.template chunk<V, Y>(d, r, j, c, warp);
          if (dx_cast)
            norm_store<V>(dx_cast + r * c + j, d);
          if (Fp8::kWritesDx && dx_sums) {
            if (sum_of_cast) { // the values dx_cast holds
#pragma unroll
              for (int i = 0; i < V; ++i)
                d[i] = static_cast<A>(
                    Elem<Y>::load(Elem<Y>::store(static_cast<acc_t<Y>>(d[i]))));
            }
            norm_shared_add(mine_dx + j, d);
          }
        });
    fp8.band(rb, rows, c, warps);
  }
  if (!workspace) {
    fp8.finish(rows * c);
    return;
  }
  __syncthreads();
  // The block's part (slots, c): dw, db, then dx when dx_sums; a sum not
  // wanted is written as zeros. Slot by slot (no index division), each
  // column the sum of the warps' slices in warp order.
  const int64_t slots = dx_sums ? 3 : 2;
  A *part = workspace + static_cast<int64_t>(blockIdx.x) * slots * c;
  const int n = static_cast<int>(c);
  int slice = 0;
  for (int slot = 0; slot < slots; ++slot) {
    const bool wanted = slot == 0 ? dw_sums : (slot == 1 ? db_sums : dx_sums);
    norm_flush_warp_sums(wanted ? sums + slice * n : nullptr, sliced, warps, n,
                         part + slot * c);
    slice += wanted ? 1 : 0;
  }
  fp8.finish(rows * c);
}

// weight_grad / bias_grad (and the input gradient's column sum, with a
// third row: slots 3) from the parts: column j of the workspace's (slots,
// c) rows (dweight, dbias, dx) is the sum over parts. Block b takes columns
// 32 b .. 32 b + 31 (a warp reads 128 contiguous bytes per part); warp w
// adds parts w, w + kNormSumWarps, ... in order (many loads in flight:
// parts are L2-resident and the old one-thread-per-column loop waited on
// them one after another), then the warps' sums are added in warp order.
// The order depends on (parts, c) only: deterministic on every machine.
constexpr int kNormSumWarps = 32;
template <class T, class U>
__global__ void __launch_bounds__(kNormSumWarps * 32)
    layer_norm_sum_parts_kernel(const acc_t<T> *__restrict__ workspace, int64_t parts,
                                int64_t c, int64_t slots, T *__restrict__ dweight,
                                T *__restrict__ dbias, U *__restrict__ dx_sum) {
  using A = acc_t<T>;
  __shared__ A warp_sums[kNormSumWarps][32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t n = slots * c;
  // Column groups grid-stride (the grid is capped); block-uniform, so the
  // barriers inside are reached by every thread.
  for (int64_t first = static_cast<int64_t>(blockIdx.x) * 32; first < n;
       first += static_cast<int64_t>(gridDim.x) * 32) {
    const int64_t j = first + lane;
    A s = 0;
    if (j < n) {
#pragma unroll 8
      for (int64_t p = warp; p < parts; p += kNormSumWarps)
        s += workspace[p * n + j];
    }
    warp_sums[warp][lane] = s;
    __syncthreads();
    if (warp == 0 && j < n) {
      A t = 0;
      for (int w = 0; w < kNormSumWarps; ++w)
        t += warp_sums[w][lane];
      if (j < c) {
        if (dweight)
          dweight[j] = Elem<T>::store(t);
      } else if (j < 2 * c) {
        if (dbias)
          dbias[j - c] = Elem<T>::store(t);
      } else if (dx_sum) {
        dx_sum[j - 2 * c] = Elem<U>::store(static_cast<acc_t<U>>(t));
      }
    }
    __syncthreads(); // warp_sums is rewritten by the next group
  }
}
