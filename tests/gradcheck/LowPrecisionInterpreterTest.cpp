// The reference interpreter honours bf16/f16 element types: every op with a
// bf16/f16 result computes in float64 from its (rounded) operands and rounds
// once, to nearest even, like a compiled kernel that computes in fp32 and
// rounds when it stores; f32 results stay unrounded float64.
//
// The expected values come from an independent rounding written here with
// frexp/ldexp (not the interpreter's APFloat conversion), applied by hand to
// a float64 transcription of each op.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <random>
#include <utility>

#include <gtest/gtest.h>

#include "interpreter/TgInterpreter.h"
#include "tests/gradcheck/GradCheckFixture.h"

using namespace mlir;
using namespace tcc;
using tcc::interp::Tensor;

namespace {

// An IEEE binary format by its significand bits (with the implicit one), its
// smallest normal exponent and its largest finite value.
struct Format {
  int significandBits;
  int minExponent; // of the value 1.f * 2^e
  double largest;
};
const Format kBf16{8, -126, 0x1.fep127};
const Format kF16{11, -14, 65504.0};
const Format kF32{24, -126, 0x1.fffffep127};

// `x` rounded to nearest even in `format`, by hand: scale the significand
// to an integer, round it (nearbyint rounds ties to even), scale back; below
// the smallest normal the quantum stays that of the smallest normal. A
// magnitude that rounds above the largest finite value is an overflow: inf.
double roundByHand(double x, Format format) {
  if (x == 0.0 || !std::isfinite(x))
    return x;
  int exponent = 0;
  std::frexp(x, &exponent); // x = m * 2^exponent, 0.5 <= |m| < 1
  int unbiased = std::max(exponent - 1, format.minExponent);
  int quantumExponent = unbiased - (format.significandBits - 1);
  double rounded =
      std::ldexp(std::nearbyint(std::ldexp(x, -quantumExponent)), quantumExponent);
  if (std::abs(rounded) > format.largest)
    return std::copysign(std::numeric_limits<double>::infinity(), x);
  return rounded;
}

std::vector<double> roundAll(std::vector<double> values, Format format) {
  for (double &x : values)
    x = roundByHand(x, format);
  return values;
}

class LowPrecisionInterpreterTest : public gradcheck::GradCheckTest {
protected:
  // Random magnitudes in [0.1, 1.5) with random sign, most of them not
  // representable in bf16/f16.
  std::vector<double> randomValues(size_t n) {
    std::uniform_real_distribution<double> magnitude(0.1, 1.5);
    std::vector<double> out(n);
    for (double &x : out)
      x = (rng_() & 1 ? -1.0 : 1.0) * magnitude(rng_);
    return out;
  }
  // Two operands of n random values each, element 0 an exact product
  // (0.5 * 0.25) in every format.
  std::pair<std::vector<double>, std::vector<double>> randomOperands(size_t n) {
    std::vector<double> x = randomValues(n), y = randomValues(n);
    x[0] = 0.5, y[0] = 0.25;
    return {x, y};
  }

  // tg.matmul, the reductions and softmax do not admit bf16/f16 operands
  // in the dialect yet (TgOps.td's Tg_FloatTensor is f32/f64); the AMP work
  // widens it. Until then these tests parse without the verifier so that the
  // interpreter's rounding rule for them is checked now; nothing in the
  // interpreter depends on the op verifiers.
  FailureOr<std::vector<Tensor>> runUnverified(llvm::StringRef source,
                                               std::vector<Tensor> args) {
    diagnostics_.clear();
    ParserConfig config(&context(), /*verifyAfterParse=*/false);
    unverified_ = parseSourceString<ModuleOp>(source, config);
    if (!unverified_)
      return failure();
    return interp::interpret(unverified_->lookupSymbol<func::FuncOp>("f"), args);
  }

  std::mt19937_64 rng_{seed()};
  OwningOpRef<ModuleOp> unverified_;
};

// Exact equality: both sides are rounded to the same grid, so any slip in
// where the interpreter rounds shows up as a whole quantum.
void expectExactly(const Tensor &actual, const std::vector<double> &expected) {
  ASSERT_EQ(actual.data.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_EQ(actual.data[i], expected[i]) << "element " << i;
}

TEST(LowPrecisionRoundingTest, HandRoundingMatchesKnownValues) {
  // 1 + 2^-8 is a bf16 tie that rounds to even (1); 1 + 3*2^-8 rounds up.
  EXPECT_EQ(roundByHand(1.0 + 0x1p-8, kBf16), 1.0);
  EXPECT_EQ(roundByHand(1.0 + 3 * 0x1p-8, kBf16), 1.0 + 0x1p-6);
  EXPECT_EQ(roundByHand(65519.0, kF16), 65504.0);
  EXPECT_TRUE(std::isinf(roundByHand(65520.0, kF16)));
  EXPECT_EQ(roundByHand(0x1p-25, kF16), 0.0);        // half the smallest subnormal: even
  EXPECT_EQ(roundByHand(0x1.8p-24, kF16), 0x1p-23); // a subnormal tie to even
}

TEST_F(LowPrecisionInterpreterTest, Bf16MatmulRoundsOperandsAndResultOnce) {
  std::vector<double> a = randomValues(2 * 3), b = randomValues(3 * 2);
  auto results = runUnverified(R"mlir(
    func.func @f(%a: tensor<2x3xbf16>, %b: tensor<3x2xbf16>) -> tensor<2x2xbf16> {
      %0 = tg.matmul %a, %b : (tensor<2x3xbf16>, tensor<3x2xbf16>) -> tensor<2x2xbf16>
      return %0 : tensor<2x2xbf16>
    })mlir",
                     {{{2, 3}, a}, {{3, 2}, b}});
  ASSERT_TRUE(succeeded(results)) << diagnostics_;
  std::vector<double> ra = roundAll(a, kBf16), rb = roundAll(b, kBf16);
  std::vector<double> expected(4);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) {
      double sum = 0;
      for (int k = 0; k < 3; ++k)
        sum += ra[i * 3 + k] * rb[k * 2 + j];
      expected[i * 2 + j] = roundByHand(sum, kBf16);
    }
  expectExactly((*results)[0], expected);
}

TEST_F(LowPrecisionInterpreterTest, F16ElementwiseChainRoundsAfterEveryOp) {
  const size_t n = 64;
  std::vector<double> x = randomValues(3 * n);
  std::vector<double> y(x.begin() + n, x.begin() + 2 * n), z(x.begin() + 2 * n, x.end());
  x.resize(n);
  auto results = run(R"mlir(
    func.func @f(%x: tensor<64xf16>, %y: tensor<64xf16>, %z: tensor<64xf16>) -> tensor<64xf16> {
      %0 = tg.mul %x, %y : (tensor<64xf16>, tensor<64xf16>) -> tensor<64xf16>
      %1 = tg.add %0, %z : (tensor<64xf16>, tensor<64xf16>) -> tensor<64xf16>
      %2 = tg.exp %1 : tensor<64xf16>
      return %2 : tensor<64xf16>
    })mlir",
                     {{{64}, x}, {{64}, y}, {{64}, z}});
  ASSERT_TRUE(succeeded(results)) << diagnostics_;
  std::vector<double> perOp(n);
  int differsFromOneFinalRounding = 0;
  for (size_t i = 0; i < n; ++i) {
    double rx = roundByHand(x[i], kF16), ry = roundByHand(y[i], kF16),
           rz = roundByHand(z[i], kF16);
    double product = roundByHand(rx * ry, kF16);
    double sum = roundByHand(product + rz, kF16);
    perOp[i] = roundByHand(std::exp(sum), kF16);
    differsFromOneFinalRounding +=
        perOp[i] != roundByHand(std::exp(rx * ry + rz), kF16);
  }
  expectExactly((*results)[0], perOp);
  // The intermediate roundings matter on these inputs: rounding only the
  // final result would not pass the check above.
  EXPECT_GT(differsFromOneFinalRounding, 0);
}

TEST_F(LowPrecisionInterpreterTest, F16OverflowRoundsToInfinityLikeIeee) {
  auto results = run(R"mlir(
    func.func @f(%x: tensor<4xf16>, %y: tensor<4xf16>) -> tensor<4xf16> {
      %0 = tg.mul %x, %y : (tensor<4xf16>, tensor<4xf16>) -> tensor<4xf16>
      return %0 : tensor<4xf16>
    })mlir",
                     {{{4}, {300, -300, 255.9375, 2}}, {{4}, {300, 300, 256, 32752}}});
  ASSERT_TRUE(succeeded(results)) << diagnostics_;
  double inf = std::numeric_limits<double>::infinity();
  // 255.9375 * 256 = 65520 is exactly half a quantum above 65504: the tie
  // goes to the even neighbour 65536, which overflows; 2 * 32752 = 65504 fits.
  expectExactly((*results)[0], {inf, -inf, inf, 65504});
}

// The two representable neighbours of `x` in `format` (below, above), by
// hand as roundByHand finds its quantum; equal when x is representable.
std::pair<double, double> neighboursByHand(double x, Format format) {
  int exponent = 0;
  std::frexp(x, &exponent);
  int unbiased = std::max(exponent - 1, format.minExponent);
  int quantumExponent = unbiased - (format.significandBits - 1);
  double scaled = std::ldexp(x, -quantumExponent);
  return {std::ldexp(std::floor(scaled), quantumExponent),
          std::ldexp(std::ceil(scaled), quantumExponent)};
}

// For random rounding: each got[i] must be one of exact[i]'s two neighbours
// in `format` (elements in `skip` are left out); how many went below and how
// many above, counting only inexact values.
std::pair<int, int> neighbourDirections(const std::vector<double> &got,
                                        const std::vector<double> &exact, Format format,
                                        std::initializer_list<size_t> skip = {}) {
  int below = 0, above = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::find(skip.begin(), skip.end(), i) != skip.end())
      continue;
    auto [low, high] = neighboursByHand(exact[i], format);
    EXPECT_TRUE(got[i] == low || got[i] == high)
        << "element " << i << ": " << got[i] << " is not " << low << " or " << high;
    below += low != high && got[i] == low;
    above += low != high && got[i] == high;
  }
  return {below, above};
}

// interpret(..., randomRoundingSeed): each f16 result goes to one of its two
// neighbours, both directions occur, exact results and the (nearest-rounded)
// arguments stay, overflow is still inf, and the seed alone fixes the pattern.
TEST_F(LowPrecisionInterpreterTest, RandomRoundingPicksANeighbourOfEachResult) {
  const size_t n = 256;
  auto [x, y] = randomOperands(n);
  x[1] = 300, y[1] = 300;       // overflows f16
  x[2] = 1.0 + 0x1p-12;         // an argument between f16 values
  OwningOpRef<ModuleOp> module = parse(R"mlir(
    func.func @f(%x: tensor<256xf16>, %y: tensor<256xf16>) -> (tensor<256xf16>, tensor<256xf16>) {
      %0 = tg.mul %x, %y : (tensor<256xf16>, tensor<256xf16>) -> tensor<256xf16>
      return %0, %x : tensor<256xf16>, tensor<256xf16>
    })mlir");
  ASSERT_TRUE(module);
  auto f = module->lookupSymbol<func::FuncOp>("f");
  std::vector<Tensor> args{{{256}, x}, {{256}, y}};
  uint64_t roundingSeed = rng_();
  auto once = interp::interpret(f, args, roundingSeed);
  auto again = interp::interpret(f, args, roundingSeed);
  auto other = interp::interpret(f, args, roundingSeed + 1);
  ASSERT_TRUE(succeeded(once) && succeeded(again) && succeeded(other)) << diagnostics_;
  const Tensor &product = (*once)[0];
  std::vector<double> exact(n);
  for (size_t i = 0; i < n; ++i)
    exact[i] = roundByHand(x[i], kF16) * roundByHand(y[i], kF16);
  EXPECT_TRUE(std::isinf(product.data[1])) << "overflow must stay inf";
  auto [below, above] = neighbourDirections(product.data, exact, kF16, /*skip=*/{1});
  EXPECT_EQ(product.data[0], 0.125);
  // 255 inexact products, each way with probability 1/2: both occur.
  EXPECT_GT(below, 64);
  EXPECT_GT(above, 64);
  EXPECT_EQ((*again)[0].data, product.data) << "the seed alone fixes the pattern";
  EXPECT_NE((*other)[0].data, product.data);
  expectExactly((*once)[1], roundAll(x, kF16)); // arguments round to nearest
}

// interpret(..., seed, randomlyRoundF32): f32 results go to one of their two
// f32 neighbours, both directions occur, exact results stay; without the
// flag (and always without a seed) f32 results are the unrounded float64.
TEST_F(LowPrecisionInterpreterTest, RandomRoundingOfF32ResultsOnlyWhenAskedFor) {
  const size_t n = 256;
  auto [x, y] = randomOperands(n);
  OwningOpRef<ModuleOp> module = parse(R"mlir(
    func.func @f(%x: tensor<256xf32>, %y: tensor<256xf32>) -> tensor<256xf32> {
      %0 = tg.mul %x, %y : (tensor<256xf32>, tensor<256xf32>) -> tensor<256xf32>
      return %0 : tensor<256xf32>
    })mlir");
  ASSERT_TRUE(module);
  auto f = module->lookupSymbol<func::FuncOp>("f");
  std::vector<Tensor> args{{{256}, x}, {{256}, y}};
  uint64_t roundingSeed = rng_();
  auto plain = interp::interpret(f, args);
  auto f16Only = interp::interpret(f, args, roundingSeed);
  auto probed = interp::interpret(f, args, roundingSeed, /*randomlyRoundF32=*/true);
  ASSERT_TRUE(succeeded(plain) && succeeded(f16Only) && succeeded(probed)) << diagnostics_;
  std::vector<double> exact(n);
  for (size_t i = 0; i < n; ++i)
    exact[i] = x[i] * y[i];
  expectExactly((*plain)[0], exact);
  expectExactly((*f16Only)[0], exact);
  auto [below, above] = neighbourDirections((*probed)[0].data, exact, kF32);
  EXPECT_EQ((*probed)[0].data[0], 0.125);
  // Products of two random doubles are almost never f32 values: both
  // directions occur among the 255 others.
  EXPECT_GT(below, 64);
  EXPECT_GT(above, 64);
}

// interpret(..., productErrorSide): each product element moves by exactly
// +-K * 2^-24 * sum |a_ik b_kj| (f32 accumulation's error bound), the two
// sides opposite; the relu after it sees the moved value (a pre-activation
// planted within the bound of zero crosses it on the +1 side), and
// elementwise ops add no error of their own.
TEST_F(LowPrecisionInterpreterTest, ProductErrorSideMovesProductsByTheAccumulationBound) {
  const int64_t m = 3, k = 5, n = 4;
  std::vector<double> a = randomValues(m * k), b = randomValues(k * n);
  // Element (0, 0): a tiny negative exact sum, a[0][4] * b[4][0] cancelling
  // the rest to -2^-30, far inside the bound (~5 * 2^-24 * sum |terms|).
  double rest = 0;
  for (int64_t p = 0; p < k - 1; ++p)
    rest += a[p] * b[p * n];
  b[(k - 1) * n] = 1.0;
  a[k - 1] = -rest - 0x1p-30;
  OwningOpRef<ModuleOp> module = parse(R"mlir(
    func.func @f(%a: tensor<3x5xf32>, %b: tensor<5x4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>) {
      %p = tg.matmul %a, %b : (tensor<3x5xf32>, tensor<5x4xf32>) -> tensor<3x4xf32>
      %r = tg.relu %p : tensor<3x4xf32>
      return %p, %r : tensor<3x4xf32>, tensor<3x4xf32>
    })mlir");
  ASSERT_TRUE(module);
  auto f = module->lookupSymbol<func::FuncOp>("f");
  std::vector<Tensor> args{{{m, k}, a}, {{k, n}, b}};
  auto plain = interp::interpret(f, args);
  auto up = interp::interpret(f, args, std::nullopt, false, +1);
  auto down = interp::interpret(f, args, std::nullopt, false, -1);
  ASSERT_TRUE(succeeded(plain) && succeeded(up) && succeeded(down)) << diagnostics_;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0, magnitude = 0;
      for (int64_t p = 0; p < k; ++p) {
        sum += a[i * k + p] * b[p * n + j];
        magnitude += std::abs(a[i * k + p] * b[p * n + j]);
      }
      const double bound = k * magnitude / (1 << 24);
      const int64_t e = i * n + j;
      EXPECT_NEAR((*plain)[0].data[e], sum, 1e-15) << "element " << e;
      EXPECT_NEAR((*up)[0].data[e] - (*plain)[0].data[e], bound, 1e-15 + 1e-12 * bound);
      EXPECT_NEAR((*down)[0].data[e] - (*plain)[0].data[e], -bound, 1e-15 + 1e-12 * bound);
      EXPECT_EQ((*up)[1].data[e], std::max((*up)[0].data[e], 0.0)) << "element " << e;
    }
  EXPECT_LT((*plain)[0].data[0], 0.0);
  EXPECT_EQ((*plain)[1].data[0], 0.0);
  EXPECT_GT((*up)[1].data[0], 0.0) << "the planted kink crosses on the +1 side";
  EXPECT_EQ((*down)[1].data[0], 0.0);
  // Anything but -1, 0, +1 is refused with a message.
  diagnostics_.clear();
  EXPECT_TRUE(failed(interp::interpret(f, args, std::nullopt, false, 2)));
  EXPECT_NE(diagnostics_.find("productErrorSide must be -1, 0 or +1"), std::string::npos)
      << diagnostics_;
}

// The same for a convolution (padding 1: the corner outputs have 4 terms,
// the edges 6, the centre 9; the bound counts each output's own).
TEST_F(LowPrecisionInterpreterTest, ProductErrorSideMovesConvolutionsByTheirBound) {
  std::vector<double> x = randomValues(9), w = randomValues(9);
  OwningOpRef<ModuleOp> module = parse(R"mlir(
    func.func @f(%x: tensor<1x1x3x3xf32>, %w: tensor<1x1x3x3xf32>) -> tensor<1x1x3x3xf32> {
      %0 = tg.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : (tensor<1x1x3x3xf32>, tensor<1x1x3x3xf32>) -> tensor<1x1x3x3xf32>
      return %0 : tensor<1x1x3x3xf32>
    })mlir");
  ASSERT_TRUE(module);
  auto f = module->lookupSymbol<func::FuncOp>("f");
  std::vector<Tensor> args{{{1, 1, 3, 3}, x}, {{1, 1, 3, 3}, w}};
  auto plain = interp::interpret(f, args);
  auto up = interp::interpret(f, args, std::nullopt, false, +1);
  auto down = interp::interpret(f, args, std::nullopt, false, -1);
  ASSERT_TRUE(succeeded(plain) && succeeded(up) && succeeded(down)) << diagnostics_;
  for (int oy = 0; oy < 3; ++oy)
    for (int ox = 0; ox < 3; ++ox) {
      double sum = 0, magnitude = 0;
      int terms = 0;
      for (int ky = 0; ky < 3; ++ky)
        for (int kx = 0; kx < 3; ++kx) {
          int iy = oy - 1 + ky, ix = ox - 1 + kx;
          if (iy < 0 || iy > 2 || ix < 0 || ix > 2)
            continue;
          double term = x[iy * 3 + ix] * w[ky * 3 + kx];
          sum += term;
          magnitude += std::abs(term);
          ++terms;
        }
      const double bound = terms * magnitude / (1 << 24);
      const int e = oy * 3 + ox;
      EXPECT_NEAR((*plain)[0].data[e], sum, 1e-15) << "element " << e;
      EXPECT_NEAR((*up)[0].data[e] - (*plain)[0].data[e], bound, 1e-15 + 1e-12 * bound);
      EXPECT_NEAR((*down)[0].data[e] - (*plain)[0].data[e], -bound, 1e-15 + 1e-12 * bound);
    }
}

TEST_F(LowPrecisionInterpreterTest, Bf16ReductionSumsInFloat64AndRoundsOnce) {
  std::vector<double> x = randomValues(4 * 16);
  auto results = runUnverified(R"mlir(
    func.func @f(%x: tensor<4x16xbf16>) -> tensor<4xbf16> {
      %0 = tg.reduce_sum %x {axes = array<i64: 1>} : (tensor<4x16xbf16>) -> tensor<4xbf16>
      return %0 : tensor<4xbf16>
    })mlir",
                     {{{4, 16}, x}});
  ASSERT_TRUE(succeeded(results)) << diagnostics_;
  std::vector<double> expected(4, 0.0);
  for (int row = 0; row < 4; ++row) {
    for (int k = 0; k < 16; ++k)
      expected[row] += roundByHand(x[row * 16 + k], kBf16);
    expected[row] = roundByHand(expected[row], kBf16);
  }
  expectExactly((*results)[0], expected);
}

TEST_F(LowPrecisionInterpreterTest, Bf16SoftmaxComputesInFloat64AndRoundsOnce) {
  std::vector<double> x = randomValues(3 * 8);
  for (double &v : x)
    v *= 4; // spread the logits so the probabilities differ widely
  auto results = runUnverified(R"mlir(
    func.func @f(%x: tensor<3x8xbf16>) -> tensor<3x8xbf16> {
      %0 = tg.softmax %x {axis = 1 : i64} : tensor<3x8xbf16>
      return %0 : tensor<3x8xbf16>
    })mlir",
                     {{{3, 8}, x}});
  ASSERT_TRUE(succeeded(results)) << diagnostics_;
  std::vector<double> expected(x.size());
  for (int row = 0; row < 3; ++row) {
    double largest = -std::numeric_limits<double>::infinity(), total = 0;
    for (int k = 0; k < 8; ++k)
      largest = std::max(largest, roundByHand(x[row * 8 + k], kBf16));
    for (int k = 0; k < 8; ++k)
      total += std::exp(roundByHand(x[row * 8 + k], kBf16) - largest);
    for (int k = 0; k < 8; ++k)
      expected[row * 8 + k] = roundByHand(
          std::exp(roundByHand(x[row * 8 + k], kBf16) - largest) / total, kBf16);
  }
  // The interpreter's softmax may sum in another order than this loop; one
  // float64 ulp of difference can move a bf16 tie, so allow one bf16 quantum.
  const Tensor &actual = (*results)[0];
  ASSERT_EQ(actual.data.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(actual.data[i], roundByHand(actual.data[i], kBf16)) << "element " << i;
    EXPECT_NEAR(actual.data[i], expected[i], std::ldexp(std::abs(expected[i]), -7))
        << "element " << i;
  }
}

TEST_F(LowPrecisionInterpreterTest, F32ResultsStayUnroundedFloat64) {
  // 1/3 and 0.1 + 0.2 are not f32 values; the f32 graph keeps them exact in
  // float64, as before low-precision rounding existed.
  auto results = run(R"mlir(
    func.func @f(%x: tensor<2xf32>, %y: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>) {
      %0 = tg.div %x, %y : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
      %1 = tg.add %x, %y : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
      return %0, %1 : tensor<2xf32>, tensor<2xf32>
    })mlir",
                     {{{2}, {1, 0.1}}, {{2}, {3, 0.2}}});
  ASSERT_TRUE(succeeded(results)) << diagnostics_;
  expectExactly((*results)[0], {1.0 / 3.0, 0.1 / 0.2});
  expectExactly((*results)[1], {4.0, 0.1 + 0.2});
  EXPECT_NE((*results)[0].data[0], static_cast<double>(1.0f / 3.0f));
}

TEST_F(LowPrecisionInterpreterTest, CastBetweenPrecisionsRoundsAtTheNarrowType) {
  // f32 -> bf16 -> f32: the f32 tail sees the bf16 value, and an f32 op on
  // it is not rounded again.
  auto results = run(R"mlir(
    func.func @f(%x: tensor<2xf32>) -> tensor<2xf32> {
      %0 = tg.cast %x : tensor<2xf32> to tensor<2xbf16>
      %1 = tg.cast %0 : tensor<2xbf16> to tensor<2xf32>
      %2 = tg.div %1, %x : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
      return %2 : tensor<2xf32>
    })mlir",
                     {{{2}, {1.0 + 3 * 0x1p-9, 3.0}}});
  ASSERT_TRUE(succeeded(results)) << diagnostics_;
  double x0 = 1.0 + 3 * 0x1p-9;
  expectExactly((*results)[0], {roundByHand(x0, kBf16) / x0, 1.0});
}

} // namespace
