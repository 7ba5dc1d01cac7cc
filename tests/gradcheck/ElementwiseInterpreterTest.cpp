// The reference interpreter on the elementwise ops: values computed by hand
// (the gradient checks compare the interpreter with itself, so its forward
// values need their own check), cast rounding, and dropout's mask.
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include <gtest/gtest.h>

#include "interpreter/TgInterpreter.h"
#include "tcc/counter_rng.h"
#include "tests/gradcheck/GradCheck.h"
#include "tests/gradcheck/GradCheckFixture.h"

using namespace mlir;
using namespace tcc;
using tcc::interp::Tensor;

namespace {

class ElementwiseInterpreterTest : public gradcheck::GradCheckTest {};

void expectTensor(const Tensor &actual, std::vector<int64_t> shape,
                  std::vector<double> data, double tolerance = 1e-15) {
  EXPECT_EQ(actual.shape, shape);
  ASSERT_EQ(actual.data.size(), data.size());
  for (size_t i = 0; i < data.size(); ++i) {
    if (std::isnan(data[i]))
      EXPECT_TRUE(std::isnan(actual.data[i])) << "element " << i;
    else
      EXPECT_NEAR(actual.data[i], data[i], tolerance * (1 + std::abs(data[i])))
          << "element " << i;
  }
}

TEST_F(ElementwiseInterpreterTest, UnaryValues) {
  auto results = run(R"mlir(
    func.func @f(%x: tensor<3xf64>) -> (tensor<3xf64>, tensor<3xf64>, tensor<3xf64>,
        tensor<3xf64>, tensor<3xf64>, tensor<3xf64>, tensor<3xf64>, tensor<3xf64>) {
      %0 = tg.neg %x : tensor<3xf64>
      %1 = tg.sigmoid %x : tensor<3xf64>
      %2 = tg.silu %x : tensor<3xf64>
      %3 = tg.gelu %x : tensor<3xf64>
      %4 = tg.gelu %x {approximate = "tanh"} : tensor<3xf64>
      %5 = tg.pow %x {exponent = 3.0 : f64} : tensor<3xf64>
      %6 = tg.rsqrt %x : tensor<3xf64>
      %7 = tg.relu %x : tensor<3xf64>
      return %0, %1, %2, %3, %4, %5, %6, %7 : tensor<3xf64>, tensor<3xf64>, tensor<3xf64>,
          tensor<3xf64>, tensor<3xf64>, tensor<3xf64>, tensor<3xf64>, tensor<3xf64>
    })mlir",
                     {{{3}, {1.0, 4.0, -2.0}}});
  ASSERT_TRUE(succeeded(results)) << diagnostics_;
  const auto &r = *results;
  expectTensor(r[0], {3}, {-1.0, -4.0, 2.0});
  expectTensor(r[1], {3}, {0.7310585786300049, 0.9820137900379085, 0.11920292202211755});
  expectTensor(r[2], {3}, {0.7310585786300049, 3.928055160151634, -0.2384058440442351});
  // torch.nn.functional.gelu(torch.tensor([1., 4., -2.], dtype=torch.float64))
  expectTensor(r[3], {3}, {0.8413447460685429, 3.9998733150326675, -0.04550026389635842});
  // ... approximate='tanh'
  expectTensor(r[4], {3}, {0.8411919906082768, 3.9999297540518075, -0.04540230591222494});
  expectTensor(r[5], {3}, {1.0, 64.0, -8.0});
  expectTensor(r[6], {3}, {1.0, 0.5, std::nan("")});
  expectTensor(r[7], {3}, {1.0, 4.0, 0.0});
}

TEST_F(ElementwiseInterpreterTest, BinaryWithBroadcastAndNaN) {
  double nan = std::nan("");
  auto results = run(R"mlir(
    func.func @f(%a: tensor<2x2xf64>, %b: tensor<2xf64>)
        -> (tensor<2x2xf64>, tensor<2x2xf64>, tensor<2x2xf64>, tensor<2x2xf64>) {
      %0 = tg.sub %a, %b : (tensor<2x2xf64>, tensor<2xf64>) -> tensor<2x2xf64>
      %1 = tg.div %a, %b : (tensor<2x2xf64>, tensor<2xf64>) -> tensor<2x2xf64>
      %2 = tg.max %a, %b : (tensor<2x2xf64>, tensor<2xf64>) -> tensor<2x2xf64>
      %3 = tg.min %b, %a : (tensor<2xf64>, tensor<2x2xf64>) -> tensor<2x2xf64>
      return %0, %1, %2, %3 : tensor<2x2xf64>, tensor<2x2xf64>, tensor<2x2xf64>, tensor<2x2xf64>
    })mlir",
                     {{{2, 2}, {1, 6, nan, -3}}, {{2}, {2, 3}}});
  ASSERT_TRUE(succeeded(results)) << diagnostics_;
  expectTensor((*results)[0], {2, 2}, {-1, 3, nan, -6});
  expectTensor((*results)[1], {2, 2}, {0.5, 2, nan, -1});
  expectTensor((*results)[2], {2, 2}, {2, 6, nan, 3}); // NaN propagates
  expectTensor((*results)[3], {2, 2}, {1, 3, nan, -3});
}

TEST_F(ElementwiseInterpreterTest, ComparisonsOnFloatsIntegersAndBools) {
  double nan = std::nan("");
  auto results = run(R"mlir(
    func.func @f(%a: tensor<4xf64>, %b: tensor<4xf64>, %i: tensor<3x1xi64>, %j: tensor<2xi64>)
        -> (tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>,
            tensor<4xi1>, tensor<3x2xi1>, tensor<4xi1>) {
      %0 = tg.equal %a, %b : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xi1>
      %1 = tg.not_equal %a, %b : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xi1>
      %2 = tg.less %a, %b : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xi1>
      %3 = tg.less_equal %a, %b : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xi1>
      %4 = tg.greater %a, %b : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xi1>
      %5 = tg.greater_equal %a, %b : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xi1>
      %6 = tg.greater %i, %j : (tensor<3x1xi64>, tensor<2xi64>) -> tensor<3x2xi1>
      %7 = tg.less %2, %5 : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
      return %0, %1, %2, %3, %4, %5, %6, %7 : tensor<4xi1>, tensor<4xi1>, tensor<4xi1>,
          tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<3x2xi1>, tensor<4xi1>
    })mlir",
                     {{{4}, {1, 2, 3, nan}},
                      {{4}, {1, 3, 2, 0}},
                      {{3, 1}, {-1, 0, 1}},
                      {{2}, {0, -1}}});
  ASSERT_TRUE(succeeded(results)) << diagnostics_;
  const auto &r = *results;
  expectTensor(r[0], {4}, {1, 0, 0, 0});
  expectTensor(r[1], {4}, {0, 1, 1, 1}); // NaN != x
  expectTensor(r[2], {4}, {0, 1, 0, 0});
  expectTensor(r[3], {4}, {1, 1, 0, 0});
  expectTensor(r[4], {4}, {0, 0, 1, 0});
  expectTensor(r[5], {4}, {1, 0, 1, 0});
  expectTensor(r[6], {3, 2}, {0, 0, 0, 1, 1, 1});
  expectTensor(r[7], {4}, {1, 0, 1, 0}); // false < true
}

TEST_F(ElementwiseInterpreterTest, SelectConstantAndIota) {
  auto results = run(R"mlir(
    func.func @f(%a: tensor<2x3xf64>) -> (tensor<2x3xf64>, tensor<2x3xi64>, tensor<2x3xf32>, tensor<2xi1>) {
      %zero = tg.constant dense<0.0> : tensor<f64>
      %col = tg.iota {axis = 1 : i64} : tensor<2x3xi64>
      %row = tg.iota {axis = 0 : i64} : tensor<2x3xf32>
      %one = tg.constant dense<1> : tensor<i64>
      %mask = tg.less_equal %col, %one : (tensor<2x3xi64>, tensor<i64>) -> tensor<2x3xi1>
      %0 = tg.select %mask, %a, %zero : (tensor<2x3xi1>, tensor<2x3xf64>, tensor<f64>) -> tensor<2x3xf64>
      %t = tg.constant dense<true> : tensor<2xi1>
      return %0, %col, %row, %t : tensor<2x3xf64>, tensor<2x3xi64>, tensor<2x3xf32>, tensor<2xi1>
    })mlir",
                     {{{2, 3}, {1, 2, 3, 4, 5, 6}}});
  ASSERT_TRUE(succeeded(results)) << diagnostics_;
  expectTensor((*results)[0], {2, 3}, {1, 2, 0, 4, 5, 0});
  expectTensor((*results)[1], {2, 3}, {0, 1, 2, 0, 1, 2});
  expectTensor((*results)[2], {2, 3}, {0, 0, 0, 1, 1, 1});
  expectTensor((*results)[3], {2}, {1, 1});
}

TEST_F(ElementwiseInterpreterTest, CastsRoundLikeTheTargetType) {
  auto results = run(R"mlir(
    func.func @f(%x: tensor<6xf64>, %b: tensor<2xi1>)
        -> (tensor<6xf32>, tensor<6xbf16>, tensor<6xf16>, tensor<6xi32>, tensor<6xi1>,
            tensor<2xf32>, tensor<6xf64>) {
      %0 = tg.cast %x : tensor<6xf64> to tensor<6xf32>
      %1 = tg.cast %x : tensor<6xf64> to tensor<6xbf16>
      %2 = tg.cast %x : tensor<6xf64> to tensor<6xf16>
      %3 = tg.cast %x : tensor<6xf64> to tensor<6xi32>
      %4 = tg.cast %x : tensor<6xf64> to tensor<6xi1>
      %5 = tg.cast %b : tensor<2xi1> to tensor<2xf32>
      %6 = tg.cast %3 : tensor<6xi32> to tensor<6xf64>
      return %0, %1, %2, %3, %4, %5, %6 : tensor<6xf32>, tensor<6xbf16>, tensor<6xf16>,
          tensor<6xi32>, tensor<6xi1>, tensor<2xf32>, tensor<6xf64>
    })mlir",
                     {{{6}, {1.0 / 3.0, 1.00390625, 1.01171875, -2.7, 2.7, 0.0}},
                      {{2}, {1, 0}}});
  ASSERT_TRUE(succeeded(results)) << diagnostics_;
  const auto &r = *results;
  expectTensor(r[0], {6},
               {static_cast<float>(1.0 / 3.0), 1.00390625, 1.01171875,
                static_cast<float>(-2.7), static_cast<float>(2.7), 0.0},
               0.0);
  // bf16 has 8 significant bits: 1 + 2^-8 is a tie that rounds to even (1),
  // 1 + 3 * 2^-8 a tie that rounds up to 1 + 2^-6; 1/3 -> 0.333984375.
  expectTensor(r[1], {6}, {0.333984375, 1.0, 1.015625, -2.703125, 2.703125, 0.0},
               0.0);
  // f16 has 11: 1 + 2^-8 and 1 + 3 * 2^-8 are exact.
  expectTensor(r[2], {6},
               {0.333251953125, 1.00390625, 1.01171875, -2.69921875, 2.69921875, 0.0},
               0.0);
  expectTensor(r[3], {6}, {0, 1, 1, -2, 2, 0}, 0.0); // toward zero
  expectTensor(r[4], {6}, {1, 1, 1, 1, 1, 0}, 0.0);
  expectTensor(r[5], {2}, {1, 0}, 0.0);
  expectTensor(r[6], {6}, {0, 1, 1, -2, 2, 0}, 0.0);
}

TEST_F(ElementwiseInterpreterTest, CastOutOfIntegerRangeIsAnError) {
  auto results = run(R"mlir(
    func.func @f(%x: tensor<2xf64>) -> tensor<2xi32> {
      %0 = tg.cast %x : tensor<2xf64> to tensor<2xi32>
      return %0 : tensor<2xi32>
    })mlir",
                     {{{2}, {1.0, 3e9}}});
  EXPECT_TRUE(failed(results));
  EXPECT_NE(diagnostics_.find("3000000000 is out of the range of 'i32'"),
            std::string::npos)
      << diagnostics_;
}

//===----------------------------------------------------------------------===//
// Dropout
//===----------------------------------------------------------------------===//

constexpr const char *kDropout = R"mlir(
  func.func @f(%x: tensor<100x100xf64>, %seed: tensor<i64>, %step: tensor<i64>)
      -> (tensor<100x100xf64>, tensor<100x100xf64>, tensor<100x100xf64>) {
    %0 = tg.dropout %x, %seed, %step {op_id = 42 : i64, rate = 0.0 : f64} : tensor<100x100xf64>
    %1 = tg.dropout %x, %seed, %step {op_id = 42 : i64, rate = 0.5 : f64} : tensor<100x100xf64>
    %2 = tg.dropout %x, %seed, %step {op_id = 43 : i64, rate = 0.5 : f64} : tensor<100x100xf64>
    return %0, %1, %2 : tensor<100x100xf64>, tensor<100x100xf64>, tensor<100x100xf64>
  })mlir";

Tensor randomNonZero(std::vector<int64_t> shape, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.5, 2.0);
  Tensor t = Tensor::zeros(shape);
  for (double &v : t.data)
    v = u(rng);
  return t;
}

// Positions dropout zeroed.
std::vector<bool> dropped(const Tensor &t) {
  std::vector<bool> mask;
  for (double v : t.data)
    mask.push_back(v == 0.0);
  return mask;
}

TEST_F(ElementwiseInterpreterTest, DropoutMaskIsAFunctionOfSeedStepAndOp) {
  Tensor x = randomNonZero({100, 100}, seed());
  // Seeds held exactly by the interpreter's doubles: below 2^53.
  double rngSeed = static_cast<double>(seed() >> 12);
  auto atStep = [&](double step) {
    auto results = run(kDropout, {x, Tensor::scalar(rngSeed), Tensor::scalar(step)});
    EXPECT_TRUE(succeeded(results)) << diagnostics_;
    return succeeded(results) ? *results : std::vector<Tensor>(3);
  };
  std::vector<Tensor> step3 = atStep(3), again = atStep(3), step4 = atStep(4);
  ASSERT_EQ(step3[0].data.size(), 10000u);

  // rate 0: the identity.
  EXPECT_EQ(step3[0].data, x.data);
  // rate 0.5: about half kept (10000 draws: 5 standard deviations is 250),
  // the kept ones doubled.
  int kept = 0;
  for (size_t i = 0; i < x.data.size(); ++i) {
    if (step3[1].data[i] != 0.0) {
      ++kept;
      EXPECT_EQ(step3[1].data[i], 2.0 * x.data[i]);
    }
    // Exactly counter_rng.h's rule.
    bool keep = tcc_dropout_keep(static_cast<uint64_t>(rngSeed), 42, 3, i, 0.5);
    ASSERT_EQ(step3[1].data[i] != 0.0, keep) << "position " << i;
  }
  EXPECT_GT(kept, 4750);
  EXPECT_LT(kept, 5250);
  // Same key, same mask; another step or another op, another mask.
  EXPECT_EQ(step3[1].data, again[1].data);
  EXPECT_NE(dropped(step3[1]), dropped(step4[1]));
  EXPECT_NE(dropped(step3[1]), dropped(step3[2]));
}

TEST_F(ElementwiseInterpreterTest, DropoutScalesByOneOverKeepProbability) {
  auto results = run(R"mlir(
    func.func @f(%x: tensor<1000xf64>, %seed: tensor<i64>, %step: tensor<i64>) -> tensor<1000xf64> {
      %0 = tg.dropout %x, %seed, %step {op_id = -7 : i64, rate = 0.2 : f64} : tensor<1000xf64>
      return %0 : tensor<1000xf64>
    })mlir",
                     {{{1000}, std::vector<double>(1000, 1.0)},
                      Tensor::scalar(-5), // negative seeds are bit patterns
                      Tensor::scalar(0)});
  ASSERT_TRUE(succeeded(results)) << diagnostics_;
  int kept = 0;
  for (size_t i = 0; i < 1000; ++i) {
    double v = (*results)[0].data[i];
    bool keep = tcc_dropout_keep(static_cast<uint64_t>(int64_t{-5}),
                                 static_cast<uint64_t>(int64_t{-7}), 0, i, 0.2);
    EXPECT_EQ(v, keep ? 1.0 / 0.8 : 0.0) << "position " << i;
    kept += keep;
  }
  EXPECT_GT(kept, 700);
  EXPECT_LT(kept, 900);
}

// counter_rng.h against splitmix64's published first output for seed 0
// (0xE220A8397B1DCDAF), and its uniform draws against their definition.
TEST(CounterRng, MatchesSplitmix64AndItsDefinition) {
  // bits(seed, stream, 0) = mix64(key + G) is splitmix64's first output from
  // state `key`; key = 0 needs mix64(mix64(seed) ^ stream) = 0, i.e. stream =
  // mix64(seed) since mix64(0) = 0.
  EXPECT_EQ(tcc_rng_mix64(0), 0u);
  uint64_t seed = 12345;
  EXPECT_EQ(tcc_rng_bits(seed, tcc_rng_mix64(seed), 0), 0xE220A8397B1DCDAFull);
  for (uint64_t i = 0; i < 1000; ++i) {
    uint64_t bits = tcc_rng_bits(1, 2, i);
    float u = tcc_rng_uniform01(1, 2, i);
    EXPECT_EQ(static_cast<double>(u),
              static_cast<double>(bits >> 40) / 16777216.0);
    EXPECT_GE(u, 0.0f);
    EXPECT_LT(u, 1.0f);
  }
  // FNV-1a 64 test vectors.
  EXPECT_EQ(tcc_fnv1a64("", 0), 0xCBF29CE484222325ull);
  EXPECT_EQ(tcc_fnv1a64("a", 1), 0xAF63DC4C8601EC8Cull);
  EXPECT_EQ(tcc_fnv1a64("foobar", 6), 0x85944171F73967E8ull);
}

} // namespace
