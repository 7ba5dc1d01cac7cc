// tcc CPU kernel prelude, 2-D convolution and pooling (kern.conv2d,
// kern.pool2d), NCHW. Pasted into generated steps after cpu_norm.h
// (compiler/codegen/CodegenSources.cmake); tests include it after
// cpu_prelude.h.
//
// Direct loops, sums in double, one rounding per output element. Every
// output element is computed by one thread from a fixed order of terms
// (the gradients are written in gather form, or per (n, c) plane), so the
// results do not depend on the thread count.
#include <cmath>
#include <limits>
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

// y (N, O, HO, WO) = x (N, C, H, W) correlated with w (O, C/g, KH, KW).
template <typename T> void conv2d_forward(const Conv2dShape &s, const T *x, const T *w, T *y) {
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
}

// dx (N, C, H, W) from dy (N, O, HO, WO) and w: each dx element gathers the
// (output position, tap) pairs that read it (a transposed convolution).
template <typename T>
void conv2d_input_grad(const Conv2dShape &s, const T *dy, const T *w, T *dx) {
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
}

// dw (O, C/g, KH, KW) = sum over n, oy, ox of dy * the x element each tap read.
template <typename T>
void conv2d_weight_grad(const Conv2dShape &s, const T *dy, const T *x, T *dw) {
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
}

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
// * KW) over the window's positions inside x. One thread per plane.
template <typename T>
void pool2d_backward(const Pool2dShape &s, bool avg, const T *x, const T *dy, T *dx) {
#ifdef _OPENMP
#pragma omp parallel for if (static_cast<double>(s.planes) * s.ho * s.wo * s.kh * s.kw > kParallelWork)
#endif
  for (int64_t p = 0; p < s.planes; ++p) {
    std::vector<double> acc(static_cast<size_t>(s.h * s.w), 0.0);
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
              acc[at] += g / static_cast<double>(s.kh * s.kw);
              continue;
            }
            const double v = static_cast<double>(Elem<T>::load(x[p * s.h * s.w + at]));
            if (best < 0 || v > bestValue)
              best = at, bestValue = v;
          }
        }
        if (!avg && best >= 0)
          acc[best] += g;
      }
    for (int64_t i = 0; i < s.h * s.w; ++i)
      dx[p * s.h * s.w + i] = Elem<T>::store(static_cast<acc_t<T>>(acc[i]));
  }
}

} // namespace tcc_cpu
