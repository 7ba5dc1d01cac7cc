//===--------------------------------------------------------------------===//
// The norm backward (kern.layer_norm_grad): dx, the weight and bias
// gradients' parts and their sums (the row helpers are norm_kernels.cuh's)
//===--------------------------------------------------------------------===//

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
