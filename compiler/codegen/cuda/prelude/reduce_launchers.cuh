//===--------------------------------------------------------------------===//
// Launchers
//===--------------------------------------------------------------------===//

// Tunables of the planned phases, measured with bench/reduce on an H200
// (docs/performance.md, 2026-11-29; its variants build with -D overrides):
// - a group of lanes (up to a warp) per row for rows of up to 8192
//   elements when there are >= 2048 rows (a block per row with 256 threads
//   left a 3136-element row's second pass half idle: 62% -> 88% of the copy
//   rate for batch norm's 56x56 sums);
// - middle tiles of at most 256 threads and at least 1056 tiles (8 per SM
//   of 132): 1024-thread tiles, 1-2 per SM, left SMs idle in the tail
//   (f32 4096 x 4096 over axis 0: 64% -> 78%).
#ifndef TCC_REDUCE_WARP_ROWS_MAX_COLS
#define TCC_REDUCE_WARP_ROWS_MAX_COLS 8192
#endif
#ifndef TCC_REDUCE_WARP_ROWS_MIN_ROWS
#define TCC_REDUCE_WARP_ROWS_MIN_ROWS 2048
#endif
#ifndef TCC_REDUCE_MIDDLE_MAX_THREADS
#define TCC_REDUCE_MIDDLE_MAX_THREADS 256
#endif
#ifndef TCC_REDUCE_MIDDLE_MIN_TILES
#define TCC_REDUCE_MIDDLE_MIN_TILES 1056
#endif
#ifndef TCC_REDUCE_MIDDLE_ROWS_PER_THREAD
#define TCC_REDUCE_MIDDLE_ROWS_PER_THREAD 8
#endif
// Cluster phases: how many blocks the tiles are narrowed for (down to a
// 128-byte line a row: 32- and 64-byte rows were slower).
#ifndef TCC_REDUCE_CLUSTER_MIN_BLOCKS
#define TCC_REDUCE_CLUSTER_MIN_BLOCKS 512
#endif
// Strided phases: lanes per output so each lane loads about this many bytes.
#ifndef TCC_REDUCE_STRIDED_LANE_BYTES
#define TCC_REDUCE_STRIDED_LANE_BYTES 32
#endif

namespace detail {

// out (rows) = reduce(in (rows, cols)) with a group of G lanes per row, G
// the power of two >= the row's loads up to 32 (cols <= 1024); 16-byte
// loads when in is 16-byte aligned and cols a multiple of the width.
template <class In, class Out, int Kind, bool Vec>
inline void launch_reduce_rows_groups_as(const In *in, Out *out, int64_t rows,
                                         int64_t cols, int64_t count,
                                         int64_t loads, cudaStream_t stream) {
  const int threads = 256;
  const int64_t g = pow2_at_least(loads) < 32 ? pow2_at_least(loads) : 32;
  const unsigned blocks =
      static_cast<unsigned>(grid_for(rows, threads / static_cast<int>(g)));
  switch (g) {
  case 1:
    reduce_rows_warp_kernel<In, Out, Kind, 1, Vec>
        <<<blocks, threads, 0, stream>>>(in, out, rows, cols, count);
    break;
  case 2:
    reduce_rows_warp_kernel<In, Out, Kind, 2, Vec>
        <<<blocks, threads, 0, stream>>>(in, out, rows, cols, count);
    break;
  case 4:
    reduce_rows_warp_kernel<In, Out, Kind, 4, Vec>
        <<<blocks, threads, 0, stream>>>(in, out, rows, cols, count);
    break;
  case 8:
    reduce_rows_warp_kernel<In, Out, Kind, 8, Vec>
        <<<blocks, threads, 0, stream>>>(in, out, rows, cols, count);
    break;
  case 16:
    reduce_rows_warp_kernel<In, Out, Kind, 16, Vec>
        <<<blocks, threads, 0, stream>>>(in, out, rows, cols, count);
    break;
  default:
    reduce_rows_warp_kernel<In, Out, Kind, 32, Vec>
        <<<blocks, threads, 0, stream>>>(in, out, rows, cols, count);
  }
}

template <class In, class Out, int Kind>
inline void launch_reduce_rows_groups(const In *in, Out *out, int64_t rows,
                                      int64_t cols, int64_t count,
                                      cudaStream_t stream) {
  constexpr int64_t n = Vec16<In>::n;
  if (aligned16(in) && cols % n == 0 && cols >= 4 * n)
    launch_reduce_rows_groups_as<In, Out, Kind, true>(in, out, rows, cols, count,
                                                      cols / n, stream);
  else
    launch_reduce_rows_groups_as<In, Out, Kind, false>(in, out, rows, cols, count,
                                                       cols, stream);
}

// Block per (row, segment) (reduce_rows_block_kernel), 16-byte loads when
// in is 16-byte aligned and cols and chunk multiples of the vector width.
template <class In, class Out, int Kind>
inline void launch_reduce_rows_blocks(const In *in, Out *out, int64_t rows,
                                      int64_t cols, int64_t segs, int64_t chunk,
                                      int64_t count, int threads,
                                      cudaStream_t stream) {
  const bool vec = aligned16(in) && cols % Vec16<In>::n == 0 &&
                   chunk % Vec16<In>::n == 0;
  const unsigned blocks = static_cast<unsigned>(grid_for(rows * segs, 1));
  if (vec)
    reduce_rows_block_kernel<In, Out, Kind, true><<<blocks, threads, 0, stream>>>(
        in, out, rows, cols, segs, chunk, count);
  else
    reduce_rows_block_kernel<In, Out, Kind, false><<<blocks, threads, 0, stream>>>(
        in, out, rows, cols, segs, chunk, count);
}

// Row groups (Y) of a middle tile of `across` threads: about
// TCC_REDUCE_MIDDLE_ROWS_PER_THREAD rows of a `chunk`-row segment each, a
// power of two, at most TCC_REDUCE_MIDDLE_MAX_THREADS threads a block.
inline int64_t middle_row_groups(int64_t across, int64_t chunk) {
  const int64_t most = TCC_REDUCE_MIDDLE_MAX_THREADS / across > 0
                           ? TCC_REDUCE_MIDDLE_MAX_THREADS / across : 1;
  const int64_t want = pow2_at_least((chunk + TCC_REDUCE_MIDDLE_ROWS_PER_THREAD - 1) /
                                     TCC_REDUCE_MIDDLE_ROWS_PER_THREAD);
  return want < most ? want : most;
}

// The tile width (columns) of a middle phase: 32 threads x n columns, or
// the row's width (a power of two), halved while a width w gives fewer
// than `minBlocks` blocks (`perColumnTile` * ceil(inner / w)), never below
// one 128-byte line a row (or n columns).
inline int64_t middle_tile_width(int64_t inner, int64_t n, int64_t elemBytes,
                                 int64_t perColumnTile, int64_t minBlocks) {
  const int64_t innerP2 = pow2_at_least(inner);
  const int64_t line = 128 / elemBytes;
  const int64_t narrowest = line < 32 * n ? (line > n ? line : n) : 32 * n;
  int64_t tw = innerP2 < 32 * n ? innerP2 : 32 * n;
  tw = tw > n ? tw : n;
  while (tw > narrowest && perColumnTile * ((inner + tw - 1) / tw) < minBlocks)
    tw /= 2;
  return tw;
}

// reduce_strided_kernel with G lanes an output: 256-thread blocks of 256 / G
// groups for G <= 32, a block of G threads (one group) above.
template <class In, class Out, int Kind, int N>
inline void launch_reduce_strided_as(const In *in, Out *out, int64_t outer,
                                     int64_t reduced, int64_t kept, int64_t cols,
                                     int64_t count, int64_t g, cudaStream_t stream) {
  // Column lanes: the power of two >= the row's packs, at most g.
  int colShift = 0;
  while ((int64_t(1) << colShift) < cols / N && (int64_t(2) << colShift) <= g)
    ++colShift;
  const int threads = g <= 32 ? 256 : static_cast<int>(g);
  const unsigned blocks = static_cast<unsigned>(
      grid_for(outer * kept, threads / static_cast<int>(g)));
#define TCC_REDUCE_STRIDED_CASE(G)                                              \
  case G:                                                                      \
    reduce_strided_kernel<In, Out, Kind, G, N><<<blocks, threads, 0, stream>>>( \
        in, out, outer, reduced, kept, cols, colShift, count);                 \
    break;
  switch (g) {
    TCC_REDUCE_STRIDED_CASE(1)
    TCC_REDUCE_STRIDED_CASE(2)
    TCC_REDUCE_STRIDED_CASE(4)
    TCC_REDUCE_STRIDED_CASE(8)
    TCC_REDUCE_STRIDED_CASE(16)
    TCC_REDUCE_STRIDED_CASE(32)
    TCC_REDUCE_STRIDED_CASE(64)
    TCC_REDUCE_STRIDED_CASE(128)
    TCC_REDUCE_STRIDED_CASE(256)
    TCC_REDUCE_STRIDED_CASE(512)
    default:
      reduce_strided_kernel<In, Out, Kind, 1024, N><<<blocks, 1024, 0, stream>>>(
          in, out, outer, reduced, kept, cols, colShift, count);
  }
#undef TCC_REDUCE_STRIDED_CASE
}

} // namespace detail

// out (rows) = reduce(in (rows, cols) over cols); Kind 0 sum, 1 mean, 2 max
// (semantics: detail::Reducer). Sums accumulate in acc_t<T> (T; float for
// bf16 / f16, rounded once per output). Launch shapes:
// - cols <= 1024: a group of lanes per row (a warp; fewer lanes for rows
//   shorter than 32), 256 threads a block;
// - few long rows (rows < 264, two per SM, and cols >= 65536, e.g. one row
//   of a whole tensor): each row is split into segments of >= 32768
//   elements (about 528 blocks in all), one 1024-thread block per segment
//   writes a partial, then a warp per row combines the partials in order.
//   The partials live in a stream-ordered cudaMallocAsync buffer freed
//   right after (no host synchronization); if that allocation fails, or an
//   earlier error is pending, it falls back to the next shape. (Generated
//   steps plan this split themselves, launch_reduce_phase_rows into the
//   step's workspace, and allocate nothing.);
// - otherwise a block per row (256 threads; 1024 for rows >= 16384 long).
// Block shapes use 16-byte loads when in is 16-byte aligned and cols a
// multiple of the vector width. Warp shuffles, then a shared-memory combine
// across warps. Deterministic for given sizes and alignment (and, for
// split rows, as long as the scratch allocation succeeds).
template <class T, int Kind>
inline void launch_reduce_rows(const T *in, T *out, int64_t rows, int64_t cols,
                               cudaStream_t stream) {
  static_assert(detail::IsFloating<T>::value,
                "reduce: float, double, bf16 or f16");
  using A = acc_t<T>;
  if (rows <= 0)
    return;
  if (cols <= 1024) {
    detail::launch_reduce_rows_groups<T, T, Kind>(in, out, rows, cols, cols, stream);
    return;
  }
  const int64_t fewRows = 2 * 132, targetBlocks = 4 * 132;
  if (rows < fewRows && cols >= 65536 && cudaPeekAtLastError() == cudaSuccess) {
    int64_t segs = (cols + 32767) / 32768;
    const int64_t perRow = (targetBlocks + rows - 1) / rows;
    segs = segs < perRow ? segs : perRow;
    // Chunks of whole 1024-element groups keep every segment aligned.
    const int64_t chunk = ((cols + segs - 1) / segs + 1023) / 1024 * 1024;
    segs = (cols + chunk - 1) / chunk;
    A *partial = nullptr; // partials stay in the accumulator type
    if (segs > 1 &&
        cudaMallocAsync(reinterpret_cast<void **>(&partial),
                        static_cast<size_t>(rows * segs) * sizeof(A),
                        stream) == cudaSuccess) {
      detail::launch_reduce_rows_blocks<T, A, Kind>(in, partial, rows, cols, segs,
                                                    chunk, cols, 1024, stream);
      detail::reduce_rows_warp_kernel<A, T, Kind>
          <<<static_cast<unsigned>(grid_for(rows, 8)), 256, 0, stream>>>(
              partial, out, rows, segs, cols);
      cudaFreeAsync(partial, stream);
      return;
    }
    (void)cudaGetLastError(); // only our failed allocation: none was pending
  }
  // Few rows: give each row more threads.
  detail::launch_reduce_rows_blocks<T, T, Kind>(
      in, out, rows, cols, 1, cols, cols,
      rows < fewRows && cols >= 16384 ? 1024 : 256, stream);
}

// One phase of a planned reduction (the CUDA code generator's plan,
// compiler/codegen/cuda/ReducePlan.h): out (rows, segs) = reduce(in (rows,
// cols)) over segments of `chunk` columns; segs == 1 finishes (a mean
// divided by `count`, the element count of the whole reduction, which
// earlier phases summed), segs > 1 leaves raw partials. In and Out are T
// or acc_t<T> (partials between phases). chunk is a multiple of 1024 when
// segs > 1.
template <class In, class Out, int Kind>
inline void launch_reduce_phase_rows(const In *in, Out *out, int64_t rows,
                                     int64_t cols, int64_t segs, int64_t chunk,
                                     int64_t count, cudaStream_t stream) {
  if (rows <= 0)
    return;
  if (segs == 1 && (cols <= 1024 || (cols <= TCC_REDUCE_WARP_ROWS_MAX_COLS &&
                                      rows >= TCC_REDUCE_WARP_ROWS_MIN_ROWS)))
    detail::launch_reduce_rows_groups<In, Out, Kind>(in, out, rows, cols, count,
                                                     stream);
  else
    detail::launch_reduce_rows_blocks<In, Out, Kind>(
        in, out, rows, cols, segs, chunk, count,
        segs > 1 || (rows < 2 * 132 && cols >= 16384) ? 1024 : 256, stream);
}

// One phase of a planned reduction: out (outer, segs, inner) =
// reduce(in (outer, reduced, inner)) over segments of `chunk` reduced rows
// (segs == 1: chunk = reduced, finished with `count`; segs > 1: raw
// partials, so few outputs over a long reduction still fill the GPU).
// Tiles of TW columns x Y row groups (detail::reduce_middle_kernel), each
// thread N columns (16-byte loads when in is 16-byte aligned and inner a
// multiple of the vector width, else N = 1). TW starts at 32 threads x N
// columns (512 bytes a row), or the row's width, and halves while there
// are fewer than TCC_REDUCE_MIDDLE_MIN_TILES tiles (8 per SM), down to
// whole 128-byte lines (64 bf16, 32 floats: the plan splits rows into
// segments rather than go narrower). Y gives every thread about 8 rows of
// its segment (at most TCC_REDUCE_MIDDLE_MAX_THREADS / (TW / N) groups); a
// short segment widens TW so blocks keep >= 256 threads.
// Deterministic.
template <class In, class Out, int Kind>
inline void launch_reduce_phase_middle(const In *in, Out *out, int64_t outer,
                                       int64_t reduced, int64_t inner,
                                       int64_t segs, int64_t chunk,
                                       int64_t count, cudaStream_t stream) {
  if (outer <= 0 || inner <= 0 || segs <= 0)
    return;
  constexpr int64_t kVec = detail::Vec16<In>::n;
  const int64_t n = detail::aligned16(in) && inner % kVec == 0 ? kVec : 1;
  const int64_t innerP2 = detail::pow2_at_least(inner);
  auto rowGroups = [&](int64_t width) { return detail::middle_row_groups(width / n, chunk); };
  int64_t tw = detail::middle_tile_width(inner, n, sizeof(In), outer * segs,
                                         TCC_REDUCE_MIDDLE_MIN_TILES);
  int64_t y = rowGroups(tw);
  while ((tw / n) * y < 256 && tw < innerP2) {
    tw *= 2;
    y = rowGroups(tw);
  }
  const int64_t tilesPerOuter = (inner + tw - 1) / tw;
  const unsigned blocks =
      static_cast<unsigned>(grid_for(outer * segs * tilesPerOuter, 1));
  const dim3 threads(static_cast<unsigned>(tw / n), static_cast<unsigned>(y));
  const size_t shared = sizeof(acc_t<Out>) * static_cast<size_t>(tw * y);
  if (n == kVec && kVec > 1)
    detail::reduce_middle_kernel<In, Out, Kind, kVec><<<blocks, threads, shared, stream>>>(
        in, out, outer, reduced, inner, segs, chunk, tilesPerOuter, count);
  else
    detail::reduce_middle_kernel<In, Out, Kind, 1><<<blocks, threads, shared, stream>>>(
        in, out, outer, reduced, inner, segs, chunk, tilesPerOuter, count);
}

// One phase of a planned reduction: out (outer, kept) = reduce(in (outer,
// reduced, kept, cols) over reduced and cols), finished (a mean divided by
// `count`): batch norm's statistics over (N, C, H, W) with >= 128 channels
// in one launch (detail::reduce_strided_kernel). A group of lanes per output,
// the power of two that gives each lane about TCC_REDUCE_STRIDED_LANE_BYTES
// bytes to load (at most 1024 lanes); 16-byte loads when in is 16-byte
// aligned and cols a multiple of the vector width. Deterministic.
template <class In, class Out, int Kind>
inline void launch_reduce_phase_strided(const In *in, Out *out, int64_t outer,
                                        int64_t reduced, int64_t kept, int64_t cols,
                                        int64_t count, cudaStream_t stream) {
  if (outer <= 0 || kept <= 0)
    return;
  constexpr int64_t kVec = detail::Vec16<In>::n;
  const bool vec = kVec > 1 && detail::aligned16(in) && cols % kVec == 0;
  const int64_t bytes = reduced * cols * static_cast<int64_t>(sizeof(In));
  int64_t g = detail::pow2_at_least((bytes + TCC_REDUCE_STRIDED_LANE_BYTES - 1) /
                                    TCC_REDUCE_STRIDED_LANE_BYTES);
  g = g < 1024 ? g : 1024;
  if (vec)
    detail::launch_reduce_strided_as<In, Out, Kind, kVec>(in, out, outer, reduced, kept,
                                                         cols, count, g, stream);
  else
    detail::launch_reduce_strided_as<In, Out, Kind, 1>(in, out, outer, reduced, kept,
                                                      cols, count, g, stream);
}

namespace detail {

// Whether this GPU launches thread-block clusters and the loaded
// reduce_middle_cluster_kernel is sm_90 code (not an sm_80 PTX build,
// where the kernel body is compiled out). Asked once per instantiation.
template <class In, class Out, int Kind, int N>
inline bool reduce_clusters_usable() {
  static const bool usable = [] {
    int dev = 0, clusters = 0;
    cudaFuncAttributes a{};
    return cudaGetDevice(&dev) == cudaSuccess &&
           cudaDeviceGetAttribute(&clusters, cudaDevAttrClusterLaunch, dev) == cudaSuccess &&
           clusters &&
           cudaFuncGetAttributes(&a, reduce_middle_cluster_kernel<In, Out, Kind, N>) ==
               cudaSuccess &&
           a.binaryVersion >= 90;
  }();
  return usable;
}

} // namespace detail

// One phase of a planned reduction, finished: out (outer, inner) =
// reduce(in (outer, reduced, inner)) over `reduced`, split over `cluster`
// blocks (2..8) that combine through distributed shared memory
// (detail::reduce_middle_cluster_kernel): a long reduction with few
// outputs in one launch instead of a split phase and a second launch over
// its partials. Tiles as launch_reduce_phase_middle, narrowed (down to
// 128-byte rows) until there are TCC_REDUCE_CLUSTER_MIN_BLOCKS blocks.
// Where clusters are not available (before sm_90, or an sm_80 PTX build)
// it runs those two launches, the partials in `fallback` (outer * cluster
// * inner accumulators). Deterministic either way.
template <class In, class Out, int Kind>
inline void launch_reduce_phase_middle_cluster(const In *in, Out *out, int64_t outer,
                                               int64_t reduced, int64_t inner,
                                               int64_t cluster, int64_t count,
                                               void *fallback, cudaStream_t stream) {
  using A = acc_t<Out>;
  if (outer <= 0 || inner <= 0)
    return;
  const int64_t chunk = (reduced + cluster - 1) / cluster;
  constexpr int64_t kVec = detail::Vec16<In>::n;
  const bool vec = kVec > 1 && detail::aligned16(in) && inner % kVec == 0;
  const bool usable = vec ? detail::reduce_clusters_usable<In, Out, Kind, kVec>()
                          : detail::reduce_clusters_usable<In, Out, Kind, 1>();
  if (!usable || cluster < 2 || cluster > 8) {
    A *partials = static_cast<A *>(fallback);
    launch_reduce_phase_middle<In, A, Kind == 1 ? 0 : Kind>(in, partials, outer, reduced, inner,
                                                           cluster, chunk, count, stream);
    launch_reduce_phase_middle<A, Out, Kind>(partials, out, outer, cluster, inner, 1, cluster,
                                             count, stream);
    return;
  }
  const int64_t n = vec ? kVec : 1;
  const int64_t tw = detail::middle_tile_width(inner, n, sizeof(In), outer * cluster,
                                               TCC_REDUCE_CLUSTER_MIN_BLOCKS);
  const int64_t y = detail::middle_row_groups(tw / n, chunk);
  const int64_t tilesPerOuter = (inner + tw - 1) / tw;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(outer * tilesPerOuter * cluster));
  config.blockDim = dim3(static_cast<unsigned>(tw / n), static_cast<unsigned>(y));
  config.dynamicSmemBytes = sizeof(A) * static_cast<size_t>(tw * y);
  config.stream = stream;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeClusterDimension;
  attribute.val.clusterDim.x = static_cast<unsigned>(cluster);
  attribute.val.clusterDim.y = 1;
  attribute.val.clusterDim.z = 1;
  config.attrs = &attribute;
  config.numAttrs = 1;
  const int c = static_cast<int>(cluster);
  if (vec)
    cudaLaunchKernelEx(&config, detail::reduce_middle_cluster_kernel<In, Out, Kind, kVec>, in,
                       out, outer, reduced, inner, chunk, tilesPerOuter, c, count);
  else
    cudaLaunchKernelEx(&config, detail::reduce_middle_cluster_kernel<In, Out, Kind, 1>, in, out,
                       outer, reduced, inner, chunk, tilesPerOuter, c, count);
}

// out (outer, inner) = reduce(in (outer, reduced, inner) over reduced),
// e.g. a bias gradient: outer 1, reduced B*T = 16384, inner 768. inner 1
// is a row reduction (launch_reduce_rows); otherwise one unsplit phase
// (launch_reduce_phase_middle). Deterministic.
template <class T, int Kind>
inline void launch_reduce_middle(const T *in, T *out, int64_t outer,
                                 int64_t reduced, int64_t inner,
                                 cudaStream_t stream) {
  static_assert(detail::IsFloating<T>::value,
                "reduce: float, double, bf16 or f16");
  if (outer <= 0 || inner <= 0)
    return;
  if (inner == 1) {
    launch_reduce_rows<T, Kind>(in, out, outer, reduced, stream);
    return;
  }
  launch_reduce_phase_middle<T, T, Kind>(in, out, outer, reduced, inner, 1,
                                         reduced, reduced, stream);
}
