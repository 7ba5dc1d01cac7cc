#include "runtime/initializers/Initializers.h"

#include "tcc/counter_rng.h"
#include "tests/runtime/TestData.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
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
  EXPECT_EQ(tcc_rng_key_bits(0, 0), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(tcc_rng_key_bits(0, 1), 0x6E789E6AA1B965F4ull);
  EXPECT_EQ(tcc_rng_key_bits(0, 2), 0x06C45D188009454Full);
}

// trun's streams (domains of tcc/counter_rng.h), against values of an
// independent implementation of the formulas there (Python integers).
TEST(CounterRngTest, StreamKeysAndBitsFollowTheirDefinition) {
  uint64_t init = tcc_rng_stream_key(7, TCC_RNG_DOMAIN_PARAM_INIT, 42);
  EXPECT_EQ(init, 0xA3E84097331305C2ull);
  EXPECT_EQ(tcc_rng_key_bits(init, 0), 0xB189329B73C2F407ull);
  EXPECT_EQ(tcc_rng_key_bits(init, 1000), 0x07A040F6DB7E0C20ull);
  EXPECT_EQ(tcc_rng_stream_key(0, TCC_RNG_DOMAIN_SHUFFLE, 0),
            0x52EAD7E36EA7FEA8ull);
  uint64_t window =
      tcc_rng_stream_key(123456789, TCC_RNG_DOMAIN_TOKEN_WINDOW, 5);
  EXPECT_EQ(window, 0x926A70AA93A595F3ull);
  EXPECT_EQ(tcc_rng_key_bits(window, 1000), 0xF43AD0BF3E09D6A2ull);
  EXPECT_EQ(tcc_rng_stream_key(~0ull, TCC_RNG_DOMAIN_SAMPLE, 0),
            0x7344B75503E50392ull);
  // The dropout stream is the same generator keyed without a domain.
  EXPECT_EQ(tcc_rng_bits(5, 9, 3),
            tcc_rng_key_bits(tcc_rng_mix64(tcc_rng_mix64(5) ^ 9), 3));
}

TEST(CounterRngTest, UnitDoubleIsInHalfOpenUnitInterval) {
  EXPECT_EQ(tcc_rng_unit_double(0), 0.0);
  EXPECT_LT(tcc_rng_unit_double(~0ull), 1.0);
  EXPECT_EQ(tcc_rng_unit_double(1ull << 63), 0.5);
}

TEST(InitializersTest, ZerosAndOnes) {
  std::vector<int64_t> shape{3, 5};
  for (float v : Initialize(Tensor(shape, TCC_INIT_ZEROS, 0, 1), 0))
    EXPECT_EQ(v, 0.0f);
  for (float v : Initialize(Tensor(shape, TCC_INIT_ONES, 0, 1), 0))
    EXPECT_EQ(v, 1.0f);
}

TEST(InitializersTest, ConstantIsTheScaleItself) {
  // The loss scale's start: exact, also at the top of the f32 range.
  for (double value : {65536.0, 1.7014118346046923e38, 0.5})
    for (float v : Initialize(Tensor({3}, TCC_INIT_CONSTANT, value, 0), 0))
      EXPECT_EQ(v, static_cast<float>(value));
  EXPECT_EQ(InitKindName(TCC_INIT_CONSTANT), "constant");
}

TEST(InitializersTest, UniformFollowsDefinitionAndRange) {
  std::vector<int64_t> shape{200000};
  tcc_tensor_desc t = Tensor(shape, TCC_INIT_UNIFORM, 0.25, 42);
  std::vector<float> values = Initialize(t, 7);
  uint64_t key = tcc_rng_stream_key(7, TCC_RNG_DOMAIN_PARAM_INIT, 42);
  double sum = 0, squares = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    ASSERT_GE(values[i], -0.25f);
    ASSERT_LT(values[i], 0.25f);
    sum += values[i];
    squares += values[i] * values[i];
  }
  for (int64_t i : {0, 1, 12345, 199999}) {
    double u = tcc_rng_unit_double(tcc_rng_key_bits(key, i));
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
  uint64_t key = tcc_rng_stream_key(0, TCC_RNG_DOMAIN_PARAM_INIT, 5);
  double u1 = tcc_rng_unit_double(tcc_rng_key_bits(key, 20));
  double u2 = tcc_rng_unit_double(tcc_rng_key_bits(key, 21));
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

// Threads fill chunks of 2^20 elements, normal pairs computed once for
// both elements: every element must still be InitialValue's, bit for bit,
// for any thread count, and for a shard starting at an odd index (a pair
// split across the shard's start, and across its last element).
TEST(InitializersTest, ThreadsAndPairsChangeNoValue) {
  const int64_t n = (int64_t{5} << 19) + 3; // 2.5 chunks, odd
  std::vector<int64_t> shape{n};
  for (tcc_init_kind kind : {TCC_INIT_NORMAL, TCC_INIT_UNIFORM}) {
    tcc_tensor_desc t = Tensor(shape, kind, 0.02, 11);
    for (int64_t first : {int64_t{0}, int64_t{7}}) {
      std::vector<float> one(n), four(n), automatic(n);
      ASSERT_TRUE(InitializeTensor(t, 5, one.data(), first, 1).ok());
      ASSERT_TRUE(InitializeTensor(t, 5, four.data(), first, 4).ok());
      ASSERT_TRUE(InitializeTensor(t, 5, automatic.data(), first).ok());
      int64_t differ = 0;
      for (int64_t i = 0; i < n; ++i)
        differ += one[i] != four[i] || one[i] != automatic[i] ||
                  one[i] != InitialValue(t, 5, first + i);
      EXPECT_EQ(differ, 0) << InitKindName(kind) << ", first index " << first;
    }
  }
}

// The default count follows OMP_NUM_THREADS (trun's --threads and cgroup
// quota reach the fill through it); anything but one positive count falls
// back to the affinity mask's CPUs.
TEST(InitializersTest, ThreadsFollowOmpNumThreads) {
  const char *saved = std::getenv("OMP_NUM_THREADS");
  const std::string restore = saved != nullptr ? saved : "";
  ::unsetenv("OMP_NUM_THREADS");
  const int affinity = InitializerThreads();
  EXPECT_GE(affinity, 1);
  EXPECT_LE(affinity, 64);
  ::setenv("OMP_NUM_THREADS", "3", 1);
  EXPECT_EQ(InitializerThreads(), 3);
  ::setenv("OMP_NUM_THREADS", "1000", 1);
  EXPECT_EQ(InitializerThreads(), 64);
  for (const char *bad : {"0", "-2", "4,2", "two", "3x"}) {
    ::setenv("OMP_NUM_THREADS", bad, 1);
    EXPECT_EQ(InitializerThreads(), affinity) << "OMP_NUM_THREADS=" << bad;
  }
  if (saved != nullptr)
    ::setenv("OMP_NUM_THREADS", restore.c_str(), 1);
  else
    ::unsetenv("OMP_NUM_THREADS");
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

// Batch norm's num_batches_tracked buffer: i64 zeros (or ones); other
// initializers of integers are refused.
TEST(InitializersTest, IntegerBufferStartsAtZerosOrOnes) {
  std::vector<int64_t> shape{3};
  tcc_tensor_desc t = testing::MakeTensor("count", TCC_DTYPE_I64, shape);
  t.shape = shape.data();
  std::vector<int64_t> values(3, 7);
  ASSERT_TRUE(InitializeTensor(t, 0, values.data()).ok());
  EXPECT_EQ(values, std::vector<int64_t>(3, 0));
  t.init_kind = TCC_INIT_ONES;
  ASSERT_TRUE(InitializeTensor(t, 0, values.data()).ok());
  EXPECT_EQ(values, std::vector<int64_t>(3, 1));
  t.init_kind = TCC_INIT_NORMAL;
  t.init_scale = 1;
  EXPECT_FALSE(InitializeTensor(t, 0, values.data()).ok());
}

} // namespace
} // namespace tcc::trun
