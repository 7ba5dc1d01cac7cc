#include "runtime/trun/cli/Options.h"

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
            "--lr expects a positive number (float32 range), got '0'");
  EXPECT_EQ(UsageError({"s.so", "--data", "d", "--lr", "nan"}),
            "--lr expects a positive number (float32 range), got 'nan'");
  EXPECT_EQ(UsageError({"s.so", "--data", "d", "--lr", "1e39"}),
            "--lr expects a positive number (float32 range), got '1e39'");
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

TEST(OptionsTest, ParsesCheckpointMetricsAndNanFlags) {
  absl::StatusOr<Options> options = ParseOptions(
      {"s.so", "--data", "d", "--ckpt-dir", "ck", "--ckpt-every", "50",
       "--keep", "3", "--resume", "--metrics", "m.jsonl", "--on-nan", "skip",
       "--loader-depth", "8"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->ckpt_dir, "ck");
  EXPECT_EQ(options->ckpt_every, 50);
  EXPECT_EQ(options->keep, 3);
  EXPECT_TRUE(options->resume);
  EXPECT_EQ(options->metrics, "m.jsonl");
  EXPECT_EQ(options->on_nan, OnNan::kSkip);
  EXPECT_EQ(options->loader_depth, 8);
  EXPECT_FALSE(options->seed_given);

  options = ParseOptions({"s.so", "--data", "d", "--seed", "3"});
  ASSERT_TRUE(options.ok());
  EXPECT_TRUE(options->seed_given);
  EXPECT_EQ(options->on_nan, OnNan::kStop);
  EXPECT_FALSE(options->resume);
}

TEST(OptionsTest, DiagnoseNeedsNoStepOrData) {
  absl::StatusOr<Options> options = ParseOptions({"--diagnose"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_TRUE(options->diagnose);
  EXPECT_TRUE(options->step_path.empty());
  options = ParseOptions({"s.so", "--diagnose"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->step_path, "s.so");
  EXPECT_EQ(UsageError({"--diagnose", "--diagnose"}),
            "--diagnose given twice");
}

TEST(OptionsTest, RejectsBadCheckpointFlags) {
  EXPECT_EQ(UsageError({"s.so", "--data", "d", "--resume"}),
            "--resume needs --ckpt-dir");
  EXPECT_EQ(UsageError({"s.so", "--data", "d", "--ckpt-every", "5"}),
            "--ckpt-every needs --ckpt-dir");
  EXPECT_EQ(UsageError({"s.so", "--data", "d", "--keep", "2"}),
            "--keep needs --ckpt-dir");
  EXPECT_EQ(UsageError({"s.so", "--data", "d", "--ckpt-dir", "c",
                        "--ckpt-every", "0"}),
            "--ckpt-every expects a positive integer, got '0'");
  EXPECT_EQ(
      UsageError({"s.so", "--data", "d", "--ckpt-dir", "c", "--keep", "-1"}),
      "--keep expects a positive integer, got '-1'");
  EXPECT_EQ(UsageError({"s.so", "--data", "d", "--on-nan", "ignore"}),
            "--on-nan expects stop or skip, got 'ignore'");
  EXPECT_EQ(UsageError({"s.so", "--data", "d", "--loader-depth", "0"}),
            "--loader-depth expects a positive integer, got '0'");
  EXPECT_EQ(UsageError({"s.so", "--data", "d", "--ckpt-dir", "c", "--resume",
                        "--resume"}),
            "--resume given twice");
  EXPECT_EQ(UsageError({"s.so", "--data", "d", "--ckpt-dir", "c",
                        "--resume=yes"}),
            "unknown flag '--resume=yes'");
}

// docs/runtime.md must quote `trun --help` verbatim.
TEST(OptionsTest, ParsesTheGpuFlag) {
  absl::StatusOr<Options> options =
      ParseOptions({"s.so", "--data", "d", "--gpu", "3"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->gpu, 3);
  options = ParseOptions({"s.so", "--data", "d"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_FALSE(options->gpu.has_value()); // GPU 0, and fine for a cpu step
  for (const char *bad : {"-1", "x", "1.5", "4294967296"})
    EXPECT_EQ(UsageError({"s.so", "--data", "d", "--gpu", bad}),
              std::string("--gpu expects a GPU number (0, 1, ...), got '") +
                  bad + "'");
  EXPECT_EQ(UsageError({"s.so", "--info", "--gpu", "1"}),
            "--gpu does not apply to --info");
  EXPECT_EQ(UsageError({"s.so", "--info", "--profile"}),
            "--profile does not apply to --info");
  EXPECT_EQ(UsageError({"s.so", "--diagnose", "--profile"}),
            "--profile does not apply to --diagnose");
  EXPECT_EQ(UsageError({"s.so", "--profile", "--profile"}),
            "--profile given twice");
  absl::StatusOr<Options> profile =
      ParseOptions({"s.so", "--data", "d", "--profile"});
  ASSERT_TRUE(profile.ok()) << profile.status();
  EXPECT_TRUE(profile->profile);
  absl::StatusOr<Options> diagnose_gpu =
      ParseOptions({"s.so", "--diagnose", "--gpu=1"});
  ASSERT_TRUE(diagnose_gpu.ok()) << diagnose_gpu.status();
  EXPECT_EQ(diagnose_gpu->gpu, 1) << "--diagnose checks the GPU --gpu names";
}

TEST(OptionsTest, DocsQuoteTheHelpText) {
  std::ifstream docs(TRUN_TEST_DOCS);
  ASSERT_TRUE(docs.good()) << "cannot read " << TRUN_TEST_DOCS;
  std::stringstream text;
  text << docs.rdbuf();
  EXPECT_NE(text.str().find(std::string("```\n") + kUsage + "```\n"),
            std::string::npos)
      << TRUN_TEST_DOCS << " does not contain the current --help text";
}

TEST(OptionsTest, ParsesTokenWeightAndSamplingFlags) {
  absl::StatusOr<Options> options = ParseOptions(
      {"s.so", "--data", "d/train_*.bin", "--val=v.bin", "--data-order",
       "sequential", "--eval-every", "50", "--eval-batches", "4",
       "--init-from", "a.safetensors", "--save-weights", "b.safetensors",
       "--sample", "30", "--prompt", "Once upon", "--vocab", "v.json",
       "--temperature", "0"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->data, "d/train_*.bin");
  EXPECT_EQ(options->val, "v.bin");
  EXPECT_EQ(options->data_order, DataOrder::kSequential);
  EXPECT_EQ(options->eval_every, 50);
  EXPECT_EQ(options->eval_batches, 4);
  EXPECT_EQ(options->init_from, "a.safetensors");
  EXPECT_EQ(options->save_weights, "b.safetensors");
  EXPECT_EQ(options->sample, 30);
  EXPECT_EQ(options->prompt, "Once upon");
  EXPECT_EQ(options->vocab, "v.json");
  EXPECT_EQ(options->temperature, 0.0);

  options = ParseOptions({"s.so", "--data", "t.bin"});
  ASSERT_TRUE(options.ok());
  EXPECT_FALSE(options->data_order.has_value()); // random
  EXPECT_EQ(options->eval_batches, 20);
  EXPECT_EQ(options->temperature, 1.0);
  // Evaluating or sampling alone needs no training data.
  EXPECT_TRUE(ParseOptions({"s.so", "--val", "v.bin"}).ok());
  EXPECT_TRUE(ParseOptions({"s.so", "--sample", "5"}).ok());
}

TEST(OptionsTest, RejectsBadTokenAndSamplingUsage) {
  EXPECT_EQ(UsageError({"s.so", "--data", "d", "--data-order", "shuffle"}),
            "--data-order expects random or sequential, got 'shuffle'");
  EXPECT_EQ(UsageError({"s.so", "--data", "d", "--eval-batches", "0"}),
            "--eval-batches expects a positive integer, got '0'");
  EXPECT_EQ(UsageError({"s.so", "--sample", "0"}),
            "--sample expects a positive integer, got '0'");
  EXPECT_EQ(UsageError({"s.so", "--sample", "3", "--temperature", "nan"}),
            "--temperature expects a non-negative number, got 'nan'");
  EXPECT_EQ(UsageError({"s.so", "--data", "d", "--prompt", "x"}),
            "--prompt needs --sample");
  EXPECT_EQ(UsageError({"s.so", "--data", "d", "--eval-every", "5"}),
            "--eval-every needs --val");
  EXPECT_EQ(UsageError({"s.so", "--val", "v", "--data-order", "random"}),
            "--data-order needs --data");
  EXPECT_EQ(UsageError({"s.so", "--sample", "3", "--epochs", "2"}),
            "--epochs needs --data (training data)");
  EXPECT_EQ(UsageError({"s.so", "--val", "v", "--steps", "1"}),
            "--steps needs --data (training data)");
  EXPECT_TRUE(ParseOptions({"s.so", "--val", "v", "--steps", "0"}).ok());
}

} // namespace
} // namespace tcc::trun
