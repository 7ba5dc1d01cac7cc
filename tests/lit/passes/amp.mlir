// RUN: tcc-opt %s -split-input-file -tg-amp=precision=bf16 | FileCheck %s
// RUN: tcc-opt %s -split-input-file -tg-amp=precision=fp16 | FileCheck %s --check-prefix=F16
// RUN: tcc-opt %s -split-input-file -tg-amp=precision=fp32 | FileCheck %s --check-prefix=F32
// RUN: tcc-opt %s -split-input-file -tg-amp="precision=bf16 target=cpu" | FileCheck %s --check-prefix=CPU
// tg-amp: matmuls in the low type, losses/reductions/norms in f32, other ops
// follow their operands; weights cast once; results keep declared types.

module {
  func.func @forward(%w: tensor<3x2xf32> {tg.param = {name = "w", init = "normal", scale = 1.0 : f64, seed = 1 : i64, trainable = true}},
                     %b: tensor<2xf32> {tg.param = {name = "b", init = "zeros", scale = 0.0 : f64, seed = 2 : i64, trainable = true}},
                     %x: tensor<4x3xf32> {tg.input = "x"}, %y: tensor<4xi32> {tg.input = "y"})
      -> (tensor<f32> {tg.loss = "loss"}, tensor<4x2xf32> {tg.output = "logits"}) {
    %0 = tg.matmul %x, %w : (tensor<4x3xf32>, tensor<3x2xf32>) -> tensor<4x2xf32>
    %1 = tg.matmul %x, %w : (tensor<4x3xf32>, tensor<3x2xf32>) -> tensor<4x2xf32>
    %2 = tg.add %0, %b : (tensor<4x2xf32>, tensor<2xf32>) -> tensor<4x2xf32>
    %3 = tg.add %2, %1 : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
    %4 = tg.softmax_cross_entropy %3, %y : (tensor<4x2xf32>, tensor<4xi32>) -> tensor<4xf32>
    %5 = tg.reduce_mean %4 {axes = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>
    return %5, %3 : tensor<f32>, tensor<4x2xf32>
  }
}

// CHECK: module attributes {tg.precision = "bf16"}
// The weight and the input are cast once, right at the start / after their
// definition, however many matmuls read them.
// CHECK-DAG: %[[B16:.*]] = tg.cast %arg1 {tg.amp = "cast to bf16: operand of tg.add (a weight: cast once per step)"} : tensor<2xf32> to tensor<2xbf16>
// CHECK-DAG: %[[W16:.*]] = tg.cast %arg0 {tg.amp = "cast to bf16: operand of tg.matmul (a weight: cast once per step)"} : tensor<3x2xf32> to tensor<3x2xbf16>
// CHECK-DAG: %[[X16:.*]] = tg.cast %arg2 {tg.amp = "cast to bf16: operand of tg.matmul"} : tensor<4x3xf32> to tensor<4x3xbf16>
// CHECK: %[[M0:.*]] = tg.matmul %[[X16]], %[[W16]] {tg.amp = "bf16: matmul (f32 accumulation)"} : (tensor<4x3xbf16>, tensor<3x2xbf16>) -> tensor<4x2xbf16>
// CHECK: %[[M1:.*]] = tg.matmul %[[X16]], %[[W16]]
// The bias meets a bf16 activation: cast down, the add stays bf16.
// CHECK: %[[A:.*]] = tg.add %[[M0]], %[[B16]] {tg.amp = "bf16: follows its bf16 operands (weights and constants cast to bf16)"} : (tensor<4x2xbf16>, tensor<2xbf16>) -> tensor<4x2xbf16>
// CHECK: %[[S:.*]] = tg.add %[[A]], %[[M1]] {tg.amp = "bf16: follows its bf16 operands"}
// The loss in f32, read straight from the bf16 logits.
// CHECK: tg.softmax_cross_entropy %[[S]], %arg3 {tg.amp = "fp32: loss (fp32 math and result; logits read as they are)"} : (tensor<4x2xbf16>, tensor<4xi32>) -> tensor<4xf32>
// CHECK: tg.reduce_mean {{.*}}tg.amp = "fp32: reduction"
// The eval output keeps its declared f32 type.
// CHECK: %[[OUT:.*]] = tg.cast %[[S]] {tg.amp = "cast to fp32: the function's declared result type"}
// CHECK: return %{{.*}}, %[[OUT]] : tensor<f32>, tensor<4x2xf32>

// F16: module attributes {tg.precision = "fp16"}
// F16: tg.matmul {{.*}} -> tensor<4x2xf16>

// fp32 changes no op.
// F32: module attributes {tg.precision = "fp32"}
// F32-NOT: tg.cast
// F32-NOT: tg.amp

// -----

// An f32 activation meeting a bf16 one (the residual stream) keeps the op f32;
// softmax follows its bf16 input; norms and reductions compute in f32; a
// splat constant is re-made in the low type.
module {
  func.func @forward(%w: tensor<4x4xf32> {tg.param = {name = "w", init = "normal", scale = 1.0 : f64, seed = 1 : i64, trainable = true}},
                     %x: tensor<2x4xf32> {tg.input = "x"}) -> (tensor<f32> {tg.loss = "loss"}) {
    %h = tg.layer_norm %x {eps = 1.0e-5 : f64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %m = tg.matmul %h, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %c = tg.constant dense<0.5> : tensor<f32>
    %s = tg.mul %m, %c : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
    %p = tg.softmax %s {axis = 1 : i64} : tensor<2x4xf32>
    %r = tg.add %x, %p : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %l = tg.reduce_sum %p {axes = array<i64: 0, 1>} : (tensor<2x4xf32>) -> tensor<f32>
    %l2 = tg.reduce_sum %r {axes = array<i64: 0, 1>} : (tensor<2x4xf32>) -> tensor<f32>
    %t = tg.add %l, %l2 : (tensor<f32>, tensor<f32>) -> tensor<f32>
    return %t : tensor<f32>
  }
}

// CHECK: module attributes {tg.precision = "bf16"}
// CHECK: tg.layer_norm %arg1 {tg.amp = "fp32: norm statistics"} : (tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK: %[[C:.*]] = tg.constant {tg.amp = "bf16: constant re-made for tg.mul"} dense<5.000000e-01> : tensor<bf16>
// CHECK: %[[S:.*]] = tg.mul %{{.*}}, %[[C]] {{.*}}-> tensor<2x4xbf16>
// CHECK: %[[P:.*]] = tg.softmax %[[S]] {axis = 1 : i64, tg.amp = "bf16: follows its bf16 operands; its max and sum in fp32"} : tensor<2x4xbf16>
// CHECK: %[[P32:.*]] = tg.cast %[[P]] {{.*}} to tensor<2x4xf32>
// CHECK: tg.add %arg1, %[[P32]] {tg.amp = "fp32: an fp32 activation meets a bf16 one (kept fp32, as the residual stream)"}
// CHECK: tg.reduce_sum %[[P32]] {{.*}}"fp32: reduction"

// -----

// A convolution is a product: input and weight cast to bf16 (the weight once
// per step), the result bf16, as autocast runs conv2d; the mean after it (a
// reduction) goes back to f32.
module {
  func.func @forward(%w: tensor<8x3x3x3xf32> {tg.param = {name = "w", init = "normal", scale = 1.0 : f64, seed = 1 : i64, trainable = true}},
                     %x: tensor<2x3x6x6xf32> {tg.input = "x"}) -> (tensor<f32> {tg.loss = "loss"}) {
    %y = tg.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : (tensor<2x3x6x6xf32>, tensor<8x3x3x3xf32>) -> tensor<2x8x6x6xf32>
    %l = tg.reduce_mean %y {axes = array<i64: 0, 1, 2, 3>} : (tensor<2x8x6x6xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// CHECK: module attributes {tg.precision = "bf16"}
// CHECK-DAG: %[[W16:.*]] = tg.cast %arg0 {tg.amp = "cast to bf16: operand of tg.conv2d (a weight: cast once per step)"} : tensor<8x3x3x3xf32> to tensor<8x3x3x3xbf16>
// CHECK-DAG: %[[X16:.*]] = tg.cast %arg1 {tg.amp = "cast to bf16: operand of tg.conv2d"} : tensor<2x3x6x6xf32> to tensor<2x3x6x6xbf16>
// CHECK: %[[Y:.*]] = tg.conv2d %[[X16]], %[[W16]] {{.*}}tg.amp = "bf16: convolution (f32 accumulation)"{{.*}} -> tensor<2x8x6x6xbf16>
// CHECK: %[[Y32:.*]] = tg.cast %[[Y]] {{.*}} to tensor<2x8x6x6xf32>
// CHECK: tg.reduce_mean %[[Y32]] {{.*}}"fp32: reduction"
// F16: tg.conv2d {{.*}}-> tensor<2x8x6x6xf16>
// On the cpu target convolutions stay f32 (its 16-bit kernels are direct
// loops, its f32 ones im2col + BLAS).
// CPU: tg.conv2d %arg1, %arg0 {{.*}}tg.amp = "fp32: convolution on the cpu target{{.*}} -> tensor<2x8x6x6xf32>
// F32: tg.conv2d {{.*}}-> tensor<2x8x6x6xf32>

// -----

// Batch norm written out after a bf16 convolution: the statistics are f32
// reductions, and the full-size ops that read them (x - mean, * 1/std) stay
// bf16 with the per-channel f32 operands cast down (they broadcast), as
// autocast's batch norm keeps its input's type; a full-size f32 activation
// would keep the op f32 (the residual-stream test above).
module {
  func.func @forward(%w: tensor<4x2x1x1xf32> {tg.param = {name = "w", init = "normal", scale = 1.0 : f64, seed = 1 : i64, trainable = true}},
                     %x: tensor<2x2x3x3xf32> {tg.input = "x"}) -> (tensor<f32> {tg.loss = "loss"}) {
    %y = tg.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>} : (tensor<2x2x3x3xf32>, tensor<4x2x1x1xf32>) -> tensor<2x4x3x3xf32>
    %m = tg.reduce_mean %y {axes = array<i64: 0, 2, 3>, keep_dims = true} : (tensor<2x4x3x3xf32>) -> tensor<1x4x1x1xf32>
    %c = tg.sub %y, %m : (tensor<2x4x3x3xf32>, tensor<1x4x1x1xf32>) -> tensor<2x4x3x3xf32>
    %l = tg.reduce_mean %c {axes = array<i64: 0, 1, 2, 3>} : (tensor<2x4x3x3xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// CHECK: module attributes {tg.precision = "bf16"}
// CHECK: %[[Y:.*]] = tg.conv2d {{.*}}-> tensor<2x4x3x3xbf16>
// CHECK: %[[M:.*]] = tg.reduce_mean {{.*}}"fp32: reduction"{{.*}} -> tensor<1x4x1x1xf32>
// CHECK: %[[M16:.*]] = tg.cast %[[M]] {tg.amp = "cast to bf16: operand of tg.sub"} : tensor<1x4x1x1xf32> to tensor<1x4x1x1xbf16>
// CHECK: tg.sub %[[Y]], %[[M16]] {tg.amp = "bf16: follows its bf16 operands (broadcast fp32 statistics, weights and constants cast to bf16)"} : (tensor<2x4x3x3xbf16>, tensor<1x4x1x1xbf16>) -> tensor<2x4x3x3xbf16>
