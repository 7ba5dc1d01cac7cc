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

// kern.softmax_cross_entropy_with_grad: loss (rows) as
// launch_softmax_xent_forward and out as launch_softmax_xent_backward, from
// one logsumexp per row (the row is read twice, the second read mostly
// from L2, instead of three times by the two kernels). loss may be null
// (the gradient alone). out may be logits itself.
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
  if (detail::aligned16(logits) && detail::aligned16(out) &&
      classes % detail::Vec16<T>::n == 0)
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
// row, two reads of the row (online max / sum, then the write pass), math
// in acc_t<T>. A label outside [0, classes): that row of out is NaN and
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

