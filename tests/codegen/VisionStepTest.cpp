// conv2d / max_pool2d / avg_pool2d (kern.conv2d, kern.pool2d and the CPU
// kernels of compiler/codegen/cpu/cpu_conv.h) through the whole pipeline:
// small CNNs compiled by the real `tcc` for the CPU, run on fresh random
// parameters and inputs, their loss, outputs, gradients and updated
// parameters compared with the float64 reference interpreter (StepCheck.h).
// Sizes divide no vector width; every window attribute is exercised.
#include "tests/codegen/StepCheck.h"

namespace tcc {
namespace {

// conv (stride 2, padding 1) -> relu -> max pool (3, stride 2, padding 1)
// -> grouped dilated conv (groups 2, dilation 2, padding 2) + bias -> avg
// pool (2, padding 1, padding counted) -> flatten -> linear -> cross-entropy.
constexpr const char *kCnnModel = R"pb(
schema_version: 1
name: "cnn"
params { name: "c1" dtype: F32 shape { dims: 4 dims: 3 dims: 3 dims: 3 } init { kind: NORMAL scale: 0.3 seed: 1 } }
params { name: "c2" dtype: F32 shape { dims: 6 dims: 2 dims: 3 dims: 3 } init { kind: NORMAL scale: 0.3 seed: 2 } }
params { name: "b2" dtype: F32 shape { dims: 6 dims: 1 dims: 1 } init { kind: NORMAL scale: 0.3 seed: 3 } }
params { name: "w" dtype: F32 shape { dims: 48 dims: 5 } init { kind: NORMAL scale: 0.3 seed: 4 } }
inputs { name: "x" dtype: F32 shape { dims: 3 dims: 3 dims: 11 dims: 9 } }
inputs { name: "y" dtype: I32 shape { dims: 3 } }
nodes { name: "h1" op: "conv2d" inputs: "x" inputs: "c1" outputs: "h1"
        attrs { key: "stride" value { ints { values: 2 } } }
        attrs { key: "padding" value { ints { values: 1 values: 1 } } } }
nodes { name: "r1" op: "relu" inputs: "h1" outputs: "r1" }
nodes { name: "p1" op: "max_pool2d" inputs: "r1" outputs: "p1"
        attrs { key: "kernel" value { ints { values: 3 } } }
        attrs { key: "stride" value { ints { values: 2 } } }
        attrs { key: "padding" value { ints { values: 1 } } } }
nodes { name: "h2" op: "conv2d" inputs: "p1" inputs: "c2" outputs: "h2"
        attrs { key: "groups" value { i: 2 } }
        attrs { key: "dilation" value { ints { values: 2 values: 2 } } }
        attrs { key: "padding" value { ints { values: 2 values: 2 } } } }
nodes { name: "hb" op: "add" inputs: "h2" inputs: "b2" outputs: "hb" }
nodes { name: "p2" op: "avg_pool2d" inputs: "hb" outputs: "p2"
        attrs { key: "kernel" value { ints { values: 2 } } }
        attrs { key: "stride" value { ints { values: 1 values: 2 } } }
        attrs { key: "padding" value { ints { values: 1 values: 1 } } } }
nodes { name: "flat" op: "reshape" inputs: "p2" outputs: "flat"
        attrs { key: "shape" value { ints { values: 3 values: 48 } } } }
nodes { name: "logits" op: "matmul" inputs: "flat" inputs: "w" outputs: "logits" }
nodes { name: "xent" op: "softmax_cross_entropy" inputs: "logits" inputs: "y" outputs: "xent" }
nodes { name: "loss" op: "mean" inputs: "xent" outputs: "loss" }
outputs { name: "logits" value: "logits" }
training { loss: "loss" optimizer { sgd { learning_rate: 0.25 } } }
)pb";

TEST(VisionStep, CnnMatchesReference) {
  checkModel(parse(kCnnModel, "cnn"), "cnn", {.defaultIntRange = 5});
}

// A depthwise conv (groups = channels, asymmetric stride and kernel) and a
// non-overlapping max pool, large enough for the kernels' OpenMP loops.
constexpr const char *kDepthwiseModel = R"pb(
schema_version: 1
name: "depthwise"
params { name: "dw" dtype: F32 shape { dims: 8 dims: 1 dims: 3 dims: 2 } init { kind: NORMAL scale: 0.5 seed: 1 } }
params { name: "pw" dtype: F32 shape { dims: 16 dims: 8 dims: 1 dims: 1 } init { kind: NORMAL scale: 0.3 seed: 2 } }
params { name: "w" dtype: F32 shape { dims: 16 dims: 4 } init { kind: NORMAL scale: 0.3 seed: 3 } }
inputs { name: "x" dtype: F32 shape { dims: 5 dims: 8 dims: 37 dims: 29 } }
inputs { name: "y" dtype: I32 shape { dims: 5 } }
nodes { name: "d" op: "conv2d" inputs: "x" inputs: "dw" outputs: "d"
        attrs { key: "groups" value { i: 8 } }
        attrs { key: "stride" value { ints { values: 1 values: 2 } } }
        attrs { key: "padding" value { ints { values: 1 values: 0 } } } }
nodes { name: "p" op: "conv2d" inputs: "d" inputs: "pw" outputs: "p" }
nodes { name: "t" op: "tanh" inputs: "p" outputs: "t" }
nodes { name: "m" op: "max_pool2d" inputs: "t" outputs: "m"
        attrs { key: "kernel" value { ints { values: 4 values: 2 } } } }
nodes { name: "g" op: "mean" inputs: "m" outputs: "g"
        attrs { key: "axes" value { ints { values: 2 values: 3 } } } }
nodes { name: "logits" op: "matmul" inputs: "g" inputs: "w" outputs: "logits" }
nodes { name: "xent" op: "softmax_cross_entropy" inputs: "logits" inputs: "y" outputs: "xent" }
nodes { name: "loss" op: "mean" inputs: "xent" outputs: "loss" }
training { loss: "loss" optimizer { sgd { learning_rate: 0.25 } } }
)pb";

TEST(VisionStep, DepthwiseMatchesReference) {
  checkModel(parse(kDepthwiseModel, "depthwise"), "depthwise", {.defaultIntRange = 4});
}

} // namespace
} // namespace tcc
