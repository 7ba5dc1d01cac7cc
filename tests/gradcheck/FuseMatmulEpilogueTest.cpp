// tg-fuse-matmul-epilogue keeps the meaning of the train step: for each
// epilogue the pass fuses (bias; bias + tanh gelu; bias + erf gelu; bias +
// residual; bias + gelu + residual, on the cpu target), a model written
// out from primitives is differentiated by tg-autodiff, then fused; the
// fused and unfused modules compute the same loss, gradients and eval
// function on the float64 reference interpreter (random inputs, 1e-12).
// A bias-free product takes its residual add alone (and the backward's dX
// sum dY + dY w^T). The backward's gelu_grad reads the fused op's
// pre_activation result; in a
// two-layer MLP it becomes tg.matmul_dgelu of the second layer's dX product.
// Each bias gradient (reduce_sum of dY over its rows) becomes the second
// result of its weight-gradient product, a tg.matmul_bias_grad.
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

struct EpilogueCase {
  std::string name;
  const char *gelu; // nullptr: none, else tg.gelu's approximate
  bool residual;
  const char *expected; // the fused op's activation
};

void PrintTo(const EpilogueCase &c, std::ostream *os) { *os << c.name; }

std::string caseName(const ::testing::TestParamInfo<EpilogueCase> &info) {
  return info.param.name;
}

// x (2, 3, 4) @ w (4, 8) + b (8) [-> gelu] [+ r (2, 3, 8)]: a GPT block's
// linear layer (batched activations, one weight).
Value writeLinear(OpBuilder &b, Location loc, ArrayRef<Value> a,
                  const EpilogueCase &c) {
  Value y = build::add(b, loc, build::matmul(b, loc, a[0], a[1], false, false), a[2]);
  if (c.gelu)
    y = tg::GeluOp::create(b, loc, y.getType(), y, b.getStringAttr(c.gelu));
  if (c.residual)
    y = build::add(b, loc, a[3], y);
  return y;
}

const std::vector<EpilogueCase> &epilogueCases() {
  static const std::vector<EpilogueCase> cases = {
      {"bias", nullptr, false, "none"},
      {"bias_gelu_tanh", "tanh", false, "gelu_tanh"},
      {"bias_gelu_erf", "none", false, "gelu_erf"},
      {"bias_residual", nullptr, true, "none"},
      {"bias_gelu_residual", "tanh", true, "gelu_tanh"},
  };
  return cases;
}

class FuseMatmulEpilogueTest : public GradCheckParamTest<EpilogueCase> {};

TEST_P(FuseMatmulEpilogueTest, FusedStepComputesTheUnfusedOne) {
  const EpilogueCase &c = GetParam();
  std::vector<ArgSpec> args = {ArgSpec::param({2, 3, 4}), ArgSpec::param({4, 8}),
                               ArgSpec::param({8})};
  if (c.residual)
    args.push_back(ArgSpec::param({2, 3, 8}));
  OwningOpRef<ModuleOp> original =
      buildDifferentiated(args, [&c](OpBuilder &b, Location loc, ArrayRef<Value> a) {
        return writeLinear(b, loc, a, c);
      });
  ASSERT_TRUE(original) << diagnostics_;
  OwningOpRef<ModuleOp> fused = original->clone();
  PassManager pm(&context());
  pm.addPass(createTgFuseMatmulEpilogue(TgFuseMatmulEpilogueOptions{"cpu", true}));
  ASSERT_TRUE(succeeded(pm.run(*fused))) << diagnostics_;
  // One in @forward (eval) and one in @train_step.
  ASSERT_EQ(countOps(*fused, "tg.matmul_epilogue"), 2) << "the case is not fused";
  EXPECT_EQ(countOps(*fused, "tg.gelu"), 0);
  bool activationSeen = false;
  fused->walk([&](tg::MatmulEpilogueOp op) {
    EXPECT_EQ(op.getActivation(), c.expected);
    EXPECT_EQ(static_cast<bool>(op.getResidual()), c.residual);
    activationSeen |= op.getPreActivation() && !op.getPreActivation().use_empty();
  });
  // The backward's gelu_grad reads the saved pre-activation.
  EXPECT_EQ(activationSeen, c.gelu != nullptr);
  // dW = x^T dY with db = the sums of dY's rows.
  EXPECT_EQ(countOps(*fused, "tg.matmul_bias_grad"), 1) << "the bias gradient is not fused";
  EXPECT_EQ(countOps(*fused, "tg.reduce_sum"), countOps(*original, "tg.reduce_sum") - 1);
  expectSameFunctions(*original, *fused, seed(), 1);
}

INSTANTIATE_TEST_SUITE_P(Epilogues, FuseMatmulEpilogueTest,
                         ::testing::ValuesIn(epilogueCases()), caseName);

// A GPT MLP, gelu(x w1 + b1) w2 + b2 + x: the forward fuses both linears
// and the backward's gelu_grad(pre, dy w2^T) becomes one tg.matmul_dgelu.
class FuseMatmulDgeluTest : public GradCheckParamTest<const char *> {};

TEST_P(FuseMatmulDgeluTest, FusedMlpStepComputesTheUnfusedOne) {
  const char *approximate = GetParam();
  std::vector<ArgSpec> args = {ArgSpec::param({2, 3, 4}), ArgSpec::param({4, 8}),
                               ArgSpec::param({8}), ArgSpec::param({8, 4}),
                               ArgSpec::param({4})};
  OwningOpRef<ModuleOp> original = buildDifferentiated(
      args, [&](OpBuilder &b, Location loc, ArrayRef<Value> a) {
        Value h = build::add(b, loc, build::matmul(b, loc, a[0], a[1], false, false), a[2]);
        h = tg::GeluOp::create(b, loc, h.getType(), h, b.getStringAttr(approximate));
        Value y = build::add(b, loc, build::matmul(b, loc, h, a[3], false, false), a[4]);
        return build::add(b, loc, a[0], y);
      });
  ASSERT_TRUE(original) << diagnostics_;
  OwningOpRef<ModuleOp> fused = original->clone();
  PassManager pm(&context());
  pm.addPass(createTgFuseMatmulEpilogue(TgFuseMatmulEpilogueOptions{"cpu", true}));
  ASSERT_TRUE(succeeded(pm.run(*fused))) << diagnostics_;
  EXPECT_EQ(countOps(*fused, "tg.matmul_dgelu"), 1) << "the backward's gelu_grad is not fused";
  EXPECT_EQ(countOps(*fused, "tg.gelu_grad"), 0);
  // Two linears, forward and train step; and the backward's dX through the
  // residual, dY + dH W1^T, one product with dY as its residual (no bias).
  EXPECT_EQ(countOps(*fused, "tg.matmul_epilogue"), 5);
  // Both bias gradients, the second read from the DGELU product's result.
  EXPECT_EQ(countOps(*fused, "tg.matmul_bias_grad"), 2) << "a bias gradient is not fused";
  expectSameFunctions(*original, *fused, seed(), 1);
}

INSTANTIATE_TEST_SUITE_P(Gelus, FuseMatmulDgeluTest, ::testing::Values("tanh", "none"));

// A bias-free residual layer, x + x w (LLaMA's attention and MLP outputs):
// the forward's product takes the residual add without a bias, and the
// backward's input gradient dY + dY w^T does too (the transposed weight).
TEST_F(GradCheckTest, FusedBiasFreeResidualStepComputesTheUnfusedOne) {
  std::vector<ArgSpec> args = {ArgSpec::param({2, 3, 4}), ArgSpec::param({4, 4})};
  OwningOpRef<ModuleOp> original =
      buildDifferentiated(args, [](OpBuilder &b, Location loc, ArrayRef<Value> a) {
        return build::add(b, loc, a[0], build::matmul(b, loc, a[0], a[1], false, false));
      });
  ASSERT_TRUE(original) << diagnostics_;
  OwningOpRef<ModuleOp> fused = original->clone();
  PassManager pm(&context());
  pm.addPass(createTgFuseMatmulEpilogue(TgFuseMatmulEpilogueOptions{"cpu", true}));
  ASSERT_TRUE(succeeded(pm.run(*fused))) << diagnostics_;
  // @forward's and @train_step's product, and the train step's dX.
  EXPECT_EQ(countOps(*fused, "tg.matmul_epilogue"), 3);
  bool transposedSeen = false;
  fused->walk([&](tg::MatmulEpilogueOp op) {
    EXPECT_FALSE(op.getBias());
    EXPECT_TRUE(op.getResidual());
    transposedSeen |= op.getTransposeRhs();
  });
  EXPECT_TRUE(transposedSeen) << "the backward's dY + dY w^T is not fused";
  expectSameFunctions(*original, *fused, seed(), 1);
}

} // namespace
