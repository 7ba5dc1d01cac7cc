//===--------------------------------------------------------------------===//
// 2-D pooling (kern.pool2d), NCHW or NHWC
//===--------------------------------------------------------------------===//

// Max / avg pooling and its input gradient with the CPU's rules
// (cpu/cpu_conv.h), beside the convolutions (conv_kernels.cuh, whose
// conv_fits_int32 picks the index type here too): x (N, C, H, W) as N * C
// planes, or channels-last (N, H, W, C); one thread per output element
// forward, gradients in gather form (no atomics, the same bits every run).

struct Pool2dShape {
  int64_t planes, h, w; // x (N * C planes, H, W)
  int64_t ho, wo;       // y
  int64_t kh, kw, sh, sw, ph, pw;
  // > 0: x (N, H, W, C), y (N, HO, WO, C) with C = nhwc_channels (planes
  // still N * C).
  int64_t nhwc_channels = 0;
};

namespace detail {

// c: NHWC's channel count (1 for NCHW).
template <class I> struct PoolDims {
  I planes, h, w, ho, wo, kh, kw, sh, sw, ph, pw, c;
  explicit PoolDims(const Pool2dShape &s)
      : planes(I(s.planes)), h(I(s.h)), w(I(s.w)), ho(I(s.ho)), wo(I(s.wo)), kh(I(s.kh)),
        kw(I(s.kw)), sh(I(s.sh)), sw(I(s.sw)), ph(I(s.ph)), pw(I(s.pw)),
        c(I(s.nhwc_channels > 0 ? s.nhwc_channels : 1)) {}
};

// A flat index into pooling's x (rows, cols = H, W) or y (HO, WO) as a
// plane's pixel (y, x): NCHW planes are contiguous blocks; NHWC's plane
// (b, ch) has its pixels C apart and the index runs over ch fastest.
template <bool NHWC, class I> struct PoolPos {
  I y, x, b, ch; // NCHW: b is the plane, ch 0
  __device__ PoolPos(const PoolDims<I> &s, I idx, I rows, I cols) {
    ch = 0;
    if constexpr (NHWC) {
      ch = idx % s.c;
      idx /= s.c;
    }
    x = idx % cols;
    idx /= cols;
    y = idx % rows;
    b = idx / rows;
  }
  // The offset of the plane's pixel (0, 0) in a tensor of rows x cols
  // planes; pixel (y, x) is (y * cols + x) * pool_step(s) past it.
  __device__ I base(const PoolDims<I> &s, I rows, I cols) const {
    return NHWC ? b * rows * cols * s.c + ch : b * rows * cols;
  }
};

template <bool NHWC, class I> __device__ inline I pool_step(const PoolDims<I> &s) {
  return NHWC ? s.c : I(1);
}

// The windows (oy0..oy1, ox0..ox1) that contain input element (iy, ix):
// oy * sh - ph <= iy <= oy * sh - ph + kh - 1, clipped to the output.
template <class I> struct PoolCover {
  I oy0, oy1, ox0, ox1;
  __host__ __device__ PoolCover(const PoolDims<I> &s, I iy, I ix) {
    const I ty = iy + s.ph, tx = ix + s.pw;
    oy0 = ty - s.kh + 1 <= 0 ? 0 : (ty - s.kh + 1 + s.sh - 1) / s.sh;
    ox0 = tx - s.kw + 1 <= 0 ? 0 : (tx - s.kw + 1 + s.sw - 1) / s.sw;
    oy1 = ty / s.sh < s.ho - 1 ? ty / s.sh : s.ho - 1;
    ox1 = tx / s.sw < s.wo - 1 ? tx / s.sw : s.wo - 1;
  }
};

// Window (oy, ox)'s first maximum in row-major order, as a pixel index
// y * W + x of the plane at xp (PyTorch's rule; padding never a
// candidate); -1 for a window wholly in the padding.
template <bool NHWC, class T, class I>
__device__ inline I pool_window_first_max(const PoolDims<I> &s, const T *xp, I oy, I ox) {
  using A = acc_t<T>;
  const I step = pool_step<NHWC>(s);
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
      const A v = static_cast<A>(Elem<T>::load(xp[(y * s.w + xx) * step]));
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
template <bool NHWC, class T, class I>
__global__ void __launch_bounds__(256)
    pool2d_forward_kernel(PoolDims<I> s, bool avg, const T *__restrict__ x, T *__restrict__ y) {
  using A = acc_t<T>;
  const I step = pool_step<NHWC>(s);
  const I total = s.planes * s.ho * s.wo;
  for (I idx = blockIdx.x * I(blockDim.x) + threadIdx.x; idx < total;
       idx += I(gridDim.x) * blockDim.x) {
    const PoolPos<NHWC, I> q(s, idx, s.ho, s.wo); // (oy, ox)
    const T *xp = x + q.base(s, s.h, s.w);
    A acc = avg ? A(0) : -INFINITY;
    for (I ky = 0; ky < s.kh; ++ky) {
      const I iy = q.y * s.sh - s.ph + ky;
      if (iy < 0 || iy >= s.h)
        continue;
      for (I kx = 0; kx < s.kw; ++kx) {
        const I ix = q.x * s.sw - s.pw + kx;
        if (ix < 0 || ix >= s.w)
          continue;
        const A v = static_cast<A>(Elem<T>::load(xp[(iy * s.w + ix) * step]));
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
template <bool NHWC, class T, class I>
__global__ void __launch_bounds__(256)
    pool2d_backward_kernel(PoolDims<I> s, bool avg, const T *__restrict__ x,
                           const T *__restrict__ dy, T *__restrict__ dx) {
  using A = acc_t<T>;
  const I step = pool_step<NHWC>(s);
  const I total = s.planes * s.h * s.w;
  for (I idx = blockIdx.x * I(blockDim.x) + threadIdx.x; idx < total;
       idx += I(gridDim.x) * blockDim.x) {
    const PoolPos<NHWC, I> q(s, idx, s.h, s.w); // (iy, ix)
    const T *xp = x + q.base(s, s.h, s.w);
    const T *dyp = dy + q.base(s, s.ho, s.wo);
    const PoolCover<I> c(s, q.y, q.x);
    A sum = 0;
    for (I oy = c.oy0; oy <= c.oy1; ++oy)
      for (I ox = c.ox0; ox <= c.ox1; ++ox) {
        const A g = static_cast<A>(Elem<T>::load(dyp[(oy * s.wo + ox) * step]));
        if (avg) {
          sum += g / static_cast<A>(s.kh * s.kw);
          continue;
        }
        if (pool_window_first_max<NHWC, T>(s, xp, oy, ox) == q.y * s.w + q.x)
          sum += g;
      }
    dx[idx] = Elem<T>::store(sum);
  }
}

// Max pooling's gradient by bands of input rows (NCHW; NHWC's is
// pool2d_max_backward_band_nhwc_kernel below): a block owns `band` rows of
// one plane. It first finds, once, the first maximum of every window that
// covers them (a flat index into the plane, -1 for a window wholly in the
// padding) and keeps it with the window's dy in shared memory; then each
// input element gathers dy from its windows in ascending (oy, ox) order.
// The terms and their order are pool2d_backward_kernel's (the same bits);
// what it saves is each input element rescanning every window that covers
// it (9 windows x 9 loads for ResNet's 3x3 / 2 stem pool).
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
      winner[k] = pool_window_first_max<false, T>(s, xp, oy, ox);
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

// The same for channels-last, x and dx (N, H, W, C), dy (N, HO, WO, C):
// a block owns (image n, `band` input rows, a chunk of `chunk` channels),
// so that its loads and stores run along C (a warp: one pixel's 32
// neighbouring channels; the chunks of one band are neighbouring blocks,
// sharing the pixels' cache lines). Each thread keeps one channel of the
// chunk (lane = threadIdx.x % chunk) and steps over pixels, 256 / chunk of
// them at a time.
//   Phase 1: for every window (oy, ox) covering the band's rows and each
//   channel, its first maximum (pool_window_first_max<NHWC>: a pixel index
//   iy * W + ix, -1 for a window wholly in the padding) and its dy.
//   Phase 2: each (iy, ix, c) of the band adds dy over its windows, in
//   ascending (oy, ox) order, where it is the winner.
// The terms and their order are pool2d_backward_kernel<NHWC>'s: the same
// bits. Window rows a band shares with the next are found by both (a
// stride-2 pool finds 1 + 2 / band times its windows).
// Shared memory (pool_band_nhwc_bytes of windowRows * WO * chunk entries,
// windowRows = pool_band_window_rows_max): winners (I) [window row][ox]
// [lane], then the dy (T, widened where added, which is exact: a bf16
// entry takes 6 bytes, not 8, so a band holds more rows).
template <class I>
__host__ __device__ inline size_t pool_band_nhwc_grad_offset(I entries) {
  return (static_cast<size_t>(entries) * sizeof(I) + 15) / 16 * 16; // dy 16-byte aligned
}
template <class T, class I> inline size_t pool_band_nhwc_bytes(I entries) {
  return pool_band_nhwc_grad_offset(entries) + static_cast<size_t>(entries) * sizeof(T);
}

// The most window rows a band of `band` input rows (starting at 0, band,
// 2 * band, ...) meets: the kernel's oyHi - oyLo + 1, exactly
// (pool_band_window_rows bounds it for any start; the exact count lets
// ResNet's stem pool take bands of 4 rows in 3 window rows, not 4).
template <class I> inline I pool_band_window_rows_max(const PoolDims<I> &s, I band) {
  I most = 0;
  for (I iy0 = 0; iy0 < s.h; iy0 += band) {
    const I iy1 = iy0 + band < s.h ? iy0 + band : s.h;
    const I rows = PoolCover<I>(s, iy1 - 1, 0).oy1 - PoolCover<I>(s, iy0, 0).oy0 + 1;
    most = rows > most ? rows : most;
  }
  return most;
}

template <class T, class I>
__global__ void __launch_bounds__(256)
    pool2d_max_backward_band_nhwc_kernel(PoolDims<I> s, I band, I bands, I chunk, I chunks,
                                         I windowRows, const T *__restrict__ x,
                                         const T *__restrict__ dy, T *__restrict__ dx) {
  using A = acc_t<T>;
  extern __shared__ __align__(16) unsigned char poolShared[];
  const I entries = windowRows * s.wo * chunk;
  I *winner = reinterpret_cast<I *>(poolShared); // [window row][ox][lane]
  T *grad = reinterpret_cast<T *>(poolShared + pool_band_nhwc_grad_offset(entries));
  // Threads past slots * chunk idle (chunk 20: 240 of 256 work).
  const I lane = I(threadIdx.x) % chunk, slot = I(threadIdx.x) / chunk,
          slots = I(blockDim.x) / chunk;
  // Items (n, band, chunk), the chunk fastest.
  for (I item = blockIdx.x; item < s.planes / s.c * bands * chunks; item += gridDim.x) {
    const I ci = item % chunks, bi = (item / chunks) % bands, n = item / (chunks * bands);
    const I ch = ci * chunk + lane; // this thread's channel
    const bool live = slot < slots && ch < s.c;
    const I iy0 = bi * band, iy1 = iy0 + band < s.h ? iy0 + band : s.h;
    // Plane (n, ch): pixel p at xp[p * C], dyp[p * C], dxp[p * C].
    const T *xp = x + n * s.h * s.w * s.c + ch;
    const T *dyp = dy + n * s.ho * s.wo * s.c + ch;
    T *dxp = dx + n * s.h * s.w * s.c + ch;
    // The window rows covering rows iy0 .. iy1 - 1 (<= windowRows).
    const I oyLo = PoolCover<I>(s, iy0, 0).oy0, oyHi = PoolCover<I>(s, iy1 - 1, 0).oy1;
    const I windows = oyHi >= oyLo ? (oyHi - oyLo + 1) * s.wo : 0;
    if (live)
      for (I k = slot; k < windows; k += slots) { // k: (oy - oyLo) * WO + ox
        const I oy = oyLo + k / s.wo, ox = k - (k / s.wo) * s.wo;
        winner[k * chunk + lane] = pool_window_first_max<true, T>(s, xp, oy, ox);
        grad[k * chunk + lane] = dyp[(oy * s.wo + ox) * s.c];
      }
    __syncthreads();
    if (live)
      for (I k = slot; k < (iy1 - iy0) * s.w; k += slots) { // k: (iy - iy0) * W + ix
        const I iy = iy0 + k / s.w, ix = k - (k / s.w) * s.w;
        const PoolCover<I> c(s, iy, ix);
        const I self = iy * s.w + ix;
        A sum = 0;
        for (I oy = c.oy0; oy <= c.oy1; ++oy)
          for (I ox = c.ox0; ox <= c.ox1; ++ox) {
            const I e = ((oy - oyLo) * s.wo + ox) * chunk + lane;
            if (winner[e] == self)
              sum += static_cast<A>(Elem<T>::load(grad[e]));
          }
        dxp[self * s.c] = Elem<T>::store(sum);
      }
    __syncthreads(); // the next item rewrites the windows
  }
}

} // namespace detail

// mode: 0 max, 1 avg, 2 max_grad, 3 avg_grad (grad: dy, else null).
// max_grad runs by bands of input rows (pool2d_max_backward_band_kernel;
// NHWC, s.nhwc_channels > 0: pool2d_max_backward_band_nhwc_kernel) unless
// one row's windows overflow 48 KiB of shared memory; the rest gather per
// element.
template <class T>
inline cudaError_t launch_pool2d(int mode, const Pool2dShape &s, const T *x, const T *grad,
                                 T *out, cudaStream_t stream) {
  static_assert(detail::IsFloating<T>::value, "pool2d: float, double, bf16 or f16");
  const int64_t xs = s.planes * s.h * s.w, ys = s.planes * s.ho * s.wo;
  const bool backward = mode >= 2, avg = mode == 1 || mode == 3, nhwc = s.nhwc_channels > 0;
  const int64_t items = backward ? xs : ys;
  if (items <= 0)
    return cudaSuccess;
  const unsigned blocks = static_cast<unsigned>(grid_for(items, 256));
  auto run = [&](auto dims) {
    using I = decltype(dims.h);
    if (nhwc && backward && !avg) {
      // Chunks: C split evenly into chunks of <= 32 channels (C = 64: 2 of
      // 32, a warp one pixel's 64 bytes of bf16; C = 40: 2 of 20; C = 3:
      // one of 3). Bands of about 16384 input elements (64 per thread: a
      // band recomputes the window rows it shares with the next, so fewer,
      // larger bands), fewer rows while their windows overflow 48 KiB.
      // ResNet-50's stem pool (W 112, WO 56, C 64) at batch 64: chunks of
      // 32, bands of 4 rows meeting 3 window rows, 32256 bytes for bf16
      // (43008 for f32), 64 x 28 x 2 = 3584 blocks over the 132 SMs.
      const I chunks = (dims.c + 31) / 32, chunk = (dims.c + chunks - 1) / chunks;
      I band = dims.w * chunk >= 16384 ? I(1) : I(16384 / (dims.w * chunk));
      band = band < dims.h ? band : dims.h;
      auto bytes = [&](I b) {
        return detail::pool_band_nhwc_bytes<T, I>(detail::pool_band_window_rows_max(dims, b) *
                                                  dims.wo * chunk);
      };
      while (band > 1 && bytes(band) > 48 * 1024)
        --band;
      if (bytes(band) <= 48 * 1024) {
        const I bands = (dims.h + band - 1) / band;
        const I work = dims.planes / dims.c * bands * chunks; // (n, band, chunk) items
        detail::pool2d_max_backward_band_nhwc_kernel<<<static_cast<unsigned>(grid_for(work, 1)),
                                                       256, bytes(band), stream>>>(
            dims, band, bands, chunk, chunks, detail::pool_band_window_rows_max(dims, band), x,
            grad, out);
        return;
      }
    }
    if (nhwc) {
      if (backward)
        detail::pool2d_backward_kernel<true><<<blocks, 256, 0, stream>>>(dims, avg, x, grad, out);
      else
        detail::pool2d_forward_kernel<true><<<blocks, 256, 0, stream>>>(dims, avg, x, out);
      return;
    }
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
      detail::pool2d_backward_kernel<false><<<blocks, 256, 0, stream>>>(dims, avg, x, grad, out);
    else
      detail::pool2d_forward_kernel<false><<<blocks, 256, 0, stream>>>(dims, avg, x, out);
  };
  if (detail::conv_fits_int32(xs, ys, 0))
    run(detail::PoolDims<int32_t>(s));
  else
    run(detail::PoolDims<int64_t>(s));
  return cudaPeekAtLastError();
}
