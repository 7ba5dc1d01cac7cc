// tg-conv-layout's channels-last rewrite keeps the step's meaning: a small
// bf16 CNN (convolutions, batch norm with running statistics, ReLU, max
// pooling, a residual add, a bias add, a global average pool) through tg-amp,
// tg-conv-layout with and without channels-last, autodiff and SGD computes
// the same loss, gradients, updates and running statistics on the float64
// interpreter (the interpreter evaluates channels-last ops in NCHW order,
// so the two steps round identically), and only the chain's edges keep a
// transpose; a transposed convolution (conv_transpose2d) joins the chain.
#include <gtest/gtest.h>

#include "dialects/tg/TgDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "passes/Passes.h"
#include "tests/gradcheck/GradCheck.h"
#include "tests/gradcheck/GradCheckFixture.h"

using namespace mlir;
using namespace tcc;
using namespace tcc::gradcheck;

namespace {

// tcc compile --compile-to=import of a pbtxt model (locations dropped).
constexpr const char *kCnn = R"mlir(
module attributes {tg.model_name = "cnnbn", tg.optimizer = {kind = "sgd", learning_rate = 1.000000e-01 : f64}} {
  func.func @forward(%arg0: tensor<16x3x3x3xf32> {tg.param = {init = "normal", name = "w1", scale = 3.000000e-01 : f64, seed = 1 : i64, trainable = true}}, %arg1: tensor<16xf32> {tg.param = {init = "ones", name = "g1", scale = 0.000000e+00 : f64, seed = 0 : i64, trainable = true}}, %arg2: tensor<16xf32> {tg.param = {init = "zeros", name = "h1", scale = 0.000000e+00 : f64, seed = 0 : i64, trainable = true}}, %arg3: tensor<16x16x3x3xf32> {tg.param = {init = "normal", name = "w2", scale = 1.000000e-01 : f64, seed = 2 : i64, trainable = true}}, %arg4: tensor<8x16x1x1xf32> {tg.param = {init = "normal", name = "w3", scale = 1.000000e-01 : f64, seed = 3 : i64, trainable = true}}, %arg5: tensor<8x1x1xf32> {tg.param = {init = "normal", name = "b3", scale = 1.000000e-01 : f64, seed = 4 : i64, trainable = true}}, %arg6: tensor<4x3x8x8xf32> {tg.input = "x"}, %arg7: tensor<16xf32> {tg.buffer = {init = "zeros", name = "rm1", scale = 0.000000e+00 : f64, seed = 0 : i64, trainable = false}}, %arg8: tensor<16xf32> {tg.buffer = {init = "ones", name = "rv1", scale = 0.000000e+00 : f64, seed = 0 : i64, trainable = false}}) -> (tensor<f32> {tg.loss = "loss"}, tensor<16xf32> {tg.updates_buffer = 0 : i64}, tensor<16xf32> {tg.updates_buffer = 1 : i64}) {
    %0 = tg.conv2d %arg6, %arg0 {dilation = array<i64: 1, 1>, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>} : (tensor<4x3x8x8xf32>, tensor<16x3x3x3xf32>) -> tensor<4x16x8x8xf32>
    %1 = tg.constant dense<9.99999974E-6> : tensor<f32>
    %result, %mean, %var = tg.batch_norm %0 weight %arg1 bias %arg2 : (tensor<4x16x8x8xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<4x16x8x8xf32>, tensor<16xf32>, tensor<16xf32>)
    %2 = tg.reshape %arg2 : (tensor<16xf32>) -> tensor<1x16x1x1xf32>
    %3 = tg.reshape %arg1 : (tensor<16xf32>) -> tensor<1x16x1x1xf32>
    %4 = tg.reshape %arg8 : (tensor<16xf32>) -> tensor<1x16x1x1xf32>
    %5 = tg.reshape %arg7 : (tensor<16xf32>) -> tensor<1x16x1x1xf32>
    %6 = tg.add %4, %1 : (tensor<1x16x1x1xf32>, tensor<f32>) -> tensor<1x16x1x1xf32>
    %7 = tg.rsqrt %6 : tensor<1x16x1x1xf32>
    %8 = tg.sub %0, %5 : (tensor<4x16x8x8xf32>, tensor<1x16x1x1xf32>) -> tensor<4x16x8x8xf32>
    %9 = tg.mul %8, %7 : (tensor<4x16x8x8xf32>, tensor<1x16x1x1xf32>) -> tensor<4x16x8x8xf32>
    %10 = tg.mul %9, %3 : (tensor<4x16x8x8xf32>, tensor<1x16x1x1xf32>) -> tensor<4x16x8x8xf32>
    %11 = tg.add %10, %2 : (tensor<4x16x8x8xf32>, tensor<1x16x1x1xf32>) -> tensor<4x16x8x8xf32>
    %12 = tg.train_select %result, %11 : tensor<4x16x8x8xf32>
    %13 = tg.constant dense<0.899999976> : tensor<f32>
    %14 = tg.constant dense<1.000000e-01> : tensor<f32>
    %15 = tg.constant dense<1.00392163> : tensor<f32>
    %16 = tg.mul %var, %15 : (tensor<16xf32>, tensor<f32>) -> tensor<16xf32>
    %17 = tg.mul %mean, %14 : (tensor<16xf32>, tensor<f32>) -> tensor<16xf32>
    %18 = tg.mul %arg7, %13 : (tensor<16xf32>, tensor<f32>) -> tensor<16xf32>
    %19 = tg.add %18, %17 : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
    %20 = tg.mul %16, %14 : (tensor<16xf32>, tensor<f32>) -> tensor<16xf32>
    %21 = tg.mul %arg8, %13 : (tensor<16xf32>, tensor<f32>) -> tensor<16xf32>
    %22 = tg.add %21, %20 : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
    %23 = tg.relu %12 : tensor<4x16x8x8xf32>
    %24 = tg.max_pool2d %23 {kernel = array<i64: 2, 2>, padding = array<i64: 0, 0>, stride = array<i64: 2, 2>} : (tensor<4x16x8x8xf32>) -> tensor<4x16x4x4xf32>
    %25 = tg.conv2d %24, %arg3 {dilation = array<i64: 1, 1>, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>} : (tensor<4x16x4x4xf32>, tensor<16x16x3x3xf32>) -> tensor<4x16x4x4xf32>
    %26 = tg.add %25, %24 : (tensor<4x16x4x4xf32>, tensor<4x16x4x4xf32>) -> tensor<4x16x4x4xf32>
    %27 = tg.relu %26 : tensor<4x16x4x4xf32>
    %28 = tg.conv2d %27, %arg4 {dilation = array<i64: 1, 1>, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>} : (tensor<4x16x4x4xf32>, tensor<8x16x1x1xf32>) -> tensor<4x8x4x4xf32>
    %29 = tg.add %28, %arg5 : (tensor<4x8x4x4xf32>, tensor<8x1x1xf32>) -> tensor<4x8x4x4xf32>
    %30 = tg.reduce_mean %29 {axes = array<i64: 2, 3>} : (tensor<4x8x4x4xf32>) -> tensor<4x8xf32>
    %31 = tg.reduce_mean %30 {axes = array<i64: 0, 1>} : (tensor<4x8xf32>) -> tensor<f32>
    return %31, %19, %22 : tensor<f32>, tensor<16xf32>, tensor<16xf32>
  }
}
)mlir";

// A patch embedding (kernel = stride = (2, 4) on 8 x 12 images), a bias,
// tanh and a mean: on cuda tg-conv-layout makes the convolution a matrix
// product over the patches (PatchConvolutions.cpp).
constexpr const char *kPatches = R"mlir(
module attributes {tg.model_name = "patches", tg.optimizer = {kind = "sgd", learning_rate = 1.000000e-01 : f64}} {
  func.func @forward(%arg0: tensor<6x3x2x4xf32> {tg.param = {init = "normal", name = "w", scale = 3.000000e-01 : f64, seed = 1 : i64, trainable = true}}, %arg1: tensor<6x1x1xf32> {tg.param = {init = "normal", name = "b", scale = 1.000000e-01 : f64, seed = 2 : i64, trainable = true}}, %arg2: tensor<2x3x8x12xf32> {tg.input = "x"}) -> (tensor<f32> {tg.loss = "loss"}) {
    %0 = tg.conv2d %arg2, %arg0 {dilation = array<i64: 1, 1>, padding = array<i64: 0, 0>, stride = array<i64: 2, 4>} : (tensor<2x3x8x12xf32>, tensor<6x3x2x4xf32>) -> tensor<2x6x4x3xf32>
    %1 = tg.add %0, %arg1 : (tensor<2x6x4x3xf32>, tensor<6x1x1xf32>) -> tensor<2x6x4x3xf32>
    %2 = tg.tanh %1 : tensor<2x6x4x3xf32>
    %3 = tg.mul %2, %2 : (tensor<2x6x4x3xf32>, tensor<2x6x4x3xf32>) -> tensor<2x6x4x3xf32>
    %4 = tg.reduce_mean %3 {axes = array<i64: 0, 1, 2, 3>} : (tensor<2x6x4x3xf32>) -> tensor<f32>
    return %4 : tensor<f32>
  }
}
)mlir";

// A transposed convolution (conv_transpose2d, imported as
// tg.conv2d_input_grad: 2x2, stride 2) between two convolutions: all three
// join one channels-last chain.
constexpr const char *kTransposed = R"mlir(
module attributes {tg.model_name = "convt", tg.optimizer = {kind = "sgd", learning_rate = 1.000000e-01 : f64}} {
  func.func @forward(%arg0: tensor<16x3x3x3xf32> {tg.param = {init = "normal", name = "w1", scale = 3.000000e-01 : f64, seed = 1 : i64, trainable = true}}, %arg1: tensor<16x16x2x2xf32> {tg.param = {init = "normal", name = "wt", scale = 2.000000e-01 : f64, seed = 2 : i64, trainable = true}}, %arg2: tensor<8x16x1x1xf32> {tg.param = {init = "normal", name = "w3", scale = 2.000000e-01 : f64, seed = 3 : i64, trainable = true}}, %arg3: tensor<2x3x6x6xf32> {tg.input = "x"}) -> (tensor<f32> {tg.loss = "loss"}) {
    %0 = tg.conv2d %arg3, %arg0 {dilation = array<i64: 1, 1>, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>} : (tensor<2x3x6x6xf32>, tensor<16x3x3x3xf32>) -> tensor<2x16x6x6xf32>
    %1 = tg.relu %0 : tensor<2x16x6x6xf32>
    %2 = tg.conv2d_input_grad %1, %arg1 {dilation = array<i64: 1, 1>, padding = array<i64: 0, 0>, stride = array<i64: 2, 2>} : (tensor<2x16x6x6xf32>, tensor<16x16x2x2xf32>) -> tensor<2x16x12x12xf32>
    %3 = tg.tanh %2 : tensor<2x16x12x12xf32>
    %4 = tg.conv2d %3, %arg2 {dilation = array<i64: 1, 1>, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>} : (tensor<2x16x12x12xf32>, tensor<8x16x1x1xf32>) -> tensor<2x8x12x12xf32>
    %5 = tg.mul %4, %4 : (tensor<2x8x12x12xf32>, tensor<2x8x12x12xf32>) -> tensor<2x8x12x12xf32>
    %6 = tg.reduce_mean %5 {axes = array<i64: 0, 1, 2, 3>} : (tensor<2x8x12x12xf32>) -> tensor<f32>
    return %6 : tensor<f32>
  }
}
)mlir";

class ConvLayoutTest : public GradCheckTest {
protected:
  OwningOpRef<ModuleOp> trainStep(bool channelsLast, const char *source = kCnn,
                                  StringRef target = "cuda", bool amp = true) {
    OwningOpRef<ModuleOp> module = parse(source);
    if (!module)
      return {};
    PassManager pm(&context());
    if (amp)
      pm.addPass(createTgAmp(TgAmpOptions{"bf16", "cuda"}));
    pm.addPass(createTgConvLayout(TgConvLayoutOptions{target.str(), channelsLast}));
    pm.addPass(createTgAutodiff());
    pm.addPass(createTgStripTrainOnlyOps());
    pm.addPass(createTgSgdUpdate());
    pm.addPass(createCSEPass());
    if (failed(pm.run(*module)))
      return {};
    return module;
  }
};

int64_t opsWithLayout(ModuleOp m, StringRef function, StringRef layout) {
  int64_t n = 0;
  m.lookupSymbol<func::FuncOp>(function).walk([&](Operation *op) {
    auto l = op->getAttrOfType<StringAttr>("layout");
    n += l && l.getValue() == layout;
  });
  return n;
}

// Transposes in @forward other than a convolution's weight's.
int64_t activationTransposes(ModuleOp m) {
  int64_t activations = 0;
  m.lookupSymbol<func::FuncOp>("forward").walk([&](tg::TransposeOp t) {
    bool weight = llvm::any_of(t->getUsers(), [&](Operation *u) {
      return isa<tg::Conv2dOp, tg::Conv2dInputGradOp>(u) && u->getOperand(1) == t.getResult();
    });
    activations += !weight;
  });
  return activations;
}

TEST_F(ConvLayoutTest, ChannelsLastStepComputesTheSameFunction) {
  OwningOpRef<ModuleOp> nchw = trainStep(false);
  OwningOpRef<ModuleOp> nhwc = trainStep(true);
  ASSERT_TRUE(nchw && nhwc) << diagnostics_;
  EXPECT_EQ(opsWithLayout(*nchw, "train_step", "NHWC"), 0);
  // Forward: 3 convolutions, the pool; backward: 2 gradients per
  // convolution (the first one's input gradient is not needed), the pool's.
  EXPECT_GE(opsWithLayout(*nhwc, "forward", "NHWC"), 4);
  EXPECT_GE(opsWithLayout(*nhwc, "train_step", "NHWC"), 4 + 5 + 1);
  // The batch norm runs on the (N*H*W, C) view.
  nhwc->walk([&](tg::BatchNormOp bn) {
    EXPECT_EQ(cast<RankedTensorType>(bn.getInput().getType()).getRank(), 2);
  });
  // Transposes of activations: only the images, to NHWC, in @forward.
  EXPECT_EQ(activationTransposes(*nhwc), 1);
  expectSameFunctions(*nchw, *nhwc, seed(), /*numClasses=*/8);
}

TEST_F(ConvLayoutTest, TransposedConvolutionJoinsTheChannelsLastChain) {
  OwningOpRef<ModuleOp> nchw = trainStep(false, kTransposed);
  OwningOpRef<ModuleOp> nhwc = trainStep(true, kTransposed);
  ASSERT_TRUE(nchw && nhwc) << diagnostics_;
  int64_t transposedNhwc = 0;
  nhwc->lookupSymbol<func::FuncOp>("forward").walk([&](tg::Conv2dInputGradOp c) {
    transposedNhwc += c.getLayout() == "NHWC";
  });
  EXPECT_EQ(transposedNhwc, 1);
  // Activation transposes in @forward: the images only (the transposed
  // convolution's edges are inside the chain).
  EXPECT_EQ(activationTransposes(*nhwc), 1);
  expectSameFunctions(*nchw, *nhwc, seed(), /*numClasses=*/8);
}

TEST_F(ConvLayoutTest, PatchConvolutionAsMatmulComputesTheSameFunction) {
  OwningOpRef<ModuleOp> conv = trainStep(false, kPatches, "cpu", /*amp=*/false);
  OwningOpRef<ModuleOp> product = trainStep(false, kPatches, "cuda", /*amp=*/false);
  ASSERT_TRUE(conv && product) << diagnostics_;
  EXPECT_EQ(countOps(*conv, "tg.conv2d"), 2); // @forward and @train_step
  EXPECT_EQ(countOps(*product, "tg.conv2d"), 0);
  EXPECT_EQ(countOps(*product, "tg.conv2d_weight_grad"), 0);
  EXPECT_GE(countOps(*product, "tg.matmul"), 2); // forward, weight gradient
  expectSameFunctions(*conv, *product, seed(), /*numClasses=*/8);
}

} // namespace
