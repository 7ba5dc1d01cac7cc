#include "runtime/trun/step/StepDescriptor.h"

#include "runtime/trun/step/StepLibrary.h"
#include "tests/runtime/TestData.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <functional>
#include <sstream>

namespace tcc::trun {
namespace {

using testing::FakeStep;

std::string ValidationError(const tcc_step_descriptor &d) {
  absl::Status status = ValidateDescriptor(d, "step.so");
  EXPECT_FALSE(status.ok());
  return std::string(status.message());
}

TEST(StepDescriptorTest, AcceptsConsistentDescriptor) {
  FakeStep step(4, 6, 3);
  EXPECT_TRUE(ValidateDescriptor(step.descriptor, "step.so").ok());
}

TEST(StepDescriptorTest, RejectsOtherAbiVersionWithRecompileHint) {
  FakeStep step(4, 6, 3);
  step.descriptor.abi_version = 7;
  EXPECT_EQ(ValidationError(step.descriptor),
            "step.so: ABI version 7, this trun supports " + std::to_string(TCC_STEP_ABI_VERSION) + " — recompile with a "
            "matching tcc");
}

TEST(StepDescriptorTest, RejectsSmallerStruct) {
  FakeStep step(4, 6, 3);
  // The memory-plan fields after `device` may be missing (older steps,
  // MemoryByPrecisionTest); anything shorter may not.
  step.descriptor.struct_size =
      offsetof(tcc_step_descriptor, num_train_planned_bytes) - 8;
  EXPECT_NE(ValidationError(step.descriptor).find("descriptor is"),
            std::string::npos);
  step.descriptor.struct_size = sizeof(tcc_step_descriptor) + 16;
  EXPECT_TRUE(ValidateDescriptor(step.descriptor, "step.so").ok());
}

TEST(StepDescriptorTest, RejectsNullEntryPoints) {
  FakeStep step(4, 6, 3);
  step.descriptor.eval = nullptr;
  EXPECT_NE(ValidationError(step.descriptor).find("null eval entry point"),
            std::string::npos);
  step.descriptor.train = nullptr;
  EXPECT_NE(ValidationError(step.descriptor).find("null train"),
            std::string::npos);
}

TEST(StepDescriptorTest, RejectsUnknownTarget) {
  FakeStep step(4, 6, 3);
  step.descriptor.target = "tpu";
  EXPECT_EQ(ValidationError(step.descriptor),
            "step.so: step targets 'tpu' but this trun runs only 'cpu' and "
            "'cuda' steps");
}

// The fake GPU's complete device API (tests/runtime/fixtures/fake_device.h).
tcc_device_api FakeDeviceApi() {
  absl::StatusOr<std::unique_ptr<StepLibrary>> library =
      StepLibrary::Open(TRUN_TEST_BIGRAM_CUDA_STEP);
  EXPECT_TRUE(library.ok()) << library.status();
  // Only its fields are read (validation calls nothing), so a copy outlives
  // the library.
  return library.ok() ? *(*library)->descriptor().device : tcc_device_api{};
}

TEST(StepDescriptorTest, CudaStepNeedsACompleteDeviceApi) {
  FakeStep step(4, 6, 3);
  step.descriptor.target = "cuda";
  EXPECT_EQ(ValidationError(step.descriptor),
            "step.so: a 'cuda' step without a device API (device is NULL)");

  tcc_device_api api = FakeDeviceApi();
  step.descriptor.device = &api;
  EXPECT_TRUE(ValidateDescriptor(step.descriptor, "step.so").ok());

  // Up to profile_read is needed; gemm_choice and gemm_note (appended
  // after it) may be missing.
  const size_t beforeGemmChoice = offsetof(tcc_device_api, gemm_choice);
  api.struct_size = beforeGemmChoice - 8;
  EXPECT_NE(ValidationError(step.descriptor)
                .find("step.so: device API is " + std::to_string(beforeGemmChoice - 8) +
                      " bytes, this trun needs at least " +
                      std::to_string(beforeGemmChoice)),
            std::string::npos);
  api.struct_size = beforeGemmChoice; // a step built before gemm_choice
  EXPECT_FALSE(tcc_device_api_has_gemm_choice(&api));
  EXPECT_TRUE(ValidateDescriptor(step.descriptor, "step.so").ok());
  // A step built before release_graphs: trun runs it (and skips the call).
  api.struct_size = offsetof(tcc_device_api, release_graphs);
  EXPECT_TRUE(tcc_device_api_has_gemm_choice(&api));
  EXPECT_FALSE(tcc_device_api_has_release_graphs(&api));
  EXPECT_TRUE(ValidateDescriptor(step.descriptor, "step.so").ok());
  api.struct_size = sizeof(tcc_device_api);
  EXPECT_TRUE(tcc_device_api_has_gemm_choice(&api));
  EXPECT_TRUE(tcc_device_api_has_release_graphs(&api));
  api.struct_size = sizeof(tcc_device_api) + 8; // appended fields are fine
  EXPECT_TRUE(ValidateDescriptor(step.descriptor, "step.so").ok());

  // Each function, cleared in turn, is named.
  const std::pair<const char *, std::function<void(tcc_device_api &)>>
      clear[] = {
          {"init", [](tcc_device_api &a) { a.init = nullptr; }},
          {"alloc", [](tcc_device_api &a) { a.alloc = nullptr; }},
          {"release", [](tcc_device_api &a) { a.release = nullptr; }},
          {"alloc_pinned", [](tcc_device_api &a) { a.alloc_pinned = nullptr; }},
          {"release_pinned",
           [](tcc_device_api &a) { a.release_pinned = nullptr; }},
          {"to_device", [](tcc_device_api &a) { a.to_device = nullptr; }},
          {"to_host", [](tcc_device_api &a) { a.to_host = nullptr; }},
          {"fill_zero", [](tcc_device_api &a) { a.fill_zero = nullptr; }},
          {"upload_async", [](tcc_device_api &a) { a.upload_async = nullptr; }},
          {"wait_uploads", [](tcc_device_api &a) { a.wait_uploads = nullptr; }},
          {"last_error", [](tcc_device_api &a) { a.last_error = nullptr; }},
          {"execution_note",
           [](tcc_device_api &a) { a.execution_note = nullptr; }},
          {"allocated_bytes",
           [](tcc_device_api &a) { a.allocated_bytes = nullptr; }},
          {"peak_allocated_bytes",
           [](tcc_device_api &a) { a.peak_allocated_bytes = nullptr; }},
          {"copy_on_device",
           [](tcc_device_api &a) { a.copy_on_device = nullptr; }},
          {"set_profiling",
           [](tcc_device_api &a) { a.set_profiling = nullptr; }},
          {"profile_read",
           [](tcc_device_api &a) { a.profile_read = nullptr; }},
          {"gemm_choice", [](tcc_device_api &a) { a.gemm_choice = nullptr; }},
          {"gemm_note", [](tcc_device_api &a) { a.gemm_note = nullptr; }},
          {"release_graphs", [](tcc_device_api &a) { a.release_graphs = nullptr; }},
      };
  for (const auto &[name, change] : clear) {
    tcc_device_api broken = FakeDeviceApi();
    change(broken);
    step.descriptor.device = &broken;
    EXPECT_EQ(ValidationError(step.descriptor),
              std::string("step.so: device API has a null '") + name +
                  "' function");
  }
}

TEST(StepDescriptorTest, CpuStepMustNotHaveADeviceApi) {
  FakeStep step(4, 6, 3);
  tcc_device_api api = FakeDeviceApi();
  step.descriptor.device = &api;
  EXPECT_EQ(ValidationError(step.descriptor),
            "step.so: a 'cpu' step with a device API (device must be NULL)");
}

TEST(StepDescriptorTest, RejectsInconsistentNumElements) {
  FakeStep step(4, 6, 3);
  step.params[0].num_elements = 17;
  EXPECT_EQ(ValidationError(step.descriptor),
            "step.so: param 'w' has shape [6, 3] (18 elements) but "
            "num_elements 17");
}

TEST(StepDescriptorTest, RejectsInconsistentSizeBytes) {
  FakeStep step(4, 6, 3);
  step.inputs[1].size_bytes = 8;
  EXPECT_EQ(ValidationError(step.descriptor),
            "step.so: input 'label' has 4 i32 elements but size_bytes 8");
}

TEST(StepDescriptorTest, RejectsUnknownDtypeNegativeDimAndNullShape) {
  {
    FakeStep step(4, 6, 3);
    step.outputs[0].dtype = 99;
    EXPECT_NE(ValidationError(step.descriptor).find("unknown dtype 99"),
              std::string::npos);
  }
  {
    FakeStep step(4, 6, 3);
    step.w_shape[0] = -6;
    EXPECT_NE(ValidationError(step.descriptor).find("negative dimension"),
              std::string::npos);
  }
  {
    FakeStep step(4, 6, 3);
    step.params[1].shape = nullptr;
    EXPECT_NE(ValidationError(step.descriptor).find("null shape"),
              std::string::npos);
  }
}

TEST(StepDescriptorTest, RejectsBadInitSpecs) {
  FakeStep step(4, 6, 3);
  step.params[0].init_kind = 9;
  EXPECT_NE(ValidationError(step.descriptor).find("unknown init_kind 9"),
            std::string::npos);
  step.params[0].init_kind = TCC_INIT_UNIFORM;
  step.params[0].init_scale = -1;
  EXPECT_NE(ValidationError(step.descriptor).find("invalid init_scale"),
            std::string::npos);
}

TEST(StepDescriptorTest, AcceptsAConstantStartAndChecksLossScalingOutputs) {
  FakeStep step(4, 6, 3);
  step.params[1].init_kind = TCC_INIT_CONSTANT; // as the loss scale state
  step.params[1].init_scale = 65536;
  EXPECT_TRUE(ValidateDescriptor(step.descriptor, "step.so").ok());
  step.params[1].init_kind = TCC_INIT_CONSTANT + 1;
  EXPECT_NE(ValidationError(step.descriptor).find("unknown init_kind 5"),
            std::string::npos);
  step.params[1].init_kind = TCC_INIT_ZEROS;
  // trun reads these as one f32 value each.
  for (const char *name : {"loss_scale", "skipped", "skipped_steps"}) {
    static const int64_t two[] = {2};
    std::vector<tcc_tensor_desc> outputs = {
        testing::MakeTensor(name, TCC_DTYPE_F32, {2})};
    outputs[0].shape = two;
    step.descriptor.num_train_outputs = 1;
    step.descriptor.train_outputs = outputs.data();
    EXPECT_NE(ValidationError(step.descriptor)
                  .find(std::string("train output '") + name +
                        "' must be one f32 value, got f32 [2]"),
              std::string::npos)
        << ValidationError(step.descriptor);
    outputs[0] = testing::MakeTensor(name, TCC_DTYPE_F32, {});
    EXPECT_TRUE(ValidateDescriptor(step.descriptor, "step.so").ok());
  }
}

TEST(StepDescriptorTest, FindsTheFp8ScalingStateByNameDtypeAndShape) {
  FakeStep step(4, 6, 3);
  EXPECT_EQ(FindFp8ScalingState(step.descriptor), -1) << "no optimizer state";
  std::vector<int64_t> shape = {5, TCC_FP8_SCALING_RECORD_FLOATS};
  std::vector<int64_t> moment_shape = {6, 3};
  std::vector<tcc_tensor_desc> state = {
      testing::MakeTensor("w.adam_m", TCC_DTYPE_F32, moment_shape),
      testing::MakeTensor(TCC_FP8_SCALING_STATE, TCC_DTYPE_F32, shape)};
  state[0].shape = moment_shape.data();
  state[1].shape = shape.data();
  step.descriptor.num_optimizer_state = 2;
  step.descriptor.optimizer_state = state.data();
  EXPECT_EQ(FindFp8ScalingState(step.descriptor), 1);
  // Zero sites is a well-formed (empty) state.
  std::vector<int64_t> empty = {0, TCC_FP8_SCALING_RECORD_FLOATS};
  state[1] = testing::MakeTensor(TCC_FP8_SCALING_STATE, TCC_DTYPE_F32, empty);
  state[1].shape = empty.data();
  EXPECT_EQ(FindFp8ScalingState(step.descriptor), 1);
  // Another name: not it.
  state[1] = testing::MakeTensor("fp8_scale", TCC_DTYPE_F32, shape);
  state[1].shape = shape.data();
  EXPECT_EQ(FindFp8ScalingState(step.descriptor), -1);
  // Malformed: ignored.
  std::vector<int64_t> narrow = {5, 16}, flat = {5 * TCC_FP8_SCALING_RECORD_FLOATS},
                       deep = {1, 5, TCC_FP8_SCALING_RECORD_FLOATS};
  for (const std::vector<int64_t> *s : {&narrow, &flat, &deep}) {
    state[1] = testing::MakeTensor(TCC_FP8_SCALING_STATE, TCC_DTYPE_F32, *s);
    state[1].shape = s->data();
    EXPECT_EQ(FindFp8ScalingState(step.descriptor), -1) << s->size();
  }
  for (tcc_dtype dtype : {TCC_DTYPE_F64, TCC_DTYPE_I32, TCC_DTYPE_BF16}) {
    state[1] = testing::MakeTensor(TCC_FP8_SCALING_STATE, dtype, shape);
    state[1].shape = shape.data();
    EXPECT_EQ(FindFp8ScalingState(step.descriptor), -1) << dtype;
  }
  state[1] = testing::MakeTensor(TCC_FP8_SCALING_STATE, TCC_DTYPE_F32, shape);
  state[1].shape = shape.data();
  state[1].size_bytes += 4; // inconsistent with its shape
  EXPECT_EQ(FindFp8ScalingState(step.descriptor), -1);
  state[1].size_bytes -= 4;
  state[1].shape = nullptr;
  EXPECT_EQ(FindFp8ScalingState(step.descriptor), -1);
  state[1].shape = shape.data();
  // ZeRO-1: whole-step state (shard_of -1) is it, a parameter's shard not.
  int32_t shard_of[2] = {0, -1};
  step.descriptor.shard_optimizer_ranks = 2;
  step.descriptor.optimizer_state_shard_of = shard_of;
  EXPECT_EQ(FindFp8ScalingState(step.descriptor), 1);
  shard_of[1] = 0;
  EXPECT_EQ(FindFp8ScalingState(step.descriptor), -1);
}

TEST(StepDescriptorTest, RejectsDuplicateNamesAndNullLists) {
  FakeStep step(4, 6, 3);
  step.outputs[0].name = "w";
  EXPECT_NE(ValidationError(step.descriptor).find("'w' is used twice"),
            std::string::npos);
  step.outputs[0].name = "logits";
  step.descriptor.inputs = nullptr;
  EXPECT_NE(ValidationError(step.descriptor).find("null list"),
            std::string::npos);
}

// Model buffers (batch norm's running statistics): checked like the
// parameters, their state_dict keys with the parameters', listed by --info.
TEST(StepDescriptorTest, ChecksAndListsBuffers) {
  FakeStep step(4, 6, 3);
  std::vector<tcc_tensor_desc> buffers = {
      testing::MakeTensor("bn.running_mean", TCC_DTYPE_F32, {}),
      testing::MakeTensor("bn.running_var", TCC_DTYPE_F32, {}),
      testing::MakeTensor("bn.num_batches_tracked", TCC_DTYPE_I64, {})};
  buffers[1].init_kind = TCC_INIT_ONES;
  step.descriptor.num_buffers = 3;
  step.descriptor.buffers = buffers.data();
  EXPECT_TRUE(ValidateDescriptor(step.descriptor, "step.so").ok());
  std::ostringstream out;
  PrintDescriptorInfo(step.descriptor, out);
  EXPECT_NE(out.str().find("buffers: 3\n  bn.running_mean  f32 []  4 bytes  init zeros\n"
                           "  bn.running_var  f32 []  4 bytes  init ones\n"
                           "  bn.num_batches_tracked  i64 []  8 bytes  init zeros\n"),
            std::string::npos)
      << out.str();

  buffers[1].init_kind = TCC_INIT_NORMAL;
  buffers[1].init_scale = 1;
  EXPECT_NE(ValidationError(step.descriptor)
                .find("buffer 'bn.running_var' must start at zeros or ones, not normal"),
            std::string::npos)
      << ValidationError(step.descriptor);
  buffers[1].init_kind = TCC_INIT_ONES;
  buffers[0].name = "w"; // a parameter's name
  EXPECT_NE(ValidationError(step.descriptor).find("buffer name 'w' is used twice"),
            std::string::npos)
      << ValidationError(step.descriptor);
  buffers[0].name = "bn.running_mean";
  // A buffer's state_dict key may not be a parameter's.
  std::vector<tcc_torch_tensor> keys = {{"bn.running_mean", nullptr, 0, nullptr},
                                        {"w", nullptr, 0, nullptr},
                                        {"bn.num_batches_tracked", nullptr, 0, nullptr}};
  step.descriptor.buffer_torch = keys.data();
  EXPECT_NE(ValidationError(step.descriptor).find("'w' is also a key of param 'w'"),
            std::string::npos)
      << ValidationError(step.descriptor);
  keys[1].name = "bn.running_var";
  EXPECT_TRUE(ValidateDescriptor(step.descriptor, "step.so").ok());
  step.descriptor.buffers = nullptr;
  EXPECT_NE(ValidationError(step.descriptor).find("3 buffers but a null list"),
            std::string::npos);
}

TEST(StepDescriptorTest, InfoListsTensorsWorkspaceAndFlops) {
  FakeStep step(4, 6, 3);
  step.descriptor.train_flops_per_step = 1234;
  std::ostringstream out;
  PrintDescriptorInfo(step.descriptor, out);
  std::string info = out.str();
  EXPECT_NE(info.find("model: fake"), std::string::npos) << info;
  EXPECT_NE(info.find("param values: 21 (21 trainable), 84 bytes"),
            std::string::npos)
      << info;
  EXPECT_NE(info.find("  w  f32 [6, 3]  72 bytes  init normal(scale=0.5, "
                      "seed=3)  trainable"),
            std::string::npos)
      << info;
  EXPECT_NE(info.find("  label  i32 [4]  16 bytes"), std::string::npos) << info;
  EXPECT_NE(info.find("workspace: 100 bytes"), std::string::npos) << info;
  EXPECT_NE(info.find("flops/step: train 1234, eval 0"), std::string::npos)
      << info;
}

} // namespace
} // namespace tcc::trun
