// Batch norm's reductions (batch_norm_kernels.cuh). x (n, c, s) of T; mean,
// var (c) of A = acc_t<T> (f32, f64 for f64); ws (parts, 2, c) of A, or
// null when parts == 1 (kern::batchNormParts decides parts; the launch uses
// exactly that many blocks per channel, so the sums are added in the same
// order on every run). A second, tiny launch adds the parts when there are
// several. S = 1 (channels-last activations seen as a row-major (n, c)) takes
// the column kernels (batch_norm_*_column_kernel: tiles of 64 channels by
// parts of the rows, coalesced; kern::batchNormColumnParts decides parts).
namespace detail {

// The flattened values per block: count / parts rounded up to V.
inline int64_t bn_chunk(int64_t count, int64_t parts, int v) {
  int64_t chunk = (count + parts - 1) / parts;
  return (chunk + v - 1) / v * v;
}

inline unsigned bn_finish_blocks(int64_t c) {
  return static_cast<unsigned>(grid_for(c, kBatchNormThreads));
}

// The column kernels' grid: a block per 64 channels and part (parts rows
// each, the last ones possibly fewer or none), and the finish's blocks of
// 32 channels.
inline dim3 bn_column_grid(int64_t c, int64_t parts) {
  return dim3(static_cast<unsigned>((c + kBnColumnChannels - 1) / kBnColumnChannels),
              static_cast<unsigned>(parts));
}
inline unsigned bn_column_finish_blocks(int64_t c) {
  return static_cast<unsigned>(grid_for(c, kBnColumnFinishLanes));
}
inline dim3 bn_column_finish_threads() {
  return dim3(kBnColumnFinishLanes, kBnColumnFinishLanes);
}

template <class T, class A>
inline void batch_norm_stats_columns(const T *x, A *mean, A *var, A *ws, int64_t n, int64_t c,
                                     int64_t parts, cudaStream_t stream) {
  constexpr int V = Vec16<T>::n;
  const int64_t chunk = (n + parts - 1) / parts;
  const dim3 grid = bn_column_grid(c, parts);
  if (c % V == 0 && aligned16(x))
    batch_norm_stats_column_kernel<V, true, T, A>
        <<<grid, kBatchNormThreads, 0, stream>>>(x, mean, var, ws, n, c, chunk);
  else
    batch_norm_stats_column_kernel<V, false, T, A>
        <<<grid, kBatchNormThreads, 0, stream>>>(x, mean, var, ws, n, c, chunk);
  if (parts > 1)
    batch_norm_stats_column_finish_kernel<T, A>
        <<<bn_column_finish_blocks(c), bn_column_finish_threads(), 0, stream>>>(
            x, ws, mean, var, n, c, static_cast<int>(parts));
}

template <class G, class T, class A>
inline void batch_norm_grad_sums_columns(const G *grad, const T *x, const A *mean,
                                         const A *rstd, A *grad_sum, A *grad_xhat_sum, A *ws,
                                         int64_t n, int64_t c, int64_t parts,
                                         cudaStream_t stream) {
  constexpr int V = Vec16<G>::n < Vec16<T>::n ? Vec16<G>::n : Vec16<T>::n;
  const int64_t chunk = (n + parts - 1) / parts;
  const dim3 grid = bn_column_grid(c, parts);
  if (c % V == 0 && aligned16(grad) && aligned16(x))
    batch_norm_grad_sums_column_kernel<V, true, G, T, A>
        <<<grid, kBatchNormThreads, 0, stream>>>(grad, x, mean, rstd, grad_sum, grad_xhat_sum,
                                                 ws, n, c, chunk);
  else
    batch_norm_grad_sums_column_kernel<V, false, G, T, A>
        <<<grid, kBatchNormThreads, 0, stream>>>(grad, x, mean, rstd, grad_sum, grad_xhat_sum,
                                                 ws, n, c, chunk);
  if (parts > 1)
    batch_norm_grad_sums_column_finish_kernel<A>
        <<<bn_column_finish_blocks(c), bn_column_finish_threads(), 0, stream>>>(
            ws, rstd, grad_sum, grad_xhat_sum, c, static_cast<int>(parts));
}

} // namespace detail

template <class T, class A>
inline void launch_batch_norm_stats(const T *x, A *mean, A *var, A *ws, int64_t n, int64_t c,
                                    int64_t s, int64_t parts, cudaStream_t stream) {
  static_assert(detail::IsFloating<T>::value, "batch_norm_stats: float, double, bf16 or f16");
  if (n <= 0 || c <= 0 || s <= 0)
    return;
  if (s == 1)
    return detail::batch_norm_stats_columns(x, mean, var, ws, n, c, parts, stream);
  constexpr int V = detail::Vec16<T>::n;
  const bool vector = s % V == 0 && detail::aligned16(x);
  const int64_t count = n * s;
  const dim3 grid(static_cast<unsigned>(c), static_cast<unsigned>(parts));
  if (vector)
    detail::batch_norm_stats_kernel<V, T, A><<<grid, detail::kBatchNormThreads, 0, stream>>>(
        x, mean, var, ws, n, c, s, detail::bn_chunk(count, parts, V));
  else
    detail::batch_norm_stats_kernel<1, T, A><<<grid, detail::kBatchNormThreads, 0, stream>>>(
        x, mean, var, ws, n, c, s, detail::bn_chunk(count, parts, 1));
  if (parts > 1)
    detail::batch_norm_stats_finish_kernel<T, A>
        <<<detail::bn_finish_blocks(c), detail::kBatchNormThreads, 0, stream>>>(
            x, ws, mean, var, n, c, s, static_cast<int>(parts));
}

// grad (n, c, s) of G and x of T (any float types); mean, rstd, grad_sum,
// grad_xhat_sum (c) of A.
template <class G, class T, class A>
inline void launch_batch_norm_grad_sums(const G *grad, const T *x, const A *mean, const A *rstd,
                                        A *grad_sum, A *grad_xhat_sum, A *ws, int64_t n,
                                        int64_t c, int64_t s, int64_t parts,
                                        cudaStream_t stream) {
  static_assert(detail::IsFloating<G>::value && detail::IsFloating<T>::value,
                "batch_norm_grad_sums: float, double, bf16 or f16");
  if (c <= 0)
    return;
  if (n <= 0 || s <= 0) { // no values: both sums are 0
    cudaMemsetAsync(grad_sum, 0, c * sizeof(A), stream);
    cudaMemsetAsync(grad_xhat_sum, 0, c * sizeof(A), stream);
    return;
  }
  if (s == 1)
    return detail::batch_norm_grad_sums_columns(grad, x, mean, rstd, grad_sum, grad_xhat_sum,
                                                ws, n, c, parts, stream);
  constexpr int V = detail::Vec16<G>::n < detail::Vec16<T>::n ? detail::Vec16<G>::n
                                                              : detail::Vec16<T>::n;
  const bool vector = s % V == 0 && detail::aligned16(grad) && detail::aligned16(x);
  const int64_t count = n * s;
  const dim3 grid(static_cast<unsigned>(c), static_cast<unsigned>(parts));
  if (vector)
    detail::batch_norm_grad_sums_kernel<V, G, T, A>
        <<<grid, detail::kBatchNormThreads, 0, stream>>>(grad, x, mean, rstd, grad_sum,
                                                         grad_xhat_sum, ws, n, c, s,
                                                         detail::bn_chunk(count, parts, V));
  else
    detail::batch_norm_grad_sums_kernel<1, G, T, A>
        <<<grid, detail::kBatchNormThreads, 0, stream>>>(grad, x, mean, rstd, grad_sum,
                                                         grad_xhat_sum, ws, n, c, s,
                                                         detail::bn_chunk(count, parts, 1));
  if (parts > 1)
    detail::batch_norm_grad_sums_finish_kernel<A>
        <<<detail::bn_finish_blocks(c), detail::kBatchNormThreads, 0, stream>>>(
            ws, rstd, grad_sum, grad_xhat_sum, c, static_cast<int>(parts));
}
