// Generation with the KV-cache entries (tcc compile --generate; trun
// --sample): small GPTs (learned positions with layer norm and GELU; rotary
// positions with rms norm and SwiGLU) compiled for the cpu and trained a
// little on a repeated text.
//  - The compiled prefill / decode logits equal the compiled eval logits at
//    the same positions (1e-5 relative), through the Trainer like trun.
//  - trun --sample: the greedy tokens of the cache path equal the eval
//    path's (three prompts of different lengths, two samples each, past the
//    context), and so do top-k / top-p draws at one seed; top-k 1 is greedy;
//    the same seed repeats, another differs; a prompt longer than the
//    context is an error on the cache path only.
#include "runtime/trun/data/StepBinding.h"
#include "runtime/trun/step/StepEntries.h"
#include "runtime/trun/step/StepLibrary.h"
#include "runtime/trun/train/Trainer.h"
#include "tests/runtime/fixtures/TrunCli.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>

namespace tcc::trun {
namespace {

using testing::CliResult;
using testing::RunTrun;

constexpr int64_t kBatch = 4, kContext = 16;

struct Model {
  const char *name;
  const char *flags; // tcc-models gpt
};

class GenerateCliTest : public testing::TrunCliFixture,
                        public ::testing::WithParamInterface<Model> {
protected:
  void SetUp() override {
    WriteTokenShards(/*with_vocab=*/true);
    if (HasFatalFailure())
      return;
    // Compiled and trained once per model for the suite (the shards are
    // the same text in every test's directory).
    const Model &m = GetParam();
    static std::map<std::string, std::unique_ptr<testing::TempDir>> built;
    std::unique_ptr<testing::TempDir> &dir = built[m.name];
    step_ = (dir ? *dir : dir_).File("gpt.so");
    weights_ = (dir ? *dir : dir_).File("w.safetensors");
    if (dir)
      return;
    dir = std::make_unique<testing::TempDir>();
    step_ = dir->File("gpt.so");
    weights_ = dir->File("w.safetensors");
    Run(std::string(TRUN_TEST_TCC_MODELS_BINARY) + " gpt --vocab 11 --context 16 --layers 2 "
        "--width 32 --heads 4 --batch 4 " + m.flags + " -o " + dir->File("gpt.pbtxt"));
    Run(std::string(TRUN_TEST_TCC_BINARY) + " compile --target cpu --precision fp32 --generate " +
        dir->File("gpt.pbtxt") + " -o " + step_);
    Run(std::string(TRUN_TEST_TRUN_BINARY) + " " + step_ + " --data " + train_ +
        " --steps 30 --log-every 0 --save-weights " + weights_);
    if (HasFatalFailure())
      dir.reset();
  }
  void Run(const std::string &command) {
    ASSERT_EQ(std::system((command + " >" + dir_.File("log") + " 2>&1").c_str()), 0)
        << command << "\n" << testing::Slurp(dir_.File("log"));
  }
  // trun --sample from the trained weights; `out` without the "generate:"
  // line (timings).
  CliResult Sample(const std::string &flags) {
    CliResult r = RunTrun(step_ + " --init-from " + weights_ + " --vocab " + vocab_ +
                          " --sample " + flags);
    size_t at = r.out.find("generate: ");
    if (at != std::string::npos)
      r.out.erase(at, r.out.find('\n', at) + 1 - at);
    return r;
  }
  std::string step_, weights_;
};

TEST_P(GenerateCliTest, EntryLogitsEqualEvalLogits) {
  absl::StatusOr<std::unique_ptr<StepLibrary>> library = StepLibrary::Open(step_);
  ASSERT_TRUE(library.ok()) << library.status();
  const tcc_step_descriptor &d = (*library)->descriptor();
  int32_t prefill = EntryIndex(d, "prefill"), decode = EntryIndex(d, "decode");
  ASSERT_GE(prefill, 0);
  ASSERT_GE(decode, 0);
  absl::StatusOr<StepBinding> binding = BindStep(d);
  ASSERT_TRUE(binding.ok()) << binding.status();
  absl::StatusOr<std::unique_ptr<Trainer>> trainer = Trainer::Create(d, *binding, /*seed=*/5);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  const int64_t V = binding->vocab_size;
  ASSERT_EQ(V, 11);
  std::mt19937 rng(3);
  HostBatch batch(*binding);
  int32_t *tokens = batch.data.as<int32_t>();
  for (int64_t i = 0; i < kBatch * kContext; ++i)
    tokens[i] = static_cast<int32_t>(rng() % V);
  std::memset(batch.targets.as<int32_t>(), 0, kBatch * kContext * sizeof(int32_t));
  ASSERT_TRUE((*trainer)->EvalBatch(batch, "eval").ok());
  std::vector<float> full(kBatch * kContext * V);
  ASSERT_TRUE((*trainer)
                  ->ReadOutput(binding->token_logits_output, 0,
                               static_cast<int64_t>(full.size() * sizeof(float)), full.data())
                  .ok());
  double worst = 0;
  auto compare = [&](const std::vector<float> &got, const std::vector<int32_t> &pos) {
    for (int64_t b = 0; b < kBatch; ++b) {
      double scale = 0, diff = 0;
      for (int64_t v = 0; v < V; ++v) {
        double want = full[(b * kContext + pos[b]) * V + v];
        scale = std::max(scale, std::abs(want));
        diff = std::max(diff, std::abs(got[b * V + v] - want));
      }
      worst = std::max(worst, diff / std::max(scale, 1e-3));
    }
  };
  // Prompts of 1, 5, 9 and 16 tokens; the padding holds other ids.
  std::vector<int32_t> lengths = {1, 5, 9, 16}, padded(tokens, tokens + kBatch * kContext);
  for (int64_t b = 0; b < kBatch; ++b)
    for (int64_t t = lengths[b]; t < kContext; ++t)
      padded[b * kContext + t] = (padded[b * kContext + t] + 3) % V;
  std::vector<float> logits(kBatch * V);
  ASSERT_TRUE((*trainer)
                  ->CallEntry(prefill, {padded.data(), lengths.data()}, {logits.data()}, 0,
                              "prefill")
                  .ok());
  std::vector<int32_t> last(kBatch);
  for (int64_t b = 0; b < kBatch; ++b)
    last[b] = lengths[b] - 1;
  compare(logits, last);
  int checked = kBatch;
  for (int64_t step = 0; step < kContext; ++step) {
    std::vector<int32_t> tok(kBatch), pos(kBatch);
    for (int64_t b = 0; b < kBatch; ++b) {
      pos[b] = static_cast<int32_t>(std::min<int64_t>(lengths[b] + step, kContext - 1));
      tok[b] = tokens[b * kContext + pos[b]];
    }
    ASSERT_TRUE(
        (*trainer)->CallEntry(decode, {tok.data(), pos.data()}, {logits.data()}, 0, "decode").ok());
    compare(logits, pos);
    checked += kBatch;
  }
  EXPECT_LE(worst, 1e-5) << "worst relative difference over " << checked << " rows";
}

TEST_P(GenerateCliTest, CacheSamplesEqualEvalSamples) {
  // 30 new tokens: rows outgrow the 16-token context (window prefills).
  std::string prompts = " --prompt cd --prompt abcdefgh --prompt j --num-samples 2";
  CliResult cache = Sample("30 --temperature 0" + prompts);
  CliResult eval = Sample("30 --temperature 0 --sampler eval" + prompts);
  ASSERT_EQ(cache.exit_code, 0) << cache.err;
  ASSERT_EQ(eval.exit_code, 0) << eval.err;
  EXPECT_EQ(cache.out, eval.out);
  EXPECT_NE(cache.out.find("--- prompt 3, sample 2\nj"), std::string::npos) << cache.out;
  CliResult timed = RunTrun(step_ + " --init-from " + weights_ + " --vocab " + vocab_ +
                            " --sample 3 --prompt ab");
  EXPECT_NE(timed.out.find("generate: kv cache (prefill + decode), 1 rows in batches of 4: 3 "
                           "tokens in "),
            std::string::npos)
      << timed.out;
  // Filtered draws at one seed: the same on both paths.
  std::string draw = "30 --temperature 1.3 --top-k 5 --top-p 0.9 --seed 4" + prompts;
  CliResult a = Sample(draw), b = Sample(draw + " --sampler eval");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out.substr(a.out.find("\n---")), b.out.substr(b.out.find("\n---")));
  EXPECT_NE(a.out.find("top-k 5, top-p 0.9"), std::string::npos) << a.out;
  EXPECT_EQ(Sample(draw).out, a.out);
  EXPECT_NE(Sample("30 --temperature 1.3 --top-k 5 --top-p 0.9 --seed 5" + prompts).out, a.out);
  // top-k 1 is greedy at any temperature.
  CliResult k1 = Sample("30 --temperature 2 --top-k 1" + prompts);
  EXPECT_EQ(k1.out.substr(k1.out.find("\n---")), cache.out.substr(cache.out.find("\n---")));
}

// Past the 16-token context, the exact cache path re-prefills the last 16
// tokens for every new token; --context-keep 8 restarts the cache from the
// last 8 once per 8 new tokens and decodes in between. 30 tokens after a
// 2-token prompt: exact, 1 + 15 prefills and 14 decodes; kept, a prefill at
// the prompt, at 17 tokens (cache from token 9 on) and at 26 (from 18 on),
// and 14 + 8 + 5 decodes. Up to the first restart the tokens are the exact
// path's.
TEST_P(GenerateCliTest, ContextKeepRestartsTheCacheOncePerWindow) {
  std::string base = step_ + " --init-from " + weights_ + " --vocab " + vocab_ +
                     " --sample 30 --temperature 0 --prompt cd";
  CliResult exact = RunTrun(base);
  CliResult kept = RunTrun(base + " --context-keep 8");
  ASSERT_EQ(exact.exit_code, 0) << exact.err;
  ASSERT_EQ(kept.exit_code, 0) << kept.err;
  EXPECT_NE(exact.out.find("(16 prefill calls, "), std::string::npos) << exact.out;
  EXPECT_NE(exact.out.find("; 14 decode calls, "), std::string::npos) << exact.out;
  EXPECT_NE(kept.out.find("(3 prefill calls, "), std::string::npos) << kept.out;
  EXPECT_NE(kept.out.find("; 27 decode calls, "), std::string::npos) << kept.out;
  // The text after the "sample: ..." line: the prompt and 30 tokens.
  auto text = [](const std::string &out) {
    size_t at = out.find('\n', out.find("sample: "));
    return at == std::string::npos ? std::string() : out.substr(at + 1);
  };
  ASSERT_GE(text(exact.out).size(), 2u + 15u) << exact.out;
  EXPECT_EQ(text(kept.out).substr(0, 2 + 15), text(exact.out).substr(0, 2 + 15));

  testing::ExpectExactError(RunTrun(base + " --context-keep 16"), 1,
                            "--context-keep 16: expected 1 to 15 (step 'gpt' has a context of 16)");
  testing::ExpectExactError(
      RunTrun(base + " --context-keep 8 --sampler eval"), 1,
      "--context-keep applies to the KV cache path (prefill / decode entries: tcc compile "
      "--generate); the eval path always runs the last context tokens");
}

TEST_P(GenerateCliTest, PromptLongerThanTheContext) {
  testing::ExpectExactError(Sample("3 --prompt abcdefghijabcdefghij"), 1,
                            "prompt of 20 tokens; step 'gpt' has a context of 16");
  CliResult eval = Sample("3 --prompt abcdefghijabcdefghij --sampler eval");
  EXPECT_EQ(eval.exit_code, 0) << eval.err;
}

INSTANTIATE_TEST_SUITE_P(Gpts, GenerateCliTest,
                         ::testing::Values(Model{"learned", ""},
                                           Model{"rope", "--positions rope --norm rms --mlp swiglu"}),
                         [](const auto &info) { return std::string(info.param.name); });

} // namespace
} // namespace tcc::trun
