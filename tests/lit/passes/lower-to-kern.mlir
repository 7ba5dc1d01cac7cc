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

// Eval: outputs are trailing buffer arguments.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %arg4: memref<f32> {tg.loss = "loss"}, %arg5: memref<4x2xf32> {tg.output = "logits"})
// CHECK: %[[MM:.*]] = kern.alloc : memref<4x2xf32>
// CHECK: kern.gemm %arg2, %arg0, %[[MM]] {alpha = 1.000000e+00 : f64, beta = 0.000000e+00 : f64, transpose_a = false, transpose_b = false}
// CHECK: %[[LOGITS:.*]] = kern.alloc : memref<4x2xf32>
// CHECK: kern.elementwise add(%[[MM]], %arg1) into %[[LOGITS]]
// CHECK: kern.elementwise relu
// CHECK: kern.softmax_cross_entropy
// CHECK: kern.reduce {{.*}} {axes = array<i64: 0>, mean = true}
// CHECK: kern.elementwise copy({{.*}}) into %arg4
// CHECK: kern.elementwise copy(%[[LOGITS]]) into %arg5
// CHECK-NEXT: return

// Train: no buffers for updated parameters; updates are in place, last.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %arg4: memref<f32> {tg.hyper = "learning_rate"}, %arg5: memref<f32> {tg.loss = "loss"})
// CHECK: kern.softmax_cross_entropy_grad
// CHECK: kern.elementwise relu_grad
// CHECK: kern.reshape %{{.*}} : memref<1x2xf32> to memref<2xf32>
// CHECK: kern.sgd_update %arg0, %{{.*}}, %arg4
// CHECK: kern.sgd_update %arg1, %{{.*}}, %arg4
// CHECK: kern.elementwise copy({{.*}}) into %arg5
// CHECK-NEXT: return
