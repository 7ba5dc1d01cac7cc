#include "runtime/trun/Options.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace tcc::trun {
namespace {

std::string UsageError(const std::vector<std::string> &args) {
  absl::StatusOr<Options> options = ParseOptions(args);
  EXPECT_FALSE(options.ok());
  return std::string(options.status().message());
}

TEST(OptionsTest, ParsesEveryFlag) {
  absl::StatusOr<Options> options = ParseOptions(
      {"step.so", "--data", "dir", "--test=i,l", "--steps", "12", "--lr",
       "0.25", "--seed=18446744073709551615", "--log-every", "0"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->step_path, "step.so");
  EXPECT_EQ(options->data, "dir");
  EXPECT_EQ(options->test, "i,l");
  EXPECT_EQ(options->steps, 12);
  EXPECT_FALSE(options->epochs.has_value());
  EXPECT_EQ(options->learning_rate, 0.25);
  EXPECT_EQ(options->seed, 18446744073709551615ull);
  EXPECT_EQ(options->log_every, 0);
  EXPECT_FALSE(options->info);
}

TEST(OptionsTest, Defaults) {
  absl::StatusOr<Options> options = ParseOptions({"--data", "d", "s.so"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->seed, 0u);
  EXPECT_EQ(options->log_every, 100);
  EXPECT_FALSE(options->steps || options->epochs || options->learning_rate ||
               options->test);
}

TEST(OptionsTest, InfoNeedsNoData) {
  absl::StatusOr<Options> options = ParseOptions({"s.so", "--info"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_TRUE(options->info);
}

TEST(OptionsTest, HelpWinsOverEverythingElse) {
  absl::StatusOr<Options> options = ParseOptions({"--bogus", "--help"});
  EXPECT_FALSE(options.ok()); // an error before --help is still an error
  options = ParseOptions({"--help", "--bogus"});
  ASSERT_TRUE(options.ok());
  EXPECT_TRUE(options->help);
}

TEST(OptionsTest, RejectsBadUsage) {
  EXPECT_EQ(UsageError({}), "missing STEP.so (see trun --help)");
  EXPECT_EQ(UsageError({"s.so"}), "missing --data (see trun --help)");
  EXPECT_EQ(UsageError({"s.so", "--data", "d", "--frobnicate"}),
            "unknown flag '--frobnicate'");
  EXPECT_EQ(UsageError({"s.so", "--data"}), "--data needs a value");
  EXPECT_EQ(UsageError({"s.so", "--data", "--steps", "3"}),
            "--data needs a value");
  EXPECT_EQ(UsageError({"s.so", "--data="}), "--data needs a value");
  EXPECT_EQ(UsageError({"s.so", "--data", "d", "--steps", "ten"}),
            "--steps expects a non-negative integer, got 'ten'");
  EXPECT_EQ(UsageError({"s.so", "--data", "d", "--steps", "-1"}),
            "--steps expects a non-negative integer, got '-1'");
  EXPECT_EQ(UsageError({"s.so", "--data", "d", "--epochs", "1.5"}),
            "--epochs expects a non-negative integer, got '1.5'");
  EXPECT_EQ(UsageError({"s.so", "--data", "d", "--lr", "0"}),
            "--lr expects a positive number, got '0'");
  EXPECT_EQ(UsageError({"s.so", "--data", "d", "--lr", "nan"}),
            "--lr expects a positive number, got 'nan'");
  EXPECT_EQ(UsageError({"s.so", "--data", "d", "--seed", "-3"}),
            "--seed expects an unsigned 64-bit integer, got '-3'");
  EXPECT_EQ(
      UsageError({"s.so", "--data", "d", "--steps", "1", "--epochs", "1"}),
      "give --steps or --epochs, not both");
  EXPECT_EQ(UsageError({"s.so", "--data", "d", "--seed", "1", "--seed=2"}),
            "--seed given twice");
  EXPECT_EQ(UsageError({"s.so", "other.so", "--data", "d"}),
            "unexpected argument 'other.so' (one STEP.so only)");
  EXPECT_EQ(UsageError({"s.so", "--info=yes"}), "unknown flag '--info=yes'");
}

// docs/runtime.md must quote `trun --help` verbatim.
TEST(OptionsTest, DocsQuoteTheHelpText) {
  std::ifstream docs(TRUN_TEST_DOCS);
  ASSERT_TRUE(docs.good()) << "cannot read " << TRUN_TEST_DOCS;
  std::stringstream text;
  text << docs.rdbuf();
  EXPECT_NE(text.str().find(std::string("```\n") + kUsage + "```\n"),
            std::string::npos)
      << TRUN_TEST_DOCS << " does not contain the current --help text";
}

} // namespace
} // namespace tcc::trun
