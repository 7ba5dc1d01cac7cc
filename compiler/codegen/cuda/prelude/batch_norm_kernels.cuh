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
// S = 1 (channels-last) takes the column kernels at the end of this file.
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

//===--------------------------------------------------------------------===//
// Channels-last batch norm (S = 1): column sums of a row-major (N, C)
//===--------------------------------------------------------------------===//

// With S = 1 (NHWC activations seen as (N * H * W, C)) channel ch is column
// ch of a row-major (N, C): the kernels above would read it C apart. Here
// block (t, p) of a (ceil(C / 64), P) grid folds the 64 channels [64 t,
// 64 t + 64) over rows [p * chunk, (p + 1) * chunk): thread i owns V
// consecutive channels (lane i % L, L = 64 / V, V the 16-byte vector of the
// narrowest type read) and reads rows i / L, + R, + 2R, ... (R = 256 / L
// rows a step; kBnColumnUnroll steps' loads in flight), so a warp reads
// whole 16-byte pieces of consecutive channels of 32 / L rows. A load is one
// vector when C is a multiple of V and the bases are 16-byte aligned, else V
// bounds-checked scalars: the same values in the same order, so both give
// the same bits. Each thread adds its rows in row order; the R row lanes of
// a channel are then added by a fixed tree in shared memory. With P = 1 the
// block finishes its channels, else it writes its two sums to ws (P, 2, C)
// and batch_norm_*_column_finish_kernel adds the P parts (a fixed order: 32
// lanes of parts p = lane mod 32 each in part order, then a fixed tree).
// kern::batchNormColumnParts (dialects/kern/NormWorkspace.h) chooses P for
// this tile width.
constexpr int kBnColumnChannels = 64;
constexpr int kBnColumnUnroll = 4;

// V values of one row from p, the (left > 0) channels left in the row from
// p bounding the scalar form.
template <int V, bool Vector, class T, class A>
__device__ __forceinline__ void bn_column_load(const T *__restrict__ p, int64_t left,
                                               A (&v)[V]) {
  if constexpr (Vector) {
    norm_load<V, T>(p, v);
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k)
      v[k] = k < left ? static_cast<A>(Elem<T>::load(p[k])) : A(0);
  }
}

// The 256 threads' sums (V channels each, R row lanes) of the block's 64
// channels added over the row lanes by a fixed tree; on return red[0][k *
// R * L + lane] and red[1][...] hold channel lane * V + k's two sums (read
// them after the trailing __syncthreads). red: 2 * 256 * V values.
template <int V, class A>
__device__ __forceinline__ void bn_column_tree(A *red, const A (&s1)[V], const A (&s2)[V]) {
  constexpr int L = kBnColumnChannels / V, R = kBatchNormThreads / L, kSlice = R * L * V;
  const int lane = threadIdx.x % L, row = threadIdx.x / L;
#pragma unroll
  for (int k = 0; k < V; ++k) {
    red[(k * R + row) * L + lane] = s1[k];
    red[kSlice + (k * R + row) * L + lane] = s2[k];
  }
#pragma unroll
  for (int step = R / 2; step > 0; step /= 2) {
    __syncthreads();
    if (row < step) {
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const int at = (k * R + row) * L + lane, from = at + step * L;
        red[at] += red[from];
        red[kSlice + at] += red[kSlice + from];
      }
    }
  }
  __syncthreads();
}

// Channel j (< 64) of the block's tile: its two sums after bn_column_tree.
template <int V, class A>
__device__ __forceinline__ void bn_column_sums(const A *red, int j, A &s1, A &s2) {
  constexpr int L = kBnColumnChannels / V, R = kBatchNormThreads / L, kSlice = R * L * V;
  const int at = (j % V) * R * L + j / V;
  s1 = red[at];
  s2 = red[kSlice + at];
}

template <int V, bool Vector, class T, class A>
__global__ void __launch_bounds__(kBatchNormThreads)
    batch_norm_stats_column_kernel(const T *__restrict__ x, A *__restrict__ mean,
                                   A *__restrict__ var, A *__restrict__ ws, int64_t n,
                                   int64_t c, int64_t chunk) {
  constexpr int L = kBnColumnChannels / V, R = kBatchNormThreads / L, U = kBnColumnUnroll;
  __shared__ A red[2 * kBatchNormThreads * V];
  const int lane = threadIdx.x % L, row = threadIdx.x / L;
  const int64_t tile = static_cast<int64_t>(blockIdx.x) * kBnColumnChannels;
  const int64_t ch = tile + lane * V, part = blockIdx.y, parts = gridDim.y;
  const int64_t begin = part * chunk, end = begin + chunk < n ? begin + chunk : n;
  A shift[V], s1[V], s2[V];
#pragma unroll
  for (int k = 0; k < V; ++k)
    shift[k] = s1[k] = s2[k] = A(0);
  if (ch < c) {
    const int64_t left = c - ch;
    bn_column_load<V, Vector, T>(x + ch, left, shift); // K = x[0, ch]
    const T *p = x + (begin + row) * c + ch;
    const int64_t step = R * c;
    int64_t r = begin + row;
    for (; r + (U - 1) * R < end; r += U * R, p += U * step) {
      A v[U][V];
#pragma unroll
      for (int u = 0; u < U; ++u)
        bn_column_load<V, Vector, T>(p + u * step, left, v[u]);
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const A d = v[u][k] - shift[k];
          s1[k] += d;
          s2[k] += d * d;
        }
    }
    for (; r < end; r += R, p += step) {
      A v[V];
      bn_column_load<V, Vector, T>(p, left, v);
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const A d = v[k] - shift[k];
        s1[k] += d;
        s2[k] += d * d;
      }
    }
  }
  bn_column_tree<V>(red, s1, s2);
  const int j = threadIdx.x;
  if (j >= kBnColumnChannels || tile + j >= c)
    return;
  A t1, t2;
  bn_column_sums<V>(red, j, t1, t2);
  if (parts == 1) {
    bn_finish_stats(static_cast<A>(Elem<T>::load(x[tile + j])), t1, t2, n, mean + tile + j,
                    var + tile + j);
  } else {
    bn_store_part(ws, part, c, tile + j, t1, t2);
  }
}

template <int V, bool Vector, class G, class T, class A>
__global__ void __launch_bounds__(kBatchNormThreads)
    batch_norm_grad_sums_column_kernel(const G *__restrict__ g, const T *__restrict__ x,
                                       const A *__restrict__ mean, const A *__restrict__ rstd,
                                       A *__restrict__ grad_sum, A *__restrict__ grad_xhat_sum,
                                       A *__restrict__ ws, int64_t n, int64_t c,
                                       int64_t chunk) {
  constexpr int L = kBnColumnChannels / V, R = kBatchNormThreads / L, U = kBnColumnUnroll;
  __shared__ A red[2 * kBatchNormThreads * V];
  const int lane = threadIdx.x % L, row = threadIdx.x / L;
  const int64_t tile = static_cast<int64_t>(blockIdx.x) * kBnColumnChannels;
  const int64_t ch = tile + lane * V, part = blockIdx.y, parts = gridDim.y;
  const int64_t begin = part * chunk, end = begin + chunk < n ? begin + chunk : n;
  A m[V], s1[V], s2[V];
#pragma unroll
  for (int k = 0; k < V; ++k) {
    m[k] = ch + k < c ? mean[ch + k] : A(0);
    s1[k] = s2[k] = A(0);
  }
  if (ch < c) {
    const int64_t left = c - ch, first = (begin + row) * c + ch, step = R * c;
    const G *pg = g + first;
    const T *px = x + first;
    int64_t r = begin + row;
    for (; r + (U - 1) * R < end; r += U * R, pg += U * step, px += U * step) {
      A gv[U][V], xv[U][V];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        bn_column_load<V, Vector, G>(pg + u * step, left, gv[u]);
        bn_column_load<V, Vector, T>(px + u * step, left, xv[u]);
      }
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int k = 0; k < V; ++k) {
          s1[k] += gv[u][k];
          s2[k] += gv[u][k] * (xv[u][k] - m[k]);
        }
    }
    for (; r < end; r += R, pg += step, px += step) {
      A gv[V], xv[V];
      bn_column_load<V, Vector, G>(pg, left, gv);
      bn_column_load<V, Vector, T>(px, left, xv);
#pragma unroll
      for (int k = 0; k < V; ++k) {
        s1[k] += gv[k];
        s2[k] += gv[k] * (xv[k] - m[k]);
      }
    }
  }
  bn_column_tree<V>(red, s1, s2);
  const int j = threadIdx.x;
  if (j >= kBnColumnChannels || tile + j >= c)
    return;
  A t1, t2;
  bn_column_sums<V>(red, j, t1, t2);
  if (parts == 1) {
    grad_sum[tile + j] = t1;
    grad_xhat_sum[tile + j] = t2 * rstd[tile + j];
  } else {
    bn_store_part(ws, part, c, tile + j, t1, t2);
  }
}

// The P parts of ws (P, 2, C) added per channel: blocks of 32 channels x 32
// part lanes; lane y adds parts y, y + 32, ... in order, then the 32 lanes
// are added by a fixed tree. f(ch, s1, s2) finishes channel ch. Grid-stride
// over groups of 32 channels (the whole block loops together).
constexpr int kBnColumnFinishLanes = 32;

template <class A, class F>
__device__ __forceinline__ void bn_column_add_parts(const A *__restrict__ ws, int64_t c,
                                                    int parts, F &&f) {
  constexpr int W = kBnColumnFinishLanes;
  __shared__ A red[2][W][W];
  const int tx = threadIdx.x, ty = threadIdx.y;
  for (int64_t group = blockIdx.x; group * W < c; group += gridDim.x) {
    const int64_t ch = group * W + tx;
    A s1 = A(0), s2 = A(0);
    if (ch < c) {
#pragma unroll 4
      for (int p = ty; p < parts; p += W) {
        s1 += ws[(static_cast<int64_t>(p) * 2) * c + ch];
        s2 += ws[(static_cast<int64_t>(p) * 2 + 1) * c + ch];
      }
    }
    red[0][ty][tx] = s1;
    red[1][ty][tx] = s2;
#pragma unroll
    for (int step = W / 2; step > 0; step /= 2) {
      __syncthreads();
      if (ty < step) {
        red[0][ty][tx] += red[0][ty + step][tx];
        red[1][ty][tx] += red[1][ty + step][tx];
      }
    }
    __syncthreads();
    if (ty == 0 && ch < c)
      f(ch, red[0][0][tx], red[1][0][tx]);
    __syncthreads(); // red is written again by the next group
  }
}

template <class T, class A>
__global__ void __launch_bounds__(kBnColumnFinishLanes * kBnColumnFinishLanes)
    batch_norm_stats_column_finish_kernel(const T *__restrict__ x, const A *__restrict__ ws,
                                          A *__restrict__ mean, A *__restrict__ var, int64_t n,
                                          int64_t c, int parts) {
  bn_column_add_parts(ws, c, parts, [&](int64_t ch, A s1, A s2) {
    bn_finish_stats(static_cast<A>(Elem<T>::load(x[ch])), s1, s2, n, mean + ch, var + ch);
  });
}

template <class A>
__global__ void __launch_bounds__(kBnColumnFinishLanes * kBnColumnFinishLanes)
    batch_norm_grad_sums_column_finish_kernel(const A *__restrict__ ws,
                                              const A *__restrict__ rstd,
                                              A *__restrict__ grad_sum,
                                              A *__restrict__ grad_xhat_sum, int64_t c,
                                              int parts) {
  bn_column_add_parts(ws, c, parts, [&](int64_t ch, A s1, A s2) {
    grad_sum[ch] = s1;
    grad_xhat_sum[ch] = s2 * rstd[ch];
  });
}
