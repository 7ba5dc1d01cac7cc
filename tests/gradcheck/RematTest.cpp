// tg-remat and tg-chunk-loss-head keep the meaning of the train step: a tiny GPT (layer norm and
// GELU, or RMS norm and SwiGLU) through the training recipe (autodiff,
// AdamW), the GEMM epilogues, tg-decompose and CSE as the pipeline runs
// them, then tg-remat with budget 0 (drop everything it can across each
// peak, the most recomputation there is) and budgets it meets part way:
// values are recomputed (tg.remat clones) and @train_step and @forward
// give the same loss, gradients and updates on the float64 reference
// interpreter (random inputs). So does the step with its loss head in row
// chunks (tg-chunk-loss-head), alone and followed by tg-remat.
#include <gtest/gtest.h>

#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "passes/Passes.h"
#include "models/Gpt.h"
#include "frontend/importer/Importer.h"
#include "tests/gradcheck/GradCheck.h"
#include "tests/gradcheck/GradCheckFixture.h"

using namespace mlir;
using namespace tcc;
using namespace tcc::gradcheck;

namespace {

struct RematCase {
  std::string name;
  models::GptOptions::Norm norm;
  models::GptOptions::Mlp mlp;
  models::GptOptions::Positions positions = models::GptOptions::Positions::Learned;
};

void PrintTo(const RematCase &c, std::ostream *os) { *os << c.name; }

int64_t clones(ModuleOp module) {
  int64_t n = 0;
  module.walk([&](Operation *op) { n += op->hasAttr("tg.remat"); });
  return n;
}

class RematTest : public GradCheckParamTest<RematCase> {};

// A tiny GPT of case `c` through the pipeline up to tg-remat (the training
// recipe, GEMM epilogues, tg-decompose, CSE).
OwningOpRef<ModuleOp> tinyTrainStep(MLIRContext &context, const RematCase &c,
                                    models::GptOptions &options, std::string &why) {
  options.vocab = 7;
  options.context = 4;
  options.layers = 2;
  options.width = 8;
  options.heads = 2;
  options.batch = 2;
  options.norm = c.norm;
  options.mlp = c.mlp;
  options.positions = c.positions;
  why = models::validateGptOptions(options);
  if (!why.empty())
    return {};
  OwningOpRef<ModuleOp> module = importModel(models::buildGpt(options), context);
  if (!module) {
    why = "the tiny GPT does not import";
    return {};
  }
  PassManager pm(&context);
  pm.addPass(createTgFuseCrossEntropy());
  pm.addPass(createTgFuseAttention(TgFuseAttentionOptions{"cpu", "", true}));
  pm.addPass(createTgAutodiff());
  pm.addPass(createTgStripTrainOnlyOps());
  pm.addPass(createTgClipGradNorm());
  pm.addPass(createTgAdamWUpdate());
  pm.addPass(createCSEPass());
  pm.addPass(createTgFuseMatmulEpilogue(TgFuseMatmulEpilogueOptions{"cpu", true}));
  pm.addPass(createTgDecompose());
  pm.addPass(createCSEPass());
  if (failed(pm.run(*module))) {
    why = "the pipeline fails";
    return {};
  }
  return module;
}

TEST_P(RematTest, RecomputedStepComputesTheSameFunction) {
  models::GptOptions options;
  std::string why;
  OwningOpRef<ModuleOp> original = tinyTrainStep(context(), GetParam(), options, why);
  ASSERT_TRUE(original) << why << diagnostics_;
  // 0: everything tg-remat can drop; the others stop part way (the tiny
  // step's tensors are 64 B to 2 KiB).
  for (int64_t budget : {int64_t(0), int64_t(2048), int64_t(8192)}) {
    OwningOpRef<ModuleOp> remat = original->clone();
    PassManager pm(&context());
    pm.addPass(createTgRemat(TgRematOptions{budget}));
    ASSERT_TRUE(succeeded(pm.run(*remat))) << diagnostics_;
    if (budget == 0) {
      EXPECT_GT(clones(*remat), 0) << "nothing recomputed";
    }
    SCOPED_TRACE("budget " + std::to_string(budget) + ": " +
                 std::to_string(clones(*remat)) + " ops recomputed");
    expectSameFunctions(*original, *remat, seed(), options.vocab);
  }
}

// Without a budget tg-remat recomputes only copies (here the rotary
// embedding's concatenations; the threshold lowered to 0 bytes for the tiny
// step's tensors): the same function too. The learned-position GPTs have
// no copy to recompute.
TEST_P(RematTest, RecomputedCopiesComputeTheSameFunction) {
  models::GptOptions options;
  std::string why;
  OwningOpRef<ModuleOp> original = tinyTrainStep(context(), GetParam(), options, why);
  ASSERT_TRUE(original) << why << diagnostics_;
  OwningOpRef<ModuleOp> remat = original->clone();
  PassManager pm(&context());
  TgRematOptions rematOptions;
  rematOptions.copyMinBytes = 0;
  pm.addPass(createTgRemat(rematOptions));
  ASSERT_TRUE(succeeded(pm.run(*remat))) << diagnostics_;
  if (GetParam().positions == models::GptOptions::Positions::Rope) {
    EXPECT_GT(clones(*remat), 0) << "no copy recomputed";
  }
  remat->walk([&](Operation *op) {
    if (op->hasAttr("tg.remat")) {
      EXPECT_TRUE((isa<tg::BroadcastToOp, tg::ConcatOp, tg::TransposeOp, tg::SliceOp,
                       tg::ReshapeOp>(op)))
          << "not a copy: " << op->getName().getStringRef().str();
    }
  });
  SCOPED_TRACE(std::to_string(clones(*remat)) + " copies recomputed");
  expectSameFunctions(*original, *remat, seed(), options.vocab);
}

// tg-chunk-loss-head: the step with its loss head in 2, 4 or 8 row chunks
// (8 rows: batch 2 x context 4; 8 chunks are single rows) computes the
// same loss, gradients and updates on the float64 interpreter (dW summed in
// another order: equal to rounding), also followed by tg-remat; 3 chunks do
// not divide the rows and leave the step as it was, saying why.
TEST_P(RematTest, ChunkedLossHeadComputesTheSameFunction) {
  models::GptOptions options;
  std::string why;
  OwningOpRef<ModuleOp> original = tinyTrainStep(context(), GetParam(), options, why);
  ASSERT_TRUE(original) << why << diagnostics_;
  auto decisions = [](ModuleOp m) {
    std::string all;
    if (auto d = m.lookupSymbol<func::FuncOp>("train_step")
                     ->getAttrOfType<ArrayAttr>("tg.loss_chunk_decisions"))
      for (Attribute a : d)
        all += cast<StringAttr>(a).getValue().str() + "\n";
    return all;
  };
  for (int64_t chunks : {2, 3, 4, 8}) {
    for (bool remat : {false, true}) {
      OwningOpRef<ModuleOp> chunked = original->clone();
      PassManager pm(&context());
      pm.addPass(createTgChunkLossHead(TgChunkLossHeadOptions{chunks}));
      if (remat)
        pm.addPass(createTgRemat(TgRematOptions{0}));
      ASSERT_TRUE(succeeded(pm.run(*chunked))) << diagnostics_;
      std::string report = decisions(*chunked);
      SCOPED_TRACE(std::to_string(chunks) + " chunks" + (remat ? " + tg-remat" : "") + ": " +
                   report);
      int64_t pieces = 0;
      chunked->walk([&](tg::SoftmaxCrossEntropyGradOp) { ++pieces; });
      if (chunks == 3) {
        EXPECT_NE(report.find("not chunked: "), std::string::npos);
        EXPECT_NE(report.find("8 rows do not split into 3 equal chunks"), std::string::npos);
        EXPECT_EQ(pieces, 1);
      } else {
        EXPECT_EQ(report.rfind("chunked ", 0), 0u);
        EXPECT_EQ(pieces, chunks);
      }
      expectSameFunctions(*original, *chunked, seed(), options.vocab);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Gpt, RematTest,
    ::testing::Values(RematCase{"layer_norm_gelu", models::GptOptions::Norm::Layer,
                                models::GptOptions::Mlp::Gelu},
                      RematCase{"rms_norm_swiglu", models::GptOptions::Norm::Rms,
                                models::GptOptions::Mlp::SwiGlu},
                      RematCase{"rms_norm_swiglu_rope", models::GptOptions::Norm::Rms,
                                models::GptOptions::Mlp::SwiGlu,
                                models::GptOptions::Positions::Rope}),
    [](const ::testing::TestParamInfo<RematCase> &info) { return info.param.name; });

} // namespace
