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

// This thread's share of row[0..classes), threads striding, in the
// accumulator type A = acc_t<T>; Vec: 16-byte loads (one max update per
// vector, then one exp per element).
template <class T, bool Vec, class A = acc_t<T>>
__device__ __forceinline__ void lse_row_partial(const T *__restrict__ row,
                                                int64_t classes, A &m, A &s) {
  m = -infinity<A>();
  s = A(0);
  if (Vec) {
    using V = Vec16<T>;
    const typename V::type *vrow =
        reinterpret_cast<const typename V::type *>(row);
    const int64_t nv = classes / V::n;
#pragma unroll 2
    for (int64_t c = threadIdx.x; c < nv; c += blockDim.x) {
      typename V::type v = vrow[c];
      const T *raw = reinterpret_cast<const T *>(&v);
      A e[V::n];
#pragma unroll
      for (int k = 0; k < V::n; ++k)
        e[k] = Elem<T>::load(raw[k]);
      A vm = -infinity<A>();
#pragma unroll
      for (int k = 0; k < V::n; ++k)
        vm = e[k] > vm ? e[k] : vm;
      if (vm > m) {
        s = s * tcc_cuda::exp(m - vm);
        m = vm;
      }
#pragma unroll
      for (int k = 0; k < V::n; ++k)
        s += e[k] == m ? A(1) : tcc_cuda::exp(e[k] - m);
    }
  } else {
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
      lse_add(m, s, Elem<T>::load(row[c]));
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

// Block per row: loss[n] = log(s) + m - logits[n, label], computed in
// acc_t<T> and rounded once to the loss type L (T, or float for 16-bit
// logits with an f32 loss).
template <class T, class I, class L, bool Vec>
__global__ void __launch_bounds__(256)
    softmax_xent_forward_kernel(const T *__restrict__ logits,
                                const I *__restrict__ labels,
                                L *__restrict__ loss, int64_t rows,
                                int64_t classes, int32_t *status,
                                int32_t code) {
  using A = acc_t<T>;
  __shared__ A sm[32], ss[32];
  for (int64_t n = blockIdx.x; n < rows; n += gridDim.x) {
    const I label = labels[n]; // block-uniform branch below
    if (!label_ok(label, classes)) {
      if (threadIdx.x == 0) {
        loss[n] = Elem<L>::store(quiet_nan<acc_t<L>>());
        fail(status, code);
      }
      continue;
    }
    const T *row = logits + n * classes;
    A m, s;
    lse_row_partial<T, Vec>(row, classes, m, s);
    lse_block_reduce(m, s, sm, ss);
    if (threadIdx.x == 0)
      loss[n] = Elem<L>::store(static_cast<acc_t<L>>(
          tcc_cuda::log(finish_lse_sum(m, s)) + m -
          Elem<T>::load(row[static_cast<int64_t>(label)])));
  }
}

// Block per row: pass 1 the online (m, s), pass 2 writes
// out = e^(x - m) * (grad / s), minus grad at the label (the CPU's order of
// operations), in acc_t<T>, each element rounded once to T. grad is of
// type G (T, or float with 16-bit logits). Reads the row twice (the second
// read mostly hits L2). out may be logits itself (written in place: each
// thread reads an element before it writes it), so neither is __restrict__.
// With a loss buffer (kern.softmax_cross_entropy_with_grad) it also writes
// the forward's loss[n], from the label logit read before the row is
// overwritten; loss is null for the gradient alone.
template <class T, class I, class G, class L, bool Vec>
__global__ void __launch_bounds__(256)
    softmax_xent_backward_kernel(const T *logits,
                                 const I *__restrict__ labels,
                                 const G *__restrict__ grad,
                                 T *out, L *__restrict__ loss, int64_t rows,
                                 int64_t classes, int32_t *status,
                                 int32_t code) {
  using A = acc_t<T>;
  __shared__ A sm[32], ss[32];
  for (int64_t n = blockIdx.x; n < rows; n += gridDim.x) {
    T *orow = out + n * classes;
    const I label = labels[n]; // block-uniform branch below
    if (!label_ok(label, classes)) {
      for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
        orow[c] = Elem<T>::store(quiet_nan<A>());
      if (threadIdx.x == 0) {
        if (loss)
          loss[n] = Elem<L>::store(quiet_nan<acc_t<L>>());
        fail(status, code);
      }
      continue;
    }
    const T *row = logits + n * classes;
    A m, s;
    lse_row_partial<T, Vec>(row, classes, m, s);
    lse_block_reduce(m, s, sm, ss);
    const A g = static_cast<A>(Elem<G>::load(grad[n]));
    const A sum = finish_lse_sum(m, s);
    const A scale = g / sum;
    const int64_t lab = static_cast<int64_t>(label);
    if (loss) { // block-uniform
      if (threadIdx.x == 0)
        loss[n] = Elem<L>::store(static_cast<acc_t<L>>(
            tcc_cuda::log(sum) + m - Elem<T>::load(row[lab])));
      __syncthreads(); // the label logit is read before anyone overwrites it
    }
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
          A o = tcc_cuda::exp(Elem<T>::load(e[k]) - m) * scale;
          e[k] = Elem<T>::store(c * V::n + k == lab ? o - g : o);
        }
        vout[c] = v;
      }
    } else {
      for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) {
        A o = tcc_cuda::exp(Elem<T>::load(row[c]) - m) * scale;
        orow[c] = Elem<T>::store(c == lab ? o - g : o);
      }
    }
  }
}
