//===--------------------------------------------------------------------===//
// 2-D convolution (kern.conv2d), NCHW or NHWC
//===--------------------------------------------------------------------===//

// Direct kernels with the CPU's rules (cpu/cpu_conv.h): x (N, C, H, W), w
// (O, C / groups, KH, KW), y (N, O, HO, WO) (pooling: pool_kernels.cuh).
// Every output element is computed by one thread (weight gradient: one
// block) from a fixed order of terms, accumulated in acc_t<T> (float for
// the 16-bit types) and rounded once: the gradients are written in gather
// form, so no atomics, and the results are the same bits on every run.
// I is the index type: int32_t when every buffer has fewer than 2^31
// elements (the launchers choose), else int64_t.
// Channels-last (NHWC, the fallback where cuDNN does not run an NHWC
// site): the same kernels on other strides, the flat index decomposed
// with the channel fastest (consecutive threads, consecutive channels);
// each element is the same terms in the same order as for the NCHW
// problem, so the results are the NCHW results' bits, transposed.

struct Conv2dShape {
  int64_t n, c, h, w; // x
  int64_t o, kh, kw;  // weight (O, C / groups, KH, KW)
  int64_t ho, wo;     // y
  int64_t sh, sw, ph, pw, dh, dw, groups;
  // x (N, H, W, C), w (O, KH, KW, C / groups), y (N, HO, WO, O); the
  // fields above keep their meaning.
  bool nhwc = false;
};

namespace detail {

// The shape in the index type, with the per-group channel counts.
template <class I> struct ConvDims {
  I n, c, h, w, o, kh, kw, ho, wo, sh, sw, ph, pw, dh, dw, cg, og;
  explicit ConvDims(const Conv2dShape &s)
      : n(I(s.n)), c(I(s.c)), h(I(s.h)), w(I(s.w)), o(I(s.o)), kh(I(s.kh)), kw(I(s.kw)),
        ho(I(s.ho)), wo(I(s.wo)), sh(I(s.sh)), sw(I(s.sw)), ph(I(s.ph)), pw(I(s.pw)),
        dh(I(s.dh)), dw(I(s.dw)), cg(I(s.c / s.groups)), og(I(s.o / s.groups)) {}
};

// Element strides of an activation (N, C, H, W) held NCHW or NHWC: batch,
// channel, row, column (the layout a compile-time constant, so NCHW's
// column stride folds to 1).
template <bool NHWC, class I> struct ActStrides {
  I n, c, y, x;
  __device__ ActStrides(I C, I H, I W)
      : n(C * H * W), c(NHWC ? I(1) : H * W), y(NHWC ? W * C : W), x(NHWC ? C : I(1)) {}
};

// Element strides of the weight, (O, C / groups, KH, KW) or NHWC's
// (O, KH, KW, C / groups): out channel, in channel, tap row, tap column.
template <bool NHWC, class I> struct WeightStrides {
  I o, ci, ky, kx;
  __device__ explicit WeightStrides(const ConvDims<I> &s)
      : o(s.cg * s.kh * s.kw), ci(NHWC ? I(1) : s.kh * s.kw), ky(NHWC ? s.kw * s.cg : s.kw),
        kx(NHWC ? s.cg : I(1)) {}
};

// A flat index into a (B, C, H, W) tensor as (b, c, y, x): NCHW with x
// fastest, NHWC with c fastest (coalesced over channels).
template <bool NHWC, class I> struct Pos4 {
  I b, c, y, x;
  __device__ Pos4(I idx, I C, I H, I W) {
    if constexpr (NHWC) {
      c = idx % C;
      idx /= C;
      x = idx % W;
      idx /= W;
      y = idx % H;
      b = idx / H;
    } else {
      x = idx % W;
      idx /= W;
      y = idx % H;
      idx /= H;
      c = idx % C;
      b = idx / C;
    }
  }
};

// y[b, oc, oy, ox] = sum over (ci, ky, kx) of x * w, one thread an output.
template <bool NHWC, class T, class I>
__global__ void __launch_bounds__(256)
    conv2d_forward_kernel(ConvDims<I> s, const T *__restrict__ x, const T *__restrict__ w,
                          T *__restrict__ y) {
  using A = acc_t<T>;
  const ActStrides<NHWC, I> xs(s.c, s.h, s.w);
  const WeightStrides<NHWC, I> ws(s);
  const I total = s.n * s.o * s.ho * s.wo;
  for (I idx = blockIdx.x * I(blockDim.x) + threadIdx.x; idx < total;
       idx += I(gridDim.x) * blockDim.x) {
    const Pos4<NHWC, I> q(idx, s.o, s.ho, s.wo); // (b, oc, oy, ox)
    const I ic0 = (q.c / s.og) * s.cg;
    A sum = 0;
    for (I ci = 0; ci < s.cg; ++ci) {
      const T *xp = x + q.b * xs.n + (ic0 + ci) * xs.c;
      const T *wp = w + q.c * ws.o + ci * ws.ci;
      for (I ky = 0; ky < s.kh; ++ky) {
        const I iy = q.y * s.sh - s.ph + ky * s.dh;
        if (iy < 0 || iy >= s.h)
          continue;
        for (I kx = 0; kx < s.kw; ++kx) {
          const I ix = q.x * s.sw - s.pw + kx * s.dw;
          if (ix >= 0 && ix < s.w)
            sum += static_cast<A>(Elem<T>::load(xp[iy * xs.y + ix * xs.x])) *
                   static_cast<A>(Elem<T>::load(wp[ky * ws.ky + kx * ws.kx]));
        }
      }
    }
    y[idx] = Elem<T>::store(sum);
  }
}

// dx[b, ic, iy, ix] gathers the (output position, tap) pairs that read it:
// oy * sh = iy + ph - ky * dh (a transposed convolution).
template <bool NHWC, class T, class I>
__global__ void __launch_bounds__(256)
    conv2d_input_grad_kernel(ConvDims<I> s, const T *__restrict__ dy, const T *__restrict__ w,
                             T *__restrict__ dx) {
  using A = acc_t<T>;
  const ActStrides<NHWC, I> ys(s.o, s.ho, s.wo);
  const WeightStrides<NHWC, I> ws(s);
  const I total = s.n * s.c * s.h * s.w;
  for (I idx = blockIdx.x * I(blockDim.x) + threadIdx.x; idx < total;
       idx += I(gridDim.x) * blockDim.x) {
    const Pos4<NHWC, I> q(idx, s.c, s.h, s.w); // (b, ic, iy, ix)
    const I group = q.c / s.cg, ci = q.c % s.cg;
    A sum = 0;
    for (I oc = group * s.og; oc < (group + 1) * s.og; ++oc) {
      const T *dyp = dy + q.b * ys.n + oc * ys.c;
      const T *wp = w + oc * ws.o + ci * ws.ci;
      for (I ky = 0; ky < s.kh; ++ky) {
        const I ty = q.y + s.ph - ky * s.dh;
        if (ty < 0 || ty % s.sh != 0 || ty / s.sh >= s.ho)
          continue;
        const I oy = ty / s.sh;
        for (I kx = 0; kx < s.kw; ++kx) {
          const I tx = q.x + s.pw - kx * s.dw;
          if (tx < 0 || tx % s.sw != 0 || tx / s.sw >= s.wo)
            continue;
          sum += static_cast<A>(Elem<T>::load(dyp[oy * ys.y + (tx / s.sw) * ys.x])) *
                 static_cast<A>(Elem<T>::load(wp[ky * ws.ky + kx * ws.kx]));
        }
      }
    }
    dx[idx] = Elem<T>::store(sum);
  }
}

// dw[oc, ci, ky, kx] = sum over (b, oy, ox) of dy * the x element the tap
// read: one block per weight element (grid-stride over them, in the
// weight's layout: NHWC's neighbouring blocks take neighbouring channels
// of the same pixels), each thread a fixed strided subset of the
// N * HO * WO terms, then a fixed tree over the block's threads.
constexpr int kConvWeightGradThreads = 256;
template <bool NHWC, class T, class I>
__global__ void __launch_bounds__(kConvWeightGradThreads)
    conv2d_weight_grad_kernel(ConvDims<I> s, const T *__restrict__ dy,
                              const T *__restrict__ x, T *__restrict__ dw) {
  using A = acc_t<T>;
  __shared__ A part[kConvWeightGradThreads];
  const ActStrides<NHWC, I> xs(s.c, s.h, s.w), ys(s.o, s.ho, s.wo);
  const I total = s.o * s.cg * s.kh * s.kw;
  const I terms = s.n * s.ho * s.wo;
  for (I e = blockIdx.x; e < total; e += gridDim.x) {
    const Pos4<NHWC, I> q(e, s.cg, s.kh, s.kw); // (oc, ci, ky, kx)
    const I oc = q.b, ky = q.y, kx = q.x;
    const I ic = (oc / s.og) * s.cg + q.c;
    const T *dyp = dy + oc * ys.c, *xp = x + ic * xs.c;
    A sum = 0;
    for (I j = threadIdx.x; j < terms; j += kConvWeightGradThreads) {
      I u = j;
      const I ox = u % s.wo;
      u /= s.wo;
      const I oy = u % s.ho, b = u / s.ho;
      const I iy = oy * s.sh - s.ph + ky * s.dh, ix = ox * s.sw - s.pw + kx * s.dw;
      if (iy >= 0 && iy < s.h && ix >= 0 && ix < s.w)
        sum += static_cast<A>(Elem<T>::load(dyp[b * ys.n + oy * ys.y + ox * ys.x])) *
               static_cast<A>(Elem<T>::load(xp[b * xs.n + iy * xs.y + ix * xs.x]));
    }
    part[threadIdx.x] = sum;
    __syncthreads();
    for (int half = kConvWeightGradThreads / 2; half > 0; half /= 2) {
      if (threadIdx.x < half)
        part[threadIdx.x] += part[threadIdx.x + half];
      __syncthreads();
    }
    if (threadIdx.x == 0)
      dw[e] = Elem<T>::store(part[0]);
    __syncthreads(); // part is rewritten by the next element
  }
}

// int32_t indexing when every count fits (pool_kernels.cuh's too).
inline bool conv_fits_int32(int64_t a, int64_t b, int64_t c) {
  const int64_t limit = int64_t(1) << 31;
  return a < limit && b < limit && c < limit;
}

} // namespace detail

// The launcher of kern.conv2d's three products. A launch error (an
// invalid configuration) is returned to the caller.
template <class T>
inline cudaError_t launch_conv2d(int product, const Conv2dShape &s, const T *a, const T *b,
                                 T *out, cudaStream_t stream) {
  static_assert(detail::IsFloating<T>::value, "conv2d: float, double, bf16 or f16");
  const int64_t xs = s.n * s.c * s.h * s.w, ws = s.o * (s.c / s.groups) * s.kh * s.kw,
                ys = s.n * s.o * s.ho * s.wo;
  const int threads = 256;
  const int64_t items = product == 0 ? ys : product == 1 ? xs : ws;
  if (items <= 0)
    return cudaSuccess;
  const unsigned blocks =
      product == 2 ? static_cast<unsigned>(items < kMaxGridBlocks ? items : kMaxGridBlocks)
                   : static_cast<unsigned>(grid_for(items, threads));
  auto launch = [&](auto dims, auto nhwc) {
    constexpr bool L = decltype(nhwc)::value;
    if (product == 0)
      detail::conv2d_forward_kernel<L><<<blocks, threads, 0, stream>>>(dims, a, b, out);
    else if (product == 1)
      detail::conv2d_input_grad_kernel<L><<<blocks, threads, 0, stream>>>(dims, a, b, out);
    else
      detail::conv2d_weight_grad_kernel<L>
          <<<blocks, detail::kConvWeightGradThreads, 0, stream>>>(dims, a, b, out);
  };
  auto run = [&](auto dims) {
    if (s.nhwc)
      launch(dims, std::true_type{});
    else
      launch(dims, std::false_type{});
  };
  if (detail::conv_fits_int32(xs, ws, ys))
    run(detail::ConvDims<int32_t>(s));
  else
    run(detail::ConvDims<int64_t>(s));
  return cudaPeekAtLastError();
}
