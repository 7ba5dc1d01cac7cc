// out (rows, d) = x * cos + rotate_half(x) * sin (transposed: the gradient
// form x * cos + rotate_half_T(x * sin)); x is (rows, d), rows = leading
// dims x t, cos / sin (t, d) shared by the leading dims, of type C (T, or
// float for bf16 / f16 x); d even. One thread per pair, 256-thread blocks;
// memory bound: reads x once and the tables (which stay in L2) per row.
// out must NOT alias x (the pointers are __restrict__).
template <class T, class C>
inline void launch_rope(const T *x, const C *cos, const C *sin, T *out,
                        int64_t rows, int64_t t, int64_t d, bool transposed,
                        cudaStream_t stream) {
  static_assert(detail::IsFloating<T>::value, "rope: float, double, bf16 or f16");
  static_assert(std::is_same<C, T>::value || std::is_same<C, float>::value,
                "rope tables: x's type or float");
  const int64_t pairs = rows * (d / 2);
  if (pairs <= 0 || t <= 0)
    return;
  const int threads = 256;
  const unsigned blocks = static_cast<unsigned>(grid_for(pairs, threads));
  if (transposed)
    detail::rope_kernel<T, C, true>
        <<<blocks, threads, 0, stream>>>(x, cos, sin, out, rows, t, d);
  else
    detail::rope_kernel<T, C, false>
        <<<blocks, threads, 0, stream>>>(x, cos, sin, out, rows, t, d);
}

