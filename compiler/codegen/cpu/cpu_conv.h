// tcc CPU kernel prelude, 2-D convolution and pooling (kern.conv2d,
// kern.pool2d), NCHW. Pasted into generated steps after cpu_norm.h
// (compiler/codegen/CodegenSources.cmake); tests include it after
// cpu_prelude.h.
//
// f32 / f64 convolutions are im2col + BLAS (sgemm / dgemm: the matmul's
// accumulation, f64 sums in double): the images are cut into chunks (a
// size set by the shape alone, see conv_images_per_product), and per
// (chunk, group) one column matrix (C/g * KH * KW, images * HO * WO) and
// one product, threads over the (chunk, group) pairs, or over each
// product's blocks when there are fewer pairs than threads. The weight
// gradient adds its chunks' products in chunk order.
// bf16 / f16 keep the direct loops below (sums in double, one rounding per
// output element). Either way every output element is computed from a
// fixed order of terms by one thread, so the results do not depend on the
// thread count.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <new>
#include <vector>

namespace tcc_cpu {

struct Conv2dShape {
  int64_t n, c, h, w;    // x (N, C, H, W)
  int64_t o, kh, kw;     // weight (O, C / groups, KH, KW)
  int64_t ho, wo;        // y (N, O, HO, WO)
  int64_t sh, sw, ph, pw, dh, dw, groups;
  int64_t cg() const { return c / groups; }
  int64_t og() const { return o / groups; }
};

// The direct loops (bf16 / f16; the generic templates, which the f32 / f64
// overloads further down outrank).
// y (N, O, HO, WO) = x (N, C, H, W) correlated with w (O, C/g, KH, KW).
template <typename T>
int32_t conv2d_forward(const Conv2dShape &s, const T *x, const T *w, T *y) {
  const int64_t cg = s.cg(), og = s.og();
#ifdef _OPENMP
#pragma omp parallel for if (static_cast<double>(s.n) * s.o * s.ho * s.wo * cg * s.kh * s.kw > kParallelWork)
#endif
  for (int64_t no = 0; no < s.n * s.o; ++no) {
    const int64_t b = no / s.o, oc = no % s.o, ic0 = (oc / og) * cg;
    for (int64_t oy = 0; oy < s.ho; ++oy)
      for (int64_t ox = 0; ox < s.wo; ++ox) {
        double sum = 0;
        for (int64_t ci = 0; ci < cg; ++ci)
          for (int64_t ky = 0; ky < s.kh; ++ky) {
            const int64_t iy = oy * s.sh - s.ph + ky * s.dh;
            if (iy < 0 || iy >= s.h)
              continue;
            const T *xrow = x + ((b * s.c + ic0 + ci) * s.h + iy) * s.w;
            const T *wrow = w + ((oc * cg + ci) * s.kh + ky) * s.kw;
            for (int64_t kx = 0; kx < s.kw; ++kx) {
              const int64_t ix = ox * s.sw - s.pw + kx * s.dw;
              if (ix >= 0 && ix < s.w)
                sum += static_cast<double>(Elem<T>::load(xrow[ix])) *
                       static_cast<double>(Elem<T>::load(wrow[kx]));
            }
          }
        y[(no * s.ho + oy) * s.wo + ox] = Elem<T>::store(static_cast<acc_t<T>>(sum));
      }
  }
  return kKernelOk;
}

// dx (N, C, H, W) from dy (N, O, HO, WO) and w: each dx element gathers the
// (output position, tap) pairs that read it (a transposed convolution).
template <typename T>
int32_t conv2d_input_grad(const Conv2dShape &s, const T *dy, const T *w, T *dx) {
  const int64_t cg = s.cg(), og = s.og();
#ifdef _OPENMP
#pragma omp parallel for if (static_cast<double>(s.n) * s.o * s.ho * s.wo * cg * s.kh * s.kw > kParallelWork)
#endif
  for (int64_t nc = 0; nc < s.n * s.c; ++nc) {
    const int64_t b = nc / s.c, ic = nc % s.c, group = ic / cg, ci = ic % cg;
    for (int64_t iy = 0; iy < s.h; ++iy)
      for (int64_t ix = 0; ix < s.w; ++ix) {
        double sum = 0;
        for (int64_t oc = group * og; oc < (group + 1) * og; ++oc)
          for (int64_t ky = 0; ky < s.kh; ++ky) {
            const int64_t ty = iy + s.ph - ky * s.dh; // = oy * sh
            if (ty < 0 || ty % s.sh != 0 || ty / s.sh >= s.ho)
              continue;
            const int64_t oy = ty / s.sh;
            for (int64_t kx = 0; kx < s.kw; ++kx) {
              const int64_t tx = ix + s.pw - kx * s.dw;
              if (tx < 0 || tx % s.sw != 0 || tx / s.sw >= s.wo)
                continue;
              sum += static_cast<double>(
                         Elem<T>::load(dy[((b * s.o + oc) * s.ho + oy) * s.wo + tx / s.sw])) *
                     static_cast<double>(
                         Elem<T>::load(w[((oc * cg + ci) * s.kh + ky) * s.kw + kx]));
            }
          }
        dx[(nc * s.h + iy) * s.w + ix] = Elem<T>::store(static_cast<acc_t<T>>(sum));
      }
  }
  return kKernelOk;
}

// dw (O, C/g, KH, KW) = sum over n, oy, ox of dy * the x element each tap read.
template <typename T>
int32_t conv2d_weight_grad(const Conv2dShape &s, const T *dy, const T *x, T *dw) {
  const int64_t cg = s.cg(), og = s.og();
#ifdef _OPENMP
#pragma omp parallel for if (static_cast<double>(s.n) * s.o * s.ho * s.wo * cg * s.kh * s.kw > kParallelWork)
#endif
  for (int64_t oci = 0; oci < s.o * cg; ++oci) {
    const int64_t oc = oci / cg, ic = (oc / og) * cg + oci % cg;
    for (int64_t ky = 0; ky < s.kh; ++ky)
      for (int64_t kx = 0; kx < s.kw; ++kx) {
        double sum = 0;
        for (int64_t b = 0; b < s.n; ++b)
          for (int64_t oy = 0; oy < s.ho; ++oy) {
            const int64_t iy = oy * s.sh - s.ph + ky * s.dh;
            if (iy < 0 || iy >= s.h)
              continue;
            for (int64_t ox = 0; ox < s.wo; ++ox) {
              const int64_t ix = ox * s.sw - s.pw + kx * s.dw;
              if (ix >= 0 && ix < s.w)
                sum += static_cast<double>(
                           Elem<T>::load(dy[((b * s.o + oc) * s.ho + oy) * s.wo + ox])) *
                       static_cast<double>(
                           Elem<T>::load(x[((b * s.c + ic) * s.h + iy) * s.w + ix]));
            }
          }
        dw[(oci * s.kh + ky) * s.kw + kx] = Elem<T>::store(static_cast<acc_t<T>>(sum));
      }
  }
  return kKernelOk;
}

//===--------------------------------------------------------------------===//
// f32 / f64: im2col + gemm
//===--------------------------------------------------------------------===//

inline int conv_thread_index() {
#ifdef _OPENMP
  return omp_get_thread_num();
#else
  return 0;
#endif
}

// A 1x1 kernel at stride 1 without padding reads x's planes as they are:
// no column matrix.
inline bool conv_is_pointwise(const Conv2dShape &s) {
  return s.kh == 1 && s.kw == 1 && s.sh == 1 && s.sw == 1 && s.ph == 0 && s.pw == 0;
}

template <typename T> std::unique_ptr<T[]> conv_buffer(int64_t count) {
  return std::unique_ptr<T[]>(new (std::nothrow) T[count > 0 ? count : 1]);
}

// Images per product: enough columns (images x HO x WO) that BLAS runs at
// its speed on late, small feature maps (a 128 x 16 x 1152 product per
// image runs at ~55 GFLOP/s on one Zen core, 8 images side by side at ~78),
// and a column matrix of at most 4M elements. A function of the shape
// alone, so the products, and the weight gradient's chunk sums, do not
// depend on the thread count.
inline int64_t conv_images_per_product(const Conv2dShape &s) {
  constexpr int64_t kColumns = 256, kColumnElements = int64_t(1) << 22;
  const int64_t hw = s.ho * s.wo, k = s.cg() * s.kh * s.kw;
  int64_t nb = (kColumns + hw - 1) / hw;
  const int64_t fit = kColumnElements / (k * hw);
  nb = nb < fit ? nb : fit;
  nb = nb < s.n ? nb : s.n;
  return nb > 1 ? nb : 1;
}

// The output columns [lo, hi) of a row whose tap reads x column
// ox * sw + x0, that fall inside x (0 <= ix < w).
inline void conv_inside(int64_t x0, int64_t sw, int64_t w, int64_t wo, int64_t &lo,
                        int64_t &hi) {
  lo = x0 >= 0 ? 0 : (-x0 + sw - 1) / sw;
  hi = x0 > w - 1 ? 0 : (w - 1 - x0) / sw + 1;
  hi = hi < wo ? hi : wo;
  lo = lo < hi ? lo : hi;
}

// col (C/g * KH * KW, ld) for `images` images of one group, xg the first
// image's first plane (images C * H * W apart): row (ci, ky, kx), columns
// [b * HO * WO, (b + 1) * HO * WO) hold the x element each output position
// of image b reads through that tap, 0 where it reads padding. Rows are
// spread over the threads when `parallel`.
template <typename T>
void im2col(const Conv2dShape &s, const T *xg, int64_t images, T *col, int64_t ld,
            bool parallel) {
  const int64_t hw = s.ho * s.wo, rows = s.cg() * s.kh * s.kw;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (parallel)
#endif
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t ci = r / (s.kh * s.kw), ky = r / s.kw % s.kh, kx = r % s.kw;
    const int64_t x0 = kx * s.dw - s.pw;
    int64_t lo, hi;
    conv_inside(x0, s.sw, s.w, s.wo, lo, hi);
    for (int64_t b = 0; b < images; ++b) {
      const T *plane = xg + (b * s.c + ci) * s.h * s.w;
      T *row = col + r * ld + b * hw;
      for (int64_t oy = 0; oy < s.ho; ++oy) {
        const int64_t iy = oy * s.sh - s.ph + ky * s.dh;
        T *out = row + oy * s.wo;
        if (iy < 0 || iy >= s.h) {
          std::fill(out, out + s.wo, T(0));
          continue;
        }
        // Plain loops: rows are short (HO x WO of a late layer), where a
        // memmove call per row costs more than the copy.
        const T *in = plane + iy * s.w + x0;
        for (int64_t ox = 0; ox < lo; ++ox)
          out[ox] = T(0);
        if (s.sw == 1)
          for (int64_t ox = lo; ox < hi; ++ox)
            out[ox] = in[ox];
        else
          for (int64_t ox = lo; ox < hi; ++ox)
            out[ox] = in[ox * s.sw];
        for (int64_t ox = hi; ox < s.wo; ++ox)
          out[ox] = T(0);
      }
    }
  }
}

// The adjoint: image b's C/g planes (dxg + b * C * H * W) = the sum of the
// col entries that read each element, added in col's row order. Threads
// over images when `parallel` (each image's planes are one thread's).
template <typename T>
void col2im(const Conv2dShape &s, const T *col, int64_t ld, int64_t images, T *dxg,
            bool parallel) {
  const int64_t hw = s.ho * s.wo;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (parallel)
#endif
  for (int64_t b = 0; b < images; ++b) {
    T *image = dxg + b * s.c * s.h * s.w;
    std::fill(image, image + s.cg() * s.h * s.w, T(0));
    for (int64_t ci = 0; ci < s.cg(); ++ci)
      for (int64_t ky = 0; ky < s.kh; ++ky)
        for (int64_t kx = 0; kx < s.kw; ++kx) {
          const T *row = col + ((ci * s.kh + ky) * s.kw + kx) * ld + b * hw;
          const int64_t x0 = kx * s.dw - s.pw;
          int64_t lo, hi;
          conv_inside(x0, s.sw, s.w, s.wo, lo, hi);
          for (int64_t oy = 0; oy < s.ho; ++oy) {
            const int64_t iy = oy * s.sh - s.ph + ky * s.dh;
            if (iy < 0 || iy >= s.h)
              continue;
            const T *in = row + oy * s.wo;
            T *out = image + (ci * s.h + iy) * s.w + x0;
            if (s.sw == 1)
              for (int64_t ox = lo; ox < hi; ++ox)
                out[ox] += in[ox];
            else
              for (int64_t ox = lo; ox < hi; ++ox)
                out[ox * s.sw] += in[ox];
          }
        }
  }
}

// rows (R, nb * HW) <- images' (R, HW) blocks, `stride` elements apart:
// image b's block becomes columns [b * HW, (b + 1) * HW). unpack_images is
// the inverse.
template <typename T>
void pack_images(const T *src, int64_t stride, int64_t rows, int64_t hw, int64_t images,
                 T *dst) {
  for (int64_t b = 0; b < images; ++b)
    for (int64_t r = 0; r < rows; ++r)
      std::copy(src + b * stride + r * hw, src + b * stride + (r + 1) * hw,
                dst + r * images * hw + b * hw);
}
template <typename T>
void unpack_images(const T *src, int64_t rows, int64_t hw, int64_t images, T *dst,
                   int64_t stride) {
  for (int64_t b = 0; b < images; ++b)
    for (int64_t r = 0; r < rows; ++r)
      std::copy(src + r * images * hw + b * hw, src + r * images * hw + (b + 1) * hw,
                dst + b * stride + r * hw);
}

// How the gemm path spreads a convolution over the threads. The images are
// cut into chunks of conv_images_per_product; a job is one (chunk, group).
// With at least as many jobs as threads each job is one thread's (serial
// BLAS); with fewer, the jobs run in turn and each product and column
// matrix is split over the threads instead.
struct ConvPlan {
  int64_t nb, chunks, jobs, k, hw;
  int64_t blocks;  // per product: 1 with 8 jobs or more, up to 8 with one
  int threads;     // threads over jobs (1: jobs in turn)
  bool split;      // jobs in turn, each one's work spread over the threads
  bool direct;     // pointwise and one image per product: x / dx as they are
  int64_t columns() const { return nb * hw; }
  int64_t n;       // images
  // Job j's group, first image, images and column-matrix width.
  struct Job {
    int64_t g, b0, nb, ld;
  };
  Job job(int64_t j, int64_t groups) const {
    const int64_t chunk = j / groups, b0 = chunk * nb;
    const int64_t images = b0 + nb <= n ? nb : n - b0;
    return Job{j % groups, b0, images, images * hw};
  }
};

// Work units a convolution is cut into (jobs x blocks per product), set by
// the shape alone: enough for 8 threads.
constexpr int64_t kConvBlocks = 8;

inline ConvPlan conv_plan(const Conv2dShape &s) {
  ConvPlan p;
  p.n = s.n;
  p.nb = conv_images_per_product(s);
  p.chunks = (s.n + p.nb - 1) / p.nb;
  p.jobs = p.chunks * s.groups;
  p.k = s.cg() * s.kh * s.kw;
  p.hw = s.ho * s.wo;
  p.blocks = (kConvBlocks + p.jobs - 1) / p.jobs;
  const double work = 2.0 * s.n * s.o * p.hw * p.k;
  const int available = work > kParallelWork * 8 ? max_threads() : 1;
  p.split = available > 1 && p.jobs < available;
  p.threads = p.split ? 1 : static_cast<int>(p.jobs < available ? p.jobs : available);
  p.direct = conv_is_pointwise(s) && p.nb == 1;
  return p;
}

// Runs body(j) for every job: over the threads, or in turn when the plan
// splits each job's work instead (no enclosing parallel region then, so the
// work's own regions get the threads without nesting).
template <typename F> void conv_for_each_job(const ConvPlan &p, F body) {
  if (p.threads > 1) {
#ifdef _OPENMP
#pragma omp parallel for num_threads(p.threads) schedule(static)
#endif
    for (int64_t j = 0; j < p.jobs; ++j)
      body(j);
    return;
  }
  for (int64_t j = 0; j < p.jobs; ++j)
    body(j);
}

// One product of the gemm path, as p.blocks blocks of c's rows (or
// columns, when N > M), of at least 64: every element is the same BLAS
// call's dot product however many threads there are (OpenBLAS picks its
// kernels by the call's sizes, so splitting by the thread count would not
// be). The blocks run in turn inside a job that is one thread's, and over
// the threads when the plan runs jobs in turn.
template <typename T>
void conv_gemm(const ConvPlan &p, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
               const T *a, int64_t lda, const T *b, int64_t ldb, T beta, T *c,
               int64_t ldc) {
  auto i = [](int64_t v) { return static_cast<int>(v); };
  const bool byRows = m >= n;
  const int64_t extent = byRows ? m : n;
  const int64_t perBlock = (extent + p.blocks - 1) / p.blocks;
  int64_t panel = (perBlock + 15) / 16 * 16;
  panel = panel > 64 ? panel : 64;
  const int64_t blocks = (extent + panel - 1) / panel;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (p.split && blocks > 1)
#endif
  for (int64_t t = 0; t < blocks; ++t) {
    const int64_t begin = t * panel, size = begin + panel < extent ? panel : extent - begin;
    if (byRows)
      gemm_serial(ta, tb, i(size), i(n), i(k), T(1), ta ? a + begin : a + begin * lda,
                  i(lda), b, i(ldb), beta, c + begin * ldc, i(ldc));
    else
      gemm_serial(ta, tb, i(m), i(size), i(k), T(1), a, i(lda),
                  tb ? b + begin * ldb : b + begin, i(ldb), beta, c + begin, i(ldc));
  }
}

// Scratch of `threads` x `each` elements (none when each is 0).
template <typename T> struct ConvScratch {
  std::unique_ptr<T[]> data;
  int64_t each = 0;
  bool allocate(int threads, int64_t count) {
    each = count;
    return count == 0 || (data = conv_buffer<T>(threads * count)) != nullptr;
  }
  T *mine() const { return each ? data.get() + conv_thread_index() * each : nullptr; }
};

// y-shaped input dy of group g, images [b0, b0 + nb): as it is with one
// image per product, else packed side by side into `grads` (O/g, nb * HW).
template <typename T>
const T *conv_packed_dy(const Conv2dShape &s, const ConvPlan &p, const T *dy, int64_t g,
                        int64_t b0, int64_t nb, const ConvScratch<T> &grads) {
  const T *dyg = dy + (b0 * s.o + g * s.og()) * p.hw;
  if (p.nb == 1)
    return dyg;
  pack_images(dyg, s.o * p.hw, s.og(), p.hw, nb, grads.mine());
  return grads.mine();
}

// y[images of a chunk, group g] (O/g, nb * HO*WO) = w_g (O/g, K) x col
// (K, nb * HO*WO), K = C/g*KH*KW, then unpacked into y's image blocks.
template <typename T>
int32_t conv2d_forward_gemm(const Conv2dShape &s, const T *x, const T *w, T *y) {
  const ConvPlan p = conv_plan(s);
  const int64_t cg = s.cg(), og = s.og();
  ConvScratch<T> cols, outs;
  if (!cols.allocate(p.threads, p.direct ? 0 : p.k * p.columns()) ||
      !outs.allocate(p.threads, p.nb > 1 ? og * p.columns() : 0))
    return kKernelNoMemory;
  conv_for_each_job(p, [&](int64_t j) {
    const auto [g, b0, nb, ld] = p.job(j, s.groups);
    const T *xg = x + (b0 * s.c + g * cg) * s.h * s.w;
    const T *col = xg;
    if (!p.direct) {
      im2col(s, xg, nb, cols.mine(), ld, p.split);
      col = cols.mine();
    }
    T *yg = y + (b0 * s.o + g * og) * p.hw;
    conv_gemm(p, false, false, og, ld, p.k, w + g * og * p.k, p.k, col, ld, T(0),
              p.nb > 1 ? outs.mine() : yg, ld);
    if (p.nb > 1)
      unpack_images(outs.mine(), og, p.hw, nb, yg, s.o * p.hw);
  });
  return kKernelOk;
}

// At stride 1 the input gradient is a forward convolution of dy (padded by
// d*(K-1) - p) with the weights flipped and each group's in/out channels
// swapped: dx[c, iy] = sum over o, ky of dy[o, iy + p - ky*d] w[o, c, ky].
// That is im2col + one product whose sum runs over O/g*KH*KW, where the
// form below sums over only O/g and then scatters with col2im (UNet's
// 8-channel layers: ~2x faster). It pays when O/g is short (< 32) and the
// product's rows, C/g, are not few (>= 16: 3 input channels, a stem, make
// it slower). The shape of that forward convolution, or false when the form
// does not apply (strided, 1x1, padding beyond d*(K-1)) or does not pay.
inline bool conv_input_grad_as_forward(const Conv2dShape &s, Conv2dShape &t) {
  const int64_t ph = s.dh * (s.kh - 1) - s.ph, pw = s.dw * (s.kw - 1) - s.pw;
  if (s.sh != 1 || s.sw != 1 || s.kh * s.kw == 1 || ph < 0 || pw < 0)
    return false;
  if (s.og() >= 32 || s.cg() < 16)
    return false;
  t = Conv2dShape{s.n, s.o, s.ho, s.wo, s.c, s.kh, s.kw, s.h, s.w,
                  1,   1,   ph,   pw,   s.dh, s.dw, s.groups};
  return true;
}

// w (O, C/g, KH, KW) -> wt (C, O/g, KH, KW): per group, channels swapped
// and the kernel rotated by 180 degrees.
template <typename T> void conv_flip_weights(const Conv2dShape &s, const T *w, T *wt) {
  const int64_t cg = s.cg(), og = s.og(), taps = s.kh * s.kw;
  for (int64_t g = 0; g < s.groups; ++g)
    for (int64_t oi = 0; oi < og; ++oi)
      for (int64_t ci = 0; ci < cg; ++ci) {
        const T *from = w + ((g * og + oi) * cg + ci) * taps;
        T *to = wt + ((g * cg + ci) * og + oi) * taps;
        for (int64_t t = 0; t < taps; ++t)
          to[t] = from[taps - 1 - t];
      }
}

// dcol (K, nb * HO*WO) = w_gᵀ x dy[images of a chunk, g] (packed side by
// side), then col2im into dx's images; at stride 1 a forward convolution
// instead (conv_input_grad_as_forward).
template <typename T>
int32_t conv2d_input_grad_gemm(const Conv2dShape &s, const T *dy, const T *w, T *dx) {
  Conv2dShape t;
  if (conv_input_grad_as_forward(s, t)) {
    std::unique_ptr<T[]> wt = conv_buffer<T>(s.o * s.cg() * s.kh * s.kw);
    if (!wt)
      return kKernelNoMemory;
    conv_flip_weights(s, w, wt.get());
    return conv2d_forward_gemm(t, dy, wt.get(), dx);
  }
  const ConvPlan p = conv_plan(s);
  const int64_t cg = s.cg(), og = s.og();
  ConvScratch<T> cols, grads;
  if (!cols.allocate(p.threads, p.direct ? 0 : p.k * p.columns()) ||
      !grads.allocate(p.threads, p.nb > 1 ? og * p.columns() : 0))
    return kKernelNoMemory;
  conv_for_each_job(p, [&](int64_t j) {
    const auto [g, b0, nb, ld] = p.job(j, s.groups);
    const T *dyg = conv_packed_dy(s, p, dy, g, b0, nb, grads);
    T *dxg = dx + (b0 * s.c + g * cg) * s.h * s.w;
    T *col = p.direct ? dxg : cols.mine();
    conv_gemm(p, true, false, p.k, ld, og, w + g * og * p.k, p.k, dyg, ld, T(0), col, ld);
    if (!p.direct)
      col2im(s, col, ld, nb, dxg, p.split);
  });
  return kKernelOk;
}

// dw_g (O/g, K) = sum over images of dy[b, g] x col[b, g]ᵀ: per chunk one
// product whose sum runs over the chunk's images side by side, and the
// chunks' products added in chunk order in double (one chunk: written
// directly).
template <typename T>
int32_t conv2d_weight_grad_gemm(const Conv2dShape &s, const T *dy, const T *x, T *dw) {
  const ConvPlan p = conv_plan(s);
  const int64_t cg = s.cg(), og = s.og(), size = s.o * p.k;
  ConvScratch<T> cols, grads;
  std::unique_ptr<T[]> parts;
  if (p.chunks > 1 && !(parts = conv_buffer<T>(p.chunks * size)))
    return kKernelNoMemory;
  if (!cols.allocate(p.threads, p.direct ? 0 : p.k * p.columns()) ||
      !grads.allocate(p.threads, p.nb > 1 ? og * p.columns() : 0))
    return kKernelNoMemory;
  conv_for_each_job(p, [&](int64_t j) {
    const auto [g, b0, nb, ld] = p.job(j, s.groups);
    const T *dyg = conv_packed_dy(s, p, dy, g, b0, nb, grads);
    const T *col = x + (b0 * s.c + g * cg) * s.h * s.w;
    if (!p.direct) {
      im2col(s, col, nb, cols.mine(), ld, p.split);
      col = cols.mine();
    }
    T *out = (p.chunks > 1 ? parts.get() + (j / s.groups) * size : dw) + g * og * p.k;
    conv_gemm(p, false, true, og, p.k, ld, dyg, ld, col, ld, T(0), out, p.k);
  });
  if (p.chunks == 1)
    return kKernelOk;
#ifdef _OPENMP
#pragma omp parallel for if (static_cast<double>(size) * p.chunks > kParallelWork)
#endif
  for (int64_t i = 0; i < size; ++i) {
    double sum = 0;
    for (int64_t c = 0; c < p.chunks; ++c)
      sum += static_cast<double>(parts[c * size + i]);
    dw[i] = static_cast<T>(sum);
  }
  return kKernelOk;
}

// f32 / f64 take the gemm path (exact-match overloads win over the
// templates above).
#define TCC_CONV_GEMM_OVERLOADS(T)                                                   \
  inline int32_t conv2d_forward(const Conv2dShape &s, const T *x, const T *w, T *y) {   \
    return conv2d_forward_gemm(s, x, w, y);                                             \
  }                                                                                     \
  inline int32_t conv2d_input_grad(const Conv2dShape &s, const T *dy, const T *w,       \
                                   T *dx) {                                             \
    return conv2d_input_grad_gemm(s, dy, w, dx);                                        \
  }                                                                                     \
  inline int32_t conv2d_weight_grad(const Conv2dShape &s, const T *dy, const T *x,      \
                                    T *dw) {                                            \
    return conv2d_weight_grad_gemm(s, dy, x, dw);                                       \
  }
TCC_CONV_GEMM_OVERLOADS(float)
TCC_CONV_GEMM_OVERLOADS(double)
#undef TCC_CONV_GEMM_OVERLOADS

struct Pool2dShape {
  int64_t planes, h, w; // x (N * C planes, H, W)
  int64_t ho, wo;       // y (N * C planes, HO, WO)
  int64_t kh, kw, sh, sw, ph, pw;
};

// mode 0 max, 1 avg: y from x. Max: padding never wins (-inf); avg divides
// by KH * KW (padding counts as zeros, PyTorch's count_include_pad).
template <typename T> void pool2d_forward(const Pool2dShape &s, bool avg, const T *x, T *y) {
#ifdef _OPENMP
#pragma omp parallel for if (static_cast<double>(s.planes) * s.ho * s.wo * s.kh * s.kw > kParallelWork)
#endif
  for (int64_t p = 0; p < s.planes; ++p)
    for (int64_t oy = 0; oy < s.ho; ++oy)
      for (int64_t ox = 0; ox < s.wo; ++ox) {
        double acc = avg ? 0.0 : -std::numeric_limits<double>::infinity();
        for (int64_t ky = 0; ky < s.kh; ++ky) {
          const int64_t iy = oy * s.sh - s.ph + ky;
          if (iy < 0 || iy >= s.h)
            continue;
          for (int64_t kx = 0; kx < s.kw; ++kx) {
            const int64_t ix = ox * s.sw - s.pw + kx;
            if (ix < 0 || ix >= s.w)
              continue;
            const double v = static_cast<double>(Elem<T>::load(x[(p * s.h + iy) * s.w + ix]));
            acc = avg ? acc + v : std::max(acc, v);
          }
        }
        if (avg)
          acc /= static_cast<double>(s.kh * s.kw);
        y[(p * s.ho + oy) * s.wo + ox] = Elem<T>::store(static_cast<acc_t<T>>(acc));
      }
}

// dx from dy (and x for max): max sends each window's dy to its first
// maximum in row-major window order (PyTorch's rule), avg spreads dy / (KH
// * KW) over the window's positions inside x. One thread per plane. When
// the windows cannot overlap (stride >= kernel) each dx element gets at
// most one term and is written directly; otherwise the plane is summed in
// double and rounded once.
template <typename T>
void pool2d_backward(const Pool2dShape &s, bool avg, const T *x, const T *dy, T *dx) {
  const bool disjoint = s.sh >= s.kh && s.sw >= s.kw;
  const double area = static_cast<double>(s.kh * s.kw);
#ifdef _OPENMP
#pragma omp parallel if (static_cast<double>(s.planes) * s.ho * s.wo * s.kh * s.kw > kParallelWork)
#endif
  {
    std::vector<double> acc(disjoint ? 0 : static_cast<size_t>(s.h * s.w));
#ifdef _OPENMP
#pragma omp for schedule(static)
#endif
    for (int64_t p = 0; p < s.planes; ++p) {
      T *out = dx + p * s.h * s.w;
      if (disjoint)
        std::fill(out, out + s.h * s.w, Elem<T>::store(static_cast<acc_t<T>>(0)));
      else
        std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t oy = 0; oy < s.ho; ++oy)
        for (int64_t ox = 0; ox < s.wo; ++ox) {
          const double g = static_cast<double>(Elem<T>::load(dy[(p * s.ho + oy) * s.wo + ox]));
          int64_t best = -1;
          double bestValue = 0;
          for (int64_t ky = 0; ky < s.kh; ++ky) {
            const int64_t iy = oy * s.sh - s.ph + ky;
            if (iy < 0 || iy >= s.h)
              continue;
            for (int64_t kx = 0; kx < s.kw; ++kx) {
              const int64_t ix = ox * s.sw - s.pw + kx;
              if (ix < 0 || ix >= s.w)
                continue;
              const int64_t at = iy * s.w + ix;
              if (avg) {
                if (disjoint)
                  out[at] = Elem<T>::store(static_cast<acc_t<T>>(g / area));
                else
                  acc[at] += g / area;
                continue;
              }
              const double v = static_cast<double>(Elem<T>::load(x[p * s.h * s.w + at]));
              if (best < 0 || v > bestValue)
                best = at, bestValue = v;
            }
          }
          if (!avg && best >= 0) {
            if (disjoint)
              out[best] = Elem<T>::store(static_cast<acc_t<T>>(g));
            else
              acc[best] += g;
          }
        }
      if (!disjoint)
        for (int64_t i = 0; i < s.h * s.w; ++i)
          out[i] = Elem<T>::store(static_cast<acc_t<T>>(acc[i]));
    }
  }
}

} // namespace tcc_cpu
