// Runs the trun binary as a user would and checks output and exit codes.
#include "runtime/trun/Options.h"

#include "tests/runtime/TestData.h"

#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>

namespace tcc::trun {
namespace {

using testing::TempDir;

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string Slurp(const std::string &path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// `args` is passed through the shell; tests only use paths without spaces.
CliResult RunTrun(const std::string &args) {
  TempDir io;
  std::string command = std::string(TRUN_TEST_TRUN_BINARY) + " " + args + " >" +
                        io.File("out") + " 2>" + io.File("err");
  int status = std::system(command.c_str());
  CliResult result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.out = Slurp(io.File("out"));
  result.err = Slurp(io.File("err"));
  return result;
}

// Every failure is one line "trun: error: <message>" and a given exit code.
void ExpectError(const CliResult &result, int exit_code,
                 const std::string &message_part) {
  EXPECT_EQ(result.exit_code, exit_code) << result.err;
  EXPECT_EQ(result.err.rfind("trun: error: ", 0), 0u) << result.err;
  EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1)
      << result.err;
  EXPECT_NE(result.err.find(message_part), std::string::npos) << result.err;
}

// Synthetic 28x28 data in the Fashion-MNIST layout (gzipped).
class TrunCliTest : public ::testing::Test {
protected:
  void SetUp() override {
    testing::WriteSplit(data_.path(), "train",
                        testing::MakeSyntheticSplit(600, 28, 28, 1), true);
    testing::WriteSplit(data_.path(), "t10k",
                        testing::MakeSyntheticSplit(250, 28, 28, 2), true);
  }
  std::string Step() const { return TRUN_TEST_LINEAR_STEP; }
  TempDir data_;
};

double AccuracyOf(const std::string &out) {
  std::smatch match;
  std::regex line(R"(test accuracy: ([0-9.]+) \((\d+)/250\)\n)");
  if (!std::regex_search(out, match, line))
    return -1;
  return std::stod(match[1]);
}

TEST_F(TrunCliTest, HelpPrintsUsage) {
  CliResult result = RunTrun("--help");
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_EQ(result.out, kUsage);
  EXPECT_EQ(result.err, "");
}

TEST_F(TrunCliTest, TrainsAndEvaluatesOnDataDirectory) {
  CliResult result =
      RunTrun(Step() + " --data " + data_.path() + " --epochs 3 --log-every 2");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.err, "");
  EXPECT_NE(result.out.find("step 2/18  loss "), std::string::npos)
      << result.out;
  EXPECT_NE(result.out.find("epoch 3 done: mean loss"), std::string::npos)
      << result.out;
  EXPECT_GE(AccuracyOf(result.out), 0.95) << result.out;
  EXPECT_TRUE(std::regex_search(result.out,
                                std::regex(R"(\ntest loss: \d+\.\d{4}\n$)")))
      << result.out;
}

TEST_F(TrunCliTest, SameSeedReproducesOtherSeedDiffers) {
  std::string args = Step() + " --data " + data_.path() + " --steps 2";
  CliResult a = RunTrun(args + " --seed 4");
  CliResult b = RunTrun(args + " --seed 4");
  CliResult c = RunTrun(args + " --seed 5");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  auto final_lines = [](const std::string &out) {
    return out.substr(out.find("test accuracy:"));
  };
  EXPECT_EQ(final_lines(a.out), final_lines(b.out));
  EXPECT_NE(final_lines(a.out), final_lines(c.out));
}

TEST_F(TrunCliTest, FilePairWithoutTestSkipsEvaluation) {
  CliResult result = RunTrun(
      Step() + " --data " + data_.File("train-images-idx3-ubyte.gz") + "," +
      data_.File("train-labels-idx1-ubyte.gz") + " --steps 3 --lr 0.05");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("lr 0.05"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("note: no test data"), std::string::npos);
  EXPECT_EQ(result.out.find("test accuracy"), std::string::npos);
}

TEST_F(TrunCliTest, InfoPrintsDescriptor) {
  CliResult result = RunTrun(Step() + " --info");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("model: linear_softmax"), std::string::npos);
  EXPECT_NE(result.out.find("  image  f32 [100, 784]"), std::string::npos)
      << result.out;
  EXPECT_NE(result.out.find("workspace: 4000 bytes"), std::string::npos);
}

TEST_F(TrunCliTest, UsageErrorsExitWithTwo) {
  ExpectError(RunTrun(""), 2, "missing STEP.so");
  ExpectError(RunTrun(Step() + " --data " + data_.path() + " --bogus"), 2,
              "unknown flag '--bogus'");
  ExpectError(RunTrun(Step() + " --data " + data_.path() + " --steps x"), 2,
              "--steps expects a non-negative integer, got 'x'");
  ExpectError(RunTrun(Step() + " --data"), 2, "--data needs a value");
}

TEST_F(TrunCliTest, BadLibrariesExitWithOne) {
  ExpectError(RunTrun("/nonexistent/step.so --data " + data_.path()), 1,
              "step library '/nonexistent/step.so' not found");
  ExpectError(RunTrun(std::string(TRUN_TEST_BAD_ABI_STEP) + " --info"), 1,
              "ABI version 7, this trun supports " + std::to_string(TCC_STEP_ABI_VERSION) + " — recompile with a "
              "matching tcc");
  ExpectError(RunTrun(std::string(TRUN_TEST_NO_DESCRIPTOR_STEP) + " --info"), 1,
              "not a tcc step library (no 'tcc_step_get_descriptor' symbol)");
}

TEST_F(TrunCliTest, BadDataExitsWithOne) {
  ExpectError(RunTrun(Step() + " --data /nonexistent/fashion"), 1,
              "data directory '/nonexistent/fashion' not found");

  // Truncated test labels: found before any training happens.
  std::string labels = data_.File("t10k-labels-idx1-ubyte.gz");
  std::vector<uint8_t> packed = testing::ReadFileBytes(labels);
  packed.resize(packed.size() - 12);
  testing::WriteFile(labels, packed);
  CliResult result = RunTrun(Step() + " --data " + data_.path());
  ExpectError(result, 1, labels + ": truncated gzip data");
  EXPECT_EQ(result.out.find("trained"), std::string::npos);
}

TEST_F(TrunCliTest, ShapeMismatchNamesInputAndFile) {
  TempDir small;
  std::string images = testing::WriteSplit(
      small.path(), "train", testing::MakeSyntheticSplit(200, 10, 10, 1), true);
  ExpectError(RunTrun(Step() + " --data " + images + "," +
                      small.File("train-labels-idx1-ubyte.gz")),
              1,
              "step input 'image' expects 784 values per sample but "
              "train-images-idx3-ubyte.gz has 10x10 = 100");
}

TEST_F(TrunCliTest, OutOfRangeLabelIsAnError) {
  testing::SyntheticSplit split = testing::MakeSyntheticSplit(200, 28, 28, 1);
  split.labels[17] = 10;
  TempDir bad;
  testing::WriteSplit(bad.path(), "train", split, false);
  ExpectError(RunTrun(Step() + " --data " +
                      bad.File("train-images-idx3-ubyte") + "," +
                      bad.File("train-labels-idx1-ubyte")),
              1,
              "train-labels-idx1-ubyte: label 10 of sample 17 is out of "
              "range for 'logits' width 10");
}

TEST_F(TrunCliTest, TooFewSamplesForOneBatchIsAnError) {
  TempDir tiny;
  std::string images = testing::WriteSplit(
      tiny.path(), "train", testing::MakeSyntheticSplit(99, 28, 28, 1), true);
  ExpectError(RunTrun(Step() + " --data " + images + "," +
                      tiny.File("train-labels-idx1-ubyte.gz")),
              1, "99 samples, fewer than the step's batch size 100");
}

// One epoch of the linear classifier on the real Fashion-MNIST data.
TEST(TrunFashionMnistTest, LinearStepReachesEightyPercent) {
  std::ifstream probe(std::string(TRUN_TEST_FASHION_MNIST) +
                      "/train-images-idx3-ubyte.gz");
  if (!probe.good())
    GTEST_SKIP() << "no Fashion-MNIST at " << TRUN_TEST_FASHION_MNIST;
  CliResult result =
      RunTrun(std::string(TRUN_TEST_LINEAR_STEP) + " --data " +
              TRUN_TEST_FASHION_MNIST + " --lr 0.05 --log-every 0");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  std::smatch match;
  ASSERT_TRUE(std::regex_search(
      result.out, match,
      std::regex(R"(test accuracy: ([0-9.]+) \((\d+)/10000\))")))
      << result.out;
  EXPECT_GE(std::stod(match[1]), 0.80) << result.out;
}

} // namespace
} // namespace tcc::trun
