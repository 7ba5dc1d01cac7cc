#include "runtime/trun/Initializers.h"

#include "runtime/trun/CounterRng.h"
#include "tests/runtime/TestData.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace tcc::trun {
namespace {

tcc_tensor_desc Tensor(const std::vector<int64_t> &shape, tcc_init_kind kind,
                       double scale, uint64_t seed) {
  tcc_tensor_desc t = testing::MakeTensor("p", TCC_DTYPE_F32, shape);
  t.shape = shape.data();
  t.init_kind = kind;
  t.init_scale = scale;
  t.init_seed = seed;
  return t;
}

std::vector<float> Initialize(const tcc_tensor_desc &t, uint64_t run_seed) {
  std::vector<float> values(t.num_elements);
  absl::Status status = InitializeTensor(t, run_seed, values.data());
  EXPECT_TRUE(status.ok()) << status;
  return values;
}

// Published splitmix64 outputs for seed 0.
TEST(CounterRngTest, BitsAreSplitMix64Outputs) {
  EXPECT_EQ(rng::Bits(0, 0), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(rng::Bits(0, 1), 0x6E789E6AA1B965F4ull);
  EXPECT_EQ(rng::Bits(0, 2), 0x06C45D188009454Full);
}

TEST(CounterRngTest, UnitDoubleIsInHalfOpenUnitInterval) {
  EXPECT_EQ(rng::UnitDouble(0), 0.0);
  EXPECT_LT(rng::UnitDouble(~0ull), 1.0);
  EXPECT_EQ(rng::UnitDouble(1ull << 63), 0.5);
}

TEST(InitializersTest, ZerosAndOnes) {
  std::vector<int64_t> shape{3, 5};
  for (float v : Initialize(Tensor(shape, TCC_INIT_ZEROS, 0, 1), 0))
    EXPECT_EQ(v, 0.0f);
  for (float v : Initialize(Tensor(shape, TCC_INIT_ONES, 0, 1), 0))
    EXPECT_EQ(v, 1.0f);
}

TEST(InitializersTest, UniformFollowsDefinitionAndRange) {
  std::vector<int64_t> shape{200000};
  tcc_tensor_desc t = Tensor(shape, TCC_INIT_UNIFORM, 0.25, 42);
  std::vector<float> values = Initialize(t, 7);
  uint64_t key = rng::StreamKey(7, rng::kParamInitDomain, 42);
  double sum = 0, squares = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    ASSERT_GE(values[i], -0.25f);
    ASSERT_LT(values[i], 0.25f);
    sum += values[i];
    squares += values[i] * values[i];
  }
  for (int64_t i : {0, 1, 12345, 199999}) {
    double u = rng::UnitDouble(rng::Bits(key, i));
    EXPECT_EQ(values[i], static_cast<float>(0.25 * (2 * u - 1)));
  }
  double n = static_cast<double>(values.size());
  EXPECT_NEAR(sum / n, 0.0, 0.002);
  EXPECT_NEAR(squares / n, 0.25 * 0.25 / 3, 0.0005); // variance of U(-a, a)
}

TEST(InitializersTest, NormalIsBoxMullerOverPairs) {
  std::vector<int64_t> shape{100001};
  tcc_tensor_desc t = Tensor(shape, TCC_INIT_NORMAL, 0.1, 5);
  std::vector<float> values = Initialize(t, 0);
  uint64_t key = rng::StreamKey(0, rng::kParamInitDomain, 5);
  double u1 = rng::UnitDouble(rng::Bits(key, 20));
  double u2 = rng::UnitDouble(rng::Bits(key, 21));
  double r = std::sqrt(-2 * std::log(1 - u1));
  EXPECT_FLOAT_EQ(values[20], 0.1 * r * std::cos(2 * M_PI * u2));
  EXPECT_FLOAT_EQ(values[21], 0.1 * r * std::sin(2 * M_PI * u2));
  double sum = 0, squares = 0;
  for (float v : values) {
    ASSERT_TRUE(std::isfinite(v));
    sum += v;
    squares += double{v} * v;
  }
  double n = static_cast<double>(values.size());
  EXPECT_NEAR(sum / n, 0.0, 0.002);
  EXPECT_NEAR(std::sqrt(squares / n), 0.1, 0.002);
}

TEST(InitializersTest, AnyElementCanBeComputedAlone) {
  std::vector<int64_t> shape{1001};
  tcc_tensor_desc t = Tensor(shape, TCC_INIT_NORMAL, 1.0, 9);
  std::vector<float> values = Initialize(t, 3);
  for (int64_t i : {1000, 0, 517, 1})
    EXPECT_EQ(InitialValue(t, 3, i), values[i]);
}

TEST(InitializersTest, RunSeedAndParamSeedChangeTheValues) {
  std::vector<int64_t> shape{64};
  std::vector<float> base = Initialize(Tensor(shape, TCC_INIT_NORMAL, 1, 1), 0);
  EXPECT_EQ(base, Initialize(Tensor(shape, TCC_INIT_NORMAL, 1, 1), 0));
  EXPECT_NE(base, Initialize(Tensor(shape, TCC_INIT_NORMAL, 1, 1), 1));
  EXPECT_NE(base, Initialize(Tensor(shape, TCC_INIT_NORMAL, 1, 2), 0));
}

TEST(InitializersTest, RefusesNonF32) {
  std::vector<int64_t> shape{4};
  tcc_tensor_desc t = testing::MakeTensor("h", TCC_DTYPE_F64, shape);
  t.shape = shape.data();
  std::vector<double> values(4);
  absl::Status status = InitializeTensor(t, 0, values.data());
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("'h': dtype f64"), std::string::npos)
      << status;
}

} // namespace
} // namespace tcc::trun
