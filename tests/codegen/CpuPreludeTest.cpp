// The fixed kernels and scalar helpers of compiler/codegen/cpu/cpu_prelude.h,
// checked directly: the vectorizable exp and tanh against libm in double,
// the f16 / bf16 conversions exhaustively, NaN and signed-zero rules of
// maximumf / minimumf, the threaded gemm split against one BLAS call, and
// the embedding kernels (repeated ids, ids out of range). The compiled-step
// tests reach the same code through whole models; these pin each helper.
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "compiler/codegen/cpu/cpu_prelude.h"
#include "gtest/gtest.h"

namespace {

double ulpsOff(float got, double want) {
  double ulp = std::ldexp(1.0, std::ilogb(static_cast<float>(want)) - 23);
  return std::abs(got - want) / ulp;
}

TEST(CpuPrelude, ExpIsWithinTwoUlpsAndHandlesSpecials) {
  double worst = 0;
  for (float x = -103.0f; x < 88.7f; x += 0.00173f) {
    double want = std::exp(static_cast<double>(x));
    if (want < std::numeric_limits<float>::min())
      continue; // subnormal results: checked for order of magnitude below
    worst = std::max(worst, ulpsOff(tcc_cpu::exp(x), want));
  }
  EXPECT_LE(worst, 2.0);
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(tcc_cpu::exp(-inf), 0.0f); // a causal mask's -inf becomes 0
  EXPECT_EQ(tcc_cpu::exp(inf), inf);
  EXPECT_EQ(tcc_cpu::exp(89.0f), inf);
  EXPECT_EQ(tcc_cpu::exp(-200.0f), 0.0f);
  EXPECT_TRUE(std::isnan(tcc_cpu::exp(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(tcc_cpu::exp(0.0f), 1.0f);
  // Subnormal results: within one unit of the smallest subnormal.
  for (float x : {-88.0f, -95.0f, -100.0f, -103.5f})
    EXPECT_NEAR(tcc_cpu::exp(x), std::exp(static_cast<double>(x)),
                1.5 * std::numeric_limits<float>::denorm_min()) << x;
}

TEST(CpuPrelude, TanhIsAccurateOddAndSaturates) {
  double worstRel = 0, worstAbs = 0;
  for (float x = -12.0f; x < 12.0f; x += 0.000731f) {
    double want = std::tanh(static_cast<double>(x));
    float got = tcc_cpu::tanh(x);
    worstAbs = std::max(worstAbs, std::abs(got - want));
    if (std::abs(want) > 1e-30)
      worstRel = std::max(worstRel, std::abs(got - want) / std::abs(want));
    EXPECT_EQ(tcc_cpu::tanh(-x), -got);
  }
  EXPECT_LE(worstRel, 2e-6);
  EXPECT_LE(worstAbs, 1.2e-7);
  EXPECT_EQ(tcc_cpu::tanh(30.0f), 1.0f);
  EXPECT_EQ(tcc_cpu::tanh(0.0f), 0.0f);
  EXPECT_TRUE(std::isnan(tcc_cpu::tanh(std::numeric_limits<float>::quiet_NaN())));
}

TEST(CpuPrelude, HalfConversionsRoundToNearestEven) {
  // Every f16 value survives the round trip.
  for (uint32_t h = 0; h < 65536; ++h) {
    float f = tcc_cpu::f16_to_float(static_cast<uint16_t>(h));
    if (std::isnan(f))
      EXPECT_TRUE(std::isnan(tcc_cpu::f16_to_float(tcc_cpu::float_to_f16(f))));
    else
      EXPECT_EQ(tcc_cpu::float_to_f16(f), h) << h;
  }
  // Values between representable halves round to the nearest, ties to even,
  // as the hardware conversion does.
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> wide(-70000.0f, 70000.0f), tiny(-1e-4f, 1e-4f);
  for (int i = 0; i < 200000; ++i) {
    float x = (i % 2) ? wide(rng) : tiny(rng);
    EXPECT_EQ(tcc_cpu::round_f16(x), static_cast<float>(static_cast<_Float16>(x))) << x;
  }
  EXPECT_EQ(tcc_cpu::round_f16(1.0f + 1.0f / 2048), 1.0f);            // tie: even
  EXPECT_EQ(tcc_cpu::round_f16(1.0f + 3.0f / 2048), 1.0f + 2.0f / 1024); // tie: even up
  EXPECT_TRUE(std::isinf(tcc_cpu::round_f16(65520.0f)));
  EXPECT_EQ(tcc_cpu::round_f16(65519.0f), 65504.0f);
}

TEST(CpuPrelude, Bfloat16ConversionsRoundToNearestEven) {
  for (uint32_t h = 0; h < 65536; ++h) {
    float f = tcc_cpu::bf16_to_float(static_cast<uint16_t>(h));
    if (!std::isnan(f))
      EXPECT_EQ(tcc_cpu::float_to_bf16(f), h) << h;
    else // every NaN: the canonical 0x7fff, as the GPU's cvt gives
      EXPECT_EQ(tcc_cpu::float_to_bf16(f), 0x7fffu) << h;
  }
  EXPECT_EQ(tcc_cpu::round_bf16(1.0f + 1.0f / 256), 1.0f);           // tie: even
  EXPECT_EQ(tcc_cpu::round_bf16(1.0f + 3.0f / 256), 1.0f + 1.0f / 64); // tie: even up
  EXPECT_EQ(tcc_cpu::round_bf16(1.0f + 1.1f / 256), 1.0f + 1.0f / 128);
}

TEST(CpuPrelude, MaximumAndMinimumPropagateNaNAndOrderZeros) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(tcc_cpu::maximumf(nan, 1.0f)));
  EXPECT_TRUE(std::isnan(tcc_cpu::maximumf(1.0f, nan)));
  EXPECT_TRUE(std::isnan(tcc_cpu::minimumf(nan, 1.0f)));
  EXPECT_FALSE(std::signbit(tcc_cpu::maximumf(-0.0f, 0.0f)));
  EXPECT_FALSE(std::signbit(tcc_cpu::maximumf(0.0f, -0.0f)));
  EXPECT_TRUE(std::signbit(tcc_cpu::minimumf(0.0f, -0.0f)));
  EXPECT_TRUE(std::signbit(tcc_cpu::minimumf(-0.0f, 0.0f)));
  EXPECT_EQ(tcc_cpu::maximumf(2.0f, 3.0f), 3.0f);
  EXPECT_EQ(tcc_cpu::minimumf(2.0f, 3.0f), 2.0f);
}

// The threaded split (rows or columns over OpenMP threads) computes what one
// BLAS call computes, for every transpose combination and odd sizes.
TEST(CpuPrelude, SplitGemmMatchesOneBlasCall) {
  tcc_cpu::init_threads();
  std::mt19937 rng(2);
  std::normal_distribution<float> normal;
  struct Size { int m, n, k; };
  for (Size s : {Size{331, 77, 129}, Size{45, 517, 263}, Size{1, 4099, 65}}) {
    for (int t = 0; t < 4; ++t) {
      bool ta = t & 1, tb = t & 2;
      std::vector<float> a(s.m * s.k), b(s.k * s.n), c(s.m * s.n, 1.0f), want = c;
      for (float &x : a) x = normal(rng);
      for (float &x : b) x = normal(rng);
      tcc_cpu::gemm(ta, tb, s.m, s.n, s.k, 0.5f, a.data(), b.data(), 0.25f, c.data());
      tcc_cpu::gemm_serial(ta, tb, s.m, s.n, s.k, 0.5f, a.data(), ta ? s.m : s.k,
                           b.data(), tb ? s.k : s.n, 0.25f, want.data(), s.n);
      double diff = 0, norm = 0;
      for (size_t i = 0; i < c.size(); ++i) {
        diff += (c[i] - want[i]) * (c[i] - want[i]);
        norm += want[i] * want[i];
      }
      EXPECT_LT(std::sqrt(diff / norm), 1e-6)
          << s.m << "x" << s.n << "x" << s.k << " ta " << ta << " tb " << tb;
    }
  }
}

// bf16 / f16 gemm: the result is the float product of the widened operands,
// rounded once (so it equals sgemm on those floats, rounded); alpha, beta
// (reading the 16-bit c), transposes and k = 0 honoured.
template <typename H> void checkGemmViaFloat() {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  for (int t = 0; t < 4; ++t)
    for (int k : {0, 1, 37}) {
      const bool ta = t & 1, tb = t & 2;
      const int m = 13, n = 9;
      std::vector<H> a(m * k), b(k * n), c(m * n);
      for (H &x : a) x = tcc_cpu::Elem<H>::store(normal(rng));
      for (H &x : b) x = tcc_cpu::Elem<H>::store(normal(rng));
      for (H &x : c) x = tcc_cpu::Elem<H>::store(normal(rng));
      std::vector<float> fa(a.size()), fb(b.size()), want(c.size());
      for (size_t i = 0; i < a.size(); ++i) fa[i] = tcc_cpu::Elem<H>::load(a[i]);
      for (size_t i = 0; i < b.size(); ++i) fb[i] = tcc_cpu::Elem<H>::load(b[i]);
      for (size_t i = 0; i < c.size(); ++i) want[i] = tcc_cpu::Elem<H>::load(c[i]);
      if (k > 0)
        tcc_cpu::gemm_serial(ta, tb, m, n, k, 0.5f, fa.data(), ta ? m : k, fb.data(),
                             tb ? k : n, 0.25f, want.data(), n);
      else
        for (float &w : want) w *= 0.25f;
      ASSERT_EQ(tcc_cpu::gemm_via_float(ta, tb, m, n, k, 0.5f, a.data(), b.data(), 0.25f,
                                        c.data()),
                tcc_cpu::kKernelOk);
      for (int i = 0; i < m * n; ++i)
        ASSERT_EQ(c[i].bits, tcc_cpu::Elem<H>::store(want[i]).bits)
            << "element " << i << " ta " << ta << " tb " << tb << " k " << k;
    }
}

TEST(CpuPrelude, HalfGemmRoundsTheFloatProductOnce) {
  tcc_cpu::init_threads();
  checkGemmViaFloat<tcc_cpu::bf16>();
  checkGemmViaFloat<tcc_cpu::f16>();
}

// bf16 / f16 scatter-add: sums in float, one rounding per element. Row 0
// gets 256 and then 254 updates of 0.5: the float sum 383 rounds to 384 in
// bf16; rounding after every add would keep 256 (256.5 ties to 256).
TEST(CpuPrelude, HalfScatterAddAccumulatesInFloat) {
  const int n = 256, row = 2, v = 3;
  std::vector<int32_t> ids(n, 0);
  std::vector<tcc_cpu::bf16> updates(n * row), out(v * row);
  for (int i = 0; i < n * row; ++i)
    updates[i] = tcc_cpu::Elem<tcc_cpu::bf16>::store(i < row ? 256.0f : 0.5f);
  ids[n - 1] = 1; // row 1: one update of 0.5; row 2: none
  ASSERT_EQ(tcc_cpu::scatter_add_rows_via_float(n, row, v, updates.data(), ids.data(),
                                                out.data()),
            tcc_cpu::kKernelOk);
  for (int c = 0; c < row; ++c) {
    EXPECT_EQ(tcc_cpu::bf16_to_float(out[c].bits), 384.0f);
    EXPECT_EQ(tcc_cpu::bf16_to_float(out[row + c].bits), 0.5f);
    EXPECT_EQ(out[2 * row + c].bits, 0);
  }
  ids[7] = 3;
  EXPECT_EQ(tcc_cpu::scatter_add_rows_via_float(n, row, v, updates.data(), ids.data(),
                                                out.data()),
            tcc_cpu::kKernelBadIndex);
}

TEST(CpuPrelude, EmbeddingKernelsAccumulateRepeatedIdsAndRejectBadIds) {
  // table (5, 3); ids repeat 2 three times.
  std::vector<float> table(15);
  for (int i = 0; i < 15; ++i)
    table[i] = static_cast<float>(i);
  std::vector<int32_t> ids = {2, 0, 2, 4, 2};
  std::vector<float> rows(15, -1.0f);
  ASSERT_TRUE(tcc_cpu::gather_rows(5, 3, 5, table.data(), ids.data(), rows.data()));
  for (int n = 0; n < 5; ++n)
    for (int c = 0; c < 3; ++c)
      EXPECT_EQ(rows[n * 3 + c], table[ids[n] * 3 + c]);
  std::vector<float> grad(15, 7.0f);
  ASSERT_TRUE(tcc_cpu::scatter_add_rows(5, 3, 5, rows.data(), ids.data(), grad.data()));
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(grad[2 * 3 + c], 3 * table[2 * 3 + c]); // three times, accumulated
    EXPECT_EQ(grad[0 * 3 + c], table[c]);
    EXPECT_EQ(grad[1 * 3 + c], 0.0f); // never looked up: zero, not stale
    EXPECT_EQ(grad[3 * 3 + c], 0.0f);
  }
  // Large enough for the column split over threads.
  const int n = 4000, row = 64, v = 7;
  std::vector<int64_t> many(n);
  std::vector<float> updates(n * row), out(v * row);
  for (int i = 0; i < n; ++i)
    many[i] = i % v;
  for (int i = 0; i < n * row; ++i)
    updates[i] = static_cast<float>(i % 5);
  ASSERT_TRUE(tcc_cpu::scatter_add_rows(n, row, v, updates.data(), many.data(), out.data()));
  for (int r = 0; r < v; ++r)
    for (int c = 0; c < row; ++c) {
      double want = 0;
      for (int i = r; i < n; i += v)
        want += updates[i * row + c];
      EXPECT_EQ(out[r * row + c], want);
    }
  // Out of range: refused before anything is read.
  for (int32_t bad : {5, -1}) {
    ids[3] = bad;
    EXPECT_FALSE(tcc_cpu::gather_rows(5, 3, 5, table.data(), ids.data(), rows.data()));
    EXPECT_FALSE(tcc_cpu::scatter_add_rows(5, 3, 5, rows.data(), ids.data(), grad.data()));
  }
}

} // namespace
