// out[m][0] = sum of in[m][0 .. n[m]) for m < count (kern.multi_sum), in
// launches of up to Cap members: per launch, blocks of `chunk` elements
// write one double partial each (at least one per member, so an empty
// member gets 0), then one warp per member adds them in order. `partials`
// holds multi_sum_partials(n, count, chunk) doubles. Deterministic: no
// atomics, the launch shape depends only on the sizes. With Squares (O
// float), out[m][0] sums each element's square, squared in float.
inline int64_t multi_sum_partials(const int64_t *n, int32_t count, int64_t chunk) {
  int64_t total = 0;
  for (int32_t m = 0; m < count; ++m)
    total += n[m] > chunk ? (n[m] + chunk - 1) / chunk : 1;
  return total;
}

template <class T, int Cap, class O = T, bool Squares = false>
inline void launch_multi_sum(int32_t count, const T *const *in, O *const *out,
                             const int64_t *n, int64_t chunk, double *partials,
                             cudaStream_t stream) {
  static_assert(detail::IsFloating<T>::value, "multi_sum: float, double, bf16 or f16");
  static_assert(!Squares || std::is_same<O, float>::value,
                "multi_sum: sums of squares are float");
  for (int32_t base = 0; base < count; base += Cap) {
    detail::MultiSumTable<T, O, Cap> t{};
    t.count = count - base < Cap ? count - base : Cap;
    uint32_t blocks = 0;
    for (int32_t m = 0; m < t.count; ++m) {
      t.in[m] = in[base + m];
      t.out[m] = out[base + m];
      t.n[m] = n[base + m];
      t.first[m] = blocks;
      blocks += static_cast<uint32_t>(multi_sum_partials(&t.n[m], 1, chunk));
    }
    t.first[t.count] = blocks;
    detail::multi_sum_partial_kernel<T, O, Cap, Squares>
        <<<blocks, 256, 0, stream>>>(t, chunk, partials);
    detail::multi_sum_final_kernel<T, O, Cap><<<t.count, 32, 0, stream>>>(t, partials);
    partials += blocks;
  }
}

