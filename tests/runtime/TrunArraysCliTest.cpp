// trun with named arrays (--data NAME=FILE,...), run as a user would: on the
// linear fixture step, named arrays must train exactly like the same data
// given as a float32 image pair; resume continues at the data cursor; and
// mistakes are one-line errors naming the input, array or file.
#include "runtime/trun/data/BatchSource.h"

#include "tests/runtime/fixtures/TrunCli.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <regex>
#include <sstream>

namespace tcc::trun {
namespace {

using testing::CliResult;
using testing::ExpectExactError;
using testing::RunTrun;
using testing::Slurp;
using testing::TempDir;
using testing::WriteNpy;

// Lines that depend only on data, step and seed.
std::vector<std::string> LossLines(const std::string &out) {
  std::vector<std::string> lines;
  std::regex kept(R"((step \d+/\d+  loss \S+|epoch \d+ done: mean loss \S+|)"
                  R"(test accuracy: .*))");
  std::istringstream in(out);
  std::smatch match;
  for (std::string line; std::getline(in, line);)
    if (std::regex_search(line, match, kept) && match.position(0) == 0)
      lines.push_back(match[0]);
  return lines;
}

double TestLoss(const std::string &out) {
  std::smatch match;
  if (!std::regex_search(out, match, std::regex(R"(\ntest loss: (\S+)\n)")))
    return -1;
  return std::stod(match[1]);
}

// The synthetic image splits as float32 features (x/255) with int64 labels
// ("image"/"label", the linear step's input names) and as an image pair.
class TrunArraysCliTest : public testing::TrunCliFixture {
protected:
  void SetUp() override {
    testing::SyntheticSplit train = testing::MakeSyntheticSplit(600, 28, 28, 1);
    testing::SyntheticSplit test = testing::MakeSyntheticSplit(250, 28, 28, 2);
    Write(train, "");
    Write(test, "t");
  }
  void Write(const testing::SyntheticSplit &split, const std::string &prefix) {
    std::vector<float> x;
    for (uint8_t p : split.pixels)
      x.push_back(p / 255.0f);
    std::vector<int64_t> y(split.labels.begin(), split.labels.end());
    WriteNpy(dir_.File(prefix + "x.npy"), "<f4", {split.count, 784}, x);
    WriteNpy(dir_.File(prefix + "y.npy"), "<i8", {split.count}, y);
    WriteNpy(dir_.File(prefix + "y32.npy"), "<i4", {split.count},
             std::vector<int32_t>(y.begin(), y.end()));
  }
  std::string Arrays(const std::string &prefix) const {
    return "image=" + dir_.File(prefix + "x.npy") + ",label=" +
           dir_.File(prefix + "y.npy");
  }
  std::string Step() const { return TRUN_TEST_LINEAR_STEP; }
};

TEST_F(TrunArraysCliTest, TrainsExactlyLikeTheSameImagePair) {
  std::string flags = " --epochs 2 --log-every 2 --seed 3";
  CliResult arrays = RunTrun(Step() + " --data " + Arrays("") + " --test " +
                             Arrays("t") + flags);
  CliResult pair = RunTrun(
      Step() + " --data " + dir_.File("x.npy") + "," + dir_.File("y32.npy") +
      " --test " + dir_.File("tx.npy") + "," + dir_.File("ty32.npy") + flags);
  ASSERT_EQ(arrays.exit_code, 0) << arrays.err;
  ASSERT_EQ(pair.exit_code, 0) << pair.err;
  EXPECT_EQ(arrays.err, "");
  std::vector<std::string> lines = LossLines(pair.out);
  ASSERT_EQ(lines.size(), 6u + 2u + 1u) << pair.out; // steps, epochs, accuracy
  EXPECT_EQ(LossLines(arrays.out), lines) << arrays.out;
  EXPECT_NEAR(TestLoss(arrays.out), TestLoss(pair.out), 1e-4) << arrays.out;
  // The binding, one line per input.
  EXPECT_NE(arrays.out.find("\ninput 'image' f32 [100, 784] <- " +
                            dir_.File("x.npy") +
                            " (float32 (600, 784), as stored), 600 samples\n"
                            "input 'label' i32 [100] <- " +
                            dir_.File("y.npy") +
                            " (int64 (600,), converted to i32), 600 samples "
                            "(the labels of the accuracy)\n"),
            std::string::npos)
      << arrays.out;
  EXPECT_NE(arrays.out.find("\ntest input 'image' f32 [100, 784] <- " +
                            dir_.File("tx.npy")),
            std::string::npos)
      << arrays.out;
}

// Stopped after 8 steps (mid-epoch 2: 6 steps per epoch) and resumed, the
// run ends exactly like the uninterrupted one.
TEST_F(TrunArraysCliTest, ResumedRunEndsLikeTheUninterruptedOne) {
  std::string args = Step() + " --data " + Arrays("") + " --test " +
                     Arrays("t") + " --seed 5 --log-every 1";
  std::string ckpt = dir_.File("ckpt");
  CliResult whole = RunTrun(args + " --epochs 3");
  CliResult first = RunTrun(args + " --steps 8 --ckpt-dir " + ckpt);
  CliResult rest = RunTrun(args + " --epochs 3 --ckpt-dir " + ckpt + " --resume");
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  ASSERT_EQ(first.exit_code, 0) << first.err;
  ASSERT_EQ(rest.exit_code, 0) << rest.err;
  EXPECT_NE(rest.out.find("resumed from " + ckpt +
                          "/step_000000008: step 8 of 8, seed 5, data cursor 8 "
                          "batches"),
            std::string::npos)
      << rest.out;
  // Steps 9..18 and the accuracy (epoch means differ: the resumed run
  // averages only the steps it made).
  auto steps_after_8 = [](const std::string &out) {
    std::vector<std::string> kept;
    for (const std::string &line : LossLines(out))
      if (line.rfind("epoch ", 0) != 0 &&
          (line.rfind("step ", 0) != 0 || std::stoi(line.substr(5)) > 8))
        kept.push_back(line);
    return kept;
  };
  std::vector<std::string> expected = steps_after_8(whole.out);
  ASSERT_EQ(expected.size(), 10u + 1u) << whole.out;
  EXPECT_EQ(steps_after_8(rest.out), expected) << rest.out;
  EXPECT_EQ(TestLoss(rest.out), TestLoss(whole.out));
}

// On the fake GPU (fixtures/fake_device.h) the arrays go up from pinned
// buffers, one per input, and the run matches the CPU's to the byte.
TEST_F(TrunArraysCliTest, GpuStepMatchesTheCpu) {
  std::string args = " --data " + Arrays("") + " --test " + Arrays("t") +
                     " --epochs 2 --seed 1";
  CliResult cpu = RunTrun(Step() + args + " --save-weights " +
                          dir_.File("cpu.safetensors"));
  std::string report = dir_.File("fake_report.txt");
  setenv("TRUN_FAKE_REPORT", report.c_str(), 1);
  CliResult gpu = RunTrun(std::string(TRUN_TEST_LINEAR_CUDA_STEP) + args +
                          " --save-weights " + dir_.File("gpu.safetensors"));
  unsetenv("TRUN_FAKE_REPORT");
  ASSERT_EQ(cpu.exit_code, 0) << cpu.err;
  ASSERT_EQ(gpu.exit_code, 0) << gpu.err;
  std::string fake = Slurp(report);
  for (const char *clean : {" errors=0", " device_blocks=0", " pinned_blocks=0",
                            " pending=0"})
    EXPECT_NE((" " + fake).find(clean), std::string::npos) << fake;
  EXPECT_EQ(LossLines(gpu.out), LossLines(cpu.out)) << gpu.out;
  EXPECT_EQ(TestLoss(gpu.out), TestLoss(cpu.out));
  EXPECT_EQ(Slurp(dir_.File("gpu.safetensors")),
            Slurp(dir_.File("cpu.safetensors")));
}

TEST_F(TrunArraysCliTest, MistakesAreOneLineErrors) {
  std::string x = dir_.File("x.npy"), y = dir_.File("y.npy");
  ExpectExactError(RunTrun(Step() + " --data image=" + x), 1,
                   "step input 'label' i32 [100] has no array in --data (add "
                   "label=FILE.npy)");
  ExpectExactError(RunTrun(Step() + " --data image=" + x + ",label=" + y +
                           ",extra=" + y),
                   1,
                   "--data: array 'extra' (" + y +
                       ") is not an input of step 'linear_softmax' (inputs: "
                       "image, label); name it INPUT=FILE");
  ExpectExactError(RunTrun(Step() + " --data image=" + y + ",label=" + y), 1,
                   y + ": array 'image' int64 (600,) has samples shaped (); "
                       "step input 'image' f32 [100, 784] takes (784,) per "
                       "sample");
  ExpectExactError(RunTrun(Step() + " --data " + Arrays("") +
                           " --test image=" + dir_.File("tx.npy") + ",label=" + y),
                   1,
                   "--test: sample counts differ: 'image' (" +
                       dir_.File("tx.npy") + ") has 250, 'label' (" + y +
                       ") has 600");
  std::vector<float> few(99 * 784, 0.5f);
  WriteNpy(dir_.File("fewx.npy"), "<f4", {99, 784}, few);
  WriteNpy(dir_.File("fewy.npy"), "<i4", {99}, std::vector<int32_t>(99, 1));
  ExpectExactError(RunTrun(Step() + " --data image=" + dir_.File("fewx.npy") +
                           ",label=" + dir_.File("fewy.npy")),
                   1, "--data: 99 samples, fewer than the step's batch size 100");
  ExpectExactError(RunTrun(Step() + " --data image=" + dir_.File("no.npy") +
                           ",label=" + y),
                   1, "cannot open " + dir_.File("no.npy") +
                          ": No such file or directory");
  ExpectExactError(RunTrun(Step() + " --data " + Arrays("") + " --val x.bin"), 1,
                   "--val is for token models; step 'linear_softmax' is fed "
                   "named arrays (use --test NAMED_ARRAYS)");
}

} // namespace
} // namespace tcc::trun
