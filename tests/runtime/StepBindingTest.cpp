#include "runtime/trun/data/StepBinding.h"

#include "tests/runtime/TestData.h"

#include <gtest/gtest.h>

namespace tcc::trun {
namespace {

using testing::FakeStep;
using testing::MakeTensor;

std::string BindError(const tcc_step_descriptor &d) {
  absl::StatusOr<StepBinding> binding = BindStep(d);
  EXPECT_FALSE(binding.ok());
  return std::string(binding.status().message());
}

LabeledImages Images(int64_t count, int64_t rows, int64_t cols,
                     std::vector<uint8_t> labels) {
  LabeledImages set;
  set.images_path = "/data/train-images-idx3-ubyte.gz";
  set.labels_path = "/data/train-labels-idx1-ubyte.gz";
  set.count = count;
  set.rows = rows;
  set.cols = cols;
  set.pixels.assign(count * rows * cols, 0);
  set.labels = std::move(labels);
  return set;
}

TEST(StepBindingTest, BindsImagesLabelsAndLogits) {
  FakeStep step(8, 784, 10);
  std::swap(step.inputs[0], step.inputs[1]); // order must not matter
  absl::StatusOr<StepBinding> binding = BindStep(step.descriptor);
  ASSERT_TRUE(binding.ok()) << binding.status();
  EXPECT_EQ(binding->data_input, 1);
  EXPECT_EQ(binding->target_input, 0);
  EXPECT_EQ(binding->batch_size, 8);
  EXPECT_EQ(binding->values_per_sample, 784);
  EXPECT_EQ(binding->logits_output, 0);
  EXPECT_EQ(binding->num_classes, 10);
}

TEST(StepBindingTest, AcceptsImageShapedInput) {
  FakeStep step(8, 784, 10);
  step.image_shape = {8, 28, 28};
  step.inputs[0] = MakeTensor("image", TCC_DTYPE_F32, step.image_shape);
  step.Sync();
  absl::StatusOr<StepBinding> binding = BindStep(step.descriptor);
  ASSERT_TRUE(binding.ok()) << binding.status();
  EXPECT_EQ(binding->values_per_sample, 784);
  EXPECT_TRUE(
      CheckDataFits(*binding, step.descriptor, Images(2, 28, 28, {0, 9})).ok());
}

TEST(StepBindingTest, StepWithoutLogitsBindsWithoutAccuracy) {
  FakeStep step(8, 784, 10);
  step.outputs[0].name = "probabilities";
  absl::StatusOr<StepBinding> binding = BindStep(step.descriptor);
  ASSERT_TRUE(binding.ok()) << binding.status();
  EXPECT_EQ(binding->logits_output, -1);
  // Without logits there is no label range to check.
  EXPECT_TRUE(
      CheckDataFits(*binding, step.descriptor, Images(1, 28, 28, {200})).ok());
}

// Steps whose inputs are not exactly f32 images [B, ...] and i32 labels [B]
// are fed named arrays (NamedArraysTest has the details).
TEST(StepBindingTest, OtherInputSetsBindNamedArrays) {
  {
    FakeStep step(8, 784, 10);
    step.inputs[1] = MakeTensor("image2", TCC_DTYPE_F32, step.image_shape);
    step.Sync();
    step.inputs[1].shape = step.image_shape.data();
    step.descriptor.label_input = nullptr; // the labels input is gone
    absl::StatusOr<StepBinding> binding = BindStep(step.descriptor);
    ASSERT_TRUE(binding.ok()) << binding.status();
    EXPECT_TRUE(binding->is_named_arrays());
    EXPECT_EQ(binding->logits_output, -1); // no integer input: no accuracy
  }
  {
    FakeStep step(8, 784, 10);
    step.inputs.pop_back();
    step.Sync();
    step.descriptor.num_inputs = 1;
    step.descriptor.label_input = nullptr; // the labels input is gone
    absl::StatusOr<StepBinding> binding = BindStep(step.descriptor);
    ASSERT_TRUE(binding.ok()) << binding.status();
    EXPECT_TRUE(binding->is_named_arrays());
  }
  {
    FakeStep step(8, 784, 10);
    step.inputs[1].dtype = TCC_DTYPE_I64;
    step.inputs[1].size_bytes = 64;
    absl::StatusOr<StepBinding> binding = BindStep(step.descriptor);
    ASSERT_TRUE(binding.ok()) << binding.status();
    EXPECT_TRUE(binding->is_named_arrays());
    EXPECT_EQ(binding->target_input, 1); // i64 labels with logits: accuracy
    EXPECT_EQ(binding->num_classes, 10);
  }
  {
    FakeStep step(8, 784, 10);
    step.label_shape = {4};
    step.inputs[1] = MakeTensor("label", TCC_DTYPE_I32, step.label_shape);
    step.Sync();
    EXPECT_EQ(BindError(step.descriptor),
              "step inputs 'image' [8, 784] and 'label' [4] differ in their "
              "first dimension; named arrays feed every input [batch, ...] "
              "from the same batch of samples");
  }
}

TEST(StepBindingTest, RejectsMisshapenLogits) {
  FakeStep step(8, 784, 10);
  step.logits_shape = {80};
  step.outputs[0] = MakeTensor("logits", TCC_DTYPE_F32, step.logits_shape);
  step.Sync();
  EXPECT_EQ(BindError(step.descriptor),
            "step output 'logits' is f32 [80]; expected f32 [8, classes]");
}

TEST(StepBindingTest, ReportsValuesPerSampleMismatch) {
  FakeStep step(8, 100, 10);
  absl::StatusOr<StepBinding> binding = BindStep(step.descriptor);
  ASSERT_TRUE(binding.ok()) << binding.status();
  absl::Status status =
      CheckDataFits(*binding, step.descriptor, Images(1, 28, 28, {0}));
  EXPECT_EQ(status.message(),
            "step input 'image' expects 100 values per sample but "
            "train-images-idx3-ubyte.gz has 28x28 = 784");
}

TEST(StepBindingTest, ReportsLabelOutOfRange) {
  FakeStep step(8, 4, 10);
  absl::StatusOr<StepBinding> binding = BindStep(step.descriptor);
  ASSERT_TRUE(binding.ok()) << binding.status();
  absl::Status status =
      CheckDataFits(*binding, step.descriptor, Images(3, 2, 2, {9, 0, 10}));
  EXPECT_EQ(status.message(),
            "train-labels-idx1-ubyte.gz: label 10 of sample 2 is out of range "
            "for 'logits' width 10");
}

// A token model: tokens, targets i32 [4, 16]; logits f32 [4, 16, 65].
struct TokenStep {
  TokenStep() { Sync(); }
  void Sync() {
    inputs = {MakeTensor("tokens", TCC_DTYPE_I32, tokens_shape),
              MakeTensor("targets", TCC_DTYPE_I32, targets_shape)};
    outputs = {MakeTensor("logits", TCC_DTYPE_F32, logits_shape)};
    inputs[0].shape = tokens_shape.data();
    inputs[1].shape = targets_shape.data();
    outputs[0].shape = logits_shape.data();
    descriptor.model_name = "gpt";
    descriptor.num_inputs = static_cast<int32_t>(inputs.size());
    descriptor.inputs = inputs.data();
    descriptor.num_outputs = static_cast<int32_t>(outputs.size());
    descriptor.outputs = outputs.data();
  }
  std::vector<int64_t> tokens_shape{4, 16}, targets_shape{4, 16},
      logits_shape{4, 16, 65}, mask_shape{4, 16};
  std::vector<tcc_tensor_desc> inputs, outputs;
  tcc_step_descriptor descriptor{};
};

TEST(StepBindingTest, BindsTokenModels) {
  TokenStep step;
  std::swap(step.inputs[0], step.inputs[1]); // order must not matter
  absl::StatusOr<StepBinding> binding = BindStep(step.descriptor);
  ASSERT_TRUE(binding.ok()) << binding.status();
  EXPECT_TRUE(binding->is_token_model());
  EXPECT_EQ(binding->data_input, 1);
  EXPECT_EQ(binding->target_input, 0);
  EXPECT_EQ(binding->batch_size, 4);
  EXPECT_EQ(binding->context_length(), 16);
  EXPECT_EQ(binding->targets_per_sample, 16);
  EXPECT_EQ(binding->token_logits_output, 0);
  EXPECT_EQ(binding->vocab_size, 65);
  EXPECT_EQ(binding->logits_output, -1); // no image accuracy for tokens

  step.outputs[0].name = "hidden";
  binding = BindStep(step.descriptor);
  ASSERT_TRUE(binding.ok()) << binding.status();
  EXPECT_EQ(binding->token_logits_output, -1);
  EXPECT_EQ(binding->vocab_size, 0);
}

TEST(StepBindingTest, RejectsMalformedTokenModels) {
  {
    TokenStep step;
    step.inputs[1].name = "labels";
    EXPECT_EQ(BindError(step.descriptor),
              "step has an input 'tokens' but no 'targets'; a token model "
              "needs both (i32 [batch, context])");
  }
  {
    TokenStep step;
    step.inputs.push_back(MakeTensor("mask", TCC_DTYPE_F32, step.mask_shape));
    step.inputs.back().shape = step.mask_shape.data();
    step.descriptor.num_inputs = 3;
    step.descriptor.inputs = step.inputs.data();
    EXPECT_EQ(BindError(step.descriptor),
              "step input 'mask' is neither 'tokens' nor 'targets'; trun "
              "feeds a token model only those two");
  }
  {
    TokenStep step;
    step.inputs[0].dtype = TCC_DTYPE_I64;
    EXPECT_EQ(BindError(step.descriptor),
              "step input 'tokens' is i64; this trun feeds i32 tokens");
  }
  {
    TokenStep step;
    step.targets_shape = {4, 8};
    step.Sync();
    EXPECT_EQ(BindError(step.descriptor),
              "step input 'targets' has shape [4, 8]; expected [4, 16] like "
              "'tokens'");
  }
  {
    TokenStep step;
    step.tokens_shape = step.targets_shape = {64};
    step.Sync();
    EXPECT_EQ(BindError(step.descriptor),
              "step input 'tokens' has shape [64]; expected [batch, context]");
  }
  {
    TokenStep step;
    step.logits_shape = {64, 65};
    step.Sync();
    EXPECT_EQ(BindError(step.descriptor),
              "step output 'logits' is f32 [64, 65]; expected f32 [4, 16, "
              "vocab]");
  }
}

} // namespace
} // namespace tcc::trun
