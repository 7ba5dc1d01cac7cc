
//===--------------------------------------------------------------------===//
// Embeddings
//===--------------------------------------------------------------------===//

// out[n, j] = table[ids[n], j] in copy units U (1 to 16 bytes; a row is a
// whole number of units). One thread per unit, grid-stride over all units
// of all ids, so short rows (even one element) keep every lane busy.
template <class U, class I>
__global__ void __launch_bounds__(256)
    gather_rows_kernel(const U *__restrict__ table, const I *__restrict__ ids,
                       U *__restrict__ out, int64_t n_ids, int64_t vocab,
                       int64_t row_units, U fill, int32_t *status,
                       int32_t code) {
  const int64_t total = n_ids * row_units;
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       k < total; k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t n = k / row_units, j = k - n * row_units;
    const I id = ids[n];
    if (!label_ok(id, vocab)) {
      out[k] = fill;
      if (j == 0)
        fail(status, code);
    } else {
      out[k] = table[static_cast<int64_t>(id) * row_units + j];
    }
  }
}

template <class T, class U, class I>
inline void launch_gather_units(const T *table, const I *ids, T *out,
                                int64_t n_ids, int64_t vocab, int64_t row_elems,
                                const unsigned char *fill16, int32_t *status,
                                int32_t code, cudaStream_t stream) {
  const int64_t rowUnits = row_elems * static_cast<int64_t>(sizeof(T)) /
                           static_cast<int64_t>(sizeof(U));
  U fill;
  memcpy(&fill, fill16, sizeof(U));
  const int threads = 256;
  gather_rows_kernel<U, I>
      <<<static_cast<unsigned>(grid_for(n_ids * rowUnits, threads)), threads, 0,
         stream>>>(reinterpret_cast<const U *>(table), ids,
                   reinterpret_cast<U *>(out), n_ids, vocab, rowUnits, fill,
                   status, code);
}

// out[ids[n], j] += updates[n, j]; one thread per element, atomics on the
// accumulator type (float for bf16 / f16 updates: out is then a float
// scratch, rounded afterwards by store_elements_kernel).
template <class T, class I>
__global__ void __launch_bounds__(256)
    scatter_add_rows_kernel(const T *__restrict__ updates,
                            const I *__restrict__ ids, acc_t<T> *out,
                            int64_t n_ids,
                            int64_t vocab, int64_t row_elems, int32_t *status,
                            int32_t code) {
  const int64_t total = n_ids * row_elems;
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       k < total; k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t n = k / row_elems, j = k - n * row_elems;
    const I id = ids[n];
    if (!label_ok(id, vocab)) {
      if (j == 0)
        fail(status, code);
      continue;
    }
    atomicAdd(out + static_cast<int64_t>(id) * row_elems + j,
              Elem<T>::load(updates[k]));
  }
}

// The same sums in the order of n, the same bits every run (tcc compile
// --deterministic): block (t, c) owns output rows [t * rows_per_tile, ...)
// and columns [c * blockDim.x, ...), one thread per column; every block
// walks all ids in order (through shared memory: the test of each id is the
// same for the whole block) and adds the update rows of the ids in its
// tile. No atomics: each element has one writer. A few tiles keep the walks
// few (a walk reads every id); out must be zero before.
template <class T, class I>
__global__ void __launch_bounds__(256)
    scatter_add_rows_ordered_kernel(const T *__restrict__ updates,
                                    const I *__restrict__ ids, acc_t<T> *out,
                                    int64_t n_ids, int64_t vocab, int64_t row_elems,
                                    int64_t rows_per_tile, int32_t *status,
                                    int32_t code) {
  constexpr int kChunk = 1024;
  __shared__ I chunk[kChunk];
  const int64_t r0 = blockIdx.x * rows_per_tile;
  const int64_t r1 = r0 + rows_per_tile < vocab ? r0 + rows_per_tile : vocab;
  const int64_t j = blockIdx.y * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  for (int64_t base = 0; base < n_ids; base += kChunk) {
    const int64_t m = n_ids - base < kChunk ? n_ids - base : kChunk;
    __syncthreads(); // the previous chunk is read
    for (int64_t k = threadIdx.x; k < m; k += blockDim.x)
      chunk[k] = ids[base + k];
    __syncthreads();
    if (j >= row_elems)
      continue;
    for (int64_t k = 0; k < m; ++k) {
      const int64_t id = static_cast<int64_t>(chunk[k]);
      if (id >= r0 && id < r1)
        out[id * row_elems + j] += Elem<T>::load(updates[(base + k) * row_elems + j]);
    }
  }
  if (blockIdx.x == 0 && blockIdx.y == 0) // ids outside [0, vocab): no tile has them
    for (int64_t k = threadIdx.x; k < n_ids; k += blockDim.x)
      if (!label_ok(ids[k], vocab))
        fail(status, code);
}

// out[i] = in[i] rounded to T (once), i < n.
template <class T>
__global__ void __launch_bounds__(256)
    store_elements_kernel(const acc_t<T> *__restrict__ in, T *__restrict__ out,
                          int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = Elem<T>::store(in[i]);
}

// Only the id check (rows of zero elements: nothing to copy, but a bad id
// still fails the step, as on the CPU).
template <class I>
__global__ void __launch_bounds__(256)
    check_ids_kernel(const I *__restrict__ ids, int64_t n_ids, int64_t vocab,
                     int32_t *status, int32_t code) {
  for (int64_t n = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       n < n_ids; n += static_cast<int64_t>(gridDim.x) * blockDim.x)
    if (!label_ok(ids[n], vocab))
      fail(status, code);
}

template <class I> struct IsIndex { static constexpr bool value = false; };
template <> struct IsIndex<int32_t> { static constexpr bool value = true; };
template <> struct IsIndex<int64_t> { static constexpr bool value = true; };

} // namespace detail

