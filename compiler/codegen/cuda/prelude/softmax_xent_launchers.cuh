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

