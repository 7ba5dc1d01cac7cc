// out (n_ids, row_elems) = table (vocab, row_elems)[ids[n]]. T is any
// trivially copyable type of 1, 2, 4 or 8 bytes (float, double, bf16, f16,
// int32_t, int64_t, uint8_t / bool): rows are copied in the widest unit
// (16, 8, 4, 2 or 1 bytes, never narrower than T) that divides a row and to
// which both table and out are aligned. An id outside [0, vocab): that row
// of out is NaN (float, double, bf16, f16) or zero bytes (other types) and
// fail(status, code). Bit-exact copy.
template <class T, class I>
inline void launch_gather_rows(const T *table, const I *ids, T *out,
                               int64_t n_ids, int64_t vocab, int64_t row_elems,
                               int32_t *status, int32_t code,
                               cudaStream_t stream) {
  static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 ||
                    sizeof(T) == 8,
                "gather: elements of 1, 2, 4 or 8 bytes");
  static_assert(detail::IsIndex<I>::value, "ids: int32_t or int64_t");
  if (n_ids <= 0)
    return;
  if (row_elems <= 0) {
    detail::check_ids_kernel<I>
        <<<static_cast<unsigned>(grid_for(n_ids, 256)), 256, 0, stream>>>(
            ids, n_ids, vocab, status, code);
    return;
  }
  // The bad-id fill, repeated to 16 bytes.
  unsigned char fill16[16] = {};
  if constexpr (detail::IsFloating<T>::value) {
    const T nan = Elem<T>::store(quiet_nan<acc_t<T>>());
    for (size_t k = 0; k < 16; k += sizeof(T))
      memcpy(fill16 + k, &nan, sizeof(T));
  }
  const int64_t rowBytes = row_elems * static_cast<int64_t>(sizeof(T));
  const uintptr_t addr =
      reinterpret_cast<uintptr_t>(table) | reinterpret_cast<uintptr_t>(out);
  auto fits = [&](int64_t unit) {
    return unit >= static_cast<int64_t>(sizeof(T)) && rowBytes % unit == 0 &&
           addr % static_cast<uintptr_t>(unit) == 0;
  };
  if (fits(16))
    detail::launch_gather_units<T, uint4>(
        table, ids, out, n_ids, vocab, row_elems, fill16, status, code, stream);
  else if (fits(8))
    detail::launch_gather_units<T, unsigned long long>(
        table, ids, out, n_ids, vocab, row_elems, fill16, status, code, stream);
  else if (fits(4))
    detail::launch_gather_units<T, uint32_t>(
        table, ids, out, n_ids, vocab, row_elems, fill16, status, code, stream);
  else if (fits(2))
    detail::launch_gather_units<T, uint16_t>(
        table, ids, out, n_ids, vocab, row_elems, fill16, status, code, stream);
  else
    detail::launch_gather_units<T, uint8_t>(
        table, ids, out, n_ids, vocab, row_elems, fill16, status, code, stream);
}

// out (vocab, row_elems) = 0 (cudaMemsetAsync on stream), then
// out[ids[n], :] += updates (n_ids, row_elems)[n, :] with atomicAdd, so
// repeated ids accumulate. An id outside [0, vocab): that update row is
// skipped and fail(status, code). NOT deterministic: the order in which
// repeated ids' atomics land varies run to run, so float sums may differ in
// the last bits (the CPU adds in order of n). `ordered` (tcc compile
// --deterministic): no atomics, each sum in the order of n as on the CPU,
// the same bits every run (scatter_add_rows_ordered_kernel; slower: every
// one of 32 row tiles walks all ids).
// bf16 / f16: 16-bit atomics would round after every add (a row hit k
// times collects k roundings, and small updates vanish against a large
// sum), so the sums accumulate in a float scratch (stream-ordered
// cudaMallocAsync, freed right after) and each element is rounded once, as
// on the CPU. If that allocation fails, nothing is launched and its error
// stays pending, so the step fails with CUDA's out-of-memory error.
template <class T, class I>
inline void launch_scatter_add_rows(const T *updates, const I *ids, T *out,
                                    int64_t n_ids, int64_t vocab,
                                    int64_t row_elems, int32_t *status,
                                    int32_t code, cudaStream_t stream,
                                    bool ordered = false) {
  static_assert(detail::IsFloating<T>::value,
                "scatter_add: float, double, bf16 or f16");
  static_assert(detail::IsIndex<I>::value, "ids: int32_t or int64_t");
  using A = acc_t<T>;
  constexpr bool kScratch = !std::is_same<A, T>::value;
  const int64_t elems = vocab > 0 && row_elems > 0 ? vocab * row_elems : 0;
  const int threads = 256;
  if (elems > 0 && (!kScratch || n_ids <= 0))
    cudaMemsetAsync(out, 0, static_cast<size_t>(elems) * sizeof(T), stream);
  if (n_ids <= 0)
    return;
  if (row_elems <= 0) {
    detail::check_ids_kernel<I>
        <<<static_cast<unsigned>(grid_for(n_ids, threads)), threads, 0,
           stream>>>(ids, n_ids, vocab, status, code);
    return;
  }
  A *sums = reinterpret_cast<A *>(out);
  if (kScratch) {
    if (elems == 0 || cudaMallocAsync(reinterpret_cast<void **>(&sums),
                                      static_cast<size_t>(elems) * sizeof(A),
                                      stream) != cudaSuccess) {
      if (elems == 0) // vocab 0: every id is out of range
        detail::check_ids_kernel<I>
            <<<static_cast<unsigned>(grid_for(n_ids, threads)), threads, 0,
               stream>>>(ids, n_ids, vocab, status, code);
      return;
    }
    cudaMemsetAsync(sums, 0, static_cast<size_t>(elems) * sizeof(A), stream);
  }
  if (ordered && vocab <= 0) { // every id is out of range
    detail::check_ids_kernel<I>
        <<<static_cast<unsigned>(grid_for(n_ids, threads)), threads, 0, stream>>>(
            ids, n_ids, vocab, status, code);
  } else if (ordered) {
    // 32 row tiles: each walks all ids; more would walk more.
    const int64_t tiles = vocab < 32 ? vocab : 32;
    const int64_t rowsPerTile = (vocab + tiles - 1) / tiles;
    const dim3 grid(static_cast<unsigned>(tiles),
                    static_cast<unsigned>((row_elems + threads - 1) / threads));
    detail::scatter_add_rows_ordered_kernel<T, I><<<grid, threads, 0, stream>>>(
        updates, ids, sums, n_ids, vocab, row_elems, rowsPerTile, status, code);
  } else {
    detail::scatter_add_rows_kernel<T, I>
        <<<static_cast<unsigned>(grid_for(n_ids * row_elems, threads)), threads,
           0, stream>>>(updates, ids, sums, n_ids, vocab, row_elems, status,
                        code);
  }
  if (kScratch) {
    detail::store_elements_kernel<T>
        <<<static_cast<unsigned>(grid_for(elems, threads)), threads, 0,
           stream>>>(sums, out, elems);
    cudaFreeAsync(sums, stream);
  }
}

