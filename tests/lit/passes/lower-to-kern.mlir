// RUN: tcc-opt %s -tg-autodiff -tg-sgd-update -tg-lower-to-kern | FileCheck %s
// tg-lower-to-kern: tensors become buffers, results become output buffers
// (loss, eval outputs) or in-place parameter updates.

module attributes {tg.optimizer = {kind = "sgd", learning_rate = 0.5 : f64}} {
  func.func @forward(%w: tensor<3x2xf32> {tg.param = {name = "w", init = "normal", scale = 1.0 : f64, seed = 1 : i64, trainable = true}},
                     %b: tensor<2xf32> {tg.param = {name = "b", init = "zeros", scale = 0.0 : f64, seed = 2 : i64, trainable = true}},
                     %x: tensor<4x3xf32> {tg.input = "x"}, %y: tensor<4xi32> {tg.input = "y"})
      -> (tensor<f32> {tg.loss = "loss"}, tensor<4x2xf32> {tg.output = "logits"}) {
    %0 = tg.matmul %x, %w : (tensor<4x3xf32>, tensor<3x2xf32>) -> tensor<4x2xf32>
    %1 = tg.add %0, %b : (tensor<4x2xf32>, tensor<2xf32>) -> tensor<4x2xf32>
    %2 = tg.relu %1 : tensor<4x2xf32>
    %3 = tg.softmax_cross_entropy %2, %y : (tensor<4x2xf32>, tensor<4xi32>) -> tensor<4xf32>
    %4 = tg.reduce_mean %3 {axes = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>
    return %4, %1 : tensor<f32>, tensor<4x2xf32>
  }
}

// Eval: outputs are trailing buffer arguments, written directly by the
// kernel computing them (the logits by the bias add, the loss by the mean).
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %arg4: memref<f32> {tg.loss = "loss"}, %arg5: memref<4x2xf32> {tg.output = "logits"})
// CHECK: %[[MM:.*]] = kern.alloc : memref<4x2xf32>
// CHECK: kern.gemm %arg2, %arg0, %[[MM]] {alpha = 1.000000e+00 : f64, beta = 0.000000e+00 : f64, transpose_a = false, transpose_b = false}
// Elementwise ops become kern.elementwise with their scalar body.
// CHECK: kern.elementwise ins(%[[MM]], %arg1 : memref<4x2xf32>, memref<2xf32>) outs(%arg5 : memref<4x2xf32>) {
// CHECK-NEXT: ^bb0(%[[X:.*]]: f32, %[[B:.*]]: f32, %{{.*}}: i64):
// CHECK-NEXT: %[[S:.*]] = arith.addf %[[X]], %[[B]] : f32
// CHECK-NEXT: kern.yield %[[S]] : f32
// CHECK: %[[R:.*]] = kern.alloc : memref<4x2xf32>
// CHECK: kern.elementwise ins(%arg5 : memref<4x2xf32>) outs(%[[R]] : memref<4x2xf32>)
// CHECK: arith.cmpf ogt
// CHECK: arith.select
// CHECK: kern.softmax_cross_entropy %[[R]], %arg3
// CHECK: kern.reduce mean %{{.*}}, %arg4 {axes = array<i64: 0>}
// CHECK-NEXT: return

// Train: no buffers for updated parameters; each update is one elementwise
// kernel writing the parameter in place (nothing reads it afterwards).
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %arg4: memref<f32> {tg.hyper = "learning_rate"}, %arg5: memref<f32> {tg.loss = "loss"})
// CHECK: kern.reduce mean %{{.*}}, %arg5
// The 1/N of the mean's gradient is a splat folded into the body.
// CHECK: arith.constant 2.500000e-01 : f32
// CHECK: kern.softmax_cross_entropy_grad
// CHECK: kern.reshape %{{.*}} : memref<1x2xf32> to memref<2xf32>
// CHECK: kern.elementwise ins(%arg0, %{{.*}}, %arg4 : memref<3x2xf32>, memref<3x2xf32>, memref<f32>) outs(%arg0 : memref<3x2xf32>)
// CHECK: arith.mulf
// CHECK-NEXT: arith.subf
// CHECK: kern.elementwise ins(%arg1, %{{.*}}, %arg4 : memref<2xf32>, memref<2xf32>, memref<f32>) outs(%arg1 : memref<2xf32>)
// CHECK-NOT: kern.elementwise
// CHECK: return
