// Block size for a block-per-row kernel over rows of `classes` elements:
// one warp for short rows, up to 256 threads (a few hundred elements
// each at 50304 classes).
inline int row_block_threads(int64_t classes) {
  return classes <= 256 ? 32 : classes <= 4096 ? 128 : 256;
}

// loss (rows) = logsumexp(logits (rows, classes)[n]) - logits[n, labels[n]].
// Block per row, one read pass (online max / sum of exps), 16-byte loads
// when classes is a multiple of the vector width and logits is 16-byte
// aligned (8 bf16 / f16 a load). Accumulates in acc_t<T> (float for bf16 /
// f16). The loss type L is T, or float with 16-bit logits. A label outside
// [0, classes): loss[n] = NaN and fail(status, code). NaN / +inf logits, or
// a row all -inf, give NaN (as the CPU).
template <class T, class I, class L = T>
inline void launch_softmax_xent_forward(const T *logits, const I *labels,
                                        L *loss, int64_t rows, int64_t classes,
                                        int32_t *status, int32_t code,
                                        cudaStream_t stream) {
  static_assert(detail::IsFloating<T>::value,
                "xent: float, double, bf16 or f16");
  static_assert(std::is_same<L, T>::value || std::is_same<L, float>::value,
                "xent loss: the logits' type or float");
  static_assert(detail::IsIndex<I>::value, "labels: int32_t or int64_t");
  if (rows <= 0)
    return;
  const int threads = row_block_threads(classes);
  const unsigned blocks = static_cast<unsigned>(grid_for(rows, 1));
  if (detail::aligned16(logits) && classes % detail::Vec16<T>::n == 0)
    detail::softmax_xent_forward_kernel<T, I, L, true>
        <<<blocks, threads, 0, stream>>>(logits, labels, loss, rows, classes,
                                         status, code);
  else
    detail::softmax_xent_forward_kernel<T, I, L, false>
        <<<blocks, threads, 0, stream>>>(logits, labels, loss, rows, classes,
                                         status, code);
}

namespace detail {
// softmax_xent_staged_kernel when a row of `classes` (16-byte aligned
// vectors) fits in this device's opt-in shared memory beside the kernel's
// own; false (nothing launched) when it does not. The attribute and the
// occupancy are set / asked on every launch (cheap, no stream operation,
// so also fine while a CUDA graph is being captured; per device, as the
// attribute is).
template <class T, class I, class G, class L>
inline bool launch_softmax_xent_staged(const T *logits, const I *labels,
                                       const G *grad, T *out, L *loss,
                                       int64_t rows, int64_t classes,
                                       int32_t *status, int32_t code,
                                       cudaStream_t stream) {
  int device = 0, optin = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin,
                             device) != cudaSuccess)
    return false;
  const int64_t bytes = classes * static_cast<int64_t>(sizeof(T));
  const int64_t own = 2 * 32 * static_cast<int64_t>(sizeof(acc_t<T>));
  if (bytes + own > optin)
    return false;
  auto kernel = softmax_xent_staged_kernel<T, I, G, L>;
  int per_sm = 0, sms = 0;
  if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(bytes)) != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(
          &per_sm, kernel, kXentStagedThreads,
          static_cast<size_t>(bytes)) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) !=
          cudaSuccess ||
      per_sm <= 0)
    return false;
  // One wave of resident blocks, each looping over rows: every row after a
  // block's first is already in flight while the block writes the one
  // before. Each row's result does not depend on the grid.
  const int64_t resident = static_cast<int64_t>(per_sm) * sms;
  const int64_t blocks = rows < resident ? rows : resident;
  kernel<<<static_cast<unsigned>(blocks), kXentStagedThreads,
           static_cast<size_t>(bytes), stream>>>(
      logits, labels, grad, out, loss, rows, classes, status, code);
  return true;
}
} // namespace detail

// kern.softmax_cross_entropy_with_grad: loss (rows) as
// launch_softmax_xent_forward and out as launch_softmax_xent_backward, from
// one logsumexp per row. Rows of more than 4096 classes that fit in shared
// memory (bf16 / f16 up to ~116k classes on an H100 / H200, float ~58k)
// with 16-byte vectors are read from global memory once
// (softmax_xent_staged_kernel); others are read twice, the second read
// mostly from L2 (softmax_xent_backward_kernel), instead of three times by
// the two kernels. loss may be null (the gradient alone). out may be
// logits itself.
template <class T, class I, class G, class L>
inline void launch_softmax_xent_with_grad(const T *logits, const I *labels,
                                          const G *grad, T *out, L *loss,
                                          int64_t rows, int64_t classes,
                                          int32_t *status, int32_t code,
                                          cudaStream_t stream) {
  static_assert(detail::IsFloating<T>::value,
                "xent: float, double, bf16 or f16");
  static_assert(std::is_same<G, T>::value || std::is_same<G, float>::value,
                "xent gradient: the logits' type or float");
  static_assert(std::is_same<L, T>::value || std::is_same<L, float>::value,
                "xent loss: the logits' type or float");
  static_assert(detail::IsIndex<I>::value, "labels: int32_t or int64_t");
  if (rows <= 0)
    return; // classes 0 still launches: every label is out of range
  const int threads = row_block_threads(classes);
  const unsigned blocks = static_cast<unsigned>(grid_for(rows, 1));
  const bool vec = detail::aligned16(logits) && detail::aligned16(out) &&
                   classes % detail::Vec16<T>::n == 0;
  if (vec && classes > 4096 &&
      detail::launch_softmax_xent_staged(logits, labels, grad, out, loss,
                                         rows, classes, status, code, stream))
    return;
  if (vec)
    detail::softmax_xent_backward_kernel<T, I, G, L, true>
        <<<blocks, threads, 0, stream>>>(logits, labels, grad, out, loss,
                                         rows, classes, status, code);
  else
    detail::softmax_xent_backward_kernel<T, I, G, L, false>
        <<<blocks, threads, 0, stream>>>(logits, labels, grad, out, loss,
                                         rows, classes, status, code);
}

// out (rows, classes) = (softmax(logits[n]) - onehot(labels[n])) * grad[n];
// grad is (rows), of type G (T, or float with 16-bit logits). Block per
// row, the row read once or twice as launch_softmax_xent_with_grad says,
// math in acc_t<T>. A label outside [0, classes): that row of out is NaN and
// fail(status, code). out may be logits itself (the gradient written in
// place over logits nothing reads afterwards); no other overlap.
template <class T, class I, class G = T>
inline void launch_softmax_xent_backward(const T *logits, const I *labels,
                                         const G *grad, T *out, int64_t rows,
                                         int64_t classes, int32_t *status,
                                         int32_t code, cudaStream_t stream) {
  launch_softmax_xent_with_grad<T, I, G, float>(logits, labels, grad, out,
                                                 nullptr, rows, classes,
                                                 status, code, stream);
}

