// tg-amp keeps the meaning of the model up to 16-bit rounding: on the
// reference interpreter (float64, with every cast rounding to bf16/f16), the
// mixed-precision train step's loss and gradients stay within a few units of
// the 16-bit roundoff of the fp32 step's, on fresh random inputs; they are
// not bit-identical (the casts are honoured); and the weights are cast once
// per step after CSE, however many ops read them.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "compiler/interpreter/TgInterpreter.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "passes/Passes.h"
#include "tests/gradcheck/GradCheck.h"
#include "tests/gradcheck/GradCheckFixture.h"

using namespace mlir;
using namespace tcc;
using namespace tcc::gradcheck;
using tcc::interp::Tensor;

namespace {

// A transformer-shaped step in f32: layer norm, a biased matmul + GELU, a
// second matmul, causal softmax attention of the result with itself (scaled
// by a constant), a residual add, the output projection with the first
// weight read again, and the mean softmax cross-entropy. x (2, 4, 8).
constexpr llvm::StringLiteral kBlock = R"mlir(
module {
  func.func @forward(
      %w1: tensor<8x16xf32> {tg.param = {name = "w1", init = "normal", scale = 1.0 : f64, seed = 1 : i64, trainable = true}},
      %b1: tensor<16xf32> {tg.param = {name = "b1", init = "normal", scale = 1.0 : f64, seed = 2 : i64, trainable = true}},
      %w2: tensor<16x8xf32> {tg.param = {name = "w2", init = "normal", scale = 1.0 : f64, seed = 3 : i64, trainable = true}},
      %w3: tensor<8x5xf32> {tg.param = {name = "w3", init = "normal", scale = 1.0 : f64, seed = 4 : i64, trainable = true}},
      %x: tensor<2x4x8xf32> {tg.input = "x"}, %y: tensor<8xi32> {tg.input = "y"})
      -> (tensor<f32> {tg.loss = "loss"}) {
    %h = tg.layer_norm %x {eps = 1.0e-5 : f64} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %m = tg.matmul %h, %w1 : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
    %mb = tg.add %m, %b1 : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
    %g = tg.gelu %mb {approximate = "tanh"} : tensor<2x4x16xf32>
    %s = tg.matmul %g, %w2 : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
    %sc = tg.matmul %s, %s {transpose_rhs = true} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x4xf32>
    %k = tg.constant dense<0.35> : tensor<f32>
    %scaled = tg.mul %sc, %k : (tensor<2x4x4xf32>, tensor<f32>) -> tensor<2x4x4xf32>
    %masked = tg.causal_mask %scaled : tensor<2x4x4xf32>
    %p = tg.softmax %masked {axis = 2 : i64} : tensor<2x4x4xf32>
    %ctx = tg.matmul %p, %s : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %r = tg.add %x, %ctx : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %m2 = tg.matmul %r, %w1 : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
    %r2 = tg.reduce_mean %m2 {axes = array<i64: 2>} : (tensor<2x4x16xf32>) -> tensor<2x4xf32>
    %logits = tg.matmul %r, %w3 : (tensor<2x4x8xf32>, tensor<8x5xf32>) -> tensor<2x4x5xf32>
    %lr = tg.reshape %logits : (tensor<2x4x5xf32>) -> tensor<8x5xf32>
    %xe = tg.softmax_cross_entropy %lr, %y : (tensor<8x5xf32>, tensor<8xi32>) -> tensor<8xf32>
    %loss0 = tg.reduce_mean %xe {axes = array<i64: 0>} : (tensor<8xf32>) -> tensor<f32>
    %extra = tg.reduce_mean %r2 {axes = array<i64: 0, 1>} : (tensor<2x4xf32>) -> tensor<f32>
    %loss = tg.add %loss0, %extra : (tensor<f32>, tensor<f32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}
)mlir";

double maxAbsDiff(const Tensor &a, const Tensor &b) {
  double d = 0;
  for (size_t i = 0; i < a.data.size(); ++i)
    d = std::max(d, std::fabs(a.data[i] - b.data[i]));
  return d;
}

double maxAbs(const Tensor &a) {
  double m = 0;
  for (double v : a.data)
    m = std::max(m, std::fabs(v));
  return m;
}

struct AmpCase {
  const char *precision;
  double unitRoundoff; // 2^-8 (bf16), 2^-11 (f16)
};

class AmpTest : public GradCheckParamTest<AmpCase> {};

TEST_P(AmpTest, TrainStepTracksTheFp32StepWithinRoundoff) {
  OwningOpRef<ModuleOp> full = parse(kBlock);
  ASSERT_TRUE(full);
  OwningOpRef<ModuleOp> mixed = full->clone();
  PassManager pm(&context());
  pm.addPass(createTgAmp(TgAmpOptions{GetParam().precision}));
  ASSERT_TRUE(succeeded(pm.run(*mixed))) << diagnostics_;
  ASSERT_TRUE(differentiate(*full));
  ASSERT_TRUE(differentiate(*mixed));
  PassManager cse(&context());
  cse.addPass(createCSEPass());
  ASSERT_TRUE(succeeded(cse.run(*mixed)));

  // w1 feeds two matmuls (forward) and its gradient matmuls read it again:
  // one cast of each weight per step, whatever the number of readers.
  auto train = mixed->lookupSymbol<func::FuncOp>("train_step");
  for (BlockArgument w : train.getArguments().take_front(4)) {
    int casts = 0;
    for (Operation *user : w.getUsers())
      casts += isa<tg::CastOp>(user);
    EXPECT_EQ(casts, 1) << "parameter " << w.getArgNumber();
  }

  std::mt19937_64 rng(seed());
  auto fullTrain = full->lookupSymbol<func::FuncOp>("train_step");
  std::vector<Tensor> args = randomArguments(fullTrain, rng, /*numClasses=*/5);
  // Weights at a trained network's scale (|w| < 0.4): with unit weights the
  // attention saturates and both steps' gradients hinge on a few
  // near-ties, which no rounding test can pin down.
  for (size_t p = 0; p < 4; ++p)
    for (double &v : args[p].data)
      v *= 0.25;
  FailureOr<std::vector<Tensor>> want = interp::interpret(fullTrain, args);
  FailureOr<std::vector<Tensor>> got = interp::interpret(train, args);
  ASSERT_TRUE(succeeded(want) && succeeded(got)) << diagnostics_;
  ASSERT_EQ(want->size(), got->size());

  // A handful of roundings on the way (inputs, products, activations,
  // the softmax): a loose multiple of the unit roundoff, far below the
  // differences a wrong cast or a missing gradient path would make.
  double u = GetParam().unitRoundoff;
  double lossError = std::fabs((*got)[0].data[0] - (*want)[0].data[0]);
  EXPECT_LT(lossError, 16 * u * std::max(1.0, std::fabs((*want)[0].data[0])));
  EXPECT_GT(lossError, 0.0) << "the casts must round (else they were dropped)";
  for (size_t i = 1; i < want->size(); ++i) {
    double scale = maxAbs((*want)[i]);
    ASSERT_GT(scale, 1e-6) << "gradient " << i << " must not vanish";
    EXPECT_LT(maxAbsDiff((*got)[i], (*want)[i]), 32 * u * scale) << "gradient " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Precisions, AmpTest,
                         ::testing::Values(AmpCase{"bf16", 1.0 / 256},
                                           AmpCase{"fp16", 1.0 / 2048}),
                         [](const auto &info) { return std::string(info.param.precision); });

// fp32 and tf32 leave the graph alone: the same train step as without
// the pass (no casts anywhere).
TEST_F(GradCheckTest, Fp32AndTf32ChangeNoOp) {
  for (const char *precision : {"fp32", "tf32"}) {
    OwningOpRef<ModuleOp> module = parse(kBlock);
    ASSERT_TRUE(module);
    PassManager pm(&context());
    pm.addPass(createTgAmp(TgAmpOptions{precision}));
    ASSERT_TRUE(succeeded(pm.run(*module)));
    EXPECT_EQ(countOps(*module, "tg.cast"), 0) << precision;
  }
}

} // namespace
