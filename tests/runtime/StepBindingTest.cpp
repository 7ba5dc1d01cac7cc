#include "runtime/trun/StepBinding.h"

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
  EXPECT_EQ(binding->image_input, 1);
  EXPECT_EQ(binding->label_input, 0);
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

TEST(StepBindingTest, RejectsWrongInputSets) {
  {
    FakeStep step(8, 784, 10);
    step.inputs[1] = MakeTensor("image2", TCC_DTYPE_F32, step.image_shape);
    step.Sync();
    step.inputs[1].shape = step.image_shape.data();
    EXPECT_EQ(BindError(step.descriptor),
              "step has more than one floating input ('image', 'image2'); "
              "trun feeds one image input and one label input");
  }
  {
    FakeStep step(8, 784, 10);
    step.inputs.pop_back();
    step.Sync();
    step.descriptor.num_inputs = 1;
    EXPECT_EQ(BindError(step.descriptor),
              "step has no integer input; trun feeds one image input and one "
              "label input");
  }
  {
    FakeStep step(8, 784, 10);
    step.inputs[1].dtype = TCC_DTYPE_I64;
    EXPECT_EQ(BindError(step.descriptor),
              "step input 'label' is i64; this trun feeds i32 labels");
  }
  {
    FakeStep step(8, 784, 10);
    step.label_shape = {4};
    step.inputs[1] = MakeTensor("label", TCC_DTYPE_I32, step.label_shape);
    step.Sync();
    EXPECT_EQ(BindError(step.descriptor),
              "step input 'label' has shape [4]; expected [8] to match "
              "'image' [8, 784]");
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

} // namespace
} // namespace tcc::trun
