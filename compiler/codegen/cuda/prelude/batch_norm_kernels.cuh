//===--------------------------------------------------------------------===//
// Batch norm's reductions (kern.batch_norm_stats / _grad_sums)
//===--------------------------------------------------------------------===//

// x (N, C, S) is read per channel: channel c is N runs of S values, C * S
// apart. Block (c, p) of a (C, P) grid folds values [p * chunk, (p + 1) *
// chunk) of the channel's N * S (flattened run by run), V per load: V is
// the 16-byte vector of the narrowest type read when S and chunk are
// multiples of it and the bases are aligned (a V-group then never crosses
// a run), else 1. Sums in A (f32, f64 for f64 x), a fixed shuffle order;
// with P = 1 the block finishes its channel, else it writes its two sums
// to ws (P, 2, C) and batch_norm_*_finish_kernel adds the P parts in order.
constexpr int kBatchNormThreads = 256;

// The run and offset of flattened value i of a channel (32-bit division
// when the channel's values fit: the loop's only costly instruction).
__device__ __forceinline__ int64_t bn_offset(int64_t i, int64_t s, int64_t runStride,
                                             bool narrow) {
  const int64_t run = narrow ? static_cast<int64_t>(static_cast<uint32_t>(i) /
                                                    static_cast<uint32_t>(s))
                             : i / s;
  return run * runStride + (i - run * s);
}

// mean = K + S1 / n, var = max(S2 / n - (S1 / n)^2, 0): sums of x - K with
// K = x[0, c, 0] (a value of the channel), so the subtraction does not
// cancel for channels whose mean is large against their spread.
template <class A>
__device__ __forceinline__ void bn_finish_stats(A shift, A s1, A s2, int64_t count, A *mean,
                                                A *var) {
  const A inv = A(1) / static_cast<A>(count);
  const A m = s1 * inv;
  const A v = s2 * inv - m * m;
  *mean = shift + m;
  *var = v > A(0) ? v : A(0);
}

// A part's two sums of channel ch into ws (P, 2, C), and the P parts'
// sums of channel ch added back in part order (the same on every run).
template <class A>
__device__ __forceinline__ void bn_store_part(A *ws, int64_t part, int64_t c, int64_t ch, A s1,
                                              A s2) {
  ws[(part * 2) * c + ch] = s1;
  ws[(part * 2 + 1) * c + ch] = s2;
}
template <class A>
__device__ __forceinline__ void bn_add_parts(const A *ws, int parts, int64_t c, int64_t ch,
                                             A &s1, A &s2) {
  s1 = A(0), s2 = A(0);
  for (int p = 0; p < parts; ++p) {
    s1 += ws[(p * 2) * c + ch];
    s2 += ws[(p * 2 + 1) * c + ch];
  }
}

template <int V, class T, class A>
__global__ void __launch_bounds__(kBatchNormThreads)
    batch_norm_stats_kernel(const T *__restrict__ x, A *__restrict__ mean, A *__restrict__ var,
                            A *__restrict__ ws, int64_t n, int64_t c, int64_t s, int64_t chunk) {
  __shared__ A scratch[32];
  const int64_t ch = blockIdx.x, part = blockIdx.y, parts = gridDim.y;
  const T *base = x + ch * s;
  const A shift = static_cast<A>(Elem<T>::load(base[0]));
  const int64_t count = n * s, begin = part * chunk;
  const int64_t end = begin + chunk < count ? begin + chunk : count;
  const bool narrow = count <= 0x7fffffff;
  A s1 = A(0), s2 = A(0);
  for (int64_t i = begin + threadIdx.x * V; i < end; i += kBatchNormThreads * V) {
    A v[V];
    norm_load<V, T>(base + bn_offset(i, s, c * s, narrow), v);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const A d = v[k] - shift;
      s1 += d;
      s2 += d * d;
    }
  }
  s1 = block_reduce<Reducer<A, 0>>(s1, scratch);
  s2 = block_reduce<Reducer<A, 0>>(s2, scratch);
  if (threadIdx.x != 0)
    return;
  if (parts == 1) {
    bn_finish_stats(shift, s1, s2, count, mean + ch, var + ch);
  } else {
    bn_store_part(ws, part, c, ch, s1, s2);
  }
}

template <class T, class A>
__global__ void batch_norm_stats_finish_kernel(const T *__restrict__ x, const A *__restrict__ ws,
                                               A *__restrict__ mean, A *__restrict__ var,
                                               int64_t n, int64_t c, int64_t s, int parts) {
  for (int64_t ch = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; ch < c;
       ch += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    A s1, s2;
    bn_add_parts(ws, parts, c, ch, s1, s2);
    bn_finish_stats(static_cast<A>(Elem<T>::load(x[ch * s])), s1, s2, n * s, mean + ch,
                    var + ch);
  }
}

// grad_sum = sum(g), grad_xhat_sum = rstd * sum(g * (x - mean)) per channel.
template <int V, class G, class T, class A>
__global__ void __launch_bounds__(kBatchNormThreads)
    batch_norm_grad_sums_kernel(const G *__restrict__ g, const T *__restrict__ x,
                                const A *__restrict__ mean, const A *__restrict__ rstd,
                                A *__restrict__ grad_sum, A *__restrict__ grad_xhat_sum,
                                A *__restrict__ ws, int64_t n, int64_t c, int64_t s,
                                int64_t chunk) {
  __shared__ A scratch[32];
  const int64_t ch = blockIdx.x, part = blockIdx.y, parts = gridDim.y;
  const int64_t count = n * s, begin = part * chunk;
  const int64_t end = begin + chunk < count ? begin + chunk : count;
  const bool narrow = count <= 0x7fffffff;
  const A m = mean[ch];
  A s1 = A(0), s2 = A(0);
  for (int64_t i = begin + threadIdx.x * V; i < end; i += kBatchNormThreads * V) {
    const int64_t at = ch * s + bn_offset(i, s, c * s, narrow);
    A gv[V], xv[V];
    norm_load<V, G>(g + at, gv);
    norm_load<V, T>(x + at, xv);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      s1 += gv[k];
      s2 += gv[k] * (xv[k] - m);
    }
  }
  s1 = block_reduce<Reducer<A, 0>>(s1, scratch);
  s2 = block_reduce<Reducer<A, 0>>(s2, scratch);
  if (threadIdx.x != 0)
    return;
  if (parts == 1) {
    grad_sum[ch] = s1;
    grad_xhat_sum[ch] = s2 * rstd[ch];
  } else {
    bn_store_part(ws, part, c, ch, s1, s2);
  }
}

template <class A>
__global__ void batch_norm_grad_sums_finish_kernel(const A *__restrict__ ws,
                                                   const A *__restrict__ rstd,
                                                   A *__restrict__ grad_sum,
                                                   A *__restrict__ grad_xhat_sum, int64_t c,
                                                   int parts) {
  for (int64_t ch = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; ch < c;
       ch += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    A s1, s2;
    bn_add_parts(ws, parts, c, ch, s1, s2);
    grad_sum[ch] = s1;
    grad_xhat_sum[ch] = s2 * rstd[ch];
  }
}
