//===--------------------------------------------------------------------===//
// Rotary position embeddings (kern.rope)
//===--------------------------------------------------------------------===//

} // namespace detail

// Where a rope operand's (B, H, T, D) elements are: element (b, hh, i, j)
// at offset + b * batch + hh * head + i * row + j (element strides; D is
// contiguous). A contiguous (B, H, T, D) tensor is {0, H*T*D, T*D, D}; q
// read straight out of a packed (B, T, 3*H*D) qkv buffer is {0, T*3*H*D,
// D, 3*H*D} (k: offset H*D).
struct RopeStrides {
  int64_t offset, batch, head, row;
};

namespace detail {

// N consecutive elements at p (aligned to the access) in 16-byte accesses
// when N * sizeof(U) is a multiple of 16, else one by one (N = 1: the
// scalar form).
template <int N, class U>
__device__ __forceinline__ void rope_load(const U *__restrict__ p, U (&v)[N]) {
  if constexpr (N * sizeof(U) % 16 == 0) {
#pragma unroll
    for (int k = 0; k < static_cast<int>(N * sizeof(U) / 16); ++k) {
      const uint4 bits = reinterpret_cast<const uint4 *>(p)[k];
      memcpy(reinterpret_cast<char *>(v) + 16 * k, &bits, 16);
    }
  } else {
#pragma unroll
    for (int k = 0; k < N; ++k)
      v[k] = p[k];
  }
}
template <int N, class U>
__device__ __forceinline__ void rope_store(U *__restrict__ p, const U (&v)[N]) {
  if constexpr (N * sizeof(U) % 16 == 0) {
    // One st.global.v4 per 16 bytes: a plain uint4 store of these words is
    // split back into per-element stores by the compiler at rope_kernel's
    // strided addresses. Nothing in the kernel reads out, so the asm needs
    // no memory clobber.
    uint32_t w[N * sizeof(U) / 4];
    memcpy(w, v, sizeof(w));
#pragma unroll
    for (int k = 0; k < static_cast<int>(N * sizeof(U) / 16); ++k)
      asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};"
                   ::"l"(p + k * (16 / sizeof(U))), "r"(w[4 * k]), "r"(w[4 * k + 1]),
                   "r"(w[4 * k + 2]), "r"(w[4 * k + 3]));
  } else {
#pragma unroll
    for (int k = 0; k < N; ++k)
      p[k] = v[k];
  }
}

// a * b + c with one rounding, written out so that every instantiation (V,
// element type) contracts the same way: nvcc fused the first product and
// rounded the second in the old scalar kernel, but an f16 vector body
// contracted differently (one element in 10^4 a bit apart).
__device__ __forceinline__ float rope_fma(float a, float b, float c) {
  return __fmaf_rn(a, b, c);
}
__device__ __forceinline__ double rope_fma(double a, double b, double c) {
  return __fma_rn(a, b, c);
}

// x, out: (B, H, T, D) at strides xs / os; cos, sin: (T, D) contiguous, of
// type C (T, or float for bf16 / f16 x); h = D / 2. Each grid-stride item
// is V consecutive pairs (j..j+V-1, j+h..j+h+V-1) of one row (b, hh, i),
// item k = ((b * T + i) * H + hh) * (h / V) + j / V: the H heads of a
// position are neighbours, so a warp's table loads mostly share addresses
// (served once, from L1) and a packed (B, T, 3*H*D) qkv operand is walked
// contiguously, while a contiguous (B, H, T, D) one still moves whole rows.
//   plain:      out[j] = x1 c[j] - x2 s[j],   out[j+h] = x2 c[j+h] + x1 s[j+h]
//   Transposed: out[j] = x1 c[j] + x2 s[j+h], out[j+h] = x2 c[j+h] - x1 s[j]
// (x1 = x[j], x2 = x[j+h]), math in acc_t<T>, each output rounded once.
// V > 1 (16 bytes of x per access) needs the launcher's alignment checks;
// V = 1 is the general form. I is the index type of the item and its
// (b, hh, i) split: uint32_t when items fit in 31 bits (cheap 32-bit
// division), else int64_t; addresses are always 64-bit.
template <class T, class C, bool Transposed, int V, class I>
__global__ void __launch_bounds__(256)
    rope_kernel(const T *__restrict__ x, RopeStrides xs, const C *__restrict__ cos,
                const C *__restrict__ sin, T *__restrict__ out, RopeStrides os,
                I heads, I t, I chunks, I items, int64_t h) {
  using A = acc_t<T>;
  for (I k = static_cast<I>(blockIdx.x) * static_cast<I>(blockDim.x) + threadIdx.x;
       k < items; k += static_cast<I>(gridDim.x) * static_cast<I>(blockDim.x)) {
    const I r = k / chunks, q = r / heads, b = q / t; // q = b * T + i
    const I hh = r - q * heads, i = q - b * t;
    const int64_t j = static_cast<int64_t>(k - r * chunks) * V;
    const int64_t bi = static_cast<int64_t>(b), hi = static_cast<int64_t>(hh),
                  ii = static_cast<int64_t>(i);
    const int64_t at = xs.offset + bi * xs.batch + hi * xs.head + ii * xs.row + j;
    const int64_t to = os.offset + bi * os.batch + hi * os.head + ii * os.row + j;
    const int64_t table = ii * (2 * h) + j;
    // This item's (V) slices: x1v = x[b, hh, i, j:j+V], x2v = x[..., j+h:j+h+V],
    // c1v / s1v = cos / sin[i, j:j+V], c2v / s2v = cos / sin[i, j+h:j+h+V].
    T x1v[V], x2v[V], o1v[V], o2v[V];
    C c1v[V], c2v[V], s1v[V], s2v[V];
    rope_load<V>(x + at, x1v);
    rope_load<V>(x + at + h, x2v);
    rope_load<V>(cos + table, c1v);
    rope_load<V>(cos + table + h, c2v);
    rope_load<V>(sin + table, s1v);
    rope_load<V>(sin + table + h, s2v);
#pragma unroll
    for (int v = 0; v < V; ++v) {
      const A x1 = Elem<T>::load(x1v[v]), x2 = Elem<T>::load(x2v[v]);
      const A c1 = static_cast<A>(Elem<C>::load(c1v[v]));
      const A c2 = static_cast<A>(Elem<C>::load(c2v[v]));
      const A s1 = static_cast<A>(Elem<C>::load(s1v[v]));
      const A s2 = static_cast<A>(Elem<C>::load(s2v[v]));
      if (!Transposed) {
        o1v[v] = Elem<T>::store(rope_fma(x1, c1, -(x2 * s1)));
        o2v[v] = Elem<T>::store(rope_fma(x2, c2, x1 * s2));
      } else {
        o1v[v] = Elem<T>::store(rope_fma(x1, c1, x2 * s2));
        o2v[v] = Elem<T>::store(rope_fma(x2, c2, -(x1 * s1)));
      }
    }
    rope_store<V>(out + to, o1v);
    rope_store<V>(out + to + h, o2v);
  }
}

