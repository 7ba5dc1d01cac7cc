// Runs the trun binary as a user would and checks output and exit codes.
#include "runtime/trun/cli/Options.h"
#include "runtime/trun/data/BatchSource.h"

#include "tests/runtime/fixtures/TrunCli.h"

#include <gtest/gtest.h>


#include <cmath>
#include <filesystem>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>

namespace tcc::trun {
namespace {

using testing::CliResult;
using testing::ExpectErrorContaining;
using testing::RunTrun;
using testing::Slurp;
using testing::TempDir;
using testing::WriteNpy;

// Synthetic 28x28 data in the Fashion-MNIST layout (gzipped).
class TrunCliTest : public testing::TrunCliFixture {
protected:
  void SetUp() override { WriteImageSplits(dir_.path()); }
  std::string Step() const { return TRUN_TEST_LINEAR_STEP; }
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
      RunTrun(Step() + " --data " + dir_.path() + " --epochs 3 --log-every 2");
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

// --test-batches N: the test pass reads the first N batches only (issue 38:
// Fashion-MNIST's 10,000 test images took longer than a short run), says
// so, and reports accuracy over those samples; it needs --data and a count.
TEST_F(TrunCliTest, TestBatchesLimitsTheTestPass) {
  CliResult whole = RunTrun(Step() + " --data " + dir_.path() + " --steps 2");
  CliResult first = RunTrun(Step() + " --data " + dir_.path() + " --steps 2 --test-batches 1");
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  ASSERT_EQ(first.exit_code, 0) << first.err;
  std::smatch all, part, limit;
  ASSERT_TRUE(std::regex_search(whole.out, all, std::regex(R"(test accuracy: \S+ \(\d+/(\d+)\))")))
      << whole.out;
  ASSERT_TRUE(std::regex_search(first.out, limit,
                                std::regex(R"(test: (\d+) samples from \S+ \(the first (\d+): --test-batches 1\))")))
      << first.out;
  ASSERT_TRUE(std::regex_search(first.out, part, std::regex(R"(test accuracy: \S+ \(\d+/(\d+)\))")))
      << first.out;
  EXPECT_EQ(limit[1].str(), all[1].str());  // the split's size, as before
  EXPECT_EQ(part[1].str(), limit[2].str()); // accuracy over the first batch
  EXPECT_LT(std::stoll(part[1].str()), std::stoll(all[1].str()));

  CliResult zero = RunTrun(Step() + " --data " + dir_.path() + " --test-batches 0");
  EXPECT_EQ(zero.exit_code, 2);
  EXPECT_NE(zero.err.find("--test-batches"), std::string::npos) << zero.err;
  CliResult alone = RunTrun(Step() + " --test-batches 2");
  EXPECT_EQ(alone.exit_code, 2);
  EXPECT_NE(alone.err.find("missing --data"), std::string::npos) << alone.err;
}

TEST_F(TrunCliTest, SameSeedReproducesOtherSeedDiffers) {
  std::string args = Step() + " --data " + dir_.path() + " --steps 2";
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

// An image classifier stopped mid-epoch and resumed (shuffled batches:
// the epoch's permutation is recomputed at the data cursor) ends exactly
// like the uninterrupted run.
TEST_F(TrunCliTest, ResumedImageRunEndsLikeTheUninterruptedOne) {
  std::string args = Step() + " --data " + dir_.path() + " --seed 3";
  std::string ckpt = dir_.File("ckpt");
  CliResult whole = RunTrun(args + " --epochs 3");
  CliResult first = RunTrun(args + " --steps 8 --ckpt-dir " + ckpt);
  CliResult rest = RunTrun(args + " --epochs 3 --ckpt-dir " + ckpt +
                           " --resume");
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  ASSERT_EQ(first.exit_code, 0) << first.err;
  ASSERT_EQ(rest.exit_code, 0) << rest.err;
  EXPECT_NE(rest.out.find("resumed from " + ckpt + "/step_000000008: step 8"),
            std::string::npos)
      << rest.out;
  auto final_lines = [](const std::string &out) {
    size_t at = out.find("test accuracy:");
    return at == std::string::npos ? out : out.substr(at);
  };
  EXPECT_EQ(final_lines(rest.out), final_lines(whole.out)) << rest.out;
}

// A checkpoint's state.json edited to values no flag allows is refused at
// --resume, naming the field (issue 36: lr -1 trained, loss 4.48 -> 41.5).
TEST_F(TrunCliTest, ResumeRefusesStateValuesNoFlagAllows) {
  std::string args = Step() + " --data " + dir_.path() + " --seed 3";
  std::string ckpt = dir_.File("ckpt");
  ASSERT_EQ(RunTrun(args + " --steps 4 --ckpt-dir " + ckpt).exit_code, 0);
  std::string state_path = ckpt + "/step_000000004/state.json";
  std::string original;
  {
    std::ifstream in(state_path);
    std::stringstream text;
    text << in.rdbuf();
    original = text.str();
  }
  auto edited = [&](const std::string &field, const std::string &value) {
    std::regex re("\"" + field + "\": [^,\n]+");
    std::ofstream(state_path) << std::regex_replace(original, re,
                                                    "\"" + field + "\": " + value);
    return RunTrun(args + " --steps 6 --ckpt-dir " + ckpt + " --resume");
  };
  for (const char *lr : {"-1", "0"}) {
    CliResult r = edited("base_learning_rate", lr);
    EXPECT_NE(r.exit_code, 0) << lr;
    EXPECT_NE(r.err.find("base_learning_rate"), std::string::npos) << r.err;
  }
  CliResult far = edited("data_cursor", "1000000000000000000");
  EXPECT_NE(far.exit_code, 0);
  EXPECT_NE(far.err.find("state.json data_cursor 1000000000000000000 is past the"),
            std::string::npos)
      << far.err;
  // The untouched file resumes.
  std::ofstream(state_path) << original;
  EXPECT_EQ(RunTrun(args + " --steps 6 --ckpt-dir " + ckpt + " --resume").exit_code, 0);
}

TEST_F(TrunCliTest, FilePairWithoutTestSkipsEvaluation) {
  CliResult result = RunTrun(
      Step() + " --data " + dir_.File("train-images-idx3-ubyte.gz") + "," +
      dir_.File("train-labels-idx1-ubyte.gz") + " --steps 3 --lr 0.05");
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
  ExpectErrorContaining(RunTrun(""), 2, "missing STEP.so");
  ExpectErrorContaining(RunTrun(Step() + " --data " + dir_.path() + " --bogus"),
                        2, "unknown flag '--bogus'");
  ExpectErrorContaining(
      RunTrun(Step() + " --data " + dir_.path() + " --steps x"), 2,
      "--steps expects a non-negative integer, got 'x'");
  ExpectErrorContaining(RunTrun(Step() + " --data"), 2, "--data needs a value");
}

TEST_F(TrunCliTest, BadLibrariesExitWithOne) {
  ExpectErrorContaining(RunTrun("/nonexistent/step.so --data " + dir_.path()),
                        1, "step library '/nonexistent/step.so' not found");
  ExpectErrorContaining(
      RunTrun(std::string(TRUN_TEST_BAD_ABI_STEP) + " --info"), 1,
      "ABI version 7, this trun supports " +
          std::to_string(TCC_STEP_ABI_VERSION) +
          " — recompile with a "
          "matching tcc");
  ExpectErrorContaining(
      RunTrun(std::string(TRUN_TEST_NO_DESCRIPTOR_STEP) + " --info"), 1,
      "not a tcc step library (no 'tcc_step_get_descriptor' symbol)");
}

TEST_F(TrunCliTest, BadDataExitsWithOne) {
  ExpectErrorContaining(RunTrun(Step() + " --data /nonexistent/fashion"), 1,
                        "data directory '/nonexistent/fashion' not found");

  // Truncated test labels: found before any training happens.
  std::string labels = dir_.File("t10k-labels-idx1-ubyte.gz");
  std::vector<uint8_t> packed = testing::ReadFileBytes(labels);
  packed.resize(packed.size() - 12);
  testing::WriteFile(labels, packed);
  CliResult result = RunTrun(Step() + " --data " + dir_.path());
  ExpectErrorContaining(result, 1, labels + ": truncated gzip data");
  EXPECT_EQ(result.out.find("trained"), std::string::npos);
}

TEST_F(TrunCliTest, ShapeMismatchNamesInputAndFile) {
  TempDir small;
  std::string images = testing::WriteSplit(
      small.path(), "train", testing::MakeSyntheticSplit(200, 10, 10, 1), true);
  ExpectErrorContaining(RunTrun(Step() + " --data " + images + "," +
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
  ExpectErrorContaining(
      RunTrun(Step() + " --data " + bad.File("train-images-idx3-ubyte") + "," +
              bad.File("train-labels-idx1-ubyte")),
      1,
      "train-labels-idx1-ubyte: label 10 of sample 17 is out of "
      "range for 'logits' width 10");
}

TEST_F(TrunCliTest, TooFewSamplesForOneBatchIsAnError) {
  TempDir tiny;
  std::string images = testing::WriteSplit(
      tiny.path(), "train", testing::MakeSyntheticSplit(99, 28, 28, 1), true);
  ExpectErrorContaining(RunTrun(Step() + " --data " + images + "," +
                                tiny.File("train-labels-idx1-ubyte.gz")),
                        1, "99 samples, fewer than the step's batch size 100");
}

// The output lines that depend only on the data, step and seed: losses,
// epochs, accuracy; not timings or file names.
std::vector<std::string> ResultLines(const std::string &out) {
  std::vector<std::string> lines;
  std::regex kept(R"((step \d+/\d+  loss \S+  lr \S+|epoch \d+ done: mean )"
                  R"(loss \S+|test accuracy: .*|test loss: .*))");
  std::istringstream in(out);
  std::smatch match;
  for (std::string line; std::getline(in, line);)
    if (std::regex_search(line, match, kept) && match.position(0) == 0)
      lines.push_back(match[0]);
  return lines;
}

std::string LineStartingWith(const std::string &out, const std::string &start) {
  size_t at = out.find("\n" + start);
  return at == std::string::npos
             ? ""
             : out.substr(at + 1, out.find('\n', at + 1) - at);
}

// The fixture's data as .npy files: u8 images [N, 28, 28] and int64 / uint8
// labels train the same as the IDX files.
TEST_F(TrunCliTest, NpyUint8DataTrainsExactlyLikeIdx) {
  testing::SyntheticSplit train = testing::MakeSyntheticSplit(600, 28, 28, 1);
  testing::SyntheticSplit test = testing::MakeSyntheticSplit(250, 28, 28, 2);
  TempDir npy;
  WriteNpy(npy.File("x.npy"), "|u1", {600, 28, 28}, train.pixels);
  WriteNpy(npy.File("y.npy"), "<i8", {600},
           std::vector<int64_t>(train.labels.begin(), train.labels.end()));
  WriteNpy(npy.File("tx.npy"), "|u1", {250, 28, 28}, test.pixels);
  WriteNpy(npy.File("ty.npy"), "|u1", {250}, test.labels);

  std::string flags = " --epochs 2 --log-every 2 --seed 3";
  CliResult idx = RunTrun(Step() + " --data " + dir_.path() + flags);
  CliResult from_npy = RunTrun(
      Step() + " --data " + npy.File("x.npy") + "," + npy.File("y.npy") +
      " --test " + npy.File("tx.npy") + "," + npy.File("ty.npy") + flags);
  ASSERT_EQ(idx.exit_code, 0) << idx.err;
  ASSERT_EQ(from_npy.exit_code, 0) << from_npy.err;
  EXPECT_EQ(from_npy.err, "");
  std::vector<std::string> lines = ResultLines(idx.out);
  ASSERT_EQ(lines.size(), 6u + 2u + 2u) << idx.out; // steps, epochs, test
  EXPECT_EQ(ResultLines(from_npy.out), lines) << from_npy.out;
  std::string normalization = LineStartingWith(idx.out, "normalization: mean ");
  ASSERT_NE(normalization, "") << idx.out;
  EXPECT_EQ(LineStartingWith(from_npy.out, "normalization: "), normalization);
  EXPECT_NE(from_npy.out.find("train: 600 samples from " + npy.File("x.npy")),
            std::string::npos)
      << from_npy.out;
  EXPECT_NE(from_npy.out.find("test: 250 samples from " + npy.File("tx.npy")),
            std::string::npos)
      << from_npy.out;
  EXPECT_EQ(from_npy.out.find("float32"), std::string::npos) << from_npy.out;
}

// float32 images holding exactly what the normalizer makes of the u8 pixels
// ([N, 784] this time) train exactly like the u8 data: fed as stored.
TEST_F(TrunCliTest, NpyFloat32ImagesAreFedAsStored) {
  testing::SyntheticSplit train = testing::MakeSyntheticSplit(600, 28, 28, 1);
  testing::SyntheticSplit test = testing::MakeSyntheticSplit(250, 28, 28, 2);
  LabeledImages u8;
  u8.pixels = train.pixels;
  PixelNormalizer normalizer = PixelNormalizer::FromTrainingImages(u8);
  auto normalized = [&](const std::vector<uint8_t> &pixels) {
    std::vector<float> values;
    for (uint8_t p : pixels)
      values.push_back(normalizer.table[p]);
    return values;
  };
  TempDir npy;
  WriteNpy(npy.File("x.npy"), "<f4", {600, 784}, normalized(train.pixels));
  WriteNpy(npy.File("y.npy"), "<u2", {600},
           std::vector<uint16_t>(train.labels.begin(), train.labels.end()));
  WriteNpy(npy.File("tx.npy"), "<f4", {250, 784}, normalized(test.pixels));
  WriteNpy(npy.File("ty.npy"), "<i4", {250},
           std::vector<int32_t>(test.labels.begin(), test.labels.end()));

  std::string flags = " --epochs 2 --log-every 2 --seed 3";
  CliResult idx = RunTrun(Step() + " --data " + dir_.path() + flags);
  CliResult floats = RunTrun(
      Step() + " --data " + npy.File("x.npy") + "," + npy.File("y.npy") +
      " --test " + npy.File("tx.npy") + "," + npy.File("ty.npy") + flags);
  ASSERT_EQ(idx.exit_code, 0) << idx.err;
  ASSERT_EQ(floats.exit_code, 0) << floats.err;
  EXPECT_EQ(floats.err, "");
  ASSERT_FALSE(ResultLines(idx.out).empty()) << idx.out;
  EXPECT_EQ(ResultLines(floats.out), ResultLines(idx.out)) << floats.out;
  EXPECT_GE(AccuracyOf(floats.out), 0.95) << floats.out;
  EXPECT_EQ(LineStartingWith(floats.out, "normalization: "),
            "normalization: none (float32 images)\n")
      << floats.out;
  for (const char *name : {"x.npy", "tx.npy"})
    EXPECT_NE(floats.out.find("\nimages: float32 from " + npy.File(name) +
                              ", fed as stored (no normalization)\n"),
              std::string::npos)
        << floats.out;
  EXPECT_NE(floats.out.find("<- " + npy.File("x.npy") + " (as stored), "),
            std::string::npos)
      << floats.out;
}

TEST_F(TrunCliTest, BadNpyDataExitsWithOne) {
  testing::SyntheticSplit split = testing::MakeSyntheticSplit(200, 28, 28, 1);
  TempDir npy;
  WriteNpy(npy.File("x.npy"), "|u1", {200, 784}, split.pixels);
  std::vector<float> floats(split.pixels.begin(), split.pixels.end());
  WriteNpy(npy.File("f.npy"), "<f4", {200, 28, 28}, floats);
  WriteNpy(npy.File("y.npy"), "|u1", {200}, split.labels);
  auto pair = [&](const char *images, const char *labels) {
    return npy.File(images) + "," + npy.File(labels);
  };

  // Labels past the step's 10 classes: the usual check, naming the .npy.
  std::vector<int64_t> wide(split.labels.begin(), split.labels.end());
  wide[17] = 10;
  WriteNpy(npy.File("wide.npy"), "<i8", {200}, wide);
  ExpectErrorContaining(
      RunTrun(Step() + " --data " + pair("x.npy", "wide.npy")), 1,
      "wide.npy: label 10 of sample 17 is out of range for 'logits' "
      "width 10");
  // A negative label, found while reading.
  wide[17] = -1;
  WriteNpy(npy.File("neg.npy"), "<i8", {200}, wide);
  ExpectErrorContaining(
      RunTrun(Step() + " --data " + pair("x.npy", "neg.npy")), 1,
      npy.File("neg.npy") + ": label -1 at index 17 is out of range");
  // Counts differ.
  WriteNpy(
      npy.File("few.npy"), "|u1", {150},
      std::vector<uint8_t>(split.labels.begin(), split.labels.begin() + 150));
  ExpectErrorContaining(RunTrun(Step() + " --data " + pair("x.npy", "few.npy")),
                        1,
                        npy.File("few.npy") + ": 150 labels but " +
                            npy.File("x.npy") + " has 200 images");
  // A NaN pixel.
  floats[784 * 3 + 5] = std::nanf("");
  WriteNpy(npy.File("nan.npy"), "<f4", {200, 28, 28}, floats);
  ExpectErrorContaining(
      RunTrun(Step() + " --data " + pair("nan.npy", "y.npy")), 1,
      npy.File("nan.npy") + ": value 2357 (sample 3, element 5) is "
                            "nan; float32 images must be finite");
  // Train and test must both be u8 or both float32.
  CliResult mixed = RunTrun(Step() + " --data " + pair("f.npy", "y.npy") +
                            " --test " + pair("x.npy", "y.npy"));
  ExpectErrorContaining(
      mixed, 1,
      npy.File("x.npy") + ": uint8 images but the training images " +
          npy.File("f.npy") +
          " are float32; train and test images must have the same "
          "dtype");
  EXPECT_EQ(mixed.out.find("step 1"), std::string::npos) << mixed.out;
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

namespace tcc::trun {
namespace {

// Started as one of several ranks (torchrun's variables), trun stops before
// anything is trained or written, naming the rank, until it trains across
// ranks; a broken launcher environment is an error naming the variable.
// A step compiled for one rank (no --data-parallel) started by a launcher
// as one of several ranks stops before reading data or writing anything:
// each rank would train its own copy and overwrite the others' checkpoints.
TEST_F(TrunCliTest, RefusesToRunAOneRankStepAsOneOfSeveralRanks) {
  std::string out = dir_.path() + "/ranked";
  testing::CliResult ranked = testing::RunCommand(
      "env", "RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 MASTER_ADDR=127.0.0.1 " +
                 std::string(TRUN_TEST_TRUN_BINARY) + " " + Step() + " --data " + dir_.path() +
                 " --epochs 1 --ckpt-dir " + out);
  testing::ExpectErrorContaining(
      ranked, 1,
      "started as rank 1 of 2 (local 1, torchrun, master 127.0.0.1:29500), but step");
  testing::ExpectErrorContaining(ranked, 1,
                                 "was compiled for one rank: its ranks would each train their "
                                 "own copy. Compile it with tcc compile --data-parallel");
  EXPECT_FALSE(std::filesystem::exists(out));
  testing::CliResult broken = testing::RunCommand(
      "env", "RANK=2 WORLD_SIZE=2 " + std::string(TRUN_TEST_TRUN_BINARY) + " " + Step() +
                 " --data " + dir_.path());
  testing::ExpectErrorContaining(broken, 1,
                                 "launch environment: RANK=2 is not below WORLD_SIZE=2");
}

} // namespace
} // namespace tcc::trun
