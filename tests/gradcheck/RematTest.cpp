// tg-remat keeps the meaning of the train step: a tiny GPT (layer norm and
// GELU, or RMS norm and SwiGLU) through the training recipe (autodiff,
// AdamW), the GEMM epilogues, tg-decompose and CSE as the pipeline runs
// them, then tg-remat with budget 0 (drop everything it can across each
// peak, the most recomputation there is) and budgets it meets part way:
// values are recomputed (tg.remat clones) and @train_step and @forward
// give the same loss, gradients and updates on the float64 reference
// interpreter (random inputs).
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
};

void PrintTo(const RematCase &c, std::ostream *os) { *os << c.name; }

int64_t clones(ModuleOp module) {
  int64_t n = 0;
  module.walk([&](Operation *op) { n += op->hasAttr("tg.remat"); });
  return n;
}

class RematTest : public GradCheckParamTest<RematCase> {};

TEST_P(RematTest, RecomputedStepComputesTheSameFunction) {
  const RematCase &c = GetParam();
  models::GptOptions options;
  options.vocab = 7;
  options.context = 4;
  options.layers = 2;
  options.width = 8;
  options.heads = 2;
  options.batch = 2;
  options.norm = c.norm;
  options.mlp = c.mlp;
  ASSERT_EQ(models::validateGptOptions(options), "");
  OwningOpRef<ModuleOp> original = importModel(models::buildGpt(options), context());
  ASSERT_TRUE(original) << "the tiny GPT does not import";
  {
    PassManager pm(&context());
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
    ASSERT_TRUE(succeeded(pm.run(*original))) << diagnostics_;
  }
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

INSTANTIATE_TEST_SUITE_P(
    Gpt, RematTest,
    ::testing::Values(RematCase{"layer_norm_gelu", models::GptOptions::Norm::Layer,
                                models::GptOptions::Mlp::Gelu},
                      RematCase{"rms_norm_swiglu", models::GptOptions::Norm::Rms,
                                models::GptOptions::Mlp::SwiGlu}),
    [](const ::testing::TestParamInfo<RematCase> &info) { return info.param.name; });

} // namespace
