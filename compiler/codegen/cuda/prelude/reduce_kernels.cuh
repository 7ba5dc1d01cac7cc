//===--------------------------------------------------------------------===//
// Row reductions: out[r] = reduce(in[r, 0..cols))
//===--------------------------------------------------------------------===//

// A group of G lanes per row (G a power of two <= 32; G = 32: a warp per
// row, for cols <= 1024 at most 32 loads per lane; short rows take smaller
// groups so no lane idles), 256 threads a block; Vec: 16-byte loads. `count` is what a mean
// divides by: cols, except when combining partials (of a split row, or of
// an earlier phase of a planned reduction, launch_reduce_phase_*; In is
// then the accumulator type, so partials are never rounded to a 16-bit
// Out).
template <class In, class T, int Kind, int G = 32, bool Vec = false>
__global__ void __launch_bounds__(256)
    reduce_rows_warp_kernel(const In *__restrict__ in, T *__restrict__ out,
                            int64_t rows, int64_t cols, int64_t count) {
  static_assert(G >= 1 && G <= 32 && (G & (G - 1)) == 0, "G: 1, 2, 4, ..., 32");
  using A = acc_t<T>;
  using R = Reducer<A, Kind>;
  using V = Vec16<In>;
  const int lane = threadIdx.x & (G - 1);
  const int64_t groupsPerBlock = blockDim.x / G;
  for (int64_t r = blockIdx.x * groupsPerBlock + threadIdx.x / G; r < rows;
       r += gridDim.x * groupsPerBlock) {
    const In *row = in + r * cols;
    A acc = R::init();
    if (Vec) { // 16-byte loads: in aligned, cols a multiple of the width
      const typename V::type *vrow =
          reinterpret_cast<const typename V::type *>(row);
      for (int64_t c = lane; c < cols / V::n; c += G) {
        typename V::type v = vrow[c];
        const In *e = reinterpret_cast<const In *>(&v);
#pragma unroll
        for (int k = 0; k < V::n; ++k)
          acc = R::combine(acc, Elem<In>::load(e[k]));
      }
    } else {
      for (int64_t c = lane; c < cols; c += G)
        acc = R::combine(acc, Elem<In>::load(row[c]));
    }
#pragma unroll
    for (int offset = G / 2; offset > 0; offset >>= 1) // within the group
      acc = R::combine(acc, __shfl_xor_sync(0xffffffffu, acc, offset));
    if (lane == 0)
      out[r] = Elem<T>::store(R::finish(acc, count));
  }
}

// Block per (row, segment): the block folds in[r, g*chunk .. +chunk) and
// writes out[r * segs + g], finished (a mean divided by `count`) only when
// the segment is the whole row (segs == 1); split rows leave raw partials
// (Out = acc_t<T>) for reduce_rows_warp_kernel. Vec: 16-byte loads (rows
// and segments are 16-byte aligned: aligned base, cols and chunk multiples
// of the width).
template <class T, class Out, int Kind, bool Vec>
__global__ void __launch_bounds__(1024)
    reduce_rows_block_kernel(const T *__restrict__ in, Out *__restrict__ out,
                             int64_t rows, int64_t cols, int64_t segs,
                             int64_t chunk, int64_t count) {
  using A = acc_t<T>;
  using R = Reducer<A, Kind>;
  using V = Vec16<T>;
  __shared__ A scratch[32];
  for (int64_t item = blockIdx.x; item < rows * segs; item += gridDim.x) {
    const int64_t r = item / segs, g = item - r * segs;
    const int64_t begin = g * chunk;
    const int64_t end = begin + chunk < cols ? begin + chunk : cols;
    const T *row = in + r * cols;
    A acc = R::init();
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
          acc = R::combine(acc, Elem<T>::load(e[k]));
      }
    } else {
#pragma unroll 2
      for (int64_t c = begin + threadIdx.x; c < end; c += blockDim.x)
        acc = R::combine(acc, Elem<T>::load(row[c]));
    }
    acc = block_reduce<R>(acc, scratch);
    if (threadIdx.x == 0)
      out[item] = Elem<Out>::store(segs == 1 ? R::finish(acc, count) : acc);
  }
}

// N consecutive elements, loaded as one access (16 bytes for N = 16 /
// sizeof(T)).
template <class T, int N> struct alignas(sizeof(T) * N) Pack { T v[N]; };

//===--------------------------------------------------------------------===//
// Strided rows: out[o, k] = reduce_{r, c} in[o, r, k, c]
//===--------------------------------------------------------------------===//

// Batch norm's statistics over (N, C, H, W) fold N and H*W at once:
// output k reads `reduced` rows of `cols` contiguous elements, kept * cols
// apart. A group of G lanes per output (G a power of two; G <=
// 32: 256-thread blocks of several groups, shuffles only; G > 32: one group
// a block, warps combined through shared memory in a fixed order). The
// group's lanes are laid out as G / GC row lanes x GC column lanes (GC =
// 2^colShift, the power of two >= the row's packs, at most G): lane (y, x)
// folds packs x, x + GC, ... of rows y, y + G / GC, ..., so a warp reads
// whole rows and no index is divided. Each pack is N consecutive elements
// (N > 1: 16-byte loads, cols a multiple of N). Every output is finished (a
// mean divided by `count`), in one launch, no partials. Deterministic:
// lanes own fixed packs and combine in a fixed tree.
template <class In, class Out, int Kind, int G, int N>
__global__ void __launch_bounds__(1024)
    reduce_strided_kernel(const In *__restrict__ in, Out *__restrict__ out,
                          int64_t outer, int64_t reduced, int64_t kept,
                          int64_t cols, int colShift, int64_t count) {
  static_assert(G >= 1 && G <= 1024 && (G & (G - 1)) == 0, "G: 1, 2, ..., 1024");
  using A = acc_t<Out>;
  using R = Reducer<A, Kind>;
  using P = Pack<In, N>;
  constexpr int kWarpLanes = G < 32 ? G : 32;
  __shared__ A warpPartial[32];
  const int lane = threadIdx.x & (G - 1);
  const int x = lane & ((1 << colShift) - 1), y = lane >> colShift;
  const int64_t rowLanes = G >> colShift, packsPerRow = cols / N;
  const int64_t groupsPerBlock = blockDim.x / G;
  const int64_t rowStride = kept * cols;
  const int64_t outputs = outer * kept;
  // Every thread of the block takes the same trips (whole warps shuffle,
  // the whole block syncs); a group past the last output only idles.
  for (int64_t first = blockIdx.x * groupsPerBlock; first < outputs;
       first += gridDim.x * groupsPerBlock) {
    const int64_t q = first + threadIdx.x / G;
    const int64_t o = q / kept, k = q - o * kept;
    const In *base = in + (o * reduced * kept + k) * cols; // in[o, 0, k, 0]
    const int64_t rows = q < outputs ? reduced : 0;
    A acc = R::init();
    for (int64_t c = x; c < packsPerRow; c += int64_t(1) << colShift) {
#pragma unroll 4
      for (int64_t r = y; r < rows; r += rowLanes) {
        const P v = *reinterpret_cast<const P *>(base + r * rowStride + c * N);
#pragma unroll
        for (int e = 0; e < N; ++e)
          acc = R::combine(acc, Elem<In>::load(v.v[e]));
      }
    }
#pragma unroll
    for (int offset = kWarpLanes / 2; offset > 0; offset >>= 1)
      acc = R::combine(acc, __shfl_xor_sync(0xffffffffu, acc, offset));
    if constexpr (G > 32) {
      const int warp = threadIdx.x >> 5;
      if ((threadIdx.x & 31) == 0)
        warpPartial[warp] = acc;
      __syncthreads();
      if (warp == 0) {
        acc = (threadIdx.x & 31) < G / 32 ? warpPartial[threadIdx.x & 31] : R::init();
#pragma unroll
        for (int offset = 16; offset > 0; offset >>= 1)
          acc = R::combine(acc, __shfl_xor_sync(0xffffffffu, acc, offset));
      }
      __syncthreads(); // warpPartial is reused by the next output
    }
    if (lane == 0 && q < outputs)
      out[q] = Elem<Out>::store(R::finish(acc, count));
  }
}

//===--------------------------------------------------------------------===//
// Middle-axis reductions: out[o, i] = reduce_r in[o, r, i]
//===--------------------------------------------------------------------===//

// Block = (W threads across) x (Y row groups), W * Y <= 1024, Y a power of
// two; each thread owns N consecutive columns (N > 1: 16-byte loads). A
// block owns a tile of W * N consecutive inner columns of one (outer index,
// segment of `chunk` reduced rows): thread (x, y) folds rows y, y + Y, ...
// of its columns (a warp reads 32 / W rows of W * N consecutive elements:
// whole 32-byte sectors for tiles of >= 8 floats), then the Y partials
// combine in a fixed shared-memory tree (of accumulators, dynamic: 8 KiB
// for 256 threads of bf16 / f16 with N = 8). out is (outer, segs, inner):
// segs > 1 splits a long reduction over more blocks, leaving raw partials
// (Out = acc_t) for a later phase; segs == 1 finishes (a mean divided by
// `count`). No atomics, so the result is deterministic.
template <class In, class Out, int Kind, int N>
__global__ void __launch_bounds__(1024)
    reduce_middle_kernel(const In *__restrict__ in, Out *__restrict__ out,
                         int64_t outer, int64_t reduced, int64_t inner,
                         int64_t segs, int64_t chunk, int64_t tilesPerOuter,
                         int64_t count) {
  using A = acc_t<Out>;
  using R = Reducer<A, Kind>;
  using P = Pack<In, N>;
  using PA = Pack<A, N>;
  // blockDim.x * blockDim.y accumulator packs (the launcher sizes it), so
  // shared memory does not cap the blocks resident on an SM.
  extern __shared__ __align__(32) unsigned char reduceMiddleShared[];
  PA *partial = reinterpret_cast<PA *>(reduceMiddleShared);
  const int W = blockDim.x, Y = blockDim.y;
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t innerP = inner / N; // packs per row (inner % N == 0)
  const int64_t tiles = outer * segs * tilesPerOuter;
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int64_t og = tile / tilesPerOuter; // o * segs + g
    const int64_t o = og / segs, g = og - o * segs;
    const int64_t i = (tile - og * tilesPerOuter) * W + tx; // pack column
    const int64_t begin = g * chunk;
    const int64_t end = begin + chunk < reduced ? begin + chunk : reduced;
    PA acc;
#pragma unroll
    for (int k = 0; k < N; ++k)
      acc.v[k] = R::init();
    if (i < innerP) {
      const P *col = reinterpret_cast<const P *>(in + o * reduced * inner) + i;
#pragma unroll 4
      for (int64_t r = begin + ty; r < end; r += Y) {
        const P v = col[r * innerP];
#pragma unroll
        for (int k = 0; k < N; ++k)
          acc.v[k] = R::combine(acc.v[k], Elem<In>::load(v.v[k]));
      }
    }
    partial[ty * W + tx] = acc;
    __syncthreads();
    for (int half = Y >> 1; half > 0; half >>= 1) {
      if (ty < half) {
        PA a = partial[ty * W + tx];
        const PA b = partial[(ty + half) * W + tx];
#pragma unroll
        for (int k = 0; k < N; ++k)
          a.v[k] = R::combine(a.v[k], b.v[k]);
        partial[ty * W + tx] = a;
      }
      __syncthreads();
    }
    if (ty == 0 && i < innerP) {
      const PA a = partial[tx];
#pragma unroll
      for (int k = 0; k < N; ++k)
        out[og * inner + i * N + k] =
            Elem<Out>::store(segs == 1 ? R::finish(a.v[k], count) : a.v[k]);
    }
    __syncthreads(); // partial is reused by the next tile
  }
}

// A middle reduction split over `cluster` blocks in one launch (sm_90):
// the blocks of one thread-block cluster own one tile of W * N columns and
// consecutive segments of `chunk` reduced rows, fold them as
// reduce_middle_kernel does into shared memory, then the cluster's block 0
// combines the cluster's partials through distributed shared memory, in
// rank order, and writes out finished (a mean divided by `count`). No
// partials in global memory, no second launch, no atomics: deterministic.
// One tile per cluster (no grid-stride loop): the grid is tiles * cluster
// blocks, cluster-major (block b: tile b / cluster, segment b % cluster).
// The fold and tree are reduce_middle_kernel's, written out again: moved
// into a shared __device__ function they made reduce_middle_kernel ~10%
// slower on the H200 (bf16 16384 x 768 over rows 13.0 -> 14.5 us, session
// 10).
template <class In, class Out, int Kind, int N>
__global__ void __launch_bounds__(1024)
    reduce_middle_cluster_kernel(const In *__restrict__ in, Out *__restrict__ out,
                                 int64_t outer, int64_t reduced, int64_t inner,
                                 int64_t chunk, int64_t tilesPerOuter, int cluster,
                                 int64_t count) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using A = acc_t<Out>;
  using R = Reducer<A, Kind>;
  using P = Pack<In, N>;
  using PA = Pack<A, N>;
  extern __shared__ __align__(32) unsigned char reduceClusterShared[];
  PA *partial = reinterpret_cast<PA *>(reduceClusterShared);
  const int W = blockDim.x, Y = blockDim.y;
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t innerP = inner / N;
  const int64_t tile = blockIdx.x / cluster;
  const int64_t g = __clusterRelativeBlockRank();
  const int64_t o = tile / tilesPerOuter;
  const int64_t i = (tile - o * tilesPerOuter) * W + tx; // pack column
  const int64_t begin = g * chunk;
  const int64_t end = begin + chunk < reduced ? begin + chunk : reduced;
  PA acc;
#pragma unroll
  for (int k = 0; k < N; ++k)
    acc.v[k] = R::init();
  if (i < innerP) {
    const P *col = reinterpret_cast<const P *>(in + o * reduced * inner) + i;
#pragma unroll 4
    for (int64_t r = begin + ty; r < end; r += Y) {
      const P v = col[r * innerP];
#pragma unroll
      for (int k = 0; k < N; ++k)
        acc.v[k] = R::combine(acc.v[k], Elem<In>::load(v.v[k]));
    }
  }
  partial[ty * W + tx] = acc;
  __syncthreads();
  for (int half = Y >> 1; half > 0; half >>= 1) {
    if (ty < half) {
      PA a = partial[ty * W + tx];
      const PA b = partial[(ty + half) * W + tx];
#pragma unroll
      for (int k = 0; k < N; ++k)
        a.v[k] = R::combine(a.v[k], b.v[k]);
      partial[ty * W + tx] = a;
    }
    __syncthreads();
  }
  __cluster_barrier_arrive(); // this block's partial[0 .. W) is final
  __cluster_barrier_wait();
  if (g == 0 && ty == 0 && i < innerP) {
    PA a = partial[tx];
    for (int rank = 1; rank < cluster; ++rank) {
      const PA b = static_cast<const PA *>(
          __cluster_map_shared_rank(static_cast<const void *>(partial), rank))[tx];
#pragma unroll
      for (int k = 0; k < N; ++k)
        a.v[k] = R::combine(a.v[k], b.v[k]);
    }
#pragma unroll
    for (int k = 0; k < N; ++k)
      out[o * inner + i * N + k] = Elem<Out>::store(R::finish(a.v[k], count));
  }
  __cluster_barrier_arrive(); // the others' shared memory lives until read
  __cluster_barrier_wait();
#else
  __trap(); // launched only where clusters exist (launch_reduce_phase_middle_cluster)
#endif
}
