// trun on token shards, weights and sampling, run as a user would with the
// bigram fixture step (fixtures/bigram_step.c: B=8, T=16, V=256).
#include "runtime/trun/data/TokenShards.h"
#include "runtime/trun/data/Vocab.h"
#include "runtime/trun/io/Safetensors.h"

#include "tests/runtime/fixtures/TrunCli.h"

#include <cstdio>

#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

namespace tcc::trun {
namespace {

using testing::CliResult;
using testing::ExpectExactError;
using testing::RunTrun;
using testing::Slurp;
using testing::StepLosses;
using testing::TempDir;
using testing::ValLosses;

// Shards of a repeated 11-character text ("abcdefghij\n"), char level:
// a bigram model can learn it exactly.
class TrunTokenCliTest : public testing::TrunCliFixture {
protected:
  void SetUp() override { WriteTokenShards(/*with_vocab=*/true); }
  std::string Step() const { return TRUN_TEST_BIGRAM_STEP; }
  std::string Data() const {
    return Step() + " --data " + train_ + " --val " + val_;
  }
};

TEST_F(TrunTokenCliTest, TrainsWithPeriodicValidation) {
  CliResult r = RunTrun(Data() + " --steps 60 --eval-every 20 --log-every 20");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_NE(r.out.find("step: bigram ("), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("batch 8x16 tokens"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("random windows of 16+1 tokens"), std::string::npos);
  EXPECT_NE(r.out.find("val: 440 tokens in " + val_ + " (3 batches of 8x16)"),
            std::string::npos)
      << r.out;
  // Reports at steps 20, 40, 60 and none repeated at the end.
  std::vector<double> losses = ValLosses(r.out);
  ASSERT_EQ(losses.size(), 3u) << r.out;
  EXPECT_NE(r.out.find("val loss: " ), std::string::npos);
  EXPECT_NE(r.out.find("(step 60)\n"), std::string::npos);
  EXPECT_LT(losses[2], losses[0]);
  EXPECT_LT(losses[2], 1.0) << r.out; // from ln(256) = 5.5
}

TEST_F(TrunTokenCliTest, SameSeedReproducesOtherSeedDiffers) {
  std::string args = Data() + " --steps 5 --eval-batches 2";
  CliResult a = RunTrun(args + " --seed 3"), b = RunTrun(args + " --seed 3"),
            c = RunTrun(args + " --seed 4");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(ValLosses(a.out).size(), 1u) << a.out;
  EXPECT_EQ(ValLosses(a.out), ValLosses(b.out));
  EXPECT_NE(ValLosses(a.out), ValLosses(c.out));
  // Sequential windows: reproducible, and not the random ones.
  CliResult s1 = RunTrun(args + " --data-order sequential");
  CliResult s2 = RunTrun(args + " --data-order sequential");
  ASSERT_EQ(s1.exit_code, 0) << s1.err;
  EXPECT_NE(s1.out.find("sequential windows"), std::string::npos);
  EXPECT_EQ(ValLosses(s1.out), ValLosses(s2.out));
  EXPECT_NE(ValLosses(s1.out), ValLosses(RunTrun(args).out));
}

TEST_F(TrunTokenCliTest, SavedWeightsReloadExactly) {
  std::string weights = dir_.File("w.safetensors");
  CliResult trained =
      RunTrun(Data() + " --steps 30 --save-weights " + weights);
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  EXPECT_NE(trained.out.find("saved weights: " + weights + " (2 tensors)"),
            std::string::npos);
  // Evaluation only, from the file, with another seed (init is replaced).
  CliResult loaded = RunTrun(Step() + " --val " + val_ + " --init-from " +
                             weights + " --seed 9");
  ASSERT_EQ(loaded.exit_code, 0) << loaded.err;
  EXPECT_NE(loaded.out.find("init: 2 parameters from " + weights),
            std::string::npos);
  // trun's own file: its tcc_data_crc32 was checked (issue 36).
  EXPECT_NE(loaded.out.find("checksum verified"), std::string::npos) << loaded.out;
  ASSERT_EQ(ValLosses(loaded.out).size(), 1u);
  EXPECT_EQ(ValLosses(loaded.out), ValLosses(trained.out));
}

TEST_F(TrunTokenCliTest, GreedySampleContinuesThePattern) {
  std::string weights = dir_.File("w.safetensors");
  ASSERT_EQ(RunTrun(Data() + " --steps 100 --save-weights " + weights).exit_code,
            0);
  CliResult r = RunTrun(Step() + " --init-from " + weights +
                        " --sample 14 --temperature 0 --prompt cd --vocab " +
                        vocab_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("sample: 14 tokens, temperature 0, seed 0\n"
                       "cdefghij\nabcdefg\n"),
            std::string::npos)
      << r.out;
  // Sampling at temperature 1 is reproducible for a seed.
  std::string sample = Step() + " --init-from " + weights +
                       " --sample 40 --vocab " + vocab_ + " --seed 5";
  CliResult a = RunTrun(sample), b = RunTrun(sample);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  // (From the "sample:" line on: the "generate:" line before it has timings.)
  EXPECT_EQ(a.out.substr(a.out.find("\nsample: ")), b.out.substr(b.out.find("\nsample: ")));
  // Without --vocab: the vocabulary found beside the shards was saved
  // beside the weights (w.vocab.json), and the sample decodes with it.
  CliResult beside = RunTrun(Step() + " --init-from " + weights +
                             " --sample 14 --temperature 0 --prompt cd");
  ASSERT_EQ(beside.exit_code, 0) << beside.err;
  EXPECT_NE(beside.out.find("vocab: 11 tokens (char level) from " +
                            dir_.File("w.vocab.json") +
                            " (beside the --init-from weights)"),
            std::string::npos)
      << beside.out;
  EXPECT_NE(beside.out.find("cdefghij\nabcdefg\n"), std::string::npos)
      << beside.out;
  // With no vocabulary anywhere, a step with 256 logits decodes bytes: the
  // byte values 0..10 come out.
  ASSERT_EQ(std::remove(dir_.File("w.vocab.json").c_str()), 0);
  CliResult bytes =
      RunTrun(Step() + " --init-from " + weights + " --sample 3 "
                       "--temperature 0 --prompt=\"$(printf '\\003')\"");
  ASSERT_EQ(bytes.exit_code, 0) << bytes.err;
  EXPECT_EQ(bytes.out.find("vocab:"), std::string::npos) << bytes.out;
  EXPECT_NE(bytes.out.find(std::string("\x03\x04\x05\x06\n")),
            std::string::npos)
      << bytes.out;
}

TEST_F(TrunTokenCliTest, StepWithoutLogitsTrainsButCannotSample) {
  std::string step = TRUN_TEST_BIGRAM_NO_LOGITS_STEP;
  CliResult r = RunTrun(step + " --data " + train_ + " --steps 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("note: step has no 'logits' output; token ids are not "
                       "checked against its vocabulary"),
            std::string::npos);
  ExpectExactError(
      RunTrun(step + " --data " + train_ + " --sample 3"), 1,
      "--sample: step 'bigram' has no eval output 'logits' [batch, "
      "context, vocab]");
}

TEST_F(TrunTokenCliTest, BadShardsExitWithOne) {
  ExpectExactError(RunTrun(Step() + " --data " + dir_.File("none.bin")), 1,
                   "cannot open " + dir_.File("none.bin") +
                       ": No such file or directory");
  ExpectExactError(RunTrun(Step() + " --data '" + dir_.File("x_*.bin") + "'"),
                   1, "no token shards match '" + dir_.File("x_*.bin") + "'");
  std::vector<uint8_t> bytes = testing::ReadFileBytes(val_);
  bytes.resize(bytes.size() - 1);
  std::string cut = dir_.File("cut.bin");
  testing::WriteFile(cut, bytes);
  CliResult r = RunTrun(Data() + " --val " + cut);
  EXPECT_EQ(r.exit_code, 2); // --val given twice
  r = RunTrun(Step() + " --data " + train_ + " --val " + cut);
  ExpectExactError(r, 1,
                   cut + ": header says 440 tokens (1904 bytes) but the file "
                         "has 1903 bytes (truncated)");
  EXPECT_EQ(r.out.find("trained"), std::string::npos); // before training
  bytes[0] ^= 0xFF;
  testing::WriteFile(cut, bytes);
  ExpectExactError(RunTrun(Step() + " --data " + cut), 1,
                   cut + ": bad magic 20240503, expected 20240520 (not a token "
                         "shard)");
  // An IDX directory is not a shard.
  ExpectExactError(RunTrun(Step() + " --data " + dir_.path()), 1,
                   dir_.path() + " is a directory, not a file");
}

TEST_F(TrunTokenCliTest, TokenOutOfRangeAndTooLittleData) {
  std::vector<uint16_t> tokens(1000, 7);
  tokens[742] = 256;
  std::string big = dir_.File("big.bin");
  ASSERT_TRUE(WriteTokenShard(big, tokens).ok());
  ExpectExactError(
      RunTrun(Step() + " --data " + big), 1,
      big + ": token 256 at position 742 is out of range for 'logits' "
            "width 256");
  std::string small = dir_.File("small.bin");
  ASSERT_TRUE(WriteTokenShard(small, std::vector<uint16_t>(100, 1)).ok());
  ExpectExactError(RunTrun(Step() + " --data " + small), 1,
                   small +
                       ": 100 tokens make 6 windows of 16+1 tokens, fewer than "
                       "the step's batch of 8");
}

TEST_F(TrunTokenCliTest, FlagsOfTheOtherStepKindAreErrors) {
  ExpectExactError(RunTrun(Step() + " --data " + train_ + " --test a,b"), 1,
                   "--test is for image classifiers; step 'bigram' is a token "
                   "model (use --val SHARDS)");
  std::string linear = TRUN_TEST_LINEAR_STEP;
  ExpectExactError(
      RunTrun(linear + " --data d --val " + val_), 1,
      "--val is for token models; step 'linear_softmax' is an image "
      "classifier (inputs 'tokens' and 'targets' make a token model)");
  ExpectExactError(
      RunTrun(linear + " --sample 3"), 1,
      "--sample is for token models; step 'linear_softmax' is an "
      "image classifier (inputs 'tokens' and 'targets' make a token "
      "model)");
  ExpectExactError(RunTrun(Step() + " --val " + val_ + " --steps 3"), 2,
                   "--steps needs --data (training data)");
  ExpectExactError(RunTrun(Step() + " --data " + train_ + " --eval-every 3"), 2,
                   "--eval-every needs --val");
  ExpectExactError(RunTrun(Step() + " --sample 3 --temperature -1"), 2,
                   "--temperature expects a non-negative number, got '-1'");
  ExpectExactError(
      RunTrun(Step() + " --data " + train_ + " --data-order shuffled"), 2,
      "--data-order expects random or sequential, got 'shuffled'");
}

TEST_F(TrunTokenCliTest, BadWeightsAndVocabExitWithOne) {
  ExpectExactError(RunTrun(Step() + " --sample 3 --init-from " +
                           dir_.File("none.safetensors")),
                   1,
                   "cannot open " + dir_.File("none.safetensors") +
                       ": No such file or directory");
  std::string garbage = dir_.File("g.safetensors");
  testing::WriteFile(garbage, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  ExpectExactError(RunTrun(Step() + " --sample 3 --init-from " + garbage), 1,
                   garbage +
                       ": header size 578437695752307201 is implausible (not "
                       "safetensors)");
  // Weights of another model: the first missing parameter is named.
  std::string linear = dir_.File("linear.safetensors");
  TempDir idx;
  testing::WriteSplit(idx.path(), "train",
                      testing::MakeSyntheticSplit(100, 28, 28, 1), false);
  ASSERT_EQ(RunTrun(std::string(TRUN_TEST_LINEAR_STEP) + " --data " +
                    idx.File("train-images-idx3-ubyte") + "," +
                    idx.File("train-labels-idx1-ubyte") +
                    " --steps 1 --save-weights " + linear)
                .exit_code,
            0);
  ExpectExactError(RunTrun(Step() + " --sample 3 --init-from " + linear), 1,
                   linear + ": missing tensor 'table' (parameter 'table' of step "
                            "'bigram': f32 [256, 256])");
  // A table of the wrong shape.
  std::vector<float> table(16 * 256), bias(256);
  std::string wrong = dir_.File("wrong.safetensors");
  ASSERT_TRUE(WriteSafetensors(
                  wrong,
                  {{"table", TCC_DTYPE_F32, {16, 256}, table.data(),
                    static_cast<int64_t>(table.size() * 4)},
                   {"bias", TCC_DTYPE_F32, {256}, bias.data(), 1024}},
                  {})
                  .ok());
  ExpectExactError(RunTrun(Step() + " --sample 3 --init-from " + wrong), 1,
                   wrong + ": tensor 'table' has shape [16, 256] but parameter "
                           "'table' of step 'bigram' needs f32 [256, 256]");
  ExpectExactError(
      RunTrun(Step() + " --sample 3 --vocab " + vocab_ + " --prompt xyz"), 1,
      "--prompt: character 'x' at byte 0 is not in the vocabulary");
  ExpectExactError(RunTrun(Step() + " --sample 3 --vocab " + train_), 1,
                   train_ +
                       ": not valid JSON (expected a vocab.json from tcc-data "
                       "tokenize)");
}

// --save-train-outputs writes the loss of the last train step (not of the
// validation that runs after it) and the step's train outputs (none here).
TEST_F(TrunTokenCliTest, SavesTheLastTrainStepsLoss) {
  std::string file = dir_.File("train_outputs.safetensors");
  CliResult r = RunTrun(Data() + " --steps 4 --eval-every 2 --log-every 1 "
                                 "--save-train-outputs " + file);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("saved train outputs of step 4: " + file +
                       " (loss and 0 tensors)"),
            std::string::npos)
      << r.out;
  std::smatch logged;
  ASSERT_TRUE(std::regex_search(r.out, logged,
                                std::regex(R"(step 4/4  loss ([0-9.]+))")))
      << r.out;
  absl::StatusOr<SafetensorsFile> saved = SafetensorsFile::Open(file);
  ASSERT_TRUE(saved.ok()) << saved.status();
  ASSERT_EQ(saved->tensors().size(), 1u);
  const SafetensorsFile::Tensor &loss = saved->tensors().at("loss");
  EXPECT_EQ(loss.dtype, "F32");
  EXPECT_TRUE(loss.shape.empty());
  ASSERT_EQ(loss.size_bytes, 4);
  float value;
  std::memcpy(&value, loss.data, 4);
  EXPECT_NEAR(value, std::stod(logged[1]), 5e-5);
  std::vector<double> val = ValLosses(r.out);
  ASSERT_EQ(val.size(), 2u) << r.out;
  EXPECT_GT(std::abs(value - val[1]), 1e-4) << "saved the validation loss";
  EXPECT_EQ(saved->metadata().at("step"), "3");

  ExpectExactError(RunTrun(Data() + " --steps 0 --save-train-outputs " + file),
                   1, "--save-train-outputs needs at least one train step");
}

TEST_F(TrunTokenCliTest, ResumedRunContinuesExactly) {
  std::string ckpt = dir_.File("ckpt");
  std::string base = Data() + " --seed 5 --eval-every 10 --eval-batches 2";
  CliResult whole =
      RunTrun(base + " --steps 30 --metrics " + dir_.File("whole.jsonl"));
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  // The same run in two pieces: 12 steps (checkpoint at 10 and 12), then
  // --resume to 30 from the final checkpoint.
  CliResult first = RunTrun(base + " --steps 12 --ckpt-dir " + ckpt +
                            " --ckpt-every 10 --metrics " +
                            dir_.File("pieces.jsonl"));
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_NE(first.out.find("checkpoint: " + ckpt + "/step_000000010"),
            std::string::npos)
      << first.out;
  EXPECT_NE(first.out.find("checkpoint: " + ckpt + "/step_000000012"),
            std::string::npos)
      << first.out;
  CliResult second = RunTrun(Data() + " --eval-every 10 --eval-batches 2 "
                             "--steps 30 --ckpt-dir " + ckpt +
                             " --resume --metrics " +
                             dir_.File("pieces.jsonl"));
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_NE(second.out.find("resumed from " + ckpt +
                            "/step_000000012: step 12 of 12, seed 5"),
            std::string::npos)
      << second.out;
  std::map<int64_t, std::string> a = StepLosses(dir_.File("whole.jsonl")),
                                  b = StepLosses(dir_.File("pieces.jsonl"));
  ASSERT_EQ(a.size(), 30u);
  EXPECT_EQ(a, b);
  EXPECT_EQ(ValLosses(whole.out).back(), ValLosses(second.out).back());
  // Nothing left to do: resuming a finished run trains nothing.
  CliResult third = RunTrun(Data() + " --steps 30 --ckpt-dir " + ckpt +
                            " --resume");
  ASSERT_EQ(third.exit_code, 0) << third.err;
  EXPECT_NE(third.out.find("nothing to train: 30 of 30 steps already done"),
            std::string::npos)
      << third.out;
}

TEST_F(TrunTokenCliTest, ResumeRefusesAnotherSeedOrDataOrder) {
  std::string ckpt = dir_.File("ckpt");
  ASSERT_EQ(RunTrun(Data() + " --steps 3 --seed 1 --ckpt-dir " + ckpt)
                .exit_code,
            0);
  CliResult seed =
      RunTrun(Data() + " --steps 6 --seed 2 --ckpt-dir " + ckpt + " --resume");
  EXPECT_EQ(seed.exit_code, 1);
  EXPECT_NE(seed.err.find("was written by a run with --seed 1, this run asks "
                          "for --seed 2"),
            std::string::npos)
      << seed.err;
  CliResult order = RunTrun(Data() + " --steps 6 --data-order sequential "
                                     "--ckpt-dir " + ckpt + " --resume");
  EXPECT_EQ(order.exit_code, 1);
  EXPECT_NE(order.err.find("was written with data order 'random', this run "
                           "uses 'sequential'"),
            std::string::npos)
      << order.err;
}

TEST_F(TrunTokenCliTest, ResumeWithAnEmptyDirectoryStartsAtZero) {
  std::string ckpt = dir_.File("new_ckpt");
  CliResult r = RunTrun(Data() + " --steps 4 --ckpt-dir " + ckpt + " --resume");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("resume: no checkpoint in " + ckpt +
                       " yet; starting at step 0"),
            std::string::npos)
      << r.out;
  EXPECT_TRUE(std::filesystem::exists(ckpt + "/step_000000004/state.json"));
}

TEST_F(TrunTokenCliTest, NonFiniteLossStopsNamingStepAndCheckpoint) {
  // The fixture diverges at its 6th step (args.step 5) and from the 21st on.
  std::string nan_step = TRUN_TEST_BIGRAM_NAN_STEP;
  std::string data = " --data " + train_;
  std::string ckpt = dir_.File("ckpt");
  CliResult stop = RunTrun(nan_step + data + " --steps 10 --ckpt-dir " + ckpt +
                           " --ckpt-every 1");
  ExpectExactError(stop, 1,
                   "step 'bigram': non-finite loss at train step 6 (loss nan) "
                   "(last good checkpoint: " +
                       ckpt + "/step_000000005)");
  EXPECT_FALSE(std::filesystem::exists(ckpt + "/step_000000006"))
      << "no checkpoint of the poisoned weights";
  // --on-nan skip: step 6 is undone, the run finishes with finite weights.
  std::string weights = dir_.File("w.safetensors");
  CliResult skip = RunTrun(nan_step + data + " --steps 15 --on-nan skip "
                                             "--save-weights " + weights);
  ASSERT_EQ(skip.exit_code, 0) << skip.err;
  EXPECT_NE(skip.out.find("warning: step 'bigram': non-finite loss at train "
                          "step 6 (loss nan); update undone (--on-nan skip)"),
            std::string::npos)
      << skip.out;
  EXPECT_NE(skip.out.find("1 skipped (non-finite)"), std::string::npos)
      << skip.out;
  absl::StatusOr<SafetensorsFile> saved = SafetensorsFile::Open(weights);
  ASSERT_TRUE(saved.ok()) << saved.status();
  for (const auto &[name, tensor] : saved->tensors()) {
    const float *values = reinterpret_cast<const float *>(tensor.data);
    for (int64_t i = 0; i < tensor.size_bytes / 4; ++i)
      ASSERT_TRUE(std::isfinite(values[i])) << name << "[" << i << "]";
  }
  // Every step bad from step 21: gives up after the limit in a row.
  CliResult give_up = RunTrun(nan_step + data + " --steps 60 --on-nan skip");
  EXPECT_EQ(give_up.exit_code, 1);
  EXPECT_NE(give_up.err.find("non-finite loss at train step 30 (loss nan); "
                             "10 steps in a row skipped (--on-nan skip), "
                             "giving up"),
            std::string::npos)
      << give_up.err;
}

TEST_F(TrunTokenCliTest, MetricsFileHasStepEvalAndRunRecords) {
  std::string metrics = dir_.File("m.jsonl");
  CliResult r = RunTrun(Data() + " --steps 10 --eval-every 5 --eval-batches 2 "
                        "--metrics " + metrics);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string text = Slurp(metrics);
  EXPECT_EQ(StepLosses(metrics).size(), 10u) << text;
  EXPECT_NE(text.find("\"kind\":\"eval\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"event\":\"start\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"event\":\"end\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"unit\":\"tokens\""), std::string::npos) << text;
  // The summary line reports the data wait of the background loader.
  EXPECT_TRUE(std::regex_search(
      r.out, std::regex("trained 10 steps in [0-9.]+ s \\([0-9]+ tokens/s, "
                        "data wait [0-9.]+%\\)")))
      << r.out;
}

TEST_F(TrunTokenCliTest, UnusableCheckpointDirectoryIsAClearError) {
  std::string file = dir_.File("plain_file");
  std::ofstream(file) << "x";
  CliResult r = RunTrun(Data() + " --steps 2 --ckpt-dir " + file + "/ckpt");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(file), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "one line: " << r.err;
}

// The bigram model on real English text (Debian's fortunes), char level.
TEST(TrunFortunesTest, BigramLearnsEnglishCharacters) {
  if (!std::filesystem::is_directory(TRUN_TEST_FORTUNES))
    GTEST_SKIP() << "no " << TRUN_TEST_FORTUNES << " (Debian package fortunes)";
  TempDir dir;
  std::string tokenize = std::string(TRUN_TEST_TCC_DATA_BINARY) +
                         " tokenize --level char -o " + dir.File("f") + " " +
                         TRUN_TEST_FORTUNES + " >/dev/null";
  ASSERT_EQ(std::system(tokenize.c_str()), 0);
  CliResult r = RunTrun(std::string(TRUN_TEST_BIGRAM_STEP) + " --data " +
                        dir.File("f_train.bin") + " --val " +
                        dir.File("f_val.bin") +
                        " --steps 400 --eval-every 200 --log-every 0 --sample "
                        "80 --vocab " +
                        dir.File("f_vocab.json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<double> losses = ValLosses(r.out);
  ASSERT_EQ(losses.size(), 2u) << r.out;
  // Uniform over 256 ids is 5.55 nats; English character bigrams are ~2.5.
  EXPECT_LT(losses[1], 3.2) << r.out;
  EXPECT_LT(losses[1], losses[0]);
  EXPECT_NE(r.out.find("sample: 80 tokens"), std::string::npos) << r.out;
}

} // namespace
} // namespace tcc::trun
