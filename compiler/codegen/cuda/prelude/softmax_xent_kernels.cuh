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

// The staged kernel (below): a row of up to the device's opt-in shared
// memory, read from global memory once. 512 threads (16 warps) a block, two
// blocks an SM for a 100 KB row (bf16 50304 classes).
constexpr int kXentStagedThreads = 512;

// 16 bytes global -> shared without a register round trip (cp.async, L2
// only: the row is read once). sm_80 and later; older GPUs copy directly.
__device__ __forceinline__ void copy16_async(void *smem, const void *gmem) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s),
               "l"(__cvta_generic_to_global(gmem))
               : "memory");
#else
  *static_cast<uint4 *>(smem) = *static_cast<const uint4 *>(gmem);
#endif
}
// Waits for this thread's copy16_async copies (visible to this thread
// only; other threads need a barrier after it).
__device__ __forceinline__ void copy_async_wait_all() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}

// The staged kernel's e^d (d = x - m <= 0, or NaN): expf / exp for float
// and double; for 16-bit logits exp2f(d * log2 e), fewer instructions than
// expf (no range reduction) and within a few float ulps (|d| 2^-24 more),
// far below the one bf16 / f16 rounding of each output. exp2f keeps
// subnormal results.
template <class T>
__device__ __forceinline__ acc_t<T> softmax_exp(acc_t<T> d) {
  return tcc_cuda::exp(d);
}
template <> __device__ __forceinline__ float softmax_exp<bf16>(float d) {
  return ::exp2f(d * 1.4426950408889634f);
}
template <> __device__ __forceinline__ float softmax_exp<f16>(float d) {
  return ::exp2f(d * 1.4426950408889634f);
}

// e^d for the row's sum of exps (pass 2): softmax_exp, but for 16-bit
// logits a result below 2^-126 may be flushed to 0 (ex2.approx.ftz: no
// scaling around it for the subnormal range). Flushing moves the sum (at least 1, the max's term) by less than
// classes * 2^-126, far below its rounding; out keeps subnormal results.
template <class T>
__device__ __forceinline__ acc_t<T> softmax_exp_for_sum(acc_t<T> d) {
  return softmax_exp<T>(d);
}
__device__ __forceinline__ float exp_ftz_16bit(float d) {
#if defined(__CUDA_ARCH__)
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(r) : "f"(d * 1.4426950408889634f));
  return r;
#else
  return ::exp2f(d * 1.4426950408889634f);
#endif
}
template <>
__device__ __forceinline__ float softmax_exp_for_sum<bf16>(float d) {
  return exp_ftz_16bit(d);
}
template <>
__device__ __forceinline__ float softmax_exp_for_sum<f16>(float d) {
  return exp_ftz_16bit(d);
}

// max that skips a NaN operand (one instruction); the row max ignores NaN
// elements, whose e^(x - m) makes the sum NaN afterwards.
__device__ __forceinline__ float max_skip_nan(float a, float b) {
  return ::fmaxf(a, b);
}
__device__ __forceinline__ double max_skip_nan(double a, double b) {
  return ::fmax(a, b);
}

// This thread's max of its vectors of the staged row (c = tid, tid +
// step, ...), skipping NaNs. bf16: packed max.bf16x2 on the raw vectors
// (sm_80+; 4 instructions for 8 elements; a max returns one of its
// operands, so the result is exact, and it also skips NaN).
template <class T>
__device__ __forceinline__ acc_t<T>
staged_thread_max(const typename Vec16<T>::type *stage, int nv, int tid,
                  int step) {
  acc_t<T> m = -infinity<acc_t<T>>();
  for (int c = tid; c < nv; c += step) {
    const typename Vec16<T>::type v = stage[c];
    const T *e = reinterpret_cast<const T *>(&v);
#pragma unroll
    for (int k = 0; k < Vec16<T>::n; ++k)
      m = max_skip_nan(m, Elem<T>::load(e[k]));
  }
  return m;
}
__device__ __forceinline__ uint32_t max_bf16x2(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  uint32_t d;
  asm("max.bf16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(b));
  return d;
#else
  const float lo = max_skip_nan(bf16_to_float(static_cast<uint16_t>(a)),
                                bf16_to_float(static_cast<uint16_t>(b)));
  const float hi = max_skip_nan(bf16_to_float(static_cast<uint16_t>(a >> 16)),
                                bf16_to_float(static_cast<uint16_t>(b >> 16)));
  return (bit_cast<uint32_t>(lo) >> 16) | (bit_cast<uint32_t>(hi) & 0xffff0000u);
#endif
}
template <>
__device__ __forceinline__ float
staged_thread_max<bf16>(const uint4 *stage, int nv, int tid, int step) {
  uint32_t m01 = 0xff80ff80u, m23 = 0xff80ff80u; // -inf, -inf
  for (int c = tid; c < nv; c += step) {
    const uint4 v = stage[c];
    m01 = max_bf16x2(m01, max_bf16x2(v.x, v.y));
    m23 = max_bf16x2(m23, max_bf16x2(v.z, v.w));
  }
  const uint32_t m = max_bf16x2(m01, m23);
  return max_skip_nan(bf16_to_float(static_cast<uint16_t>(m)),
                      bf16_to_float(static_cast<uint16_t>(m >> 16)));
}

// Two floats -> two bf16 (lo in the low half), nearest even: one cvt on
// sm_80+, the same bits as float_to_bf16 for every float (a NaN becomes
// 0x7fff in both; kernel_families_test checks them).
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  uint32_t d;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
#else
  return static_cast<uint32_t>(float_to_bf16(lo)) |
         (static_cast<uint32_t>(float_to_bf16(hi)) << 16);
#endif
}

// A 16-byte vector of T from its n values in acc_t<T>, each rounded once.
template <class T>
__device__ __forceinline__ typename Vec16<T>::type
store_vec16(const acc_t<T> (&o)[Vec16<T>::n]) {
  typename Vec16<T>::type v;
  T *e = reinterpret_cast<T *>(&v);
#pragma unroll
  for (int k = 0; k < Vec16<T>::n; ++k)
    e[k] = Elem<T>::store(o[k]);
  return v;
}
template <>
__device__ __forceinline__ uint4 store_vec16<bf16>(const float (&o)[8]) {
  return make_uint4(pack_bf16x2(o[0], o[1]), pack_bf16x2(o[2], o[3]),
                    pack_bf16x2(o[4], o[5]), pack_bf16x2(o[6], o[7]));
}

// Block-wide max (Max) or sum of v, the same value on every thread: warp
// xor-shuffle tree, then every thread combines the warps' values in warp
// order (a fixed order: deterministic). scratch holds 32 values; one
// barrier, so two calls in a row need two scratch arrays (a thread may
// write the second while another still reads the first), and a row loop
// may reuse them because the other array's barrier lies in between.
template <bool Max, class A>
__device__ __forceinline__ A block_all_reduce(A v, A *scratch) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const A o = __shfl_xor_sync(0xffffffffu, v, offset);
    v = Max ? max_skip_nan(v, o) : v + o;
  }
  if ((threadIdx.x & 31) == 0)
    scratch[threadIdx.x >> 5] = v;
  __syncthreads();
  v = scratch[0];
  for (int w = 1; w < static_cast<int>(blockDim.x >> 5); ++w)
    v = Max ? max_skip_nan(v, scratch[w]) : v + scratch[w];
  return v;
}

// softmax_xent_backward_kernel (same outputs, loss optional, out may be
// logits) for rows that fit in shared memory, 16-byte aligned, classes a
// multiple of the vector width: each thread copies its vectors (c = tid,
// tid + blockDim, ...) of the row into dynamic shared memory (classes * sizeof(T)
// bytes) with cp.async, then from there: pass 1 the row max, pass 2 the sum
// of e^(x - m), pass 3 writes out = e^(x - m) * (g / s), minus g at the
// label. Global memory is read once and written once (the old kernel's
// second read and online rescaling cost 2x the instructions, which bound
// it below the memory's speed). A thread only ever touches its own
// vectors in shared memory, so while it writes row n it already copies its
// vectors of its next row (n + gridDim) into the same slots, each right
// after its last read of the slot. The loss comes from the thread that owns the label's vector, from
// the staged copy of the row (in place, the label logit in global memory
// may already be overwritten). All loads of a row finish before the
// row's first barrier, so no write of the row precedes a read of it.
template <class T, class I, class G, class L>
__global__ void __launch_bounds__(kXentStagedThreads, 2)
    softmax_xent_staged_kernel(const T *logits, const I *__restrict__ labels,
                               const G *__restrict__ grad, T *out,
                               L *__restrict__ loss, int64_t rows,
                               int64_t classes, int32_t *status,
                               int32_t code) {
  using A = acc_t<T>;
  using V = Vec16<T>;
  using VT = typename V::type;
  extern __shared__ __align__(16) unsigned char staged_row_bytes[];
  VT *stage = reinterpret_cast<VT *>(staged_row_bytes);
  __shared__ A max_scratch[32], sum_scratch[32];
  const int nv = static_cast<int>(classes / V::n); // fits: shared memory
  const int tid = threadIdx.x, step = blockDim.x;
  auto copy_row = [&](int64_t n) {
    const VT *src = reinterpret_cast<const VT *>(logits + n * classes);
    for (int c = tid; c < nv; c += step)
      copy16_async(stage + c, src + c);
  };
  if (static_cast<int64_t>(blockIdx.x) < rows)
    copy_row(blockIdx.x);
  for (int64_t n = blockIdx.x; n < rows; n += gridDim.x) {
    T *orow = out + n * classes;
    VT *vout = reinterpret_cast<VT *>(orow);
    const int64_t next = n + gridDim.x;
    copy_async_wait_all(); // row n staged (and nothing left in flight)
    const I label = labels[n]; // block-uniform branch below
    if (!label_ok(label, classes)) {
      VT nanv; // Elem<T>::store's NaN, as the other kernels write
#pragma unroll
      for (int k = 0; k < V::n; ++k)
        reinterpret_cast<T *>(&nanv)[k] = Elem<T>::store(quiet_nan<A>());
      for (int c = tid; c < nv; c += step)
        vout[c] = nanv;
      if (tid == 0) {
        if (loss)
          loss[n] = Elem<L>::store(quiet_nan<acc_t<L>>());
        fail(status, code);
      }
      if (next < rows)
        copy_row(next);
      continue;
    }
    A m = staged_thread_max<T>(stage, nv, tid, step);
    m = block_all_reduce<true>(m, max_scratch);
    A s = A(0);
    for (int c = tid; c < nv; c += step) {
      const VT v = stage[c];
      const T *e = reinterpret_cast<const T *>(&v);
#pragma unroll
      for (int k = 0; k < V::n; ++k)
        s += softmax_exp_for_sum<T>(Elem<T>::load(e[k]) - m);
    }
    s = block_all_reduce<false>(s, sum_scratch);
    const A g = static_cast<A>(Elem<G>::load(grad[n]));
    const A sum = finish_lse_sum(m, s); // NaN for a +inf / all -inf row
    const A scale = g / sum;
    const int lab = static_cast<int>(label);
    const int lab_vec = lab / V::n, lab_k = lab % V::n;
    const VT *next_src =
        next < rows ? reinterpret_cast<const VT *>(logits + next * classes)
                    : nullptr;
    for (int c = tid; c < nv; c += step) {
      const VT v = stage[c];
      const T *e = reinterpret_cast<const T *>(&v);
      A o[V::n];
#pragma unroll
      for (int k = 0; k < V::n; ++k)
        o[k] = softmax_exp<T>(Elem<T>::load(e[k]) - m) * scale;
      if (c == lab_vec) { // once a row: the label element, and the loss
#pragma unroll
        for (int k = 0; k < V::n; ++k)
          if (k == lab_k) {
            o[k] -= g;
            if (loss)
              loss[n] = Elem<L>::store(static_cast<acc_t<L>>(
                  tcc_cuda::log(sum) + m - Elem<T>::load(e[k])));
          }
      }
      vout[c] = store_vec16<T>(o);
      if (next_src) // slot c is read (its value stored): the next row's
        copy16_async(stage + c, next_src + c);
    }
  }
}
