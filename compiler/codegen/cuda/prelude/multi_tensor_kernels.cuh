//===--------------------------------------------------------------------===//
// Multi-tensor kernels (kern.multi_sum here; kern.multi_elementwise is
// generated per body but uses multi_member and MultiVec4)
//===--------------------------------------------------------------------===//

// A launch over several tensors gives each tensor (member) a run of blocks:
// member m owns blocks [first[m], first[m + 1]). The member of block b, by
// binary search over the launch's table (passed by value).
__device__ __forceinline__ int multi_member(const uint32_t *first, int count, uint32_t b) {
  int lo = 0, hi = count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (first[mid] <= b)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

// Four consecutive elements, loaded and stored as one access (16 bytes for
// 4-byte elements, 8 for 2-byte ones) when the address is a multiple of
// the struct's size.
template <class T> struct alignas(4 * sizeof(T)) MultiVec4 {
  T v[4];
};

// The table of one kern.multi_sum launch: up to Cap members, T in, O out
// (O is T, or float for sums of squares).
template <class T, class O, int Cap> struct MultiSumTable {
  const T *in[Cap];
  O *out[Cap];
  int64_t n[Cap];
  uint32_t first[Cap + 1];
  int32_t count;
};

// One element's term: the element, or (Squares) its square in float, the
// value a separate f32 square kernel would have stored for the sum.
template <class T, bool Squares> __device__ __forceinline__ double multi_sum_term(T x) {
  if constexpr (Squares) {
    const float v = static_cast<float>(Elem<T>::load(x));
    return static_cast<double>(v * v);
  } else {
    return static_cast<double>(Elem<T>::load(x));
  }
}

// Pass 1: block b sums `chunk` elements (or their squares) of its member
// into partials[b] (double, a fixed tree: the same bits every run).
template <class T, class O, int Cap, bool Squares>
__global__ void __launch_bounds__(256)
    multi_sum_partial_kernel(const MultiSumTable<T, O, Cap> t, int64_t chunk,
                             double *__restrict__ partials) {
  using R = Reducer<double, 0>;
  __shared__ double scratch[32];
  const int m = multi_member(t.first, t.count, blockIdx.x);
  const int64_t begin = static_cast<int64_t>(blockIdx.x - t.first[m]) * chunk;
  const int64_t end = begin + chunk < t.n[m] ? begin + chunk : t.n[m];
  const T *in = t.in[m];
  double acc = 0.0;
#pragma unroll 4
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x)
    acc += multi_sum_term<T, Squares>(in[i]);
  acc = block_reduce<R>(acc, scratch);
  if (threadIdx.x == 0)
    partials[blockIdx.x] = acc;
}

// Pass 2: one warp per member adds its partials in a fixed order and
// rounds the sum once to O.
template <class T, class O, int Cap>
__global__ void __launch_bounds__(32)
    multi_sum_final_kernel(const MultiSumTable<T, O, Cap> t,
                           const double *__restrict__ partials) {
  using R = Reducer<double, 0>;
  const int m = blockIdx.x;
  double acc = 0.0;
  for (uint32_t p = t.first[m] + threadIdx.x; p < t.first[m + 1]; p += 32)
    acc += partials[p];
  acc = warp_reduce<R>(acc);
  if (threadIdx.x == 0)
    t.out[m][0] = Elem<O>::store(static_cast<acc_t<O>>(acc));
}

