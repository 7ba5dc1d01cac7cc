#include "runtime/trun/train/Sampler.h"

#include "runtime/trun/step/StepLibrary.h"
#include "runtime/trun/train/Logits.h"
#include "runtime/trun/train/Trainer.h"
#include "tests/runtime/TestData.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

namespace tcc::trun {
namespace {

TEST(PickTokenTest, GreedyTakesTheFirstMaximum) {
  float logits[4] = {1, 3, 3, -2};
  EXPECT_EQ(PickToken(logits, 4, 0.0, 0.99), 1);
  EXPECT_EQ(PickToken(logits, 1, 0.0, 0.5), 0); // only id 0 allowed
}

TEST(PickTokenTest, SamplesByInverseCdfOfTheTemperedSoftmax) {
  // Probabilities 1/4, 3/4 at temperature 1; 1/(1+sqrt 3), ... at 2.
  float logits[2] = {0, std::log(3.0f)};
  EXPECT_EQ(PickToken(logits, 2, 1.0, 0.0), 0);
  EXPECT_EQ(PickToken(logits, 2, 1.0, 0.2499), 0);
  EXPECT_EQ(PickToken(logits, 2, 1.0, 0.2501), 1);
  EXPECT_EQ(PickToken(logits, 2, 1.0, 0.9999), 1);
  double cut = 1 / (1 + std::sqrt(3.0));
  EXPECT_EQ(PickToken(logits, 2, 2.0, cut - 1e-4), 0);
  EXPECT_EQ(PickToken(logits, 2, 2.0, cut + 1e-4), 1);
}

TEST(PickTokenTest, TopKAndTopPKeepTheLikeliestThenDrawInIdOrder) {
  // Probabilities 1, 3, 2, 4 (/ 10) at temperature 1; ranked ids 3, 1, 2, 0.
  float logits[4] = {0, std::log(3.0f), std::log(2.0f), std::log(4.0f)};
  SamplingParams k2{1.0, 2, 1.0};
  // Kept 1 (0.3) and 3 (0.4), drawn in id order: id 1 below u = 3/7.
  EXPECT_EQ(PickTokenFiltered(logits, 4, k2, 3.0 / 7 - 1e-4), 1);
  EXPECT_EQ(PickTokenFiltered(logits, 4, k2, 3.0 / 7 + 1e-4), 3);
  // top-p 0.5: 0.4 is not enough, 0.4 + 0.3 is: the same two ids.
  SamplingParams p5{1.0, 0, 0.5};
  for (double u : {0.1, 0.42, 0.43, 0.9})
    EXPECT_EQ(PickTokenFiltered(logits, 4, p5, u), PickTokenFiltered(logits, 4, k2, u));
  // top-p 0.35 or top-k 1: only the likeliest, at any temperature.
  for (double u : {0.0, 0.5, 0.999}) {
    EXPECT_EQ(PickTokenFiltered(logits, 4, {1.0, 0, 0.35}, u), 3);
    EXPECT_EQ(PickTokenFiltered(logits, 4, {5.0, 1, 1.0}, u), 3);
  }
  // Unfiltered (and top-k >= n): PickToken exactly.
  for (double u = 0.0; u < 1.0; u += 0.01) {
    EXPECT_EQ(PickTokenFiltered(logits, 4, {1.5, 0, 1.0}, u), PickToken(logits, 4, 1.5, u));
    EXPECT_EQ(PickTokenFiltered(logits, 4, {1.5, 4, 1.0}, u), PickToken(logits, 4, 1.5, u));
  }
}

// The bigram fixture with a table that makes token i predict (i + 1) mod V;
// sampling runs through a Trainer holding that table, on the CPU build and
// on the fake GPU build (whose logits are downloaded).
class BigramSamplerTest : public ::testing::TestWithParam<const char *> {
protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<StepLibrary>> library =
        StepLibrary::Open(GetParam());
    ASSERT_TRUE(library.ok()) << library.status();
    library_ = std::move(*library);
    absl::StatusOr<StepBinding> binding = BindStep(d());
    ASSERT_TRUE(binding.ok()) << binding.status();
    binding_ = *binding;
    ASSERT_TRUE(binding_.is_token_model());
    ASSERT_EQ(binding_.vocab_size, 256);
    ASSERT_EQ(binding_.context_length(), 16);
    table_.assign(256 * 256, 0.0f);
    bias_.assign(256, 0.0f);
  }
  void TearDown() override {
    trainer_.reset(); // before the library that holds its device API
  }
  const tcc_step_descriptor &d() const { return library_->descriptor(); }
  // A trainer holding table_ and bias_.
  Trainer *MakeTrainer() {
    absl::StatusOr<std::unique_ptr<Trainer>> trainer =
        Trainer::Create(d(), binding_, 0);
    EXPECT_TRUE(trainer.ok()) << trainer.status();
    if (!trainer.ok())
      return nullptr;
    trainer_ = std::move(*trainer);
    std::memcpy(trainer_->mutable_param(0), table_.data(), table_.size() * 4);
    std::memcpy(trainer_->mutable_param(1), bias_.data(), bias_.size() * 4);
    return trainer_.get();
  }
  std::unique_ptr<Sampler> Make() {
    if (!MakeTrainer())
      return nullptr;
    absl::StatusOr<std::unique_ptr<Sampler>> sampler =
        Sampler::Create(d(), binding_, *trainer_);
    EXPECT_TRUE(sampler.ok()) << sampler.status();
    return sampler.ok() ? std::move(*sampler) : nullptr;
  }
  std::unique_ptr<StepLibrary> library_;
  StepBinding binding_;
  std::vector<float> table_, bias_;
  std::unique_ptr<Trainer> trainer_;
};

TEST_P(BigramSamplerTest, GreedyFollowsTheLogitsAtTheLastRealPosition) {
  for (int i = 0; i < 256; ++i)
    table_[i * 256 + (i + 1) % 256] = 10.0f;
  std::unique_ptr<Sampler> sampler = Make();
  ASSERT_NE(sampler, nullptr);
  // One token of context: position 0; the padding (id 0) would predict 1.
  absl::StatusOr<std::vector<int64_t>> out =
      sampler->Generate({5}, 20, 256, 0.0, 0);
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<int64_t> expected;
  for (int i = 0; i < 20; ++i)
    expected.push_back(6 + i);
  EXPECT_EQ(*out, expected); // runs past T = 16: the window slides
  // `allowed` restricts the choice: ids >= 6 are never picked.
  out = sampler->Generate({5}, 1, 6, 0.0, 0);
  ASSERT_TRUE(out.ok());
  EXPECT_LT((*out)[0], 6);
}

TEST_P(BigramSamplerTest, SameSeedSameTextOtherSeedDiffers) {
  std::unique_ptr<Sampler> sampler = Make(); // all logits 0: uniform
  ASSERT_NE(sampler, nullptr);
  absl::StatusOr<std::vector<int64_t>> a = sampler->Generate({1}, 30, 256, 1.0, 4);
  absl::StatusOr<std::vector<int64_t>> b = sampler->Generate({1}, 30, 256, 1.0, 4);
  absl::StatusOr<std::vector<int64_t>> c = sampler->Generate({1}, 30, 256, 1.0, 5);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_NE(*a, *c);
}

TEST_P(BigramSamplerTest, RejectsBadContextsAndStepsWithoutLogits) {
  std::unique_ptr<Sampler> sampler = Make();
  ASSERT_NE(sampler, nullptr);
  EXPECT_EQ(sampler->Generate({}, 1, 256, 0, 0).status().message(),
            "sampling needs at least one context token");
  EXPECT_EQ(sampler->Generate({256}, 1, 256, 0, 0).status().message(),
            "context token 256 is out of range for 'logits' width 256");
  StepBinding no_logits = binding_;
  no_logits.token_logits_output = -1;
  absl::StatusOr<std::unique_ptr<Sampler>> bad =
      Sampler::Create(d(), no_logits, *trainer_);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("eval output 'logits'"),
            std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(CpuAndFakeGpu, BigramSamplerTest,
                         ::testing::Values(TRUN_TEST_BIGRAM_STEP,
                                           TRUN_TEST_BIGRAM_CUDA_STEP));

} // namespace
} // namespace tcc::trun
