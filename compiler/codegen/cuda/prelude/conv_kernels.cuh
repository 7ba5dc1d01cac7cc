//===--------------------------------------------------------------------===//
// 2-D convolution and pooling (kern.conv2d, kern.pool2d), NCHW
//===--------------------------------------------------------------------===//

// Direct kernels with the CPU's rules (cpu/cpu_conv.h): x (N, C, H, W), w
// (O, C / groups, KH, KW), y (N, O, HO, WO); pooling over N * C planes.
// Every output element is computed by one thread (weight gradient: one
// block) from a fixed order of terms, accumulated in acc_t<T> (float for
// the 16-bit types) and rounded once: the gradients are written in gather
// form, so no atomics, and the results are the same bits on every run.
// I is the index type: int32_t when every buffer has fewer than 2^31
// elements (the launchers choose), else int64_t.

struct Conv2dShape {
  int64_t n, c, h, w; // x
  int64_t o, kh, kw;  // weight (O, C / groups, KH, KW)
  int64_t ho, wo;     // y
  int64_t sh, sw, ph, pw, dh, dw, groups;
};

struct Pool2dShape {
  int64_t planes, h, w; // x (N * C planes, H, W)
  int64_t ho, wo;       // y
  int64_t kh, kw, sh, sw, ph, pw;
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

// y[b, oc, oy, ox] = sum over (ci, ky, kx) of x * w, one thread an output.
template <class T, class I>
__global__ void __launch_bounds__(256)
    conv2d_forward_kernel(ConvDims<I> s, const T *__restrict__ x, const T *__restrict__ w,
                          T *__restrict__ y) {
  using A = acc_t<T>;
  const I total = s.n * s.o * s.ho * s.wo;
  for (I idx = blockIdx.x * I(blockDim.x) + threadIdx.x; idx < total;
       idx += I(gridDim.x) * blockDim.x) {
    I t = idx;
    const I ox = t % s.wo;
    t /= s.wo;
    const I oy = t % s.ho;
    t /= s.ho;
    const I oc = t % s.o, b = t / s.o;
    const I ic0 = (oc / s.og) * s.cg;
    A sum = 0;
    for (I ci = 0; ci < s.cg; ++ci) {
      const T *xp = x + (b * s.c + ic0 + ci) * s.h * s.w;
      const T *wp = w + (oc * s.cg + ci) * s.kh * s.kw;
      for (I ky = 0; ky < s.kh; ++ky) {
        const I iy = oy * s.sh - s.ph + ky * s.dh;
        if (iy < 0 || iy >= s.h)
          continue;
        for (I kx = 0; kx < s.kw; ++kx) {
          const I ix = ox * s.sw - s.pw + kx * s.dw;
          if (ix >= 0 && ix < s.w)
            sum += static_cast<A>(Elem<T>::load(xp[iy * s.w + ix])) *
                   static_cast<A>(Elem<T>::load(wp[ky * s.kw + kx]));
        }
      }
    }
    y[idx] = Elem<T>::store(sum);
  }
}

// dx[b, ic, iy, ix] gathers the (output position, tap) pairs that read it:
// oy * sh = iy + ph - ky * dh (a transposed convolution).
template <class T, class I>
__global__ void __launch_bounds__(256)
    conv2d_input_grad_kernel(ConvDims<I> s, const T *__restrict__ dy, const T *__restrict__ w,
                             T *__restrict__ dx) {
  using A = acc_t<T>;
  const I total = s.n * s.c * s.h * s.w;
  for (I idx = blockIdx.x * I(blockDim.x) + threadIdx.x; idx < total;
       idx += I(gridDim.x) * blockDim.x) {
    I t = idx;
    const I ix = t % s.w;
    t /= s.w;
    const I iy = t % s.h;
    t /= s.h;
    const I ic = t % s.c, b = t / s.c;
    const I group = ic / s.cg, ci = ic % s.cg;
    A sum = 0;
    for (I oc = group * s.og; oc < (group + 1) * s.og; ++oc) {
      const T *dyp = dy + (b * s.o + oc) * s.ho * s.wo;
      const T *wp = w + (oc * s.cg + ci) * s.kh * s.kw;
      for (I ky = 0; ky < s.kh; ++ky) {
        const I ty = iy + s.ph - ky * s.dh;
        if (ty < 0 || ty % s.sh != 0 || ty / s.sh >= s.ho)
          continue;
        const I oy = ty / s.sh;
        for (I kx = 0; kx < s.kw; ++kx) {
          const I tx = ix + s.pw - kx * s.dw;
          if (tx < 0 || tx % s.sw != 0 || tx / s.sw >= s.wo)
            continue;
          sum += static_cast<A>(Elem<T>::load(dyp[oy * s.wo + tx / s.sw])) *
                 static_cast<A>(Elem<T>::load(wp[ky * s.kw + kx]));
        }
      }
    }
    dx[idx] = Elem<T>::store(sum);
  }
}

// dw[oc, ci, ky, kx] = sum over (b, oy, ox) of dy * the x element the tap
// read: one block per weight element (grid-stride over them), each thread a
// fixed strided subset of the N * HO * WO terms, then a fixed tree over the
// block's threads.
constexpr int kConvWeightGradThreads = 256;
template <class T, class I>
__global__ void __launch_bounds__(kConvWeightGradThreads)
    conv2d_weight_grad_kernel(ConvDims<I> s, const T *__restrict__ dy,
                              const T *__restrict__ x, T *__restrict__ dw) {
  using A = acc_t<T>;
  __shared__ A part[kConvWeightGradThreads];
  const I total = s.o * s.cg * s.kh * s.kw;
  const I terms = s.n * s.ho * s.wo;
  for (I e = blockIdx.x; e < total; e += gridDim.x) {
    I t = e;
    const I kx = t % s.kw;
    t /= s.kw;
    const I ky = t % s.kh;
    t /= s.kh;
    const I ci = t % s.cg, oc = t / s.cg;
    const I ic = (oc / s.og) * s.cg + ci;
    A sum = 0;
    for (I j = threadIdx.x; j < terms; j += kConvWeightGradThreads) {
      I u = j;
      const I ox = u % s.wo;
      u /= s.wo;
      const I oy = u % s.ho, b = u / s.ho;
      const I iy = oy * s.sh - s.ph + ky * s.dh, ix = ox * s.sw - s.pw + kx * s.dw;
      if (iy >= 0 && iy < s.h && ix >= 0 && ix < s.w)
        sum += static_cast<A>(Elem<T>::load(dy[((b * s.o + oc) * s.ho + oy) * s.wo + ox])) *
               static_cast<A>(Elem<T>::load(x[((b * s.c + ic) * s.h + iy) * s.w + ix]));
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

template <class I> struct PoolDims {
  I planes, h, w, ho, wo, kh, kw, sh, sw, ph, pw;
  explicit PoolDims(const Pool2dShape &s)
      : planes(I(s.planes)), h(I(s.h)), w(I(s.w)), ho(I(s.ho)), wo(I(s.wo)), kh(I(s.kh)),
        kw(I(s.kw)), sh(I(s.sh)), sw(I(s.sw)), ph(I(s.ph)), pw(I(s.pw)) {}
};

// The windows (oy0..oy1, ox0..ox1) that contain input element (iy, ix):
// oy * sh - ph <= iy <= oy * sh - ph + kh - 1, clipped to the output.
template <class I> struct PoolCover {
  I oy0, oy1, ox0, ox1;
  __device__ PoolCover(const PoolDims<I> &s, I iy, I ix) {
    const I ty = iy + s.ph, tx = ix + s.pw;
    oy0 = ty - s.kh + 1 <= 0 ? 0 : (ty - s.kh + 1 + s.sh - 1) / s.sh;
    ox0 = tx - s.kw + 1 <= 0 ? 0 : (tx - s.kw + 1 + s.sw - 1) / s.sw;
    oy1 = ty / s.sh < s.ho - 1 ? ty / s.sh : s.ho - 1;
    ox1 = tx / s.sw < s.wo - 1 ? tx / s.sw : s.wo - 1;
  }
};

// Window (oy, ox)'s first maximum in row-major order, as a flat index into
// the plane xp (PyTorch's rule; padding never a candidate); -1 for a
// window wholly in the padding.
template <class T, class I>
__device__ inline I pool_window_first_max(const PoolDims<I> &s, const T *xp, I oy, I ox) {
  using A = acc_t<T>;
  I best = -1;
  A bestValue = 0;
  for (I ky = 0; ky < s.kh; ++ky) {
    const I y = oy * s.sh - s.ph + ky;
    if (y < 0 || y >= s.h)
      continue;
    for (I kx = 0; kx < s.kw; ++kx) {
      const I xx = ox * s.sw - s.pw + kx;
      if (xx < 0 || xx >= s.w)
        continue;
      const A v = static_cast<A>(Elem<T>::load(xp[y * s.w + xx]));
      if (best < 0 || v > bestValue) {
        best = y * s.w + xx;
        bestValue = v;
      }
    }
  }
  return best;
}

// Max: the largest value inside x (padding never wins; a window wholly in
// the padding gives -inf, as on the CPU); avg: the window's sum / (KH * KW),
// padding counted as zeros (PyTorch's count_include_pad).
template <class T, class I>
__global__ void __launch_bounds__(256)
    pool2d_forward_kernel(PoolDims<I> s, bool avg, const T *__restrict__ x, T *__restrict__ y) {
  using A = acc_t<T>;
  const I total = s.planes * s.ho * s.wo;
  for (I idx = blockIdx.x * I(blockDim.x) + threadIdx.x; idx < total;
       idx += I(gridDim.x) * blockDim.x) {
    const I ox = idx % s.wo, oy = (idx / s.wo) % s.ho, p = idx / (s.wo * s.ho);
    const T *xp = x + p * s.h * s.w;
    A acc = avg ? A(0) : -INFINITY;
    for (I ky = 0; ky < s.kh; ++ky) {
      const I iy = oy * s.sh - s.ph + ky;
      if (iy < 0 || iy >= s.h)
        continue;
      for (I kx = 0; kx < s.kw; ++kx) {
        const I ix = ox * s.sw - s.pw + kx;
        if (ix < 0 || ix >= s.w)
          continue;
        const A v = static_cast<A>(Elem<T>::load(xp[iy * s.w + ix]));
        if (avg)
          acc += v;
        else if (acc < v) // std::max(acc, v): a NaN never replaces acc
          acc = v;
      }
    }
    if (avg)
      acc /= static_cast<A>(s.kh * s.kw);
    y[idx] = Elem<T>::store(acc);
  }
}

// dx[p, iy, ix] gathers dy over the windows that contain (iy, ix), in
// ascending (oy, ox) order: avg adds dy / (KH * KW); max adds dy when
// (iy, ix) is the window's first maximum in row-major order (PyTorch's
// rule, recomputed here from x).
template <class T, class I>
__global__ void __launch_bounds__(256)
    pool2d_backward_kernel(PoolDims<I> s, bool avg, const T *__restrict__ x,
                           const T *__restrict__ dy, T *__restrict__ dx) {
  using A = acc_t<T>;
  const I total = s.planes * s.h * s.w;
  for (I idx = blockIdx.x * I(blockDim.x) + threadIdx.x; idx < total;
       idx += I(gridDim.x) * blockDim.x) {
    const I ix = idx % s.w, iy = (idx / s.w) % s.h, p = idx / (s.w * s.h);
    const T *xp = x + p * s.h * s.w;
    const T *dyp = dy + p * s.ho * s.wo;
    const PoolCover<I> c(s, iy, ix);
    A sum = 0;
    for (I oy = c.oy0; oy <= c.oy1; ++oy)
      for (I ox = c.ox0; ox <= c.ox1; ++ox) {
        const A g = static_cast<A>(Elem<T>::load(dyp[oy * s.wo + ox]));
        if (avg) {
          sum += g / static_cast<A>(s.kh * s.kw);
          continue;
        }
        if (pool_window_first_max<T>(s, xp, oy, ox) == iy * s.w + ix)
          sum += g;
      }
    dx[idx] = Elem<T>::store(sum);
  }
}

// Max pooling's gradient by bands of input rows: a block owns `band` rows
// of one plane. It first finds, once, the first maximum of every window
// that covers them (a flat index into the plane, -1 for a window wholly in
// the padding) and keeps it with the window's dy in shared memory; then
// each input element gathers dy from its windows in ascending (oy, ox)
// order. The terms and their order are pool2d_backward_kernel's (the same
// bits); what it saves is each input element rescanning every window that
// covers it (9 windows x 9 loads for ResNet's 3x3 / 2 stem pool).
// Shared memory: windowRows * WO * (sizeof(acc) + sizeof(I)) bytes, where
// windowRows = pool_band_window_rows(band) bounds the window rows a band
// meets.
template <class I>
__host__ __device__ inline I pool_band_window_rows(const PoolDims<I> &s, I band) {
  const I rows = (band + s.kh - 2) / s.sh + 2;
  return rows < s.ho ? rows : s.ho;
}

template <class T, class I>
__global__ void __launch_bounds__(256)
    pool2d_max_backward_band_kernel(PoolDims<I> s, I band, I bandsPerPlane,
                                    const T *__restrict__ x, const T *__restrict__ dy,
                                    T *__restrict__ dx) {
  using A = acc_t<T>;
  extern __shared__ __align__(16) unsigned char poolShared[];
  const I windowRows = pool_band_window_rows(s, band);
  A *grad = reinterpret_cast<A *>(poolShared);       // windowRows * wo
  I *winner = reinterpret_cast<I *>(grad + windowRows * s.wo);
  for (I item = blockIdx.x; item < s.planes * bandsPerPlane; item += gridDim.x) {
    const I p = item / bandsPerPlane, iy0 = (item - p * bandsPerPlane) * band;
    const I iy1 = iy0 + band < s.h ? iy0 + band : s.h;
    const T *xp = x + p * s.h * s.w;
    const T *dyp = dy + p * s.ho * s.wo;
    // The window rows covering rows iy0 .. iy1 - 1: from the first row's
    // first to the last row's last.
    const I oyLo = PoolCover<I>(s, iy0, 0).oy0, oyHi = PoolCover<I>(s, iy1 - 1, 0).oy1;
    const I windows = oyHi >= oyLo ? (oyHi - oyLo + 1) * s.wo : 0;
    for (I k = threadIdx.x; k < windows; k += blockDim.x) {
      const I oy = oyLo + k / s.wo, ox = k - (k / s.wo) * s.wo;
      winner[k] = pool_window_first_max<T>(s, xp, oy, ox);
      grad[k] = static_cast<A>(Elem<T>::load(dyp[oy * s.wo + ox]));
    }
    __syncthreads();
    for (I k = threadIdx.x; k < (iy1 - iy0) * s.w; k += blockDim.x) {
      const I iy = iy0 + k / s.w, ix = k - (k / s.w) * s.w;
      const PoolCover<I> c(s, iy, ix);
      const I self = iy * s.w + ix;
      A sum = 0;
      for (I oy = c.oy0; oy <= c.oy1; ++oy)
        for (I ox = c.ox0; ox <= c.ox1; ++ox) {
          const I w = (oy - oyLo) * s.wo + ox;
          if (winner[w] == self)
            sum += grad[w];
        }
      dx[p * s.h * s.w + self] = Elem<T>::store(sum);
    }
    __syncthreads(); // the next band rewrites the windows
  }
}

// int32_t indexing when every count fits.
inline bool conv_fits_int32(int64_t a, int64_t b, int64_t c) {
  const int64_t limit = int64_t(1) << 31;
  return a < limit && b < limit && c < limit;
}

} // namespace detail

// Launchers: kern.conv2d's three products and kern.pool2d's modes. A
// launch error (an invalid configuration) is returned to the caller.
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
  auto run = [&](auto dims) {
    if (product == 0)
      detail::conv2d_forward_kernel<<<blocks, threads, 0, stream>>>(dims, a, b, out);
    else if (product == 1)
      detail::conv2d_input_grad_kernel<<<blocks, threads, 0, stream>>>(dims, a, b, out);
    else
      detail::conv2d_weight_grad_kernel<<<blocks, detail::kConvWeightGradThreads, 0, stream>>>(
          dims, a, b, out);
  };
  if (detail::conv_fits_int32(xs, ws, ys))
    run(detail::ConvDims<int32_t>(s));
  else
    run(detail::ConvDims<int64_t>(s));
  return cudaPeekAtLastError();
}

// mode: 0 max, 1 avg, 2 max_grad, 3 avg_grad (grad: dy, else null).
// max_grad runs by bands of input rows (pool2d_max_backward_band_kernel)
// unless one row's windows overflow 48 KiB of shared memory.
template <class T>
inline cudaError_t launch_pool2d(int mode, const Pool2dShape &s, const T *x, const T *grad,
                                 T *out, cudaStream_t stream) {
  static_assert(detail::IsFloating<T>::value, "pool2d: float, double, bf16 or f16");
  const int64_t xs = s.planes * s.h * s.w, ys = s.planes * s.ho * s.wo;
  const bool backward = mode >= 2, avg = mode == 1 || mode == 3;
  const int64_t items = backward ? xs : ys;
  if (items <= 0)
    return cudaSuccess;
  const unsigned blocks = static_cast<unsigned>(grid_for(items, 256));
  auto run = [&](auto dims) {
    using I = decltype(dims.h);
    if (backward && !avg) {
      // Bands of about 2048 input elements (8 per thread), fewer rows while
      // their windows overflow 48 KiB of shared memory.
      I band = s.w >= 2048 ? I(1) : I(2048 / s.w);
      band = band < dims.h ? band : dims.h;
      auto bytes = [&](I b) {
        return static_cast<size_t>(detail::pool_band_window_rows(dims, b)) *
               static_cast<size_t>(dims.wo) * (sizeof(acc_t<T>) + sizeof(I));
      };
      while (band > 1 && bytes(band) > 48 * 1024)
        band /= 2;
      if (bytes(band) <= 48 * 1024) {
        const I bands = (dims.h + band - 1) / band;
        detail::pool2d_max_backward_band_kernel<<<
            static_cast<unsigned>(grid_for(s.planes * bands, 1)), 256, bytes(band), stream>>>(
            dims, band, bands, x, grad, out);
        return;
      }
    }
    if (backward)
      detail::pool2d_backward_kernel<<<blocks, 256, 0, stream>>>(dims, avg, x, grad, out);
    else
      detail::pool2d_forward_kernel<<<blocks, 256, 0, stream>>>(dims, avg, x, out);
  };
  if (detail::conv_fits_int32(xs, ys, 0))
    run(detail::PoolDims<int32_t>(s));
  else
    run(detail::PoolDims<int64_t>(s));
  return cudaPeekAtLastError();
}
