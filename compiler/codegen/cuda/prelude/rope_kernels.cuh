//===--------------------------------------------------------------------===//
// Rotary position embeddings (kern.rope)
//===--------------------------------------------------------------------===//

// One thread per rotated pair (j, j + h) of a row, grid-stride: x is
// (rows, d) with row r at position r % t of the (t, d) tables cos / sin (of
// type C: T, or float for bf16 / f16 x); h = d / 2.
//   plain:      out[j] = x1 c[j] - x2 s[j],   out[j+h] = x2 c[j+h] + x1 s[j+h]
//   Transposed: out[j] = x1 c[j] + x2 s[j+h], out[j+h] = x2 c[j+h] - x1 s[j]
// (x1 = x[j], x2 = x[j+h]), math in acc_t<T>, each output rounded once.
template <class T, class C, bool Transposed>
__global__ void rope_kernel(const T *__restrict__ x, const C *__restrict__ cos,
                            const C *__restrict__ sin, T *__restrict__ out,
                            int64_t rows, int64_t t, int64_t d) {
  using A = acc_t<T>;
  const int64_t h = d / 2, pairs = rows * h;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < pairs; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / h, j = i - r * h;
    const int64_t at = r * d + j, table = (r % t) * d + j;
    const A x1 = Elem<T>::load(x[at]), x2 = Elem<T>::load(x[at + h]);
    const A c1 = static_cast<A>(Elem<C>::load(cos[table]));
    const A c2 = static_cast<A>(Elem<C>::load(cos[table + h]));
    const A s1 = static_cast<A>(Elem<C>::load(sin[table]));
    const A s2 = static_cast<A>(Elem<C>::load(sin[table + h]));
    if (!Transposed) {
      out[at] = Elem<T>::store(x1 * c1 - x2 * s1);
      out[at + h] = Elem<T>::store(x2 * c2 + x1 * s2);
    } else {
      out[at] = Elem<T>::store(x1 * c1 + x2 * s2);
      out[at + h] = Elem<T>::store(x2 * c2 - x1 * s1);
    }
  }
}

