// trun --info's memory-by-precision table and the descriptor's memory-plan
// fields (train_planned_bytes / train_peak_bytes): rows by category and
// dtype, validation, and steps built before the fields existed.
#include "runtime/trun/step/MemoryByPrecision.h"
#include "runtime/trun/step/StepDescriptor.h"

#include "tests/runtime/TestData.h"

#include "absl/strings/str_format.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <functional>
#include <map>
#include <sstream>

namespace tcc::trun {
namespace {

using testing::FakeStep;
using testing::MakeTensor;
using Bytes = std::map<int32_t, int64_t>;

// FakeStep with a bf16 bias, f32 AdamW-like state for w, a separate
// gradient buffer for w (plus grad_norm, which is no gradient) and a plan
// with f32 and bf16 temporaries.
struct MixedStep {
  MixedStep() {
    step.params[1] = MakeTensor("b", TCC_DTYPE_BF16, step.b_shape);
    step.params[1].size_bytes = 3 * 2; // MakeTensor knows 4- and 8-byte types
    step.params[1].trainable = 1;
    step.Sync();
    for (tcc_tensor_desc &t : states)
      t.shape = w_shape.data();
    train_outputs[0].shape = w_shape.data();
    step.descriptor.num_optimizer_state = 2;
    step.descriptor.optimizer_state = states;
    step.descriptor.num_train_outputs = 2;
    step.descriptor.train_outputs = train_outputs;
    step.descriptor.num_train_planned_bytes = 2;
    step.descriptor.train_planned_bytes = planned;
    step.descriptor.num_train_peak_bytes = 1;
    step.descriptor.train_peak_bytes = peak;
  }
  FakeStep step{4, 6, 3}; // w f32 [6, 3], b [3]
  std::vector<int64_t> w_shape{6, 3};
  tcc_tensor_desc states[2] = {MakeTensor("w.adam_m", TCC_DTYPE_F32, {6, 3}),
                               MakeTensor("w.adam_v", TCC_DTYPE_F32, {6, 3})};
  tcc_tensor_desc train_outputs[2] = {
      MakeTensor("grad:w", TCC_DTYPE_F32, {6, 3}),
      MakeTensor("grad_norm", TCC_DTYPE_F32, {})};
  tcc_dtype_bytes planned[2] = {{TCC_DTYPE_F32, 3 << 20},
                                {TCC_DTYPE_BF16, 1 << 20}};
  tcc_dtype_bytes peak[1] = {{TCC_DTYPE_BF16, 1 << 19}};
};

TEST(MemoryByPrecisionTest, RowsByCategoryAndDtype) {
  MixedStep mixed;
  ASSERT_TRUE(ValidateDescriptor(mixed.step.descriptor, "step.so").ok());
  std::vector<MemoryRow> rows = MemoryByPrecision(mixed.step.descriptor);
  ASSERT_EQ(rows.size(), 5u);
  EXPECT_EQ(rows[0].category, "parameters");
  EXPECT_EQ(rows[0].bytes_by_dtype,
            (Bytes{{TCC_DTYPE_F32, 6 * 3 * 4}, {TCC_DTYPE_BF16, 3 * 2}}));
  EXPECT_EQ(rows[1].category, "gradients");
  EXPECT_EQ(rows[1].bytes_by_dtype, (Bytes{{TCC_DTYPE_F32, 6 * 3 * 4}}));
  EXPECT_EQ(rows[2].category, "optimizer state");
  EXPECT_EQ(rows[2].bytes_by_dtype, (Bytes{{TCC_DTYPE_F32, 2 * 6 * 3 * 4}}));
  EXPECT_EQ(rows[3].category, "activations at peak");
  EXPECT_EQ(rows[3].bytes_by_dtype, (Bytes{{TCC_DTYPE_BF16, 1 << 19}}));
  EXPECT_EQ(rows[4].category, "temporaries (no reuse)");
  EXPECT_EQ(rows[4].bytes_by_dtype,
            (Bytes{{TCC_DTYPE_F32, 3 << 20}, {TCC_DTYPE_BF16, 1 << 20}}));
}

TEST(MemoryByPrecisionTest, InfoPrintsTheTableInMiB) {
  MixedStep mixed;
  mixed.step.descriptor.workspace_bytes = 5 << 19; // 2.5 MiB
  std::ostringstream out;
  PrintDescriptorInfo(mixed.step.descriptor, out);
  std::string info = out.str();
  // Columns f32 then bf16 (wide to narrow floats), then the total; MiB with
  // four decimals, "-" where a category has no bytes of that dtype.
  auto line = [](const char *category, const char *f32, const char *bf16,
                 const char *total) {
    return absl::StrFormat("  %-24s%13s%13s%13s\n", category, f32, bf16, total);
  };
  std::string expected =
      "memory by precision (MiB):\n" + line("", "f32", "bf16", "total") +
      line("parameters", "0.0001", "0.0000", "0.0001") +
      line("gradients", "0.0001", "-", "0.0001") +
      line("optimizer state", "0.0001", "-", "0.0001") +
      line("activations at peak", "-", "0.5000", "0.5000") +
      line("temporaries (no reuse)", "3.0000", "1.0000", "4.0000") +
      line("workspace (total)", "", "", "2.5000");
  EXPECT_NE(info.find(expected), std::string::npos)
      << info << "\nexpected:\n" << expected;
}

TEST(MemoryByPrecisionTest, StepBuiltBeforeThePlanFieldsStillLoads) {
  FakeStep step(4, 6, 3);
  step.descriptor.struct_size =
      offsetof(tcc_step_descriptor, num_train_planned_bytes);
  // Whatever lies past struct_size is not read.
  step.descriptor.num_train_peak_bytes = -5;
  EXPECT_TRUE(ValidateDescriptor(step.descriptor, "step.so").ok());
  std::vector<MemoryRow> rows = MemoryByPrecision(step.descriptor);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].category, "optimizer state");
  std::ostringstream out;
  PrintMemoryByPrecision(step.descriptor, out);
  EXPECT_NE(out.str().find("activations by precision: not in this step"),
            std::string::npos)
      << out.str();

  step.descriptor.struct_size -= 8; // lacks `device`: too old or garbage
  absl::Status status = ValidateDescriptor(step.descriptor, "step.so");
  EXPECT_NE(status.message().find("descriptor is"), absl::string_view::npos)
      << status;
}

TEST(MemoryByPrecisionTest, RejectsMalformedPlanFields) {
  auto error = [](const std::function<void(tcc_step_descriptor &)> &edit) {
    MixedStep mixed;
    edit(mixed.step.descriptor);
    absl::Status status = ValidateDescriptor(mixed.step.descriptor, "step.so");
    EXPECT_FALSE(status.ok());
    return std::string(status.message());
  };
  EXPECT_EQ(error([](tcc_step_descriptor &d) { d.num_train_peak_bytes = -1; }),
            "step.so: negative num_train_peak_bytes -1");
  EXPECT_EQ(error([](tcc_step_descriptor &d) { d.train_planned_bytes = nullptr; }),
            "step.so: 2 train_planned_bytes entries but a null list");
  static const tcc_dtype_bytes unknown[] = {{42, 64}};
  EXPECT_EQ(error([](tcc_step_descriptor &d) { d.train_peak_bytes = unknown; }),
            "step.so: train_peak_bytes entry #0 has unknown dtype 42");
  static const tcc_dtype_bytes negative[] = {{TCC_DTYPE_F16, -64}};
  EXPECT_EQ(error([](tcc_step_descriptor &d) { d.train_peak_bytes = negative; }),
            "step.so: train_peak_bytes entry #0 (f16) has negative bytes -64");
  static const tcc_dtype_bytes twice[] = {{TCC_DTYPE_F32, 64}, {TCC_DTYPE_F32, 64}};
  EXPECT_EQ(error([](tcc_step_descriptor &d) { d.train_planned_bytes = twice; }),
            "step.so: train_planned_bytes lists f32 twice");
}

} // namespace
} // namespace tcc::trun
