// tcc CPU kernel prelude, 2-D convolution and pooling (kern.conv2d,
// kern.pool2d), NCHW. Pasted into generated steps after cpu_norm.h
// (compiler/codegen/CodegenSources.cmake); tests include it after
// cpu_prelude.h.
//
// f32 / f64 convolutions are im2col + BLAS (sgemm / dgemm: the matmul's
// accumulation, f64 sums in double): per (image, group) one column matrix
// (C/g * KH * KW, HO * WO) and one single-threaded product, threads over
// the (image, group) pairs. The weight gradient sums its per-image products
// in a fixed number of image chunks (set by N alone) added in chunk order.
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

// Threads for `jobs` independent products of 2 * N * O * HO * WO * K work
// in all: one below the parallel threshold.
inline int conv_threads(const Conv2dShape &s, int64_t jobs) {
  const double work = 2.0 * s.n * s.o * s.ho * s.wo * s.cg() * s.kh * s.kw;
  int64_t t = work > kParallelWork * 8 ? max_threads() : 1;
  return static_cast<int>(t < jobs ? t : jobs);
}

template <typename T> std::unique_ptr<T[]> conv_buffer(int64_t count) {
  return std::unique_ptr<T[]>(new (std::nothrow) T[count > 0 ? count : 1]);
}

// col (C/g * KH * KW, HO * WO) of one (image, group), xg its first plane:
// row (ci, ky, kx) holds the x element each output position reads through
// that tap, 0 where it reads padding.
template <typename T> void im2col(const Conv2dShape &s, const T *xg, T *col) {
  const int64_t hw = s.ho * s.wo;
  for (int64_t ci = 0; ci < s.cg(); ++ci)
    for (int64_t ky = 0; ky < s.kh; ++ky)
      for (int64_t kx = 0; kx < s.kw; ++kx) {
        T *row = col + ((ci * s.kh + ky) * s.kw + kx) * hw;
        const T *plane = xg + ci * s.h * s.w;
        const int64_t x0 = kx * s.dw - s.pw;
        for (int64_t oy = 0; oy < s.ho; ++oy) {
          const int64_t iy = oy * s.sh - s.ph + ky * s.dh;
          T *out = row + oy * s.wo;
          if (iy < 0 || iy >= s.h) {
            for (int64_t ox = 0; ox < s.wo; ++ox)
              out[ox] = T(0);
            continue;
          }
          const T *in = plane + iy * s.w;
          for (int64_t ox = 0; ox < s.wo; ++ox) {
            const int64_t ix = ox * s.sw + x0;
            out[ox] = ix >= 0 && ix < s.w ? in[ix] : T(0);
          }
        }
      }
}

// The adjoint: dxg's C/g planes = the sum of the col entries that read
// each element, added in col's row order.
template <typename T> void col2im(const Conv2dShape &s, const T *col, T *dxg) {
  const int64_t hw = s.ho * s.wo;
  std::fill(dxg, dxg + s.cg() * s.h * s.w, T(0));
  for (int64_t ci = 0; ci < s.cg(); ++ci)
    for (int64_t ky = 0; ky < s.kh; ++ky)
      for (int64_t kx = 0; kx < s.kw; ++kx) {
        const T *row = col + ((ci * s.kh + ky) * s.kw + kx) * hw;
        T *plane = dxg + ci * s.h * s.w;
        const int64_t x0 = kx * s.dw - s.pw;
        for (int64_t oy = 0; oy < s.ho; ++oy) {
          const int64_t iy = oy * s.sh - s.ph + ky * s.dh;
          if (iy < 0 || iy >= s.h)
            continue;
          const T *in = row + oy * s.wo;
          T *out = plane + iy * s.w;
          for (int64_t ox = 0; ox < s.wo; ++ox) {
            const int64_t ix = ox * s.sw + x0;
            if (ix >= 0 && ix < s.w)
              out[ix] += in[ox];
          }
        }
      }
}

// y[b, group g] (O/g, HO*WO) = w_g (O/g, K) x col (K, HO*WO), K = C/g*KH*KW.
template <typename T>
int32_t conv2d_forward_gemm(const Conv2dShape &s, const T *x, const T *w, T *y) {
  const int64_t cg = s.cg(), og = s.og(), k = cg * s.kh * s.kw, hw = s.ho * s.wo;
  const int64_t jobs = s.n * s.groups;
  const bool pointwise = conv_is_pointwise(s);
  const int threads = conv_threads(s, jobs);
  std::unique_ptr<T[]> cols;
  if (!pointwise && !(cols = conv_buffer<T>(threads * k * hw)))
    return kKernelNoMemory;
#ifdef _OPENMP
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
#endif
  for (int64_t j = 0; j < jobs; ++j) {
    const int64_t b = j / s.groups, g = j % s.groups;
    const T *xg = x + (b * s.c + g * cg) * s.h * s.w;
    const T *col = xg;
    if (!pointwise) {
      T *mine = cols.get() + conv_thread_index() * k * hw;
      im2col(s, xg, mine);
      col = mine;
    }
    gemm_serial(false, false, static_cast<int>(og), static_cast<int>(hw), static_cast<int>(k),
                T(1), w + g * og * k, static_cast<int>(k), col, static_cast<int>(hw), T(0),
                y + (b * s.o + g * og) * hw, static_cast<int>(hw));
  }
  return kKernelOk;
}

// dcol (K, HO*WO) = w_gᵀ x dy[b, g], then col2im into dx[b, g].
template <typename T>
int32_t conv2d_input_grad_gemm(const Conv2dShape &s, const T *dy, const T *w, T *dx) {
  const int64_t cg = s.cg(), og = s.og(), k = cg * s.kh * s.kw, hw = s.ho * s.wo;
  const int64_t jobs = s.n * s.groups;
  const bool pointwise = conv_is_pointwise(s);
  const int threads = conv_threads(s, jobs);
  std::unique_ptr<T[]> cols;
  if (!pointwise && !(cols = conv_buffer<T>(threads * k * hw)))
    return kKernelNoMemory;
#ifdef _OPENMP
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
#endif
  for (int64_t j = 0; j < jobs; ++j) {
    const int64_t b = j / s.groups, g = j % s.groups;
    T *dxg = dx + (b * s.c + g * cg) * s.h * s.w;
    T *col = pointwise ? dxg : cols.get() + conv_thread_index() * k * hw;
    gemm_serial(true, false, static_cast<int>(k), static_cast<int>(hw), static_cast<int>(og),
                T(1), w + g * og * k, static_cast<int>(k), dy + (b * s.o + g * og) * hw,
                static_cast<int>(hw), T(0), col, static_cast<int>(hw));
    if (!pointwise)
      col2im(s, col, dxg);
  }
  return kKernelOk;
}

// dw_g (O/g, K) = sum over images of dy[b, g] x col[b, g]ᵀ. The images are
// cut into min(N, 16) chunks (a function of N only); each chunk's sum is
// one product per image accumulated in order (beta 1), and the chunks'
// sums are added in chunk order in double.
template <typename T>
int32_t conv2d_weight_grad_gemm(const Conv2dShape &s, const T *dy, const T *x, T *dw) {
  const int64_t cg = s.cg(), og = s.og(), k = cg * s.kh * s.kw, hw = s.ho * s.wo;
  const int64_t chunks = s.n < 16 ? s.n : 16, size = s.o * k;
  const int64_t jobs = chunks * s.groups;
  const bool pointwise = conv_is_pointwise(s);
  const int threads = conv_threads(s, jobs);
  std::unique_ptr<T[]> cols, parts = conv_buffer<T>(chunks * size);
  if (!parts || (!pointwise && !(cols = conv_buffer<T>(threads * k * hw))))
    return kKernelNoMemory;
#ifdef _OPENMP
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
#endif
  for (int64_t j = 0; j < jobs; ++j) {
    const int64_t chunk = j / s.groups, g = j % s.groups;
    const int64_t first = s.n * chunk / chunks, last = s.n * (chunk + 1) / chunks;
    T *mine = pointwise ? nullptr : cols.get() + conv_thread_index() * k * hw;
    for (int64_t b = first; b < last; ++b) {
      const T *col = x + (b * s.c + g * cg) * s.h * s.w;
      if (!pointwise) {
        im2col(s, col, mine);
        col = mine;
      }
      gemm_serial(false, true, static_cast<int>(og), static_cast<int>(k), static_cast<int>(hw),
                  T(1), dy + (b * s.o + g * og) * hw, static_cast<int>(hw), col,
                  static_cast<int>(hw), b == first ? T(0) : T(1),
                  parts.get() + chunk * size + g * og * k, static_cast<int>(k));
    }
  }
#ifdef _OPENMP
#pragma omp parallel for if (static_cast<double>(size) * chunks > kParallelWork)
#endif
  for (int64_t i = 0; i < size; ++i) {
    double sum = 0;
    for (int64_t c = 0; c < chunks; ++c)
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
