// The CPU fused norm kernels (compiler/codegen/cpu/cpu_norm.h) against a
// float64 reference on fresh random inputs: layer and rms norm, with and
// without weight / bias, f32 / f64 / bf16 x, a bf16 y from f32 x (the folded
// cast) and a bf16 grad for f32 x (tg-amp's backward), widths 768, 100 and
// 129, dx plus a residual gradient, dx also cast to another float type, dx's
// column sums (of dx or of its cast). The backward's weight / bias sums must be bit-identical across
// thread counts (fixed parts, added in order). Batch norm's two reductions
// at the end.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <type_traits>
#include <vector>

#include "compiler/codegen/cpu/cpu_prelude.h"
#include "compiler/codegen/cpu/cpu_norm.h"
#include "dialects/kern/NormWorkspace.h"
#include "tests/reference/norm_reference.h"
#include "gtest/gtest.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace {

using tcc_cpu::bf16;

template <typename T> T make(double v) { return static_cast<T>(v); }
template <> bf16 make<bf16>(double v) { return tcc_cpu::Elem<bf16>::store(static_cast<float>(v)); }
template <typename T> double get(T v) { return static_cast<double>(tcc_cpu::Elem<T>::load(v)); }

template <typename T> double tolerance() {
  return sizeof(T) == 2 ? 1.0 / 128 : sizeof(T) == 4 ? 2e-5 : 1e-12;
}

template <typename T> std::vector<T> randomRows(std::mt19937_64 &rng, int64_t rows, int64_t c) {
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<T> v(rows * c);
  for (int64_t r = 0; r < rows; ++r) {
    double offset = 2.0 * u(rng); // a mean that matters
    for (int64_t j = 0; j < c; ++j)
      v[r * c + j] = make<T>(offset + u(rng));
  }
  return v;
}

// max |got - want| / max |want| within tolerance<T>.
template <typename T>
void expectClose(const std::vector<T> &got, const std::vector<double> &want, const char *what) {
  double maxWant = 0, maxErr = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    maxWant = std::max(maxWant, std::fabs(want[i]));
    double g = get(got[i]);
    maxErr = std::max(maxErr, std::isfinite(g) ? std::fabs(g - want[i]) : INFINITY);
  }
  EXPECT_LE(maxErr / std::max(maxWant, 1e-30), tolerance<T>()) << what;
}


template <typename T> std::vector<double> widen(const std::vector<T> &v) {
  std::vector<double> d(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    d[i] = get(v[i]);
  return d;
}

// The other float type: what a folded cast of dx converts to.
template <typename T>
using OtherFloat = typename std::conditional<sizeof(T) == 2, float, bf16>::type;

// What the backward adds up of dx besides (kern `sum`): nothing, dx's
// stored values (a sum of T), or the cast's (a sum of OtherFloat<T>).
enum class DxSum { none, stored, cast };

// The column sums `got` (c) of dx (rows, c) against the float64 reference's
// column sums, within U's rounding of each sum plus T's of every term
// (relative to the column's sum of |dx|: the terms cancel).
template <typename U>
void expectColumnSums(const std::vector<U> &got, const std::vector<double> &dx, int64_t rows,
                      int64_t c, double termTolerance, const char *what) {
  for (int64_t j = 0; j < c; ++j) {
    double want = 0, size = 0;
    for (int64_t r = 0; r < rows; ++r) {
      want += dx[r * c + j];
      size += std::fabs(dx[r * c + j]);
    }
    double bound = tolerance<U>() * std::fabs(want) + termTolerance * size + 1e-30;
    ASSERT_LE(std::fabs(get(got[j]) - want), bound) << what << " column " << j;
  }
}

// x of T, y of Y, grad of G; castDx: dx also written as OtherFloat<T> (the
// folded cast), which must be dx's values converted, bit for bit; sum: the
// column sum of dx (or of its cast) written too (a folded reduce_sum).
template <typename T, typename Y, typename G>
void runCase(int64_t rows, int64_t c, bool rms, bool affine, bool residual = false,
             bool castDx = false, DxSum sum = DxSum::none) {
  using C = OtherFloat<T>;
  SCOPED_TRACE(::testing::Message() << rows << "x" << c << (rms ? " rms" : " layer")
                                    << (affine ? " affine" : ""));
  std::mt19937_64 rng(std::random_device{}());
  const double eps = 1e-5;
  bool bias = affine && !rms;
  std::vector<T> x = randomRows<T>(rng, rows, c), w = randomRows<T>(rng, 1, c),
                 b = randomRows<T>(rng, 1, c);
  std::vector<G> g = randomRows<G>(rng, rows, c);
  std::vector<T> addend = randomRows<T>(rng, rows, c);
  std::vector<double> wd = widen(w), bd = widen(b);
  tcc_test::NormReference ref = tcc_test::normReference(
      widen(x), widen(g), affine ? &wd : nullptr, bias ? &bd : nullptr, rows, c, eps, rms);
  if (residual)
    for (int64_t i = 0; i < rows * c; ++i)
      ref.dx[i] += get(addend[i]);
  std::vector<Y> y(rows * c);
  tcc_cpu::layer_norm_forward(rows, c, x.data(), affine ? w.data() : nullptr,
                              bias ? b.data() : nullptr, eps, rms, y.data());
  expectClose(y, ref.y, "y");

  int64_t parts = tcc::kern::normGradParts(rows);
  std::vector<tcc_cpu::acc_t<T>> ws(parts * tcc::kern::normGradSlots(sum != DxSum::none) * c);
  std::vector<T> results[2][4];
  for (int threads : {1, 3}) {
#ifdef _OPENMP
    omp_set_num_threads(threads);
#endif
    std::vector<T> dx(rows * c), dw(c), db(c), dxSum(c);
    std::vector<C> dxCast(rows * c), castSum(c);
    T *storedSum = sum == DxSum::stored ? dxSum.data() : nullptr;
    tcc_cpu::layer_norm_backward(rows, c, g.data(), x.data(), affine ? w.data() : nullptr,
                                 residual ? addend.data() : nullptr, eps, rms, dx.data(),
                                 castDx ? dxCast.data() : static_cast<C *>(nullptr),
                                 affine ? dw.data() : nullptr, bias ? db.data() : nullptr,
                                 storedSum, false, ws.data(), parts);
    if (sum == DxSum::cast) { // the same call, summing the cast (C) instead
      std::vector<T> dx2(rows * c), dw2(c), db2(c);
      tcc_cpu::layer_norm_backward(rows, c, g.data(), x.data(), affine ? w.data() : nullptr,
                                   residual ? addend.data() : nullptr, eps, rms, dx2.data(),
                                   dxCast.data(), affine ? dw2.data() : nullptr,
                                   bias ? db2.data() : nullptr, castSum.data(), true, ws.data(),
                                   parts);
      EXPECT_EQ(std::memcmp(dx.data(), dx2.data(), dx.size() * sizeof(T)), 0)
          << "summing the cast changes dx";
      // The cast's values, each rounded to C, add up to the reference's sum.
      expectColumnSums(castSum, ref.dx, rows, c, tolerance<T>() + tolerance<C>(), "dx cast sum");
      for (int64_t j = 0; j < c; ++j)
        dxSum[j] = make<T>(get(castSum[j])); // compared across thread counts below
    }
    if (sum == DxSum::stored)
      expectColumnSums(dxSum, ref.dx, rows, c, tolerance<T>(), "dx sum");
    if (castDx) {
      std::vector<C> want(rows * c);
      for (int64_t i = 0; i < rows * c; ++i)
        want[i] = make<C>(get(dx[i]));
      EXPECT_EQ(std::memcmp(want.data(), dxCast.data(), want.size() * sizeof(C)), 0)
          << "the cast of dx differs from dx converted";
    }
    results[threads == 1 ? 0 : 1][0] = dx;
    results[threads == 1 ? 0 : 1][1] = dw;
    results[threads == 1 ? 0 : 1][2] = db;
    results[threads == 1 ? 0 : 1][3] = dxSum;
  }
  expectClose(results[0][0], ref.dx, "dx");
  if (affine)
    expectClose(results[0][1], ref.dw, "dweight");
  if (bias)
    expectClose(results[0][2], ref.db, "dbias");
  for (int k = 0; k < 4; ++k)
    EXPECT_EQ(std::memcmp(results[0][k].data(), results[1][k].data(),
                          results[0][k].size() * sizeof(T)),
              0)
        << "result " << k << " differs between 1 and 3 threads";
}

TEST(CpuNorm, MatchesFloat64Reference) {
  for (int64_t c : {768, 100, 129})
    for (bool rms : {false, true})
      for (bool affine : {false, true}) {
        runCase<float, float, float>(300, c, rms, affine);
        runCase<float, bf16, bf16>(300, c, rms, affine);
        runCase<bf16, bf16, bf16>(70, c, rms, affine);
        runCase<double, double, double>(50, c, rms, affine);
      }
}

// More rows than one part: several parts' sums added in order.
TEST(CpuNorm, ManyParts) { runCase<float, bf16, bf16>(5000, 64, false, true); }

// dx written plus the residual stream's gradient (kern `plus`).
TEST(CpuNorm, PlusResidualGradient) {
  runCase<float, bf16, bf16>(300, 768, false, true, /*residual=*/true);
  runCase<float, float, float>(300, 129, true, true, /*residual=*/true);
}

// dx also written as another float type (kern `cast`: the f32 residual
// gradient as the bf16 matmul operand), with and without the residual.
TEST(CpuNorm, CastOfInputGradient) {
  runCase<float, bf16, bf16>(300, 768, false, true, /*residual=*/true, /*castDx=*/true);
  runCase<float, float, float>(300, 129, true, true, /*residual=*/false, /*castDx=*/true);
  runCase<bf16, bf16, bf16>(70, 100, false, true, /*residual=*/true, /*castDx=*/true);
}

// dx's column sum written too (kern `sum`: the bias gradient of the
// products that write the residual stream), of dx as stored or of its
// cast, with and without weight and bias gradients, over several parts.
TEST(CpuNorm, ColumnSumOfInputGradient) {
  runCase<float, bf16, bf16>(300, 768, false, true, /*residual=*/true, /*castDx=*/true,
                             DxSum::cast);
  runCase<float, bf16, bf16>(5000, 64, false, true, /*residual=*/true, /*castDx=*/true,
                             DxSum::cast);
  runCase<float, float, float>(300, 129, false, true, /*residual=*/true, /*castDx=*/false,
                               DxSum::stored);
  runCase<float, float, float>(300, 100, false, false, /*residual=*/false, /*castDx=*/false,
                               DxSum::stored);
  runCase<double, double, double>(50, 129, true, true, /*residual=*/true, /*castDx=*/false,
                                  DxSum::stored);
  runCase<bf16, bf16, bf16>(70, 100, false, true, /*residual=*/true, /*castDx=*/true,
                            DxSum::cast);
}

} // namespace

// Batch norm's reductions (tcc_cpu::batch_norm_stats / _grad_sums) against
// a float64 two-pass reference, x (n, c, s) with channel means up to 30
// times their spread (the shifted sums must not cancel); f32 results from
// f32 or bf16 inputs, f64 from f64. Identical at 1 and 2 threads.
template <typename T, typename G>
void batchNormCase(int64_t n, int64_t c, int64_t s, uint64_t seed) {
  using A = typename std::conditional<std::is_same<T, double>::value, double, float>::type;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<T> x(n * c * s);
  std::vector<G> g(n * c * s);
  std::vector<double> shift(c);
  for (int64_t ch = 0; ch < c; ++ch)
    shift[ch] = 30.0 * u(rng);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t j = 0; j < s; ++j) {
        x[(i * c + ch) * s + j] = make<T>(shift[ch] + u(rng));
        g[(i * c + ch) * s + j] = make<G>(u(rng));
      }
  std::vector<double> mean(c), var(c), gsum(c), gdot(c);
  std::vector<A> rstd(c), meanA(c);
  for (int64_t ch = 0; ch < c; ++ch) {
    double s1 = 0, s2 = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < s; ++j)
        s1 += get(x[(i * c + ch) * s + j]);
    mean[ch] = s1 / (n * s);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < s; ++j) {
        double d = get(x[(i * c + ch) * s + j]) - mean[ch];
        s2 += d * d;
      }
    var[ch] = s2 / (n * s);
    meanA[ch] = static_cast<A>(mean[ch]);
    rstd[ch] = static_cast<A>(1.0 / std::sqrt(var[ch] + 1e-5));
    double t1 = 0, t2 = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < s; ++j) {
        double gv = get(g[(i * c + ch) * s + j]);
        t1 += gv;
        t2 += gv * (get(x[(i * c + ch) * s + j]) - static_cast<double>(meanA[ch]));
      }
    gsum[ch] = t1;
    gdot[ch] = t2 * static_cast<double>(rstd[ch]);
  }
  std::vector<A> results[2][4];
  for (int threads = 1; threads <= 2; ++threads) {
#ifdef _OPENMP
    omp_set_num_threads(threads);
#endif
    std::vector<A> m(c), v(c), sum(c), dot(c);
    tcc_cpu::batch_norm_stats(n, c, s, x.data(), m.data(), v.data());
    tcc_cpu::batch_norm_grad_sums(n, c, s, g.data(), x.data(), meanA.data(), rstd.data(),
                                  sum.data(), dot.data());
    results[threads - 1][0] = m;
    results[threads - 1][1] = v;
    results[threads - 1][2] = sum;
    results[threads - 1][3] = dot;
  }
  const double tol = std::is_same<A, double>::value ? 1e-12 : 1e-6;
  for (int64_t ch = 0; ch < c; ++ch) {
    EXPECT_NEAR(results[0][0][ch], mean[ch], tol * (std::fabs(mean[ch]) + 1)) << "mean " << ch;
    EXPECT_NEAR(results[0][1][ch], var[ch], tol * var[ch] * 4) << "var " << ch;
    EXPECT_NEAR(results[0][2][ch], gsum[ch], tol * n * s) << "grad_sum " << ch;
    EXPECT_NEAR(results[0][3][ch], gdot[ch], tol * n * s) << "grad_xhat_sum " << ch;
  }
  for (int k = 0; k < 4; ++k)
    EXPECT_EQ(0, std::memcmp(results[0][k].data(), results[1][k].data(), c * sizeof(A)))
        << "result " << k << " differs between 1 and 2 threads";
}

TEST(CpuBatchNorm, MatchesFloat64Reference) {
  uint64_t seed = std::random_device{}();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  batchNormCase<float, float>(8, 5, 49, seed);
  batchNormCase<bf16, bf16>(4, 3, 64, seed + 1);
  batchNormCase<float, bf16>(2, 7, 100, seed + 2);
  batchNormCase<double, double>(3, 4, 9, seed + 3);
  batchNormCase<float, float>(1, 2, 1000, seed + 4);
}
