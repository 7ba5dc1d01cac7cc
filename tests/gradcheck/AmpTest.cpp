// tg-amp keeps the meaning of the model up to 16-bit rounding: on the
// reference interpreter (float64, with every cast rounding to bf16/f16), the
// mixed-precision train step's loss and gradients stay within a few units of
// the 16-bit roundoff of the fp32 step's, on fresh random inputs; they are
// not bit-identical (the casts are honoured); and the weights are cast once
// per step after CSE, however many ops read them. The fp8 part (second
// half) checks the FP8 products' marks and numerics.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "interpreter/TgInterpreter.h"
#include "dialects/common/ModelAttrs.h"
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

//===----------------------------------------------------------------------===//
// fp8 (tg-amp's FP8 products) on the reference interpreter:
//  - which products it marks (the layers' weights, not the head, not a
//    product of activations) and the marks autodiff gives their gradients;
//  - the interpreter's FP8 product against an independent reference: each
//    operand rounded to the nearest of the format's 2 x 127 finite values
//    (found by decoding every byte, ties to the even code), scaled by
//    max / amax, the float64 product dequantized. Fresh random inputs; one
//    product E4M3 x E4M3, one E5M2 x E4M3 (the backward's);
//  - the fp8 train step tracks the fp32 one within FP8's roundoff, and is
//    not the bf16 step (the FP8 rounding is honoured).
//===----------------------------------------------------------------------===//


// x (2, 16, 32): rms norm, w1 (32 x 64), SiLU, w2 (64 x 32), the residual,
// then the head w3 (32 x 16) into the loss; and a product of two
// activations (h h^T), read by the loss through a mean.
constexpr llvm::StringLiteral kFp8Block = R"mlir(
module {
  func.func @forward(
      %w1: tensor<32x64xf32> {tg.param = {name = "mlp.w1", init = "normal", scale = 1.0 : f64, seed = 1 : i64, trainable = true}},
      %w2: tensor<64x32xf32> {tg.param = {name = "mlp.w2", init = "normal", scale = 1.0 : f64, seed = 2 : i64, trainable = true}},
      %w3: tensor<32x16xf32> {tg.param = {name = "head", init = "normal", scale = 1.0 : f64, seed = 3 : i64, trainable = true}},
      %x: tensor<2x16x32xf32> {tg.input = "x"}, %y: tensor<32xi32> {tg.input = "y"})
      -> (tensor<f32> {tg.loss = "loss"}) {
    %h = tg.rms_norm %x {eps = 1.0e-5 : f64} : (tensor<2x16x32xf32>) -> tensor<2x16x32xf32>
    %a = tg.matmul %h, %w1 : (tensor<2x16x32xf32>, tensor<32x64xf32>) -> tensor<2x16x64xf32>
    %s = tg.silu %a : tensor<2x16x64xf32>
    %b = tg.matmul %s, %w2 : (tensor<2x16x64xf32>, tensor<64x32xf32>) -> tensor<2x16x32xf32>
    %r = tg.add %x, %b : (tensor<2x16x32xf32>, tensor<2x16x32xf32>) -> tensor<2x16x32xf32>
    %g = tg.matmul %r, %r {transpose_rhs = true} : (tensor<2x16x32xf32>, tensor<2x16x32xf32>) -> tensor<2x16x16xf32>
    %gm = tg.reduce_mean %g {axes = array<i64: 0, 1, 2>} : (tensor<2x16x16xf32>) -> tensor<f32>
    %logits = tg.matmul %r, %w3 : (tensor<2x16x32xf32>, tensor<32x16xf32>) -> tensor<2x16x16xf32>
    %lr = tg.reshape %logits : (tensor<2x16x16xf32>) -> tensor<32x16xf32>
    %xe = tg.softmax_cross_entropy %lr, %y : (tensor<32x16xf32>, tensor<32xi32>) -> tensor<32xf32>
    %l0 = tg.reduce_mean %xe {axes = array<i64: 0>} : (tensor<32xf32>) -> tensor<f32>
    %k = tg.constant dense<0.01> : tensor<f32>
    %l1 = tg.mul %gm, %k : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %loss = tg.add %l0, %l1 : (tensor<f32>, tensor<f32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}
)mlir";

// Every finite value of the format, decoded from its bytes: E4M3 (bias 7,
// no infinities, S.1111.111 is NaN) or E5M2 (bias 15, exponent 31 is
// inf/NaN). With each value its code, for ties to even.
std::vector<std::pair<double, int>> fp8Values(bool e5m2) {
  const int mantissaBits = e5m2 ? 2 : 3, bias = e5m2 ? 15 : 7;
  std::vector<std::pair<double, int>> values;
  for (int code = 0; code < 256; ++code) {
    int sign = code >> 7, exponent = (code >> mantissaBits) & (e5m2 ? 31 : 15),
        mantissa = code & ((1 << mantissaBits) - 1);
    if (e5m2 ? exponent == 31 : (exponent == 15 && mantissa == 7))
      continue;
    double m = exponent == 0 ? mantissa / double(1 << mantissaBits)
                             : 1.0 + mantissa / double(1 << mantissaBits);
    double v = std::ldexp(m, (exponent == 0 ? 1 : exponent) - bias);
    values.push_back({sign ? -v : v, code});
  }
  return values;
}

// x as the cast writes it: the nearest finite value (beyond the largest:
// the largest, as the saturating cast), ties to the even code.
double nearestFp8(double x, const std::vector<std::pair<double, int>> &values) {
  double best = 0, bestDistance = std::numeric_limits<double>::infinity();
  int bestCode = 0;
  for (auto [v, code] : values) {
    double d = std::fabs(v - x);
    if (d < bestDistance || (d == bestDistance && (code & 1) == 0 && (bestCode & 1) == 1)) {
      best = v;
      bestDistance = d;
      bestCode = code;
    }
  }
  return best;
}

// The reference product of fp8 operands a (M, K) and b (K, N), rank 2.
Tensor referenceProduct(const Tensor &a, bool aE5M2, const Tensor &b, bool bE5M2) {
  auto quantize = [](const Tensor &t, bool e5m2, double &inverse) {
    std::vector<std::pair<double, int>> values = fp8Values(e5m2);
    float amax = 0;
    for (double v : t.data)
      amax = std::max(amax, static_cast<float>(std::fabs(v)));
    float scale = (e5m2 ? 57344.0f : 448.0f) / amax;
    inverse = 1.0f / scale;
    Tensor q = t;
    for (double &v : q.data)
      v = nearestFp8(static_cast<float>(v) * scale, values);
    return q;
  };
  double ia, ib;
  Tensor qa = quantize(a, aE5M2, ia), qb = quantize(b, bE5M2, ib);
  int64_t m = a.shape[0], k = a.shape[1], n = b.shape[1];
  Tensor out = Tensor::zeros({m, n});
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p)
        sum += qa.data[i * k + p] * qb.data[p * n + j];
      out.data[i * n + j] = sum * ia * ib;
    }
  return out;
}

constexpr llvm::StringLiteral kProduct = R"mlir(
module {
  func.func @f(%a: tensor<16x48xbf16>, %b: tensor<48x32xbf16>) -> tensor<16x32xbf16> {
    %p = tg.matmul %a, %b {tg.fp8 = "FORMATS"} : (tensor<16x48xbf16>, tensor<48x32xbf16>) -> tensor<16x32xbf16>
    return %p : tensor<16x32xbf16>
  }
}
)mlir";

TEST_F(GradCheckTest, Fp8ProductMatchesTheNearestValueReference) {
  for (const char *formats : {"e4m3xe4m3", "e5m2xe4m3"}) {
    std::string text = kProduct.str();
    text.replace(text.find("FORMATS"), 7, formats);
    OwningOpRef<ModuleOp> module = parse(text);
    ASSERT_TRUE(module);
    auto f = module->lookupSymbol<func::FuncOp>("f");
    std::mt19937_64 rng(seed());
    std::normal_distribution<double> normal(0, 1);
    std::uniform_real_distribution<double> exponent(-6, 3);
    Tensor a = Tensor::zeros({16, 48}), b = Tensor::zeros({48, 32});
    // bf16 inputs (the operands tg-amp gives the product; a float cut to
    // its top 16 bits) of a wide range, so that some values fall into the
    // formats' subnormals.
    for (Tensor *t : {&a, &b})
      for (double &v : t->data) {
        float x = static_cast<float>(normal(rng) * std::exp2(exponent(rng)));
        uint32_t bits;
        std::memcpy(&bits, &x, 4);
        bits &= 0xFFFF0000u;
        std::memcpy(&x, &bits, 4);
        v = x;
      }
    FailureOr<std::vector<Tensor>> got = interp::interpret(f, {a, b});
    ASSERT_TRUE(succeeded(got)) << diagnostics_;
    Tensor want = referenceProduct(a, std::string(formats).rfind("e5m2", 0) == 0, b, false);
    double worst = 0, size = 0;
    for (size_t i = 0; i < want.data.size(); ++i) {
      worst = std::max(worst, std::fabs((*got)[0].data[i] - want.data[i]));
      size = std::max(size, std::fabs(want.data[i]));
    }
    // Both sum the same products in float64; the interpreter rounds its
    // bf16 result once.
    EXPECT_LE(worst, size / 256) << formats;
    // And FP8 is not bf16: the unquantized product differs by far more.
    double plain = 0;
    for (int64_t i = 0; i < 16; ++i)
      for (int64_t j = 0; j < 32; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < 48; ++p)
          sum += a.data[i * 48 + p] * b.data[p * 32 + j];
        plain = std::max(plain, std::fabs(sum - want.data[i * 32 + j]));
      }
    EXPECT_GT(plain, 4 * size / 256) << formats;
  }
}

// The decisions, their marks after autodiff, and the step against fp32 and
// bf16 on the interpreter.
TEST_F(GradCheckTest, Fp8StepTracksFp32WithinFp8Roundoff) {
  OwningOpRef<ModuleOp> full = parse(kFp8Block);
  ASSERT_TRUE(full);
  OwningOpRef<ModuleOp> bf16 = full->clone(), fp8 = full->clone();
  for (auto [module, precision] : {std::pair{&bf16, "bf16"}, std::pair{&fp8, "fp8"}}) {
    PassManager pm(&context());
    pm.addPass(createTgAmp(TgAmpOptions{precision, "cuda"}));
    ASSERT_TRUE(succeeded(pm.run(**module))) << diagnostics_;
  }
  // Marked: the two layer products; not the head, not h h^T.
  llvm::StringMap<std::string> marks;
  fp8->lookupSymbol<func::FuncOp>("forward").walk([&](tg::MatmulOp m) {
    auto mark = m->getAttrOfType<StringAttr>(model::kFp8Attr);
    auto rhs = m.getRhs().getType();
    marks[std::to_string(cast<RankedTensorType>(rhs).getRank()) + ":" +
          std::to_string(cast<RankedTensorType>(rhs).getShape().back())] =
        mark ? mark.getValue().str() : "";
  });
  EXPECT_EQ(marks["2:64"], "e4m3xe4m3"); // w1
  EXPECT_EQ(marks["2:32"], "e4m3xe4m3"); // w2
  EXPECT_EQ(marks["2:16"], "");          // the head
  EXPECT_EQ(marks["3:32"], "");          // h h^T
  ASSERT_TRUE(differentiate(*full));
  ASSERT_TRUE(differentiate(*bf16));
  ASSERT_TRUE(differentiate(*fp8));
  int forward = 0, gradLeft = 0, gradRight = 0;
  fp8->lookupSymbol<func::FuncOp>("train_step").walk([&](tg::MatmulOp m) {
    auto mark = m->getAttrOfType<StringAttr>(model::kFp8Attr);
    if (!mark)
      return;
    forward += mark.getValue() == "e4m3xe4m3";
    gradLeft += mark.getValue() == "e5m2xe4m3";
    gradRight += mark.getValue() == "e4m3xe5m2";
  });
  EXPECT_EQ(forward, 2);
  // dA = dC B^T: w2's only; w1's A is computed from the input x alone,
  // whose gradient autodiff does not build.
  EXPECT_EQ(gradLeft, 1);
  EXPECT_EQ(gradRight, 2); // dB = A^T dC (the batch folded into K)

  std::mt19937_64 rng(seed());
  auto fullTrain = full->lookupSymbol<func::FuncOp>("train_step");
  std::vector<Tensor> args = randomArguments(fullTrain, rng, /*numClasses=*/16);
  for (size_t p = 0; p < 3; ++p)
    for (double &v : args[p].data)
      v *= 0.2;
  FailureOr<std::vector<Tensor>> want = interp::interpret(fullTrain, args);
  FailureOr<std::vector<Tensor>> low = interp::interpret(bf16->lookupSymbol<func::FuncOp>("train_step"), args);
  FailureOr<std::vector<Tensor>> got = interp::interpret(fp8->lookupSymbol<func::FuncOp>("train_step"), args);
  ASSERT_TRUE(succeeded(want) && succeeded(low) && succeeded(got)) << diagnostics_;
  // E4M3's unit roundoff is 2^-4 and E5M2's 2^-3: a gradient product's
  // relative error is at most about their sum u, and the loss, through
  // forward products only, averages E4M3's errors of random sign. Over 150
  // fresh seeds (2026-11-30) the loss moved at most 0.63% and a gradient
  // 13.8% of its largest element; the bounds, u / 8 (2.3%) and 1.25 u
  // (23%), sit well above that and far below what a lost scale (x448 or
  // x57344) or a missing gradient path would make.
  const double u = 1.0 / 16 + 1.0 / 8;
  double loss = (*want)[0].data[0];
  EXPECT_LT(std::fabs((*got)[0].data[0] - loss), u / 8 * std::fabs(loss));
  EXPECT_NE((*got)[0].data[0], (*low)[0].data[0]) << "the FP8 rounding must show";
  for (size_t i = 1; i < want->size(); ++i) {
    double scale = 0, error = 0;
    for (size_t j = 0; j < (*want)[i].data.size(); ++j) {
      scale = std::max(scale, std::fabs((*want)[i].data[j]));
      error = std::max(error, std::fabs((*got)[i].data[j] - (*want)[i].data[j]));
    }
    ASSERT_GT(scale, 1e-6) << "gradient " << i;
    EXPECT_LT(error, 1.25 * u * scale) << "gradient " << i;
  }
}

} // namespace
