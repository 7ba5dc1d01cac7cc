// tg-fuse-cross-entropy keeps the meaning of the model: on the reference
// interpreter, the fused module computes the same loss and the same
// gradients as the original (whose cross_entropy autodiff differentiates
// through its own rule), on fresh random inputs; and the fused gradient
// matches finite differences.
#include <gtest/gtest.h>

#include "interpreter/TgInterpreter.h"
#include "dialects/tg/TgStructuralBuilders.h"
#include "mlir/IR/Builders.h"
#include "mlir/Pass/PassManager.h"
#include "passes/Passes.h"
#include "tests/gradcheck/GradCheck.h"
#include "tests/gradcheck/GradCheckFixture.h"

using namespace mlir;
using namespace tcc;
using namespace tcc::gradcheck;
using tcc::interp::Tensor;

namespace {

// @forward with cross_entropy(logits (shape), labels reshaped to shape
// without its last dimension); labels are drawn in [0, classes).
OwningOpRef<ModuleOp> crossEntropyModule(MLIRContext &ctx, std::vector<int64_t> shape) {
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < shape.size(); ++i)
    rows *= shape[i];
  std::vector<int64_t> targetShape(shape.begin(), shape.end() - 1);
  return buildForwardModule(
      ctx, {ArgSpec::param(shape), ArgSpec::labels(rows)},
      [targetShape](OpBuilder &b, Location loc, ArrayRef<Value> a) -> Value {
        Value targets = tg::build::reshape(b, loc, a[1], targetShape);
        return tg::CrossEntropyOp::create(b, loc, f64Tensor(b.getContext(), {}), a[0],
                                          targets, IntegerAttr());
      });
}

class FuseCrossEntropyTest : public GradCheckParamTest<std::vector<int64_t>> {};

TEST_P(FuseCrossEntropyTest, SameLossAndGradientsAsTheUnfusedOp) {
  OwningOpRef<ModuleOp> original = crossEntropyModule(context(), GetParam());
  ASSERT_TRUE(original);
  OwningOpRef<ModuleOp> fused = original->clone();
  PassManager pm(&context());
  pm.addPass(createTgFuseCrossEntropy());
  ASSERT_TRUE(succeeded(pm.run(*fused)));
  EXPECT_EQ(countOps(*fused, "tg.cross_entropy"), 0);
  EXPECT_EQ(countOps(*fused, "tg.softmax_cross_entropy"), 1);

  ASSERT_TRUE(differentiate(*original));
  ASSERT_TRUE(differentiate(*fused));
  EXPECT_EQ(countOps(*fused, "tg.softmax_cross_entropy_grad"), 1)
      << "the gradient is the fused op too";
  expectSameFunctions(*original, *fused, seed(), GetParam().back());
  GradCheckOptions options;
  options.numClasses = GetParam().back();
  checkGradients(*fused, options);
}

INSTANTIATE_TEST_SUITE_P(Shapes, FuseCrossEntropyTest,
                         ::testing::Values(std::vector<int64_t>{6, 4},
                                           std::vector<int64_t>{2, 3, 5},
                                           std::vector<int64_t>{7}));

using FuseCrossEntropy = GradCheckTest;

TEST_F(FuseCrossEntropy, LeavesIgnoreIndexToDecompose) {
  OwningOpRef<ModuleOp> module = buildForwardModule(
      context(), {ArgSpec::param({4, 3}), ArgSpec::labels(4)},
      [](OpBuilder &b, Location loc, ArrayRef<Value> a) -> Value {
        return tg::CrossEntropyOp::create(b, loc, f64Tensor(b.getContext(), {}), a[0], a[1],
                                          b.getI64IntegerAttr(0));
      });
  PassManager pm(&context());
  pm.addPass(createTgFuseCrossEntropy());
  ASSERT_TRUE(succeeded(pm.run(*module)));
  EXPECT_EQ(countOps(*module, "tg.cross_entropy"), 1);
  EXPECT_EQ(countOps(*module, "tg.softmax_cross_entropy"), 0);
}

} // namespace
