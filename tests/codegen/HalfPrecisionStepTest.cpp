// bf16 and f16 through every CPU kernel family, against the float64
// reference interpreter: a small model whose parameters and inputs are f32
// (as an AMP step keeps its master weights) is cast to the 16-bit type and
// runs gather (so its gradient is a 16-bit scatter-add with repeated ids),
// elementwise ops, matmuls (batch folded into M, with a bias: its gradient
// and the weight's are one kern.gemm_bias_grad; a transposed shared rhs,
// a transposed fully batched product, a broadcast batch), transpose,
// reductions over trailing, middle and interleaved axes (sum, mean, max),
// concat, slice, reshape and softmax cross-entropy (with a 16-bit loss, and
// with an f32 loss of the 16-bit logits) (and, in the train step,
// every gradient of those: all gemm transposes, scatter-add, the softmax
// cross-entropy gradient, broadcasts of reduced gradients, pads of slices)
// in the 16-bit type, then casts back to f32 for the loss.
//
// Tolerance: the interpreter rounds every 16-bit result once (in float64
// between), and so does the compiled step, but not at the same points: fused
// ops (the gemm epilogues, gemm_bias_grad, the cross-entropy gradient) round
// once where the reference rounds after each op. Each rounding is a relative
// error <= u (2^-8 for bf16, 2^-11 for f16) that later ops can amplify, so
// values are checked to 16u relative (bf16 6.3%, f16 0.8%) plus what moving
// the roundings moves them: CheckOptions::roundingProbes reruns the reference
// with each 16-bit result rounded to a random neighbour. That allowance
// matters for values made by cancellation, such as u's gradient (sums of
// `a` over its batch and columns, terms far larger than the sum), which a
// different rounding point moved by 40% in bf16; for the others it is
// about 16u. A family that mistook the 16-bit bits for integers, or dropped
// a term, is off by far more than both (a scatter-add that overwrote repeated
// ids failed by 7-80x its allowance). Rounding after every add is not seen at
// this size (a few repeats per row): CpuPreludeTest checks it.
#include "tests/codegen/StepCheck.h"

#include "llvm/ADT/StringExtras.h"

namespace tcc {
namespace {

// LOW is replaced by bf16 or f16.
constexpr const char *kHalfModelIR = R"mlir(
module attributes {tg.model_name = "half_LOW", tg.optimizer = {kind = "sgd", learning_rate = 1.0e-1 : f64}} {
  func.func @forward(%w: tensor<5x6xf32> {tg.param = {name = "w", init = "normal", scale = 1.0 : f64, seed = 1 : i64, trainable = true}},
                     %v: tensor<6x6xf32> {tg.param = {name = "v", init = "normal", scale = 1.0 : f64, seed = 2 : i64, trainable = true}},
                     %e: tensor<11x5xf32> {tg.param = {name = "e", init = "normal", scale = 1.0 : f64, seed = 3 : i64, trainable = true}},
                     %u: tensor<2x1x4x6xf32> {tg.param = {name = "u", init = "normal", scale = 1.0 : f64, seed = 4 : i64, trainable = true}},
                     %bias: tensor<6xf32> {tg.param = {name = "bias", init = "normal", scale = 1.0 : f64, seed = 5 : i64, trainable = true}},
                     %x: tensor<3x4x5xf32> {tg.input = "x"},
                     %ids: tensor<3x4xi32> {tg.input = "ids"},
                     %y: tensor<12xi32> {tg.input = "y"})
      -> (tensor<f32> {tg.loss = "loss"}, tensor<3x6xf32> {tg.output = "colsum"},
          tensor<4xf32> {tg.output = "mean"}) {
    %wl = tg.cast %w : tensor<5x6xf32> to tensor<5x6xLOW>
    %vl = tg.cast %v : tensor<6x6xf32> to tensor<6x6xLOW>
    %el = tg.cast %e : tensor<11x5xf32> to tensor<11x5xLOW>
    %ul = tg.cast %u : tensor<2x1x4x6xf32> to tensor<2x1x4x6xLOW>
    %xl = tg.cast %x : tensor<3x4x5xf32> to tensor<3x4x5xLOW>
    %bl = tg.cast %bias : tensor<6xf32> to tensor<6xLOW>
    %g = tg.gather %el, %ids : (tensor<11x5xLOW>, tensor<3x4xi32>) -> tensor<3x4x5xLOW>
    %h0 = tg.add %g, %xl : (tensor<3x4x5xLOW>, tensor<3x4x5xLOW>) -> tensor<3x4x5xLOW>
    %hp = tg.matmul %h0, %wl : (tensor<3x4x5xLOW>, tensor<5x6xLOW>) -> tensor<3x4x6xLOW>
    %h = tg.add %hp, %bl : (tensor<3x4x6xLOW>, tensor<6xLOW>) -> tensor<3x4x6xLOW>
    %hg = tg.gelu %h : tensor<3x4x6xLOW>
    %hv = tg.matmul %hg, %vl {transpose_rhs = true} : (tensor<3x4x6xLOW>, tensor<6x6xLOW>) -> tensor<3x4x6xLOW>
    %a = tg.matmul %h, %hv {transpose_lhs = true} : (tensor<3x4x6xLOW>, tensor<3x4x6xLOW>) -> tensor<3x6x6xLOW>
    %t = tg.transpose %a {perm = array<i64: 0, 2, 1>} : (tensor<3x6x6xLOW>) -> tensor<3x6x6xLOW>
    %s1 = tg.reduce_sum %t {axes = array<i64: 1>} : (tensor<3x6x6xLOW>) -> tensor<3x6xLOW>
    %s2 = tg.reduce_max %t {axes = array<i64: 2>} : (tensor<3x6x6xLOW>) -> tensor<3x6xLOW>
    %s3 = tg.reduce_mean %hv {axes = array<i64: 0, 2>} : (tensor<3x4x6xLOW>) -> tensor<4xLOW>
    %c = tg.concat %s1, %s2 {axis = 1 : i64} : (tensor<3x6xLOW>, tensor<3x6xLOW>) -> tensor<3x12xLOW>
    %sl = tg.slice %c {starts = array<i64: 0, 1>, ends = array<i64: 3, 11>} : (tensor<3x12xLOW>) -> tensor<3x10xLOW>
    %sq = tg.mul %sl, %sl : (tensor<3x10xLOW>, tensor<3x10xLOW>) -> tensor<3x10xLOW>
    %q = tg.reduce_sum %sq {axes = array<i64: 0, 1>} : (tensor<3x10xLOW>) -> tensor<LOW>
    %b = tg.matmul %ul, %a : (tensor<2x1x4x6xLOW>, tensor<3x6x6xLOW>) -> tensor<2x3x4x6xLOW>
    %bs = tg.reduce_sum %b {axes = array<i64: 0, 1, 2, 3>} : (tensor<2x3x4x6xLOW>) -> tensor<LOW>
    %logits = tg.reshape %hv : (tensor<3x4x6xLOW>) -> tensor<12x6xLOW>
    %xent = tg.softmax_cross_entropy %logits, %y : (tensor<12x6xLOW>, tensor<12xi32>) -> tensor<12xLOW>
    %xs = tg.reduce_sum %xent {axes = array<i64: 0>} : (tensor<12xLOW>) -> tensor<LOW>
    %x32 = tg.softmax_cross_entropy %logits, %y : (tensor<12x6xLOW>, tensor<12xi32>) -> tensor<12xf32>
    %x32s = tg.reduce_sum %x32 {axes = array<i64: 0>} : (tensor<12xf32>) -> tensor<f32>
    %xsf = tg.cast %xs : tensor<LOW> to tensor<f32>
    %qf = tg.cast %q : tensor<LOW> to tensor<f32>
    %bf = tg.cast %bs : tensor<LOW> to tensor<f32>
    %k = tg.constant dense<1.0e-3> : tensor<f32>
    %qk = tg.mul %qf, %k : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %bk = tg.mul %bf, %k : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %l0 = tg.add %xsf, %qk : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %l1 = tg.add %l0, %bk : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %loss = tg.add %l1, %x32s : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %s1f = tg.cast %s1 : tensor<3x6xLOW> to tensor<3x6xf32>
    %s3f = tg.cast %s3 : tensor<4xLOW> to tensor<4xf32>
    return %loss, %s1f, %s3f : tensor<f32>, tensor<3x6xf32>, tensor<4xf32>
  }
}
)mlir";

std::string halfModel(llvm::StringRef low) {
  std::string text = kHalfModelIR;
  for (size_t at = text.find("LOW"); at != std::string::npos; at = text.find("LOW", at))
    text.replace(at, 3, low.str());
  return text;
}

struct HalfCase {
  const char *type;
  int mantissaBits; // significand bits: unit roundoff 2^-bits
};

class HalfPrecisionStep : public ::testing::TestWithParam<HalfCase> {};

TEST_P(HalfPrecisionStep, EveryKernelFamilyMatchesReference) {
  const HalfCase &c = GetParam();
  std::string name = std::string("half_") + c.type;
  auto s = compileIR(halfModel(c.type), name);
  CheckOptions o;
  o.intRange = {{"ids", 11}, {"y", 6}};
  o.tolerance = 16 * std::ldexp(1.0, -c.mantissaBits);
  o.valueScale = 0.5f; // keeps the logits' softmax away from saturation
  o.roundingProbes = 8;
  // The model's gradients reach ~40 (the squared sums), so the default
  // first step (0.125) moved parameters by ~5 and the next forward could
  // overflow f16 (reference and step alike: NaN against NaN).
  o.learningRate = 1.0f / 64;
  checkStep(*s, name, o);
}

INSTANTIATE_TEST_SUITE_P(Types, HalfPrecisionStep,
                         ::testing::Values(HalfCase{"bf16", 8}, HalfCase{"f16", 11}),
                         [](const auto &info) { return std::string(info.param.type); });

} // namespace
} // namespace tcc
