#include "runtime/trun/train/Trainer.h"

#include "runtime/initializers/Initializers.h"
#include "runtime/trun/data/BatchLoader.h"
#include "runtime/trun/step/StepDescriptor.h"
#include "runtime/trun/step/StepLibrary.h"
#include "tests/runtime/TestData.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <functional>
#include <limits>
#include <sstream>

namespace tcc::trun {
namespace {

using testing::FakeStep;

// What the fake entry points saw; reset by each test.
struct Calls {
  std::vector<int64_t> steps;
  std::vector<float> learning_rates;
  bool buffers_ok = true;
  int64_t fail_at = -1; // return TCC_STATUS_RUNTIME_ERROR at this step
  int64_t inf_at = -1;  // report an infinite loss at this step
  int64_t overflow_at = -1; // loss scaling: gradients overflow at this step
  bool write_loss = true;
};
Calls calls;

bool Aligned(const void *p) {
  return p && reinterpret_cast<uintptr_t>(p) % 64 == 0;
}

int32_t RecordingTrain(const tcc_step_args *args) {
  calls.steps.push_back(args->step);
  calls.learning_rates.push_back(args->learning_rate);
  calls.buffers_ok &= Aligned(args->params[0]) && Aligned(args->params[1]) &&
                      Aligned(args->workspace) && Aligned(args->inputs[0]) &&
                      Aligned(args->inputs[1]) && args->outputs == nullptr;
  if (args->step == calls.fail_at)
    return TCC_STATUS_RUNTIME_ERROR;
  if (calls.write_loss)
    *args->loss = args->step == calls.inf_at
                      ? std::numeric_limits<float>::infinity()
                      : 1.0f / (1 + args->step);
  return TCC_STATUS_OK;
}

// logits (B, C) always pick class 0; loss = mean label over all B rows.
int32_t ClassZeroEval(const tcc_step_args *args) {
  const int64_t batch = 2, classes = 3;
  const int32_t *labels = static_cast<const int32_t *>(args->inputs[1]);
  float *logits = static_cast<float *>(args->outputs[0]); // (B, C)
  float sum = 0;
  for (int64_t r = 0; r < batch; ++r) {
    for (int64_t c = 0; c < classes; ++c)
      logits[r * classes + c] = c == 0 ? 1.0f : 0.0f;
    sum += labels[r];
  }
  *args->loss = sum / batch;
  return calls.fail_at == 100 ? TCC_STATUS_BAD_ARGS : TCC_STATUS_OK;
}

LabeledImages Samples(std::vector<uint8_t> labels) {
  LabeledImages set;
  set.count = static_cast<int64_t>(labels.size());
  set.rows = 1;
  set.cols = 2;
  set.pixels.assign(set.count * 2, 9);
  set.labels = std::move(labels);
  return set;
}

class TrainerTest : public ::testing::Test {
protected:
  void SetUp() override {
    calls = Calls();
    step_.descriptor.train = RecordingTrain;
    step_.descriptor.eval = ClassZeroEval;
  }

  std::unique_ptr<Trainer> MakeTrainer(uint64_t seed = 0) {
    binding_ = BindStep(step_.descriptor);
    EXPECT_TRUE(binding_.ok()) << binding_.status();
    absl::StatusOr<std::unique_ptr<Trainer>> trainer =
        Trainer::Create(step_.descriptor, *binding_, seed);
    EXPECT_TRUE(trainer.ok()) << trainer.status();
    return trainer.ok() ? std::move(*trainer) : nullptr;
  }

  // Trains `steps` more steps, continuing the data where the trainer is.
  absl::StatusOr<TrainSummary>
  TrainFor(Trainer &trainer, int64_t steps, std::ostream &log,
           OnNan on_nan = OnNan::kStop,
           std::function<absl::Status(int64_t)> after_step = nullptr,
           bool read_fp8_scaling = true) {
    ShuffledBatches batches(data_, normalizer_, 2, 0);
    batches.SeekTo(trainer.steps_done());
    BatchLoader loader(batches, *binding_, 3);
    int64_t total = trainer.steps_done() + steps;
    ProgressReporter progress(log, /*live=*/false, total,
                              trainer.steps_done(), /*log_every=*/2,
                              "samples");
    TrainConfig config;
    config.steps = total;
    config.learning_rate = 0.5f;
    config.steps_per_epoch = batches.batches_per_epoch();
    config.progress = &progress;
    config.items_per_step = 2;
    config.on_nan = on_nan;
    config.stop_requested = &stop_;
    config.after_step = std::move(after_step);
    config.read_fp8_scaling = read_fp8_scaling;
    absl::StatusOr<TrainSummary> summary = trainer.Train(loader, config);
    progress.Finish();
    return summary;
  }
  absl::Status Train(Trainer &trainer, int64_t steps, std::ostream &log) {
    return TrainFor(trainer, steps, log).status();
  }

  std::atomic<bool> stop_{false};

  FakeStep step_{2, 2, 3};
  absl::StatusOr<StepBinding> binding_;
  LabeledImages data_ = Samples({0, 1, 1, 1, 0});
  PixelNormalizer normalizer_ = PixelNormalizer::FromTrainingImages(data_);
};

TEST_F(TrainerTest, InitializesParamsFromTheirSpecs) {
  std::unique_ptr<Trainer> trainer = MakeTrainer(/*seed=*/5);
  ASSERT_TRUE(trainer);
  const float *w = static_cast<const float *>(trainer->param(0));
  const float *b = static_cast<const float *>(trainer->param(1));
  EXPECT_TRUE(Aligned(w));
  for (int64_t i = 0; i < 6; ++i)
    EXPECT_EQ(w[i], InitialValue(step_.params[0], 5, i));
  EXPECT_NE(w[0], 0.0f);
  for (int64_t i = 0; i < 3; ++i)
    EXPECT_EQ(b[i], 0.0f);
}

TEST_F(TrainerTest, PassesStepNumberLearningRateAndAlignedBuffers) {
  std::unique_ptr<Trainer> trainer = MakeTrainer();
  ASSERT_TRUE(trainer);
  std::ostringstream log;
  ASSERT_TRUE(Train(*trainer, 5, log).ok());
  EXPECT_EQ(calls.steps, (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(calls.learning_rates, std::vector<float>(5, 0.5f));
  EXPECT_TRUE(calls.buffers_ok);
  EXPECT_EQ(trainer->steps_done(), 5);
  // Steps 0 and 1 report 1 and 1/2: the logged loss is their mean.
  EXPECT_NE(log.str().find("step 2/5  loss 0.7500"), std::string::npos)
      << log.str();
  EXPECT_NE(log.str().find("step 4/5"), std::string::npos);
  EXPECT_NE(log.str().find("epoch 2 done: mean loss 0.2917  2 steps"),
            std::string::npos)
      << log.str();
}

// A fake step whose update is visible: every call adds 1 to the first
// weight, also the calls that report a non-finite loss.
int32_t CountingTrain(const tcc_step_args *args) {
  static_cast<float *>(args->params[0])[0] += 1.0f;
  return RecordingTrain(args);
}

TEST_F(TrainerTest, OnNanSkipUndoesTheUpdateAndGoesOn) {
  step_.descriptor.train = CountingTrain;
  calls.inf_at = 2; // the third step
  std::unique_ptr<Trainer> trainer = MakeTrainer();
  ASSERT_TRUE(trainer);
  float before = static_cast<const float *>(trainer->param(0))[0];
  std::ostringstream log;
  absl::StatusOr<TrainSummary> summary =
      TrainFor(*trainer, 5, log, OnNan::kSkip);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->steps, 5);
  EXPECT_EQ(summary->skipped, 1);
  EXPECT_EQ(trainer->steps_done(), 5);
  EXPECT_EQ(static_cast<const float *>(trainer->param(0))[0], before + 4);
  EXPECT_NE(log.str().find("non-finite loss at train step 3"),
            std::string::npos)
      << log.str();
}

TEST_F(TrainerTest, OnNanSkipGivesUpAfterTooManySkipsInARow) {
  step_.descriptor.train = CountingTrain;
  calls.write_loss = false; // every loss is NaN
  std::unique_ptr<Trainer> trainer = MakeTrainer();
  ASSERT_TRUE(trainer);
  float before = static_cast<const float *>(trainer->param(0))[0];
  std::ostringstream log;
  absl::Status status = TrainFor(*trainer, 50, log, OnNan::kSkip).status();
  EXPECT_NE(status.message().find(absl::StrCat(
                kMaxConsecutiveSkips, " steps in a row skipped")),
            absl::string_view::npos)
      << status;
  EXPECT_EQ(trainer->steps_done(), kMaxConsecutiveSkips - 1);
  EXPECT_EQ(static_cast<const float *>(trainer->param(0))[0], before)
      << "every update undone";
}

TEST_F(TrainerTest, StopsBetweenStepsWhenAStopIsRequested) {
  std::unique_ptr<Trainer> trainer = MakeTrainer();
  ASSERT_TRUE(trainer);
  std::ostringstream log;
  absl::StatusOr<TrainSummary> summary =
      TrainFor(*trainer, 10, log, OnNan::kStop, [&](int64_t done) {
        if (done == 3)
          stop_.store(true);
        return absl::OkStatus();
      });
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_TRUE(summary->interrupted);
  EXPECT_EQ(summary->steps, 3);
  EXPECT_EQ(trainer->steps_done(), 3);
}

TEST_F(TrainerTest, ContinuesTheStepCountAndDataAfterSetStepsDone) {
  std::unique_ptr<Trainer> trainer = MakeTrainer();
  ASSERT_TRUE(trainer);
  trainer->set_steps_done(7);
  std::ostringstream log;
  ASSERT_TRUE(Train(*trainer, 2, log).ok());
  EXPECT_EQ(calls.steps, (std::vector<int64_t>{7, 8}));
  EXPECT_EQ(trainer->steps_done(), 9);
}

TEST_F(TrainerTest, StopsOnNonZeroStatusNamingTheStep) {
  calls.fail_at = 3;
  std::unique_ptr<Trainer> trainer = MakeTrainer();
  ASSERT_TRUE(trainer);
  std::ostringstream log;
  absl::Status status = Train(*trainer, 10, log);
  EXPECT_EQ(status.message(), "step 'fake': train step 4 failed: returned 2 "
                              "(TCC_STATUS_RUNTIME_ERROR)");
  EXPECT_EQ(trainer->steps_done(), 3);
}

TEST_F(TrainerTest, StopsOnNonFiniteLoss) {
  calls.inf_at = 2;
  std::unique_ptr<Trainer> trainer = MakeTrainer();
  ASSERT_TRUE(trainer);
  std::ostringstream log;
  EXPECT_EQ(Train(*trainer, 10, log).message(),
            "step 'fake': non-finite loss at train step 3 (loss inf)");
}

// A step with dynamic loss scaling (tcc compile --loss-scale dynamic):
// state "loss_scale" (starts at 65536, TCC_INIT_CONSTANT) and the train
// outputs grad_norm, loss_scale, skipped and skipped_steps. At step
// calls.inf_at its gradients overflow: grad_norm inf, skipped 1, the scale
// halves, the weights stay.
struct LossScalingOutputs {
  std::vector<tcc_tensor_desc> state, outputs;
};

int32_t LossScalingTrain(const tcc_step_args *args) {
  float *scale = static_cast<float *>(args->optimizer_state[0]);
  float *out[4];
  for (int i = 0; i < 4; ++i)
    out[i] = static_cast<float *>(args->train_outputs[i]);
  static float skipped_so_far = 0;
  if (args->step == 0)
    skipped_so_far = 0;
  bool overflow = args->step == calls.overflow_at;
  *out[1] = *scale; // the scale this step used
  *out[0] = overflow ? std::numeric_limits<float>::infinity() : 1.0f;
  *out[2] = overflow ? 1.0f : 0.0f;
  skipped_so_far += *out[2];
  *out[3] = skipped_so_far;
  if (overflow)
    *scale *= 0.5f;
  else
    static_cast<float *>(args->params[0])[0] += 1.0f;
  *args->loss = args->step == calls.inf_at
                    ? std::numeric_limits<float>::infinity()
                    : 1.0f;
  return TCC_STATUS_OK;
}

class LossScalingTrainerTest : public TrainerTest {
protected:
  void SetUp() override {
    TrainerTest::SetUp();
    calls.overflow_at = 1;
    tcc_tensor_desc scale = testing::MakeTensor("loss_scale", TCC_DTYPE_F32, {});
    scale.init_kind = TCC_INIT_CONSTANT;
    scale.init_scale = 65536;
    lists_.state = {scale};
    for (const char *name : {"grad_norm", "loss_scale", "skipped", "skipped_steps"})
      lists_.outputs.push_back(testing::MakeTensor(name, TCC_DTYPE_F32, {}));
    step_.descriptor.num_optimizer_state = 1;
    step_.descriptor.optimizer_state = lists_.state.data();
    step_.descriptor.num_train_outputs = 4;
    step_.descriptor.train_outputs = lists_.outputs.data();
    step_.descriptor.train = LossScalingTrain;
  }
  LossScalingOutputs lists_;
};

TEST_F(LossScalingTrainerTest, AnOverflowingStepIsReportedNotANanEvent) {
  std::unique_ptr<Trainer> trainer = MakeTrainer();
  ASSERT_TRUE(trainer);
  EXPECT_EQ(*static_cast<const float *>(trainer->optimizer_state()[0]), 65536.0f)
      << "the scale starts at its constant";
  float before = static_cast<const float *>(trainer->param(0))[0];
  std::ostringstream log;
  absl::StatusOr<TrainSummary> summary = TrainFor(*trainer, 4, log);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->skipped, 0) << "nothing rolled back by --on-nan";
  EXPECT_EQ(summary->overflow_skipped, 1);
  EXPECT_EQ(summary->run_skipped_steps, 1);
  EXPECT_EQ(summary->last_loss_scale, 32768.0);
  EXPECT_EQ(static_cast<const float *>(trainer->param(0))[0], before + 3);
  // Steps 1-2 (the second overflowed), 3-4: the latest scale, the count.
  EXPECT_NE(log.str().find("loss scale 65536  overflow 1"), std::string::npos)
      << log.str();
  EXPECT_NE(log.str().find("step 4/4  loss 1.0000  lr 5.00e-01  grad norm 1  "
                           "loss scale 32768  "),
            std::string::npos)
      << log.str();
}

TEST_F(LossScalingTrainerTest, ANonFiniteLossIsStillANanEvent) {
  calls.inf_at = 1; // the overflowing step's loss is inf too
  std::unique_ptr<Trainer> trainer = MakeTrainer();
  ASSERT_TRUE(trainer);
  std::ostringstream log;
  EXPECT_EQ(Train(*trainer, 4, log).message(),
            "step 'fake': non-finite loss at train step 2 (loss inf, grad norm "
            "inf)");
}

// FP8 delayed scaling's state "fp8_scaling" f32 [2, 32]: the step casts
// site 0 only (100 elements; the call of args->step flushes args->step of
// them and, at step 3, saturates 2), with scale 1 + step; site 1 stays zero.
int32_t Fp8ScalingTrain(const tcc_step_args *args) {
  float *records = static_cast<float *>(args->optimizer_state[0]);
  tcc_fp8_scaling_record site0{};
  site0.scale = 1.0f + args->step;
  site0.elements = 100;
  site0.flushed = static_cast<float>(args->step);
  site0.saturated = args->step == 3 ? 2.0f : 0.0f;
  std::memcpy(&site0.casts, &records[offsetof(tcc_fp8_scaling_record, casts) / 4],
              sizeof(float));
  site0.casts += 1;
  std::memcpy(records, &site0, sizeof site0);
  *args->loss = 1.0f;
  return TCC_STATUS_OK;
}

class Fp8ScalingTrainerTest : public TrainerTest {
protected:
  void SetUp() override {
    TrainerTest::SetUp();
    UseShape({2, TCC_FP8_SCALING_RECORD_FLOATS});
    step_.descriptor.train = Fp8ScalingTrain;
  }
  void UseShape(std::vector<int64_t> shape, tcc_dtype dtype = TCC_DTYPE_F32) {
    shape_ = std::move(shape);
    state_ = {testing::MakeTensor(TCC_FP8_SCALING_STATE, dtype, shape_)};
    state_[0].shape = shape_.data();
    step_.descriptor.num_optimizer_state = 1;
    step_.descriptor.optimizer_state = state_.data();
  }
  std::vector<int64_t> shape_;
  std::vector<tcc_tensor_desc> state_;
};

TEST_F(Fp8ScalingTrainerTest, ProgressLinesShowTheLastCasts) {
  std::unique_ptr<Trainer> trainer = MakeTrainer();
  ASSERT_TRUE(trainer);
  std::ostringstream log;
  ASSERT_TRUE(Train(*trainer, 4, log).ok());
  // Lines after steps 2 and 4 (calls with args->step 1 and 3).
  EXPECT_NE(log.str().find("step 2/4  loss 1.0000  lr 5.00e-01  fp8 sat 0 flush 1.0%  "),
            std::string::npos)
      << log.str();
  EXPECT_NE(log.str().find("step 4/4  loss 1.0000  lr 5.00e-01  fp8 sat 2 (2.0%) flush 3.0%  "),
            std::string::npos)
      << log.str();
  // The state itself is the step's, untouched by reading it.
  const float *records = static_cast<const float *>(trainer->optimizer_state()[0]);
  EXPECT_EQ(records[offsetof(tcc_fp8_scaling_record, casts) / 4], 4.0f);
  EXPECT_EQ(records[TCC_FP8_SCALING_RECORD_FLOATS + offsetof(tcc_fp8_scaling_record, casts) / 4],
            0.0f);
}

TEST_F(Fp8ScalingTrainerTest, OnlyRankZeroReadsIt) {
  std::unique_ptr<Trainer> trainer = MakeTrainer();
  ASSERT_TRUE(trainer);
  std::ostringstream log;
  ASSERT_TRUE(TrainFor(*trainer, 4, log, OnNan::kStop, nullptr,
                       /*read_fp8_scaling=*/false)
                  .ok());
  EXPECT_EQ(log.str().find("fp8"), std::string::npos) << log.str();
}

// (Another dtype: StepDescriptorTest; trun initializes f32 state only.)
TEST_F(Fp8ScalingTrainerTest, AStateOfAnotherShapeIsIgnored) {
  for (auto [shape, dtype] :
       std::vector<std::pair<std::vector<int64_t>, tcc_dtype>>{
           {{2, 16}, TCC_DTYPE_F32},
           {{2 * TCC_FP8_SCALING_RECORD_FLOATS}, TCC_DTYPE_F32},
           {{1, 2, TCC_FP8_SCALING_RECORD_FLOATS}, TCC_DTYPE_F32}}) {
    UseShape(shape, dtype);
    // A step that writes nothing into it (the shape may be small).
    step_.descriptor.train = RecordingTrain;
    EXPECT_EQ(FindFp8ScalingState(step_.descriptor), -1);
    std::unique_ptr<Trainer> trainer = MakeTrainer();
    ASSERT_TRUE(trainer);
    std::ostringstream log;
    ASSERT_TRUE(Train(*trainer, 4, log).ok());
    EXPECT_EQ(log.str().find("fp8"), std::string::npos) << log.str();
    EXPECT_NE(log.str().find("step 4/4"), std::string::npos) << log.str();
  }
}

TEST_F(TrainerTest, TreatsAnUnwrittenLossAsNonFinite) {
  calls.write_loss = false;
  std::unique_ptr<Trainer> trainer = MakeTrainer();
  ASSERT_TRUE(trainer);
  std::ostringstream log;
  EXPECT_EQ(Train(*trainer, 1, log).message(),
            "step 'fake': non-finite loss at train step 1 (loss nan)");
}

TEST_F(TrainerTest, EvaluationCountsOnlyRealRows) {
  std::unique_ptr<Trainer> trainer = MakeTrainer();
  ASSERT_TRUE(trainer);
  // Labels 0 1 | 1 1 | 0 (0): class 0 is right for samples 0 and 4 only.
  SequentialBatches batches(data_, normalizer_, 2);
  absl::StatusOr<EvalResult> result = trainer->Evaluate(batches);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->has_accuracy);
  EXPECT_EQ(result->samples, 5);
  EXPECT_EQ(result->correct, 2);
  EXPECT_DOUBLE_EQ(result->accuracy(), 0.4);
  // Batch losses 0.5, 1, 0 weighted by 2, 2 and 1 real rows.
  EXPECT_DOUBLE_EQ(result->mean_loss, (0.5 * 2 + 1.0 * 2 + 0.0) / 5);
}

TEST_F(TrainerTest, EvaluationFailureNamesTheBatch) {
  calls.fail_at = 100;
  std::unique_ptr<Trainer> trainer = MakeTrainer();
  ASSERT_TRUE(trainer);
  SequentialBatches batches(data_, normalizer_, 2);
  EXPECT_EQ(trainer->Evaluate(batches).status().message(),
            "step 'fake': eval batch 0 failed: returned 1 "
            "(TCC_STATUS_BAD_ARGS)");
}

// The hand-written C step learns linearly separable synthetic images.
TEST(TrainerFixtureTest, LinearStepLearnsSyntheticData) {
  absl::StatusOr<std::unique_ptr<StepLibrary>> library =
      StepLibrary::Open(TRUN_TEST_LINEAR_STEP);
  ASSERT_TRUE(library.ok()) << library.status();
  const tcc_step_descriptor &d = (*library)->descriptor();
  absl::StatusOr<StepBinding> binding = BindStep(d);
  ASSERT_TRUE(binding.ok()) << binding.status();

  testing::SyntheticSplit train_split =
      testing::MakeSyntheticSplit(600, 28, 28, 1);
  testing::SyntheticSplit test_split =
      testing::MakeSyntheticSplit(250, 28, 28, 2);
  LabeledImages train, test;
  for (auto [split, set] :
       {std::pair{&train_split, &train}, std::pair{&test_split, &test}}) {
    set->count = split->count;
    set->rows = 28;
    set->cols = 28;
    set->pixels = split->pixels;
    set->labels = split->labels;
  }
  PixelNormalizer normalizer = PixelNormalizer::FromTrainingImages(train);
  absl::StatusOr<std::unique_ptr<Trainer>> trainer =
      Trainer::Create(d, *binding, 0);
  ASSERT_TRUE(trainer.ok()) << trainer.status();

  SequentialBatches before_batches(test, normalizer, binding->batch_size);
  absl::StatusOr<EvalResult> before = (*trainer)->Evaluate(before_batches);
  ASSERT_TRUE(before.ok()) << before.status();

  ShuffledBatches batches(train, normalizer, binding->batch_size, 0);
  BatchLoader loader(batches, *binding);
  TrainConfig config;
  config.steps = 3 * batches.batches_per_epoch();
  config.learning_rate = 0.1f;
  ASSERT_TRUE((*trainer)->Train(loader, config).ok());

  SequentialBatches after_batches(test, normalizer, binding->batch_size);
  absl::StatusOr<EvalResult> after = (*trainer)->Evaluate(after_batches);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->samples, 250);
  EXPECT_LT(before->accuracy(), 0.5);
  EXPECT_GE(after->accuracy(), 0.95);
  EXPECT_LT(after->mean_loss, before->mean_loss / 2);
}

} // namespace
} // namespace tcc::trun
