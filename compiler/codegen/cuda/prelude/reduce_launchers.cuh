//===--------------------------------------------------------------------===//
// Launchers
//===--------------------------------------------------------------------===//

// out (rows) = reduce(in (rows, cols) over cols); Kind 0 sum, 1 mean, 2 max
// (semantics: detail::Reducer). Sums accumulate in acc_t<T> (T; float for
// bf16 / f16, rounded once per output). Launch shapes:
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
  static_assert(detail::IsFloating<T>::value,
                "reduce: float, double, bf16 or f16");
  using A = acc_t<T>;
  if (rows <= 0)
    return;
  if (cols <= 1024) {
    const int threads = 256; // 8 warps = 8 rows a block
    detail::reduce_rows_warp_kernel<T, T, Kind>
        <<<static_cast<unsigned>(grid_for(rows, threads / 32)), threads, 0,
           stream>>>(in, out, rows, cols, cols);
    return;
  }
  const bool vec = detail::aligned16(in) && cols % detail::Vec16<T>::n == 0;
  auto blockKernel = [&](auto *dst, int threads, int64_t segs, int64_t chunk) {
    using Out = typename std::remove_pointer<decltype(dst)>::type;
    const unsigned blocks = static_cast<unsigned>(grid_for(rows * segs, 1));
    if (vec)
      detail::reduce_rows_block_kernel<T, Out, Kind, true>
          <<<blocks, threads, 0, stream>>>(in, dst, rows, cols, segs, chunk);
    else
      detail::reduce_rows_block_kernel<T, Out, Kind, false>
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
    A *partial = nullptr; // partials stay in the accumulator type
    if (segs > 1 &&
        cudaMallocAsync(reinterpret_cast<void **>(&partial),
                        static_cast<size_t>(rows * segs) * sizeof(A),
                        stream) == cudaSuccess) {
      blockKernel(partial, 1024, segs, chunk);
      detail::reduce_rows_warp_kernel<A, T, Kind>
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
  static_assert(detail::IsFloating<T>::value,
                "reduce: float, double, bf16 or f16");
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

