// tg-fuse-rms-norm keeps the meaning of a model: a module with RMSNorm
// written out in primitives (LLaMA's form with a weight, and the x / sqrt
// form without one, feeding a product) computes the same loss and gradients
// on the reference interpreter before and after the pass, on fresh random
// inputs, and the fused module's gradients match finite differences.
#include <gtest/gtest.h>

#include "dialects/tg/TgStructuralBuilders.h"
#include "mlir/IR/Builders.h"
#include "mlir/Pass/PassManager.h"
#include "passes/Passes.h"
#include "tests/gradcheck/GradCheck.h"
#include "tests/gradcheck/GradCheckFixture.h"

using namespace mlir;
using namespace tcc;
using namespace tcc::gradcheck;
namespace build = tcc::tg::build;

namespace {

// x * rsqrt(mean(x * x, -1, keepdim) + eps) * w, as imported LLaMA code.
Value llamaRmsNorm(OpBuilder &b, Location loc, Value x, Value w, double eps) {
  int64_t last = cast<RankedTensorType>(x.getType()).getRank() - 1;
  Value ms = build::reduceMean(b, loc, build::mul(b, loc, x, x), {last}, /*keepDims=*/true);
  Value r = build::rsqrt(b, loc, build::add(b, loc, ms, build::scalar(b, loc, b.getF64Type(), eps)));
  return build::mul(b, loc, build::mul(b, loc, x, r), w);
}

// x / sqrt(mean(x^2) + eps), no weight.
Value plainRmsNorm(OpBuilder &b, Location loc, Value x, double eps) {
  auto type = cast<RankedTensorType>(x.getType());
  int64_t last = type.getRank() - 1;
  Value sq = tg::PowOp::create(b, loc, type, x, b.getF64FloatAttr(2.0));
  Value ms = build::reduceMean(b, loc, sq, {last}, /*keepDims=*/true);
  Value a = build::add(b, loc, build::scalar(b, loc, b.getF64Type(), eps), ms);
  auto statType = cast<RankedTensorType>(a.getType());
  return build::div(b, loc, x, tg::SqrtOp::create(b, loc, statType, a));
}

using FuseRmsNorm = GradCheckTest;

TEST_F(FuseRmsNorm, FusedStepComputesTheSameFunction) {
  // x (2, 3, 8) -> llama norm with w (8) -> matmul (8, 8) -> plain norm.
  OwningOpRef<ModuleOp> original = buildForwardModule(
      context(), {ArgSpec::param({2, 3, 8}), ArgSpec::param({8}), ArgSpec::param({8, 8})},
      [&](OpBuilder &b, Location loc, ArrayRef<Value> a) -> Value {
        Value h = llamaRmsNorm(b, loc, a[0], a[1], 1e-6);
        Value p = build::matmul(b, loc, h, a[2], false, false);
        return plainRmsNorm(b, loc, p, 1e-5);
      });
  ASSERT_TRUE(original);
  OwningOpRef<ModuleOp> fused = original->clone();
  PassManager pm(fused->getContext());
  pm.addPass(createTgFuseRmsNorm());
  ASSERT_TRUE(succeeded(pm.run(*fused)));
  EXPECT_EQ(countOps(*fused, "tg.rms_norm"), 2);
  EXPECT_EQ(countOps(*fused, "tg.reduce_mean"), 0);
  EXPECT_EQ(countOps(*fused, "tg.rsqrt") + countOps(*fused, "tg.sqrt"), 0);
  ASSERT_TRUE(runTrainingPasses(*original).succeeded());
  ASSERT_TRUE(runTrainingPasses(*fused).succeeded());
  EXPECT_GE(countOps(*fused, "tg.rms_norm_grad"), 2) << "the backward is the fused rule";
  expectSameFunctions(*original, *fused, seed(), 3);
  checkGradients(*fused);
}

} // namespace
