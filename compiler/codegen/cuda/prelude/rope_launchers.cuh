namespace detail {

// One rope launch with V pairs per item and index type I (see rope_kernel).
template <class T, class C, int V, class I>
inline void rope_launch_as(const T *x, RopeStrides xs, const C *cos, const C *sin, T *out,
                           RopeStrides os, int64_t heads, int64_t t, int64_t h,
                           int64_t items, bool transposed, cudaStream_t stream) {
  const int threads = 256;
  const unsigned blocks = static_cast<unsigned>(grid_for(items, threads));
  const I hs = static_cast<I>(heads), ts = static_cast<I>(t), cs = static_cast<I>(h / V),
          n = static_cast<I>(items);
  if (transposed)
    rope_kernel<T, C, true, V, I>
        <<<blocks, threads, 0, stream>>>(x, xs, cos, sin, out, os, hs, ts, cs, n, h);
  else
    rope_kernel<T, C, false, V, I>
        <<<blocks, threads, 0, stream>>>(x, xs, cos, sin, out, os, hs, ts, cs, n, h);
}

// Whether every (B, H, T, D) row start of s is a multiple of V elements
// (a stride of a size-1 dim is never used, so any value goes).
inline bool rope_strides_multiple(const RopeStrides &s, int64_t batch, int64_t heads,
                                  int64_t t, int64_t v) {
  return s.offset % v == 0 && (batch == 1 || s.batch % v == 0) &&
         (heads == 1 || s.head % v == 0) && (t == 1 || s.row % v == 0);
}

template <class T, class C, int V>
inline void rope_launch_indexed(const T *x, RopeStrides xs, const C *cos, const C *sin,
                                T *out, RopeStrides os, int64_t heads, int64_t t,
                                int64_t h, int64_t items, bool transposed,
                                cudaStream_t stream) {
  // 32-bit item math when k + the grid's stride (< 2^21) cannot wrap.
  if (items <= INT32_MAX)
    rope_launch_as<T, C, V, uint32_t>(x, xs, cos, sin, out, os, heads, t, h, items,
                                      transposed, stream);
  else
    rope_launch_as<T, C, V, int64_t>(x, xs, cos, sin, out, os, heads, t, h, items,
                                     transposed, stream);
}

} // namespace detail

// out = x * cos + rotate_half(x) * sin (transposed: the gradient form
// x * cos + rotate_half_T(x * sin)) for x, out logically (B, H, T, D) =
// (batch, heads, t, d) at element strides xs / os (D contiguous, so q / k
// can be read from, or written into, a packed qkv buffer without a copy);
// cos / sin contiguous (T, D) shared by every (b, hh), of type C (T, or
// float for bf16 / f16 x); d even. The old contiguous (rows, d) form is
// batch = rows / t, heads = 1, strides {0, t*d, 0, d}.
// Memory bound (x read and out written once; the tables stay in L2, and
// the heads of a position are neighbouring items, so they share table
// loads): each thread item is V consecutive pairs, V = 16 bytes of T (8
// bf16 / f16, 4 float, 2 double), so x / out move in 16-byte accesses and
// the float tables of 16-bit x in two 16-byte accesses per half; the
// (b, hh, i) split is done once per item, in 32-bit math when the item
// count fits (the old kernel's 64-bit div / mod per element and 2-byte
// accesses reached ~990 GB/s on an H200). V > 1 needs h % V == 0,
// 16-byte aligned x / out / cos / sin and every offset / stride (of a
// dim > 1) a multiple of V; otherwise V = 1 (scalar, any strides). Same
// per-element formulas either way, so V never changes the result bits.
// 256-thread blocks, grid-stride (grid_for). out must NOT alias x (the
// pointers are __restrict__).
template <class T, class C>
inline void launch_rope(const T *x, RopeStrides xs, const C *cos, const C *sin, T *out,
                        RopeStrides os, int64_t batch, int64_t heads, int64_t t, int64_t d,
                        bool transposed, cudaStream_t stream) {
  static_assert(detail::IsFloating<T>::value, "rope: float, double, bf16 or f16");
  static_assert(std::is_same<C, T>::value || std::is_same<C, float>::value,
                "rope tables: x's type or float");
  const int64_t h = d / 2;
  if (batch <= 0 || heads <= 0 || t <= 0 || h <= 0)
    return;
  const int64_t rows = batch * heads * t;
  constexpr int V = detail::Vec16<T>::n;
  // V * sizeof(C) is 16 or 32 bytes, so 16-byte aligned tables suffice.
  const bool vector = h % V == 0 && detail::aligned16(x) && detail::aligned16(out) &&
                      detail::aligned16(cos) && detail::aligned16(sin) &&
                      detail::rope_strides_multiple(xs, batch, heads, t, V) &&
                      detail::rope_strides_multiple(os, batch, heads, t, V);
  if (vector)
    detail::rope_launch_indexed<T, C, V>(x, xs, cos, sin, out, os, heads, t, h,
                                         rows * (h / V), transposed, stream);
  else
    detail::rope_launch_indexed<T, C, 1>(x, xs, cos, sin, out, os, heads, t, h, rows * h,
                                         transposed, stream);
}

