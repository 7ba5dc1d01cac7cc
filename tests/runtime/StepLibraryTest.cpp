#include "runtime/trun/step/StepLibrary.h"

#include "tests/runtime/TestData.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <unistd.h>

namespace tcc::trun {
namespace {

TEST(StepLibraryTest, LoadsValidStep) {
  absl::StatusOr<std::unique_ptr<StepLibrary>> library =
      StepLibrary::Open(TRUN_TEST_LINEAR_STEP);
  ASSERT_TRUE(library.ok()) << library.status();
  const tcc_step_descriptor &d = (*library)->descriptor();
  EXPECT_STREQ(d.model_name, "linear_softmax");
  EXPECT_EQ(d.num_params, 2);
  EXPECT_EQ(d.num_inputs, 2);
  EXPECT_EQ(d.workspace_bytes, 100 * 10 * 4);
}

TEST(StepLibraryTest, RefusesOtherAbiVersion) {
  absl::StatusOr<std::unique_ptr<StepLibrary>> library =
      StepLibrary::Open(TRUN_TEST_BAD_ABI_STEP);
  ASSERT_FALSE(library.ok());
  EXPECT_EQ(library.status().message(),
            std::string(TRUN_TEST_BAD_ABI_STEP) +
                ": ABI version 7, this trun supports " + std::to_string(TCC_STEP_ABI_VERSION) + " — recompile with a "
                "matching tcc");
}

TEST(StepLibraryTest, RefusesLibraryWithoutDescriptorSymbol) {
  absl::StatusOr<std::unique_ptr<StepLibrary>> library =
      StepLibrary::Open(TRUN_TEST_NO_DESCRIPTOR_STEP);
  ASSERT_FALSE(library.ok());
  EXPECT_EQ(library.status().message(),
            std::string(TRUN_TEST_NO_DESCRIPTOR_STEP) +
                ": not a tcc step library (no 'tcc_step_get_descriptor' "
                "symbol)");
}

TEST(StepLibraryTest, ReportsMissingFile) {
  absl::StatusOr<std::unique_ptr<StepLibrary>> library =
      StepLibrary::Open("/nonexistent/step.so");
  ASSERT_FALSE(library.ok());
  EXPECT_EQ(library.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(library.status().message(),
            "step library '/nonexistent/step.so' not found");
}

TEST(StepLibraryTest, ReportsFileThatIsNotASharedLibrary) {
  testing::TempDir dir;
  testing::WriteFile(dir.File("step.so"), {'h', 'e', 'l', 'l', 'o'});
  absl::StatusOr<std::unique_ptr<StepLibrary>> library =
      StepLibrary::Open(dir.File("step.so"));
  ASSERT_FALSE(library.ok());
  EXPECT_NE(library.status().message().find(
                "step.so is truncated or not a step library: 5 bytes"),
            std::string::npos)
      << library.status();
}

// A model file given where the compiled step belongs: the error says to
// compile it first (not "invalid ELF header").
TEST(StepLibraryTest, ModelFileSaysCompileItFirst) {
  testing::TempDir dir;
  testing::WriteFile(dir.File("model.pbtxt"), {'n', 'a', 'm', 'e', ':', ' ', '"', 'm', '"'});
  absl::StatusOr<std::unique_ptr<StepLibrary>> library =
      StepLibrary::Open(dir.File("model.pbtxt"));
  ASSERT_FALSE(library.ok());
  EXPECT_NE(library.status().message().find(
                "model.pbtxt' is a model file, not a compiled step: compile it first (tcc compile "),
            std::string::npos)
      << library.status();
}

// dlopen("step.so") would search the library path; trun must open ./step.so.
TEST(StepLibraryTest, OpensBareFileNameInWorkingDirectory) {
  testing::TempDir dir;
  std::filesystem::copy_file(TRUN_TEST_LINEAR_STEP, dir.File("mystep.so"));
  std::string previous = std::filesystem::current_path();
  ASSERT_EQ(chdir(dir.path().c_str()), 0);
  absl::StatusOr<std::unique_ptr<StepLibrary>> library =
      StepLibrary::Open("mystep.so");
  ASSERT_EQ(chdir(previous.c_str()), 0);
  ASSERT_TRUE(library.ok()) << library.status();
  EXPECT_STREQ((*library)->descriptor().model_name, "linear_softmax");
}

} // namespace
} // namespace tcc::trun
