// tg-derive-generate on the float64 reference interpreter: @prefill and
// @decode (the KV-cache entries) compute the logits @forward computes at the
// same positions, for a tiny GPT with learned positions (layer norm, GELU)
// and one with rotary positions (rms norm, SwiGLU): several rows with
// prompts of different lengths in one batch, garbage in the padding, decode
// steps teacher-forced with the tokens @forward saw, the caches carried from
// call to call as the runtime does.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "interpreter/TgInterpreter.h"
#include "dialects/common/ModelAttrs.h"
#include "frontend/importer/Importer.h"
#include "mlir/Pass/PassManager.h"
#include "models/Gpt.h"
#include "passes/Passes.h"
#include "tests/gradcheck/GradCheckFixture.h"

using namespace mlir;
using namespace tcc;
using namespace tcc::gradcheck;
using interp::Tensor;

namespace {

struct GenerateCase {
  std::string name;
  models::GptOptions::Positions positions;
  models::GptOptions::Norm norm;
  models::GptOptions::Mlp mlp;
};

void PrintTo(const GenerateCase &c, std::ostream *os) { *os << c.name; }

class GenerateTest : public GradCheckParamTest<GenerateCase> {};

std::vector<int64_t> shapeOf(Type t) {
  auto s = cast<RankedTensorType>(t).getShape();
  return {s.begin(), s.end()};
}

Tensor ids(std::vector<int64_t> shape, const std::vector<int64_t> &values) {
  Tensor t = Tensor::zeros(shape);
  for (size_t i = 0; i < values.size(); ++i)
    t.data[i] = static_cast<double>(values[i]);
  return t;
}

std::string decisions(func::FuncOp fwd) {
  std::string all;
  if (auto d = fwd->getAttrOfType<ArrayAttr>("tg.derive_generate"))
    for (Attribute a : d)
      all += cast<StringAttr>(a).getValue().str() + "\n";
  return all;
}

TEST_P(GenerateTest, PrefillAndDecodeMatchForward) {
  const GenerateCase &c = GetParam();
  models::GptOptions options;
  options.vocab = 11;
  options.context = 6;
  options.layers = 2;
  options.width = 8;
  options.heads = 2;
  options.batch = 3;
  options.positions = c.positions;
  options.norm = c.norm;
  options.mlp = c.mlp;
  ASSERT_EQ(models::validateGptOptions(options), "");
  OwningOpRef<ModuleOp> module = importModel(models::buildGpt(options), context());
  ASSERT_TRUE(module) << diagnostics_;
  PassManager pm(&context());
  pm.addPass(createTgFuseCrossEntropy());
  pm.addPass(createTgFuseAttention(TgFuseAttentionOptions{"cpu", "", true}));
  pm.addPass(createTgCacheRope());
  pm.addPass(createTgDeriveGenerate());
  ASSERT_TRUE(succeeded(pm.run(*module))) << diagnostics_;
  auto fwd = module->lookupSymbol<func::FuncOp>(model::kForwardFunc);
  auto prefill = module->lookupSymbol<func::FuncOp>("prefill");
  auto decode = module->lookupSymbol<func::FuncOp>("decode");
  ASSERT_TRUE(prefill && decode) << decisions(fwd);
  EXPECT_EQ(decisions(fwd).rfind("derived @prefill", 0), 0u) << decisions(fwd);
  EXPECT_EQ(prefill->getAttrOfType<StringAttr>(model::kEntryAttr).getValue(), "prefill");
  EXPECT_EQ(decode->getAttrOfType<StringAttr>(model::kEntryAttr).getValue(), "decode");

  const int64_t B = options.batch, T = options.context, V = options.vocab;
  std::mt19937_64 rng(seed());
  std::normal_distribution<double> normal(0.0, 0.5);
  std::uniform_int_distribution<int64_t> token(0, V - 1);
  std::vector<Tensor> params;
  for (BlockArgument a : fwd.getArguments())
    if (fwd.getArgAttr(a.getArgNumber(), model::kParamAttr)) {
      Tensor p = Tensor::zeros(shapeOf(a.getType()));
      for (double &x : p.data)
        x = normal(rng);
      params.push_back(p);
    }
  std::vector<int64_t> seq(B * T), padded(B * T);
  for (int64_t &t : seq)
    t = token(rng);
  // Prompts of 1, 3 and T - 1 tokens; the padding holds other tokens.
  std::vector<int64_t> lengths = {1, 3, T - 1};
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      padded[b * T + t] = t < lengths[b] ? seq[b * T + t] : (seq[b * T + t] + 1 + t) % V;

  std::vector<Tensor> args = params;
  args.push_back(ids({B, T}, seq));
  args.push_back(ids({B, T}, seq)); // targets
  FailureOr<std::vector<Tensor>> full = interp::interpret(fwd, args);
  ASSERT_TRUE(succeeded(full)) << diagnostics_;
  const Tensor &ref = (*full)[1]; // (B, T, V)
  auto expectRow = [&](const Tensor &got, int64_t b, int64_t pos, const std::string &what) {
    double scale = 0, worst = 0;
    for (int64_t v = 0; v < V; ++v) {
      double want = ref.data[(b * T + pos) * V + v];
      scale = std::max(scale, std::abs(want));
      worst = std::max(worst, std::abs(got.data[b * V + v] - want));
    }
    EXPECT_LE(worst, 1e-9 * std::max(scale, 1.0))
        << what << ": row " << b << " at position " << pos;
  };

  int numState = 0;
  for (BlockArgument a : prefill.getArguments())
    numState += prefill.getArgAttr(a.getArgNumber(), model::kEntryStateAttr) != nullptr;
  EXPECT_EQ(numState, 2 * options.layers);
  args = params;
  args.push_back(ids({B, T}, padded));
  args.push_back(ids({B}, lengths));
  for (BlockArgument a : prefill.getArguments())
    if (prefill.getArgAttr(a.getArgNumber(), model::kEntryStateAttr))
      args.push_back(Tensor::zeros(shapeOf(a.getType())));
  FailureOr<std::vector<Tensor>> pre = interp::interpret(prefill, args);
  ASSERT_TRUE(succeeded(pre)) << diagnostics_;
  for (int64_t b = 0; b < B; ++b)
    expectRow((*pre)[0], b, lengths[b] - 1, "prefill");
  std::vector<Tensor> caches(pre->begin() + 1, pre->end());

  // Decode: row b feeds seq[b, pos] at pos = lengths[b], lengths[b] + 1,
  // ...; a row past the context repeats its last position (rewriting the
  // same k, v) and is not checked.
  int checked = 0;
  for (int64_t step = 0; step < T; ++step) {
    std::vector<int64_t> tok(B), pos(B);
    for (int64_t b = 0; b < B; ++b) {
      pos[b] = std::min(lengths[b] + step, T - 1);
      tok[b] = seq[b * T + pos[b]];
    }
    args = params;
    args.push_back(ids({B}, tok));
    args.push_back(ids({B}, pos));
    for (const Tensor &cache : caches)
      args.push_back(cache);
    FailureOr<std::vector<Tensor>> dec = interp::interpret(decode, args);
    ASSERT_TRUE(succeeded(dec)) << diagnostics_;
    for (int64_t b = 0; b < B; ++b)
      if (lengths[b] + step < T) {
        expectRow((*dec)[0], b, pos[b], "decode step " + std::to_string(step));
        ++checked;
      }
    caches.assign(dec->begin() + 1, dec->end());
  }
  EXPECT_EQ(checked, (T - 1) + (T - 3) + 1);
}

INSTANTIATE_TEST_SUITE_P(
    Gpts, GenerateTest,
    ::testing::Values(GenerateCase{"learned_layer_norm_gelu", models::GptOptions::Positions::Learned,
                                   models::GptOptions::Norm::Layer, models::GptOptions::Mlp::Gelu},
                      GenerateCase{"rope_rms_norm_swiglu", models::GptOptions::Positions::Rope,
                                   models::GptOptions::Norm::Rms, models::GptOptions::Mlp::SwiGlu}),
    [](const auto &info) { return info.param.name; });

// A forward that is not a causal language model gets no entries, and says
// why on @forward.
using GenerateRefusal = GradCheckTest;

TEST_F(GenerateRefusal, NotDerivedWithoutAttention) {
  OwningOpRef<ModuleOp> module = parse(R"mlir(
    func.func @forward(%w: tensor<5x4xf32> {tg.param = {init = "normal", name = "w", scale = 1.0 : f64, seed = 1 : i64, trainable = true}},
                       %tok: tensor<2x3xi32> {tg.input = "tokens"}) -> (tensor<2x3x5xf32> {tg.output = "logits"}) {
      %e = tg.gather %w, %tok : (tensor<5x4xf32>, tensor<2x3xi32>) -> tensor<2x3x4xf32>
      %l = tg.matmul %e, %w {transpose_rhs = true} : (tensor<2x3x4xf32>, tensor<5x4xf32>) -> tensor<2x3x5xf32>
      return %l : tensor<2x3x5xf32>
    })mlir");
  ASSERT_TRUE(module) << diagnostics_;
  PassManager pm(&context());
  pm.addPass(createTgDeriveGenerate());
  ASSERT_TRUE(succeeded(pm.run(*module))) << diagnostics_;
  EXPECT_FALSE(module->lookupSymbol("decode"));
  EXPECT_EQ(decisions(module->lookupSymbol<func::FuncOp>("forward")),
            "not derived: no tg.attention in the logits' slice (not a transformer language "
            "model)\n");
}

} // namespace
