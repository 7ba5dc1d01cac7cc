// The CPU convolution kernels' f32 / f64 path (im2col + BLAS,
// compiler/codegen/cpu/cpu_conv.h) against a float64 reference written
// here as plain loops, on fresh random inputs: forward, input gradient and
// weight gradient for strides, padding, dilation, groups (depthwise too),
// 1x1 (no column matrix), a patch embedding (kernel = stride = 7), several
// images side by side in one product (chunks of unequal size), a single
// product split over the threads, and input gradients computed as forward
// convolutions of dy. The results must also be
// bit-identical for 1, 2 and 3 threads.
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "compiler/codegen/cpu/cpu_prelude.h"
#include "compiler/codegen/cpu/cpu_conv.h"
#include "gtest/gtest.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace {

using tcc_cpu::Conv2dShape;

struct Config {
  int64_t n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, groups;
};

Conv2dShape shapeOf(const Config &c) {
  int64_t ho = (c.h + 2 * c.ph - c.dh * (c.kh - 1) - 1) / c.sh + 1;
  int64_t wo = (c.w + 2 * c.pw - c.dw * (c.kw - 1) - 1) / c.sw + 1;
  return Conv2dShape{c.n,  c.c,  c.h,  c.w,  c.o,  c.kh, c.kw, ho,
                     wo,   c.sh, c.sw, c.ph, c.pw, c.dh, c.dw, c.groups};
}

// Calls f(b, oc, oy, ox, ic, ky, kx) for every (output, tap) pair that
// reads an x element (padding skipped): the definition of the convolution.
template <typename F> void forEachTerm(const Conv2dShape &s, F f) {
  for (int64_t b = 0; b < s.n; ++b)
    for (int64_t oc = 0; oc < s.o; ++oc)
      for (int64_t oy = 0; oy < s.ho; ++oy)
        for (int64_t ox = 0; ox < s.wo; ++ox)
          for (int64_t ci = 0; ci < s.cg(); ++ci)
            for (int64_t ky = 0; ky < s.kh; ++ky)
              for (int64_t kx = 0; kx < s.kw; ++kx) {
                int64_t iy = oy * s.sh - s.ph + ky * s.dh, ix = ox * s.sw - s.pw + kx * s.dw;
                if (iy >= 0 && iy < s.h && ix >= 0 && ix < s.w)
                  f(b, oc, oy, ox, (oc / s.og()) * s.cg() + ci, ci, iy, ix, ky, kx);
              }
}

struct Reference {
  std::vector<double> y, dx, dw;    // values
  std::vector<double> ya, dxa, dwa; // sums of |term|, for the tolerance
};

template <typename T>
Reference reference(const Conv2dShape &s, const std::vector<T> &x, const std::vector<T> &w,
                    const std::vector<T> &dy) {
  Reference r;
  r.y.assign(s.n * s.o * s.ho * s.wo, 0), r.ya = r.y;
  r.dx.assign(x.size(), 0), r.dxa = r.dx;
  r.dw.assign(w.size(), 0), r.dwa = r.dw;
  forEachTerm(s, [&](int64_t b, int64_t oc, int64_t oy, int64_t ox, int64_t ic, int64_t ci,
                     int64_t iy, int64_t ix, int64_t ky, int64_t kx) {
    int64_t yi = ((b * s.o + oc) * s.ho + oy) * s.wo + ox;
    int64_t xi = ((b * s.c + ic) * s.h + iy) * s.w + ix;
    int64_t wi = ((oc * s.cg() + ci) * s.kh + ky) * s.kw + kx;
    double xv = x[xi], wv = w[wi], gv = dy[yi];
    r.y[yi] += xv * wv, r.ya[yi] += std::fabs(xv * wv);
    r.dx[xi] += gv * wv, r.dxa[xi] += std::fabs(gv * wv);
    r.dw[wi] += gv * xv, r.dwa[wi] += std::fabs(gv * xv);
  });
  return r;
}

template <typename T> std::vector<T> randomVector(std::mt19937_64 &rng, int64_t n) {
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<T> v(n);
  for (T &e : v)
    e = static_cast<T>(u(rng));
  return v;
}

struct Results {
  std::vector<double> y, dx, dw;
};

template <typename T>
Results run(const Conv2dShape &s, const std::vector<T> &x, const std::vector<T> &w,
            const std::vector<T> &dy, int threads) {
#ifdef _OPENMP
  omp_set_num_threads(threads);
#else
  (void)threads;
#endif
  // NaN-filled outputs: every element must be written.
  std::vector<T> y(dy.size(), NAN), dx(x.size(), NAN), dw(w.size(), NAN);
  EXPECT_EQ(tcc_cpu::conv2d_forward(s, x.data(), w.data(), y.data()), tcc_cpu::kKernelOk);
  EXPECT_EQ(tcc_cpu::conv2d_input_grad(s, dy.data(), w.data(), dx.data()), tcc_cpu::kKernelOk);
  EXPECT_EQ(tcc_cpu::conv2d_weight_grad(s, dy.data(), x.data(), dw.data()), tcc_cpu::kKernelOk);
  return Results{std::vector<double>(y.begin(), y.end()),
                 std::vector<double>(dx.begin(), dx.end()),
                 std::vector<double>(dw.begin(), dw.end())};
}

void expectClose(const char *what, const std::vector<double> &got, const std::vector<double> &want,
                 const std::vector<double> &scale, double rel) {
  ASSERT_EQ(got.size(), want.size());
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= rel * scale[i] + 1e-30) && bad++ < 3)
      ADD_FAILURE() << what << "[" << i << "] = " << got[i] << ", float64 reference "
                    << want[i] << " (sum of |terms| " << scale[i] << ")";
  EXPECT_EQ(bad, 0) << what << ": elements off";
}

template <typename T> void check(const Config &c, uint64_t seed) {
  Conv2dShape s = shapeOf(c);
  std::mt19937_64 rng(seed);
  auto x = randomVector<T>(rng, s.n * s.c * s.h * s.w);
  auto w = randomVector<T>(rng, s.o * s.cg() * s.kh * s.kw);
  auto dy = randomVector<T>(rng, s.n * s.o * s.ho * s.wo);
  Reference r = reference(s, x, w, dy);
  // f32: sgemm's float sums; f64: dgemm's double sums.
  const double rel = sizeof(T) == 4 ? 2e-6 * std::sqrt(double(s.n * s.ho * s.wo)) : 1e-13;
  Results one = run(s, x, w, dy, 1);
  expectClose("y", one.y, r.y, r.ya, rel);
  expectClose("dx", one.dx, r.dx, r.dxa, rel);
  expectClose("dw", one.dw, r.dw, r.dwa, rel);
  for (int threads : {2, 3}) {
    Results more = run(s, x, w, dy, threads);
    EXPECT_EQ(more.y, one.y) << threads << " threads";
    EXPECT_EQ(more.dx, one.dx) << threads << " threads";
    EXPECT_EQ(more.dw, one.dw) << threads << " threads";
  }
}

// n, c, h, w, o, kh, kw, stride (2), padding (2), dilation (2), groups.
const Config kConfigs[] = {
    {3, 4, 9, 8, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1},        // same padding
    {2, 6, 11, 10, 4, 3, 2, 2, 1, 0, 1, 1, 1, 2},      // strided, 2 groups
    {19, 3, 8, 9, 5, 3, 3, 2, 2, 1, 0, 2, 1, 1},       // dilated, 19 images
    {2, 4, 7, 7, 8, 1, 1, 1, 1, 0, 0, 1, 1, 1},        // 1x1
    {4, 4, 6, 6, 4, 3, 3, 1, 1, 1, 1, 1, 1, 4},        // depthwise
    {3, 1, 28, 28, 16, 7, 7, 7, 7, 0, 0, 1, 1, 1},     // patch embedding
    {32, 8, 16, 16, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1},    // over the threads' threshold
    {5, 2, 5, 5, 3, 5, 5, 1, 1, 2, 2, 1, 1, 1},        // kernel = input, padded
    // Images side by side in one product (conv_images_per_product):
    {40, 6, 4, 4, 8, 1, 1, 1, 1, 0, 0, 1, 1, 1},       // 1x1, chunks of 16, 16, 8
    {21, 4, 10, 10, 6, 3, 3, 3, 3, 2, 2, 1, 1, 2},     // stride 3, 2 groups, chunks 16, 5
    {8, 64, 4, 4, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1},      // one job, split over the threads
    // Input gradient as a forward convolution of dy (stride 1, C/g >= 16,
    // O/g < 32: conv_input_grad_as_forward):
    {4, 16, 9, 7, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1},       // same padding
    {3, 32, 8, 8, 12, 3, 5, 1, 1, 0, 2, 2, 1, 2},      // 3x5, dilated rows, 2 groups
};

TEST(CpuConv, F32MatchesFloat64Reference) {
  uint64_t seed = 1;
  for (const Config &c : kConfigs) {
    SCOPED_TRACE(::testing::Message() << "config #" << seed);
    check<float>(c, seed++);
  }
}

TEST(CpuConv, F64MatchesFloat64Reference) {
  uint64_t seed = 100;
  for (const Config &c : kConfigs) {
    SCOPED_TRACE(::testing::Message() << "config #" << seed);
    check<double>(c, seed++);
  }
}

} // namespace
