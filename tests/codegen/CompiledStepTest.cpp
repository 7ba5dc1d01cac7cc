// The whole pipeline against the float64 reference: a model is compiled by
// the real `tcc` into a step.so (or, for tg IR the importer cannot express,
// by the same pipeline in process), run on fresh random parameters, inputs
// and optimizer state, and its loss, eval outputs, train outputs, updated
// parameters and updated optimizer state are compared with the reference
// interpreter running the same model's tg functions.
//
// This is the check of every CPU kernel family: gemm (all transpose
// combinations, batched, broadcast batch, shared rank-2 rhs), generic
// elementwise bodies (every op of the vocabulary, broadcasting, fused
// chains, i1 masks, bf16/f16 casts, counter-based dropout), reductions
// (sum, mean, max over leading, middle and trailing axes), transpose,
// slice, concat, gather / scatter_add (repeated ids), dense and splat
// constants, softmax cross-entropy, and the in-place SGD / momentum / AdamW
// updates with clipping. Workspace, outputs and train outputs are poisoned
// with NaN first, so a kernel that reads memory nobody wrote fails. Sizes
// divide no vector width.
#include "tests/codegen/StepCheck.h"

namespace tcc {
namespace {


//===----------------------------------------------------------------------===//
// MLP-class models (gemm, broadcasting elementwise, reductions, views, SGD)
//===----------------------------------------------------------------------===//

// Both transpose flags in the forward pass (so the backward pass needs all
// four gemm variants), mul with a broadcast parameter, reshape views, a
// keep_dims mean broadcast back, fan-out, sum.
constexpr const char *kTransposeModel = R"pb(
schema_version: 1
name: "transposes"
params { name: "p" dtype: F32 shape { dims: 7 dims: 3 } init { kind: NORMAL scale: 0.5 seed: 1 } }
params { name: "q" dtype: F32 shape { dims: 3 dims: 4 } init { kind: NORMAL scale: 0.5 seed: 2 } }
params { name: "s" dtype: F32 shape { dims: 4 } init { kind: UNIFORM scale: 1 seed: 3 } }
inputs { name: "x" dtype: F32 shape { dims: 5 dims: 7 } }
inputs { name: "y" dtype: I32 shape { dims: 5 } }
nodes { name: "h" op: "matmul" inputs: "p" inputs: "x" outputs: "h"
        attrs { key: "transpose_a" value { b: true } } attrs { key: "transpose_b" value { b: true } } }
nodes { name: "z" op: "matmul" inputs: "h" inputs: "q" outputs: "z"
        attrs { key: "transpose_a" value { b: true } } }
nodes { name: "zs" op: "mul" inputs: "z" inputs: "s" outputs: "zs" }
nodes { name: "flat" op: "reshape" inputs: "zs" outputs: "flat" attrs { key: "shape" value { ints { values: 20 } } } }
nodes { name: "back" op: "reshape" inputs: "flat" outputs: "back" attrs { key: "shape" value { ints { values: 5 values: 4 } } } }
nodes { name: "r" op: "relu" inputs: "back" outputs: "r" }
nodes { name: "sum" op: "add" inputs: "r" inputs: "zs" outputs: "sum" }
nodes { name: "m" op: "mean" inputs: "sum" outputs: "m"
        attrs { key: "axes" value { ints { values: 1 } } } attrs { key: "keep_dims" value { b: true } } }
nodes { name: "logits" op: "add" inputs: "sum" inputs: "m" outputs: "logits" }
nodes { name: "xent" op: "softmax_cross_entropy" inputs: "logits" inputs: "y" outputs: "xent" }
nodes { name: "loss" op: "sum" inputs: "xent" outputs: "loss" }
outputs { name: "logits" value: "logits" }
training { loss: "loss" optimizer { sgd { learning_rate: 0.25 } } }
)pb";

TEST(CompiledStep, MlpMatchesReference) {
  models::MlpOptions o;
  o.batch = 5; // sizes that divide nothing
  o.inputs = 13;
  o.hidden = {11, 7};
  o.classes = 3;
  checkModel(models::buildMlp(o), "mlp_5_13_11_7_3", {.defaultIntRange = 3});
}

TEST(CompiledStep, LargeMlpUsesThreadsAndMatchesReference) {
  // Big enough for the OpenMP loops and the split gemm.
  models::MlpOptions o;
  o.batch = 67;
  o.inputs = 301;
  o.hidden = {519};
  o.classes = 10;
  checkModel(models::buildMlp(o), "mlp_67_301_519_10", {.defaultIntRange = 10});
}

TEST(CompiledStep, LinearModelMatchesReference) {
  models::MlpOptions o;
  o.batch = 1;
  o.inputs = 9;
  o.hidden = {};
  o.classes = 6;
  checkModel(models::buildMlp(o), "linear_1_9_6", {.defaultIntRange = 6});
}

TEST(CompiledStep, TransposesViewsAndBroadcastsMatchReference) {
  checkModel(parse(kTransposeModel, "transposes"), "transposes", {.defaultIntRange = 4});
}

//===----------------------------------------------------------------------===//
// Every elementwise op of the vocabulary (generic lowering, fusion)
//===----------------------------------------------------------------------===//

// Values stay in the ops' domains: log/sqrt/rsqrt/pow of exp(.) or of
// sigmoid(.); every result reaches the loss through a random-looking mix.
constexpr const char *kElementwiseModel = R"pb(
schema_version: 1
name: "elementwise"
params { name: "p" dtype: F32 shape { dims: 5 dims: 7 } init { kind: NORMAL scale: 1 seed: 1 } }
params { name: "q" dtype: F32 shape { dims: 7 } init { kind: NORMAL scale: 1 seed: 2 } }
params { name: "c" dtype: F32 shape { dims: 3 dims: 1 dims: 7 } init { kind: NORMAL scale: 1 seed: 3 } }
inputs { name: "x" dtype: F32 shape { dims: 3 dims: 5 dims: 7 } }
nodes { name: "a" op: "add" inputs: "x" inputs: "p" outputs: "a" }
nodes { name: "b" op: "sub" inputs: "a" inputs: "q" outputs: "b" }
nodes { name: "e" op: "exp" inputs: "b" outputs: "e" }
nodes { name: "lg" op: "log" inputs: "e" outputs: "lg" }
nodes { name: "sq" op: "sqrt" inputs: "e" outputs: "sq" }
nodes { name: "rs" op: "rsqrt" inputs: "e" outputs: "rs" }
nodes { name: "pw" op: "pow" inputs: "e" outputs: "pw" attrs { key: "exponent" value { f: 1.7 } } }
nodes { name: "th" op: "tanh" inputs: "b" outputs: "th" }
nodes { name: "sg" op: "sigmoid" inputs: "a" outputs: "sg" }
nodes { name: "rl" op: "relu" inputs: "a" outputs: "rl" }
nodes { name: "sl" op: "silu" inputs: "b" outputs: "sl" }
nodes { name: "ge" op: "gelu" inputs: "a" outputs: "ge" }
nodes { name: "gt" op: "gelu" inputs: "b" outputs: "gt" attrs { key: "approximate" value { s: "tanh" } } }
nodes { name: "sn" op: "sin" inputs: "a" outputs: "sn" }
nodes { name: "cs" op: "cos" inputs: "b" outputs: "cs" }
nodes { name: "ng" op: "neg" inputs: "c" outputs: "ng" }
nodes { name: "dv" op: "div" inputs: "sn" inputs: "e" outputs: "dv" }
nodes { name: "mx" op: "max" inputs: "a" inputs: "ng" outputs: "mx" }
nodes { name: "mn" op: "min" inputs: "b" inputs: "c" outputs: "mn" }
nodes { name: "ls" op: "less" inputs: "a" inputs: "c" outputs: "ls" }
nodes { name: "gq" op: "greater_equal" inputs: "b" inputs: "q" outputs: "gq" }
nodes { name: "w1" op: "where" inputs: "ls" inputs: "th" inputs: "sg" outputs: "w1" }
nodes { name: "w2" op: "select" inputs: "gq" inputs: "dv" inputs: "mn" outputs: "w2" }
nodes { name: "lf" op: "cast" inputs: "ls" outputs: "lf" attrs { key: "dtype" value { s: "f32" } } }
nodes { name: "h16" op: "cast" inputs: "sl" outputs: "h16" attrs { key: "dtype" value { s: "f16" } } }
nodes { name: "f16" op: "cast" inputs: "h16" outputs: "f16" attrs { key: "dtype" value { s: "f32" } } }
nodes { name: "hb" op: "cast" inputs: "ge" outputs: "hb" attrs { key: "dtype" value { s: "bf16" } } }
nodes { name: "fb" op: "cast" inputs: "hb" outputs: "fb" attrs { key: "dtype" value { s: "f32" } } }
nodes { name: "ip" op: "cast" inputs: "b" outputs: "ip" attrs { key: "dtype" value { s: "i32" } } }
nodes { name: "fp" op: "cast" inputs: "ip" outputs: "fp" attrs { key: "dtype" value { s: "f32" } } }
nodes { name: "t1" op: "mul" inputs: "lg" inputs: "sq" outputs: "t1" }
nodes { name: "t2" op: "add" inputs: "t1" inputs: "rs" outputs: "t2" }
nodes { name: "t3" op: "mul" inputs: "t2" inputs: "pw" outputs: "t3" }
nodes { name: "t4" op: "add" inputs: "t3" inputs: "rl" outputs: "t4" }
nodes { name: "t5" op: "mul" inputs: "t4" inputs: "w1" outputs: "t5" }
nodes { name: "t6" op: "add" inputs: "t5" inputs: "w2" outputs: "t6" }
nodes { name: "t7" op: "mul" inputs: "t6" inputs: "cs" outputs: "t7" }
nodes { name: "t8" op: "add" inputs: "t7" inputs: "mx" outputs: "t8" }
nodes { name: "t9" op: "mul" inputs: "t8" inputs: "lf" outputs: "t9" }
nodes { name: "t10" op: "add" inputs: "t9" inputs: "f16" outputs: "t10" }
nodes { name: "t11" op: "add" inputs: "t10" inputs: "fb" outputs: "t11" }
nodes { name: "t11b" op: "add" inputs: "t11" inputs: "fp" outputs: "t11b" }
nodes { name: "t12" op: "mul" inputs: "t11b" inputs: "gt" outputs: "t12" }
nodes { name: "loss" op: "mean" inputs: "t12" outputs: "loss" }
outputs { name: "y" value: "t12" }
outputs { name: "mask" value: "lf" }
training { loss: "loss" optimizer { sgd { learning_rate: 0.1 } } }
)pb";

TEST(CompiledStep, ElementwiseOpsMatchReference) {
  // The f16/bf16 round trips change values by up to 2^-8 relative: they
  // carry a gradient of 1 (straight through), and their values are
  // rounded identically on both sides.
  // Values of scale 0.35 (b = x + p - q of std 0.6): the loss grows like
  // b·exp(2.2 b) (log(e)·sqrt(e)·e^1.7), so with unit values a rare b near 6
  // gave a step-1 gradient near 1e6 that moved a parameter to about -100,
  // where step 2's exp(b) underflows to 0 in float (log -> -inf, NaN) while
  // the float64 reference does not (seen once in CI: seed
  // 16928520469415145447). Every op still sees both signs and both
  // branches of each comparison.
  checkModel(parse(kElementwiseModel, "elementwise"), "elementwise",
             {.learningRate = 1e-3f, .valueScale = 0.35f});
}

// One op at a time: y = op(a [, b]) with a = x + p (broadcast parameter),
// b = q (another broadcast), loss = sum(y * cot) for a random cotangent, so
// each op's scalar body and gradient is checked on its own.
struct OneOp {
  const char *name, *op;
  int arity;          // 1 or 2
  bool positive;      // the op needs a > 0: a = exp(x + p)
  const char *attrs;  // extra node attributes
};

model::Model oneOpModel(const OneOp &t) {
  std::string text = R"pb(
schema_version: 1
name: "one_op"
params { name: "p" dtype: F32 shape { dims: 5 dims: 7 } init { kind: NORMAL scale: 1 seed: 1 } }
params { name: "q" dtype: F32 shape { dims: 3 dims: 1 dims: 7 } init { kind: NORMAL scale: 1 seed: 2 } }
inputs { name: "x" dtype: F32 shape { dims: 3 dims: 5 dims: 7 } }
inputs { name: "cot" dtype: F32 shape { dims: 3 dims: 5 dims: 7 } }
nodes { name: "s" op: "add" inputs: "x" inputs: "p" outputs: "s" }
)pb";
  text += t.positive ? "nodes { name: \"a\" op: \"exp\" inputs: \"s\" outputs: \"a\" }\n"
                     : "nodes { name: \"a\" op: \"neg\" inputs: \"s\" outputs: \"a\" }\n";
  text += std::string("nodes { name: \"y\" op: \"") + t.op + "\" inputs: \"a\" " +
          (t.arity == 2 ? "inputs: \"q\" " : "") + "outputs: \"y\" " + t.attrs + " }\n";
  text += R"pb(
nodes { name: "yc" op: "mul" inputs: "y" inputs: "cot" outputs: "yc" }
nodes { name: "loss" op: "sum" inputs: "yc" outputs: "loss" }
outputs { name: "y" value: "y" }
training { loss: "loss" optimizer { sgd { learning_rate: 0.01 } } }
)pb";
  return parse(text.c_str(), t.name);
}

class ElementwiseOpTest : public ::testing::TestWithParam<OneOp> {};

TEST_P(ElementwiseOpTest, MatchesReference) {
  checkModel(oneOpModel(GetParam()), std::string("op_") + GetParam().name,
             {.steps = 1, .learningRate = 1e-2f});
}

INSTANTIATE_TEST_SUITE_P(
    CompiledStep, ElementwiseOpTest,
    ::testing::Values(
        OneOp{"neg", "neg", 1, false, ""}, OneOp{"exp", "exp", 1, false, ""},
        OneOp{"log", "log", 1, true, ""}, OneOp{"sqrt", "sqrt", 1, true, ""},
        OneOp{"rsqrt", "rsqrt", 1, true, ""}, OneOp{"tanh", "tanh", 1, false, ""},
        OneOp{"sigmoid", "sigmoid", 1, false, ""}, OneOp{"relu", "relu", 1, false, ""},
        OneOp{"silu", "silu", 1, false, ""}, OneOp{"gelu", "gelu", 1, false, ""},
        OneOp{"gelu_tanh", "gelu", 1, false,
              "attrs { key: \"approximate\" value { s: \"tanh\" } }"},
        OneOp{"sin", "sin", 1, false, ""}, OneOp{"cos", "cos", 1, false, ""},
        OneOp{"pow", "pow", 1, true, "attrs { key: \"exponent\" value { f: 1.7 } }"},
        OneOp{"add", "add", 2, false, ""}, OneOp{"sub", "sub", 2, false, ""},
        OneOp{"mul", "mul", 2, false, ""}, OneOp{"div", "div", 2, true, ""},
        OneOp{"max", "max", 2, false, ""}, OneOp{"min", "min", 2, false, ""}),
    [](const ::testing::TestParamInfo<OneOp> &info) { return std::string(info.param.name); });

// A step with enough elements for the OpenMP loops and vectorized exp/tanh.
constexpr const char *kWideElementwiseModel = R"pb(
schema_version: 1
name: "wide"
params { name: "p" dtype: F32 shape { dims: 129 dims: 517 } init { kind: NORMAL scale: 1 seed: 1 } }
params { name: "q" dtype: F32 shape { dims: 517 } init { kind: NORMAL scale: 1 seed: 2 } }
inputs { name: "x" dtype: F32 shape { dims: 3 dims: 129 dims: 517 } }
nodes { name: "a" op: "add" inputs: "x" inputs: "p" outputs: "a" }
nodes { name: "b" op: "mul" inputs: "a" inputs: "q" outputs: "b" }
nodes { name: "g" op: "gelu" inputs: "b" outputs: "g" attrs { key: "approximate" value { s: "tanh" } } }
nodes { name: "e" op: "tanh" inputs: "g" outputs: "e" }
nodes { name: "s" op: "softmax" inputs: "b" outputs: "s" attrs { key: "axis" value { i: 1 } } }
nodes { name: "t" op: "mul" inputs: "e" inputs: "s" outputs: "t" }
nodes { name: "ex" op: "exp" inputs: "t" outputs: "ex" }
nodes { name: "loss" op: "mean" inputs: "ex" outputs: "loss" }
outputs { name: "t" value: "t" }
training { loss: "loss" optimizer { sgd { learning_rate: 0.001 } } }
)pb";

TEST(CompiledStep, WideElementwiseUsesThreadsAndMatchesReference) {
  checkModel(parse(kWideElementwiseModel, "wide"), "wide", {.learningRate = 10.0f});
}

//===----------------------------------------------------------------------===//
// Structural primitives and the NN ops decomposed into them
//===----------------------------------------------------------------------===//

constexpr const char *kStructuralModel = R"pb(
schema_version: 1
name: "structural"
params { name: "emb" dtype: F32 shape { dims: 11 dims: 6 } init { kind: NORMAL scale: 1 seed: 1 } }
params { name: "wq" dtype: F32 shape { dims: 6 dims: 6 } init { kind: NORMAL scale: 0.5 seed: 2 } }
params { name: "wk" dtype: F32 shape { dims: 2 dims: 6 dims: 3 } init { kind: NORMAL scale: 0.5 seed: 3 } }
params { name: "g" dtype: F32 shape { dims: 6 } init { kind: ONES } }
params { name: "bb" dtype: F32 shape { dims: 6 } init { kind: ZEROS } }
params { name: "r" dtype: F32 shape { dims: 3 } init { kind: ONES } }
inputs { name: "ids" dtype: I32 shape { dims: 3 dims: 5 } }
inputs { name: "targets" dtype: I64 shape { dims: 3 dims: 5 } }
nodes { name: "x" op: "embedding" inputs: "emb" inputs: "ids" outputs: "x" }
nodes { name: "ln" op: "layer_norm" inputs: "x" inputs: "g" inputs: "bb" outputs: "ln" }
nodes { name: "q" op: "matmul" inputs: "ln" inputs: "wq" outputs: "q" }
nodes { name: "q4" op: "reshape" inputs: "q" outputs: "q4" attrs { key: "shape" value { ints { values: 3 values: 5 values: 2 values: 3 } } } }
nodes { name: "qt" op: "transpose" inputs: "q4" outputs: "qt" attrs { key: "perm" value { ints { values: 0 values: 2 values: 1 values: 3 } } } }
nodes { name: "lnt" op: "reshape" inputs: "ln" outputs: "lnt" attrs { key: "shape" value { ints { values: 3 values: 1 values: 5 values: 6 } } } }
nodes { name: "k" op: "matmul" inputs: "lnt" inputs: "wk" outputs: "k" }
nodes { name: "s" op: "matmul" inputs: "qt" inputs: "k" outputs: "s" attrs { key: "transpose_b" value { b: true } } }
nodes { name: "m" op: "causal_mask" inputs: "s" outputs: "m" }
nodes { name: "p" op: "softmax" inputs: "m" outputs: "p" }
nodes { name: "o" op: "matmul" inputs: "p" inputs: "k" outputs: "o" }
nodes { name: "rn" op: "rms_norm" inputs: "o" inputs: "r" outputs: "rn" }
nodes { name: "parts" op: "split" inputs: "rn" outputs: "h0" outputs: "h1"
        attrs { key: "axis" value { i: 1 } } attrs { key: "sizes" value { ints { values: 1 values: 1 } } } }
nodes { name: "cat" op: "concat" inputs: "h1" inputs: "h0" outputs: "cat" attrs { key: "axis" value { i: -1 } } }
nodes { name: "ct" op: "transpose" inputs: "cat" outputs: "ct" attrs { key: "perm" value { ints { values: 0 values: 2 values: 1 values: 3 } } } }
nodes { name: "c2" op: "reshape" inputs: "ct" outputs: "c2" attrs { key: "shape" value { ints { values: 3 values: 5 values: -1 } } } }
nodes { name: "sl" op: "slice" inputs: "c2" outputs: "sl"
        attrs { key: "starts" value { ints { values: 1 } } } attrs { key: "ends" value { ints { values: 6 } } }
        attrs { key: "axes" value { ints { values: -1 } } } }
nodes { name: "mx" op: "max" inputs: "sl" outputs: "mx" attrs { key: "axes" value { ints { values: 0 } } } attrs { key: "keep_dims" value { b: true } } }
nodes { name: "ls" op: "log_softmax" inputs: "sl" outputs: "ls" attrs { key: "axis" value { i: 1 } } }
nodes { name: "z" op: "add" inputs: "ls" inputs: "mx" outputs: "z" }
nodes { name: "bc" op: "broadcast_to" inputs: "r" outputs: "bc" attrs { key: "shape" value { ints { values: 5 values: 3 } } } }
nodes { name: "bs" op: "sum" inputs: "bc" outputs: "bs" attrs { key: "axes" value { ints { values: 1 } } } }
nodes { name: "bm" op: "mean" inputs: "bs" outputs: "bm" }
nodes { name: "zz" op: "mul" inputs: "z" inputs: "bm" outputs: "zz" }
nodes { name: "xe" op: "cross_entropy" inputs: "zz" inputs: "targets" outputs: "xe"
        attrs { key: "ignore_index" value { i: 4 } } }
outputs { name: "z" value: "zz" }
outputs { name: "attn" value: "p" }
training { loss: "xe" optimizer { sgd { learning_rate: 0.1 } } }
)pb";

TEST(CompiledStep, StructuralOpsMatchReference) {
  // Ids repeat (embedding gradients accumulate); targets 4 are ignored.
  checkModel(parse(kStructuralModel, "structural"), "structural",
             {.intRange = {{"ids", 11}, {"targets", 5}}});
}

// Non-splat constants (static arrays in the source), an i1 constant mask,
// an iota, and reduce max over a leading axis — written as tg IR.
constexpr const char *kConstantsIR = R"mlir(
module attributes {tg.model_name = "constants", tg.optimizer = {kind = "sgd", learning_rate = 1.0e-1 : f64}} {
  func.func @forward(%w: tensor<2x3xf32> {tg.param = {name = "w", init = "normal", scale = 1.0 : f64, seed = 1 : i64, trainable = true}},
                     %x: tensor<4x2x3xf32> {tg.input = "x"})
      -> (tensor<f32> {tg.loss = "loss"}, tensor<4x2x3xf32> {tg.output = "y"}) {
    %k = tg.constant dense<[[1.5, -2.0, 0.25], [3.0, 0.5, -1.0]]> : tensor<2x3xf32>
    %m = tg.constant dense<[true, false, true]> : tensor<3xi1>
    %i = tg.iota {axis = 0 : i64} : tensor<4x2x3xf32>
    %0 = tg.mul %x, %k : (tensor<4x2x3xf32>, tensor<2x3xf32>) -> tensor<4x2x3xf32>
    %1 = tg.add %0, %w : (tensor<4x2x3xf32>, tensor<2x3xf32>) -> tensor<4x2x3xf32>
    %2 = tg.select %m, %1, %i : (tensor<3xi1>, tensor<4x2x3xf32>, tensor<4x2x3xf32>) -> tensor<4x2x3xf32>
    %3 = tg.reduce_max %2 {axes = array<i64: 0>} : (tensor<4x2x3xf32>) -> tensor<2x3xf32>
    %4 = tg.mul %3, %3 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    %5 = tg.reduce_sum %4 {axes = array<i64: 0, 1>} : (tensor<2x3xf32>) -> tensor<f32>
    return %5, %2 : tensor<f32>, tensor<4x2x3xf32>
  }
}
)mlir";

// Dropout masks are a function of (rng_seed, step, op_id, position) the
// compiled code and the interpreter must compute bit for bit; op ids of any
// sign (micro-batch copies mix theirs), a rate that is no power of two.
constexpr const char *kDropoutIR = R"mlir(
module attributes {tg.model_name = "dropout", tg.optimizer = {kind = "sgd", learning_rate = 1.0e-1 : f64}} {
  func.func @forward(%w: tensor<5x33xf32> {tg.param = {name = "w", init = "normal", scale = 1.0 : f64, seed = 1 : i64, trainable = true}},
                     %x: tensor<3x5x33xf32> {tg.input = "x"},
                     %seed: tensor<i64> {tg.hyper = "rng_seed"}, %step: tensor<i64> {tg.hyper = "step"})
      -> (tensor<f32> {tg.loss = "loss"}) {
    %0 = tg.mul %x, %w : (tensor<3x5x33xf32>, tensor<5x33xf32>) -> tensor<3x5x33xf32>
    %1 = tg.dropout %0, %seed, %step {rate = 0.3 : f64, op_id = -8070450532247928832 : i64} : tensor<3x5x33xf32>
    %2 = tg.dropout %1, %seed, %step {rate = 0.55 : f64, op_id = 1234567 : i64} : tensor<3x5x33xf32>
    %3 = tg.mul %2, %2 : (tensor<3x5x33xf32>, tensor<3x5x33xf32>) -> tensor<3x5x33xf32>
    %4 = tg.reduce_sum %3 {axes = array<i64: 0, 1, 2>} : (tensor<3x5x33xf32>) -> tensor<f32>
    return %4 : tensor<f32>
  }
}
)mlir";

TEST(CompiledStep, DropoutMatchesReference) {
  auto s = compileIR(kDropoutIR, "dropout");
  checkStep(*s, "dropout", {});
}

TEST(CompiledStep, DenseConstantsFromIRMatchReference) {
  auto s = compileIR(kConstantsIR, "constants");
  checkStep(*s, "constants", {});
}

//===----------------------------------------------------------------------===//
// Optimizers, clipping, dropout: the ABI v2 roles
//===----------------------------------------------------------------------===//

models::GptOptions tinyGpt() {
  models::GptOptions g;
  g.vocab = 13;
  g.context = 7;
  g.layers = 2;
  g.width = 12;
  g.heads = 3;
  g.batch = 3;
  g.gradClip = 0.5; // small: clipping is active
  g.weightDecay = 0.1;
  return g;
}

TEST(CompiledStep, TinyGptWithAdamWAndClippingMatchesReference) {
  models::GptOptions g = tinyGpt();
  checkModel(models::buildGpt(g), "gpt_tiny", {.intRange = {{"tokens", 13}, {"targets", 13}}});
}

TEST(CompiledStep, TinyGptVariantsMatchReference) {
  // rms_norm, SwiGLU, rotary positions, untied head, no biases, dropout
  // (rng_seed and step arguments), two micro-batches.
  models::GptOptions g = tinyGpt();
  g.norm = models::GptOptions::Norm::Rms;
  g.mlp = models::GptOptions::Mlp::SwiGlu;
  g.positions = models::GptOptions::Positions::Rope;
  g.context = 8;
  g.tiedEmbeddings = false;
  g.bias = false;
  g.dropout = 0.25;
  g.microBatches = 2;
  g.gradClip = 0;
  checkModel(models::buildGpt(g), "gpt_variants",
             {.intRange = {{"tokens", 13}, {"targets", 13}}, .roundingProbes = 4,
              .probeF32 = true});
}

constexpr const char *kMomentumModel = R"pb(
schema_version: 1
name: "momentum"
params { name: "w" dtype: F32 shape { dims: 9 dims: 4 } init { kind: NORMAL scale: 0.5 seed: 1 } }
params { name: "b" dtype: F32 shape { dims: 4 } init { kind: ZEROS } }
params { name: "frozen" dtype: F32 shape { dims: 4 } init { kind: ONES } frozen: true }
inputs { name: "x" dtype: F32 shape { dims: 6 dims: 9 } }
inputs { name: "y" dtype: I32 shape { dims: 6 } }
nodes { name: "h" op: "matmul" inputs: "x" inputs: "w" outputs: "h" }
nodes { name: "hb" op: "add" inputs: "h" inputs: "b" outputs: "hb" }
nodes { name: "hf" op: "mul" inputs: "hb" inputs: "frozen" outputs: "hf" }
nodes { name: "loss" op: "cross_entropy" inputs: "hf" inputs: "y" outputs: "loss" }
outputs { name: "logits" value: "hf" }
training { loss: "loss" optimizer { sgd { learning_rate: 0.1 momentum: 0.9 weight_decay: 0.01 } }
           grad_clip: 0.3 }
)pb";

TEST(CompiledStep, MomentumSgdWithClippingMatchesReference) {
  checkModel(parse(kMomentumModel, "momentum"), "momentum", {.defaultIntRange = 4});
}

TEST(CompiledStep, DescriptorListsOptimizerStateScheduleAndTrainOutputs) {
  models::GptOptions g = tinyGpt();
  g.warmupSteps = 3;
  g.decaySteps = 20;
  g.minLearningRate = 1e-4;
  g.microBatches = 2;
  auto lib = trun::StepLibrary::Open(compileWithTcc(models::buildGpt(g), "gpt_descriptor"));
  ASSERT_TRUE(lib.ok()) << lib.status();
  const tcc_step_descriptor &d = (*lib)->descriptor();
  EXPECT_STREQ(d.optimizer, "adamw");
  EXPECT_EQ(d.lr_schedule.kind, TCC_LR_WARMUP_COSINE);
  EXPECT_EQ(d.lr_schedule.warmup_steps, 3);
  EXPECT_EQ(d.lr_schedule.decay_steps, 20);
  EXPECT_DOUBLE_EQ(d.lr_schedule.min_lr, 1e-4);
  EXPECT_DOUBLE_EQ(d.lr_schedule.base_lr, g.learningRate);
  EXPECT_EQ(d.micro_batches, 2);
  // Two moments per trainable parameter, named after it, zeros, same shape.
  ASSERT_EQ(d.num_optimizer_state, 2 * d.num_params);
  for (int i = 0; i < d.num_params; ++i) {
    const tcc_tensor_desc &m = d.optimizer_state[2 * i];
    EXPECT_EQ(std::string(m.name), std::string(d.params[i].name) + ".adam_m");
    EXPECT_EQ(std::string(d.optimizer_state[2 * i + 1].name),
              std::string(d.params[i].name) + ".adam_v");
    EXPECT_EQ(m.init_kind, TCC_INIT_ZEROS);
    EXPECT_EQ(m.num_elements, d.params[i].num_elements);
    EXPECT_EQ(m.dtype, d.params[i].dtype);
  }
  ASSERT_EQ(d.num_train_outputs, 1);
  EXPECT_STREQ(d.train_outputs[0].name, "grad_norm");
  EXPECT_EQ(d.train_outputs[0].rank, 0);
}

TEST(CompiledStep, TrainOutputsMayBeNull) {
  // The caller does not want grad_norm: the step must still run (scratch).
  auto lib = trun::StepLibrary::Open(compileWithTcc(models::buildGpt(tinyGpt()), "gpt_tiny"));
  ASSERT_TRUE(lib.ok()) << lib.status();
  const tcc_step_descriptor &d = (*lib)->descriptor();
  ZeroedStepArgs step(d, 1e-3f);
  EXPECT_EQ(d.train(&step.args), TCC_STATUS_OK);
  EXPECT_TRUE(std::isfinite(step.loss));
}

//===----------------------------------------------------------------------===//
// Bad batches
//===----------------------------------------------------------------------===//

TEST(CompiledStep, LabelOutOfRangeFailsTheStep) {
  models::MlpOptions o;
  o.batch = 2;
  o.inputs = 3;
  o.hidden = {};
  o.classes = 2;
  auto lib = trun::StepLibrary::Open(compileWithTcc(models::buildMlp(o), "badlabel"));
  ASSERT_TRUE(lib.ok()) << lib.status();
  const tcc_step_descriptor &d = (*lib)->descriptor();
  ZeroedStepArgs step(d, 0.1f);
  step.inputs[1].as<int32_t>()[1] = 2; // classes are 0 and 1
  EXPECT_EQ(d.train(&step.args), TCC_STATUS_BAD_ARGS);
  EXPECT_EQ(d.eval(&step.args), TCC_STATUS_BAD_ARGS);
}

TEST(CompiledStep, TokenIdOutOfRangeFailsTheStep) {
  // The embedding lookup (forward) and its scatter_add (backward) check
  // every id before touching memory.
  auto lib = trun::StepLibrary::Open(compileWithTcc(models::buildGpt(tinyGpt()), "gpt_tiny"));
  ASSERT_TRUE(lib.ok()) << lib.status();
  const tcc_step_descriptor &d = (*lib)->descriptor();
  ZeroedStepArgs step(d, 1e-3f);
  for (int32_t bad : {13, -1}) {
    step.inputs[0].as<int32_t>()[4] = bad; // vocab is 13
    EXPECT_EQ(d.eval(&step.args), TCC_STATUS_BAD_ARGS) << bad;
    EXPECT_EQ(d.train(&step.args), TCC_STATUS_BAD_ARGS) << bad;
  }
}

} // namespace
} // namespace tcc
