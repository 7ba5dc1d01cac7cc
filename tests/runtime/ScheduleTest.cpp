// The training recipe on trun's side: learning-rate schedule values at their
// boundaries, schedule / micro-batch / train-output validation and --info,
// and the Trainer passing the per-step values (learning rate, step,
// rng_seed), allocating optimizer state and train outputs, and logging the
// learning rate and gradient norm.
#include "runtime/trun/data/BatchLoader.h"
#include "runtime/trun/step/StepDescriptor.h"
#include "runtime/trun/train/Trainer.h"
#include "tests/runtime/TestData.h"

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

namespace tcc::trun {
namespace {

using testing::FakeStep;

// A tensor desc pointing at `shape` (which must outlive it).
tcc_tensor_desc MakeTensor(const char *name, tcc_dtype dtype,
                           const std::vector<int64_t> &shape) {
  tcc_tensor_desc t = testing::MakeTensor(name, dtype, shape);
  t.shape = shape.empty() ? nullptr : shape.data();
  return t;
}

tcc_lr_schedule WarmupCosine(double base, int64_t warmup, int64_t decay,
                             double min_lr) {
  return {TCC_LR_WARMUP_COSINE, base, warmup, decay, min_lr};
}

//===----------------------------------------------------------------------===//
// LearningRateAt
//===----------------------------------------------------------------------===//

TEST(LearningRateAtTest, ConstantIsTheBaseAtEveryStep) {
  tcc_lr_schedule s = {TCC_LR_CONSTANT, 0.1, 0, 0, 0};
  EXPECT_EQ(LearningRateAt(s, 0.1, 0), 0.1);
  EXPECT_EQ(LearningRateAt(s, 0.1, 123456), 0.1);
  EXPECT_EQ(LearningRateAt(s, 0.3, 7), 0.3) << "--lr replaces the base";
}

TEST(LearningRateAtTest, WarmupCosineAtItsBoundaries) {
  // warmup 10 steps to 1e-3, cosine to 1e-4 at step 110.
  tcc_lr_schedule s = WarmupCosine(1e-3, 10, 110, 1e-4);
  // Warmup: base * (s + 1) / warmup, so step 0 already trains.
  EXPECT_DOUBLE_EQ(LearningRateAt(s, 1e-3, 0), 1e-4);
  EXPECT_DOUBLE_EQ(LearningRateAt(s, 1e-3, 4), 5e-4);
  EXPECT_DOUBLE_EQ(LearningRateAt(s, 1e-3, 9), 1e-3); // last warmup step
  // Warmup end: r = 0, the full base.
  EXPECT_DOUBLE_EQ(LearningRateAt(s, 1e-3, 10), 1e-3);
  // Halfway through the decay: r = 0.5, cos = 0, the mean of base and min.
  EXPECT_DOUBLE_EQ(LearningRateAt(s, 1e-3, 60), 5.5e-4);
  // One step before the end: r = 0.99.
  EXPECT_DOUBLE_EQ(LearningRateAt(s, 1e-3, 109),
                   1e-4 + 0.5 * (1 + std::cos(M_PI * 0.99)) * 9e-4);
  // Decay end and after: the floor.
  EXPECT_DOUBLE_EQ(LearningRateAt(s, 1e-3, 110), 1e-4);
  EXPECT_DOUBLE_EQ(LearningRateAt(s, 1e-3, 1000000), 1e-4);
  // --lr replaces the base; the floor stays.
  EXPECT_DOUBLE_EQ(LearningRateAt(s, 2e-3, 9), 2e-3);
  EXPECT_DOUBLE_EQ(LearningRateAt(s, 2e-3, 60), 1.05e-3);
  EXPECT_DOUBLE_EQ(LearningRateAt(s, 2e-3, 110), 1e-4);
}

TEST(LearningRateAtTest, NoWarmupAndNoDecayRange) {
  tcc_lr_schedule no_warmup = WarmupCosine(1.0, 0, 4, 0.0);
  EXPECT_DOUBLE_EQ(LearningRateAt(no_warmup, 1.0, 0), 1.0);
  EXPECT_DOUBLE_EQ(LearningRateAt(no_warmup, 1.0, 2), 0.5);
  EXPECT_DOUBLE_EQ(LearningRateAt(no_warmup, 1.0, 4), 0.0);
  // decay_steps == warmup_steps: warm up, then straight to the floor.
  tcc_lr_schedule step_down = WarmupCosine(1.0, 4, 4, 0.25);
  EXPECT_DOUBLE_EQ(LearningRateAt(step_down, 1.0, 3), 1.0);
  EXPECT_DOUBLE_EQ(LearningRateAt(step_down, 1.0, 4), 0.25);
}

//===----------------------------------------------------------------------===//
// Validation and --info
//===----------------------------------------------------------------------===//

std::string ValidationError(const tcc_step_descriptor &d) {
  absl::Status status = ValidateDescriptor(d, "step.so");
  EXPECT_FALSE(status.ok());
  return std::string(status.message());
}

TEST(ScheduleValidationTest, AcceptsAWarmupCosineSchedule) {
  FakeStep step(4, 6, 3);
  step.descriptor.lr_schedule = WarmupCosine(0.05, 10, 100, 0.005);
  EXPECT_TRUE(ValidateDescriptor(step.descriptor, "step.so").ok());
}

TEST(ScheduleValidationTest, RejectsBadSchedules) {
  FakeStep step(4, 6, 3);
  step.descriptor.lr_schedule.kind = 7;
  EXPECT_EQ(ValidationError(step.descriptor),
            "step.so: unknown lr_schedule kind 7");

  step.descriptor.lr_schedule = {TCC_LR_CONSTANT, 0.5, 0, 0, 0};
  EXPECT_EQ(ValidationError(step.descriptor),
            "step.so: lr_schedule.base_lr 0.5 differs from "
            "default_learning_rate 0.05");

  step.descriptor.lr_schedule = WarmupCosine(0.05, 10, 5, 0);
  EXPECT_EQ(ValidationError(step.descriptor),
            "step.so: warmup_cosine schedule needs 0 <= warmup_steps <= "
            "decay_steps and decay_steps > 0, got warmup_steps 10, "
            "decay_steps 5");
  step.descriptor.lr_schedule = WarmupCosine(0.05, -1, 5, 0);
  EXPECT_NE(ValidationError(step.descriptor).find("warmup_steps -1"),
            std::string::npos);
  step.descriptor.lr_schedule = WarmupCosine(0.05, 0, 0, 0);
  EXPECT_NE(ValidationError(step.descriptor).find("decay_steps 0"),
            std::string::npos);
  step.descriptor.lr_schedule = WarmupCosine(0.05, 0, 10, -0.1);
  EXPECT_EQ(ValidationError(step.descriptor),
            "step.so: invalid lr_schedule.min_lr -0.1");
  step.descriptor.lr_schedule = WarmupCosine(0.05, 0, 10, NAN);
  EXPECT_EQ(ValidationError(step.descriptor),
            "step.so: invalid lr_schedule.min_lr nan");
}

TEST(ScheduleValidationTest, RejectsZeroMicroBatches) {
  FakeStep step(4, 6, 3);
  step.descriptor.micro_batches = 0;
  EXPECT_EQ(ValidationError(step.descriptor),
            "step.so: micro_batches must be >= 1, got 0");
}

TEST(ScheduleValidationTest, ChecksTrainOutputs) {
  FakeStep step(4, 6, 3);
  std::vector<int64_t> scalar, wide{3};
  std::vector<tcc_tensor_desc> outs = {
      MakeTensor("grad_norm", TCC_DTYPE_F32, scalar),
      MakeTensor("grad:w", TCC_DTYPE_F32, wide)};
  step.descriptor.num_train_outputs = 2;
  step.descriptor.train_outputs = outs.data();
  // "grad:w" may sit next to the parameter "w"; names are per list.
  EXPECT_TRUE(ValidateDescriptor(step.descriptor, "step.so").ok());

  outs[1] = MakeTensor("grad_norm", TCC_DTYPE_F32, scalar);
  EXPECT_EQ(ValidationError(step.descriptor),
            "step.so: train output name 'grad_norm' is used twice");

  outs[0] = MakeTensor("grad_norm", TCC_DTYPE_F32, wide);
  outs[1] = MakeTensor("other", TCC_DTYPE_F32, scalar);
  EXPECT_EQ(ValidationError(step.descriptor),
            "step.so: train output 'grad_norm' must be one f32 value, got "
            "f32 [3]");

  step.descriptor.train_outputs = nullptr;
  EXPECT_EQ(ValidationError(step.descriptor),
            "step.so: 2 train outputs but a null list");
}

TEST(ScheduleInfoTest, PrintsScheduleMicroBatchesAndTrainOutputs) {
  FakeStep step(4, 6, 3);
  step.descriptor.optimizer = "adamw";
  step.descriptor.lr_schedule = WarmupCosine(0.05, 10, 100, 0.005);
  step.descriptor.micro_batches = 4;
  std::vector<int64_t> scalar;
  tcc_tensor_desc norm = MakeTensor("grad_norm", TCC_DTYPE_F32, scalar);
  step.descriptor.num_train_outputs = 1;
  step.descriptor.train_outputs = &norm;
  std::ostringstream out;
  PrintDescriptorInfo(step.descriptor, out);
  EXPECT_NE(out.str().find("optimizer: adamw, default learning rate 0.05\n"
                           "lr schedule: warmup_cosine (linear warmup over 10 "
                           "steps, cosine to 0.005 at step 100)\n"
                           "micro-batches per step: 4\n"),
            std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("train outputs: 1\n  grad_norm  f32 []  4 bytes\n"),
            std::string::npos)
      << out.str();
}

//===----------------------------------------------------------------------===//
// The Trainer
//===----------------------------------------------------------------------===//

// What the fake train entry point saw.
struct Seen {
  std::vector<float> learning_rates;
  std::vector<int64_t> steps;
  std::vector<uint64_t> seeds;
  bool state_ok = true;
  bool has_train_outputs = false;
};
Seen seen;

// Writes grad_norm = step + 1 and counts its calls in the optimizer state,
// which must start at zeros.
int32_t RecipeTrain(const tcc_step_args *args) {
  seen.learning_rates.push_back(args->learning_rate);
  seen.steps.push_back(args->step);
  seen.seeds.push_back(args->rng_seed);
  float *state = static_cast<float *>(args->optimizer_state[0]);
  seen.state_ok &= reinterpret_cast<uintptr_t>(state) % 64 == 0 &&
                   state[0] == static_cast<float>(args->step) &&
                   state[1] == 0.0f && state[2] == 0.0f;
  state[0] += 1.0f;
  seen.has_train_outputs = args->train_outputs && args->train_outputs[0];
  if (seen.has_train_outputs)
    *static_cast<float *>(args->train_outputs[0]) =
        static_cast<float>(args->step + 1);
  *args->loss = 1.0f;
  return TCC_STATUS_OK;
}

int32_t UnusedEval(const tcc_step_args *) { return TCC_STATUS_RUNTIME_ERROR; }

class RecipeTrainerTest : public ::testing::Test {
protected:
  void SetUp() override {
    seen = Seen();
    step_.descriptor.train = RecipeTrain;
    step_.descriptor.eval = UnusedEval;
    step_.descriptor.optimizer = "adamw";
    step_.descriptor.lr_schedule = WarmupCosine(0.05, 2, 6, 0.01);
    state_ = MakeTensor("w.adam_m", TCC_DTYPE_F32, w_shape_);
    step_.descriptor.num_optimizer_state = 1;
    step_.descriptor.optimizer_state = &state_;
    norm_ = MakeTensor("grad_norm", TCC_DTYPE_F32, scalar_);
    step_.descriptor.num_train_outputs = 1;
    step_.descriptor.train_outputs = &norm_;
    ASSERT_TRUE(ValidateDescriptor(step_.descriptor, "step.so").ok());
    data_.count = 6;
    data_.rows = 1;
    data_.cols = 2;
    data_.pixels.assign(12, 3);
    data_.labels = {0, 1, 2, 0, 1, 2};
  }

  absl::Status Run(Trainer &trainer, int64_t steps, float lr,
                   std::ostream &log) {
    PixelNormalizer normalizer = PixelNormalizer::FromTrainingImages(data_);
    ShuffledBatches batches(data_, normalizer, 2, 0);
    BatchLoader loader(batches, *binding_);
    int64_t total = trainer.steps_done() + steps;
    ProgressReporter progress(log, /*live=*/false, total,
                              trainer.steps_done(), /*log_every=*/2,
                              "samples");
    TrainConfig config;
    config.steps = total;
    config.learning_rate = lr;
    config.progress = &progress;
    config.items_per_step = 2;
    absl::Status status = trainer.Train(loader, config).status();
    progress.Finish();
    return status;
  }

  std::unique_ptr<Trainer> MakeTrainer(uint64_t seed) {
    binding_ = BindStep(step_.descriptor);
    EXPECT_TRUE(binding_.ok()) << binding_.status();
    auto trainer = Trainer::Create(step_.descriptor, *binding_, seed);
    EXPECT_TRUE(trainer.ok()) << trainer.status();
    return trainer.ok() ? std::move(*trainer) : nullptr;
  }

  FakeStep step_{2, 2, 3};
  std::vector<int64_t> w_shape_{3}, scalar_;
  tcc_tensor_desc state_{}, norm_{};
  absl::StatusOr<StepBinding> binding_;
  LabeledImages data_;
};

TEST_F(RecipeTrainerTest, PassesScheduleStepSeedStateAndTrainOutputs) {
  std::unique_ptr<Trainer> trainer = MakeTrainer(/*seed=*/42);
  ASSERT_TRUE(trainer);
  std::ostringstream log;
  ASSERT_TRUE(Run(*trainer, 4, 0.05f, log).ok()) << log.str();
  std::vector<float> want;
  for (int64_t s = 0; s < 4; ++s)
    want.push_back(static_cast<float>(
        LearningRateAt(step_.descriptor.lr_schedule, 0.05, s)));
  EXPECT_EQ(seen.learning_rates, want);
  EXPECT_FLOAT_EQ(seen.learning_rates[0], 0.025f); // warmup
  EXPECT_FLOAT_EQ(seen.learning_rates[2], 0.05f);  // warmup end
  EXPECT_EQ(seen.steps, (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(seen.seeds, std::vector<uint64_t>(4, 42));
  EXPECT_TRUE(seen.state_ok) << "optimizer state zeros, kept across steps";
  EXPECT_TRUE(seen.has_train_outputs);
  EXPECT_EQ(*static_cast<const float *>(trainer->train_output(0)), 4.0f);
  EXPECT_FLOAT_EQ(trainer->last_learning_rate(), want[3]);
  // Progress lines: this step's lr and the window's mean grad norm.
  EXPECT_NE(log.str().find("step 2/4  loss 1.0000  lr 5.00e-02  grad norm 1.5  "),
            std::string::npos)
      << log.str();
  EXPECT_NE(log.str().find("step 4/4  loss 1.0000  lr 4.41e-02  grad norm 3.5  "),
            std::string::npos)
      << log.str();

  // A second Train call continues the schedule from step 4.
  ASSERT_TRUE(Run(*trainer, 3, 0.05f, log).ok());
  EXPECT_EQ(seen.steps.back(), 6);
  EXPECT_FLOAT_EQ(seen.learning_rates.back(), 0.01f); // the floor
}

TEST_F(RecipeTrainerTest, LrReplacesTheScheduleBase) {
  std::unique_ptr<Trainer> trainer = MakeTrainer(/*seed=*/0);
  ASSERT_TRUE(trainer);
  std::ostringstream log;
  ASSERT_TRUE(Run(*trainer, 3, 0.2f, log).ok());
  EXPECT_FLOAT_EQ(seen.learning_rates[0], 0.1f); // 0.2 * 1 / 2
  EXPECT_FLOAT_EQ(seen.learning_rates[2], 0.2f);
}

TEST_F(RecipeTrainerTest, NoGradNormMeansNoNormInTheLog) {
  step_.descriptor.num_train_outputs = 0;
  step_.descriptor.train_outputs = nullptr;
  std::unique_ptr<Trainer> trainer = MakeTrainer(/*seed=*/0);
  ASSERT_TRUE(trainer);
  std::ostringstream log;
  ASSERT_TRUE(Run(*trainer, 2, 0.05f, log).ok());
  EXPECT_FALSE(seen.has_train_outputs) << "train_outputs is NULL";
  EXPECT_EQ(log.str().find("grad norm"), std::string::npos) << log.str();
  EXPECT_NE(log.str().find("step 2/2  loss 1.0000  lr 5.00e-02  "),
            std::string::npos)
      << log.str();
}

} // namespace
} // namespace tcc::trun
