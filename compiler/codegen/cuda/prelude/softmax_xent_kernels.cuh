//===--------------------------------------------------------------------===//
// Softmax cross-entropy
//===--------------------------------------------------------------------===//

// Online logsumexp state: m = running max, s = sum of e^(x - m). A NaN
// element makes s NaN (as the CPU's sum of exps); -inf elements are exact
// (e^-inf = 0) even while m is still -inf, where (x == m) counts 1 instead
// of e^(-inf - -inf) = NaN. A +inf or all -inf row is NaN at the end
// (finish_lse), as on the CPU, whose e^(x - max) is NaN there.
template <class T> __device__ __forceinline__ void lse_add(T &m, T &s, T x) {
  if (x > m) {
    s = s * tcc_cuda::exp(m - x) + T(1);
    m = x;
  } else {
    s += x == m ? T(1) : tcc_cuda::exp(x - m);
  }
}
template <class T>
__device__ __forceinline__ void lse_combine(T &m, T &s, T m2, T s2) {
  if (m2 > m) {
    s = s * tcc_cuda::exp(m - m2) + s2;
    m = m2;
  } else if (m2 == m) {
    s += s2;
  } else {
    s += s2 * tcc_cuda::exp(m2 - m);
  }
}
template <class T> __device__ __forceinline__ T finish_lse_sum(T m, T s) {
  return is_inf(m) ? quiet_nan<T>() : s;
}

// This thread's share of row[0..classes), threads striding; Vec: 16-byte
// loads (one max update per vector, then one exp per element).
template <class T, bool Vec>
__device__ __forceinline__ void lse_row_partial(const T *__restrict__ row,
                                                int64_t classes, T &m, T &s) {
  m = -infinity<T>();
  s = T(0);
  if (Vec) {
    using V = Vec16<T>;
    const typename V::type *vrow =
        reinterpret_cast<const typename V::type *>(row);
    const int64_t nv = classes / V::n;
#pragma unroll 2
    for (int64_t c = threadIdx.x; c < nv; c += blockDim.x) {
      typename V::type v = vrow[c];
      const T *e = reinterpret_cast<const T *>(&v);
      T vm = -infinity<T>();
#pragma unroll
      for (int k = 0; k < V::n; ++k)
        vm = e[k] > vm ? e[k] : vm;
      if (vm > m) {
        s = s * tcc_cuda::exp(m - vm);
        m = vm;
      }
#pragma unroll
      for (int k = 0; k < V::n; ++k)
        s += e[k] == m ? T(1) : tcc_cuda::exp(e[k] - m);
    }
  } else {
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
      lse_add(m, s, row[c]);
  }
}

// Block-wide (m, s); every thread gets the result. Block size a multiple
// of 32.
template <class T>
__device__ __forceinline__ void lse_block_reduce(T &m, T &s, T *sm, T *ss) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps = blockDim.x >> 5;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    T m2 = __shfl_down_sync(0xffffffffu, m, offset);
    T s2 = __shfl_down_sync(0xffffffffu, s, offset);
    lse_combine(m, s, m2, s2);
  }
  __syncthreads(); // sm / ss reused across rows
  if (lane == 0) {
    sm[warp] = m;
    ss[warp] = s;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < warps; ++w)
      lse_combine(m, s, sm[w], ss[w]);
    sm[0] = m;
    ss[0] = s;
  }
  __syncthreads();
  m = sm[0];
  s = ss[0];
}

template <class I>
__device__ __forceinline__ bool label_ok(I label, int64_t limit) {
  return label >= 0 && static_cast<int64_t>(label) < limit;
}

// Block per row: loss[n] = log(s) + m - logits[n, label].
template <class T, class I, bool Vec>
__global__ void __launch_bounds__(256)
    softmax_xent_forward_kernel(const T *__restrict__ logits,
                                const I *__restrict__ labels,
                                T *__restrict__ loss, int64_t rows,
                                int64_t classes, int32_t *status,
                                int32_t code) {
  __shared__ T sm[32], ss[32];
  for (int64_t n = blockIdx.x; n < rows; n += gridDim.x) {
    const I label = labels[n]; // block-uniform branch below
    if (!label_ok(label, classes)) {
      if (threadIdx.x == 0) {
        loss[n] = quiet_nan<T>();
        fail(status, code);
      }
      continue;
    }
    const T *row = logits + n * classes;
    T m, s;
    lse_row_partial<T, Vec>(row, classes, m, s);
    lse_block_reduce(m, s, sm, ss);
    if (threadIdx.x == 0)
      loss[n] = tcc_cuda::log(finish_lse_sum(m, s)) + m -
                row[static_cast<int64_t>(label)];
  }
}

// Block per row: pass 1 the online (m, s), pass 2 writes
// out = e^(x - m) * (grad / s), minus grad at the label (the CPU's order of
// operations). Reads the row twice (the second read mostly hits L2).
template <class T, class I, bool Vec>
__global__ void __launch_bounds__(256)
    softmax_xent_backward_kernel(const T *__restrict__ logits,
                                 const I *__restrict__ labels,
                                 const T *__restrict__ grad,
                                 T *__restrict__ out, int64_t rows,
                                 int64_t classes, int32_t *status,
                                 int32_t code) {
  __shared__ T sm[32], ss[32];
  for (int64_t n = blockIdx.x; n < rows; n += gridDim.x) {
    T *orow = out + n * classes;
    const I label = labels[n]; // block-uniform branch below
    if (!label_ok(label, classes)) {
      for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
        orow[c] = quiet_nan<T>();
      if (threadIdx.x == 0)
        fail(status, code);
      continue;
    }
    const T *row = logits + n * classes;
    T m, s;
    lse_row_partial<T, Vec>(row, classes, m, s);
    lse_block_reduce(m, s, sm, ss);
    const T g = grad[n];
    const T scale = g / finish_lse_sum(m, s);
    const int64_t lab = static_cast<int64_t>(label);
    if (Vec) {
      using V = Vec16<T>;
      const typename V::type *vrow =
          reinterpret_cast<const typename V::type *>(row);
      typename V::type *vout = reinterpret_cast<typename V::type *>(orow);
      const int64_t nv = classes / V::n;
      for (int64_t c = threadIdx.x; c < nv; c += blockDim.x) {
        typename V::type v = vrow[c];
        T *e = reinterpret_cast<T *>(&v);
#pragma unroll
        for (int k = 0; k < V::n; ++k) {
          T o = tcc_cuda::exp(e[k] - m) * scale;
          e[k] = c * V::n + k == lab ? o - g : o;
        }
        vout[c] = v;
      }
    } else {
      for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) {
        T o = tcc_cuda::exp(row[c] - m) * scale;
        orow[c] = c == lab ? o - g : o;
      }
    }
  }
}
