// RUN: tcc-opt %s -split-input-file -tg-autodiff -tg-accumulate-micro-batches -verify-diagnostics | FileCheck %s
// tg-accumulate-micro-batches: inputs become K times larger along dimension
// 0; the body runs once per micro-batch on a slice; the loss and the
// gradients are the means over micro-batches, eval outputs are concatenated.

module attributes {tg.optimizer = {kind = "sgd", learning_rate = 0.5 : f64}, tg.micro_batches = 3 : i64} {
  func.func @forward(%w: tensor<3x2xf32> {tg.param = {name = "w", init = "ones", scale = 0.0 : f64, seed = 1 : i64, trainable = true}},
                     %x: tensor<4x3xf32> {tg.input = "x"}, %y: tensor<4xi32> {tg.input = "y"})
      -> (tensor<f32> {tg.loss = "loss"}, tensor<4x2xf32> {tg.output = "logits"}) {
    %0 = tg.matmul %x, %w : (tensor<4x3xf32>, tensor<3x2xf32>) -> tensor<4x2xf32>
    %1 = tg.softmax_cross_entropy %0, %y : (tensor<4x2xf32>, tensor<4xi32>) -> tensor<4xf32>
    %2 = tg.reduce_mean %1 {axes = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>
    return %2, %0 : tensor<f32>, tensor<4x2xf32>
  }
}

// @forward: three slices, one loss and one logits block each; the loss is
// their mean, the logits are concatenated.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %arg1: tensor<12x3xf32> {tg.input = "x"}, %arg2: tensor<12xi32> {tg.input = "y"}
// CHECK-SAME: -> (tensor<f32> {tg.loss = "loss"}, tensor<12x2xf32> {tg.output = "logits"})
// CHECK: tg.slice %arg1 {ends = array<i64: 4, 3>, starts = array<i64: 0, 0>} : (tensor<12x3xf32>) -> tensor<4x3xf32>
// CHECK: tg.slice %arg2 {ends = array<i64: 4>, starts = array<i64: 0>} : (tensor<12xi32>) -> tensor<4xi32>
// CHECK: %[[L0:[0-9]+]] = tg.matmul
// CHECK: %[[E0:[0-9]+]] = tg.reduce_mean
// CHECK: tg.slice %arg1 {ends = array<i64: 8, 3>, starts = array<i64: 4, 0>}
// CHECK: %[[L1:[0-9]+]] = tg.matmul
// CHECK: %[[E1:[0-9]+]] = tg.reduce_mean
// CHECK: %[[S1:[0-9]+]] = tg.add %[[E0]], %[[E1]]
// CHECK: tg.slice %arg1 {ends = array<i64: 12, 3>, starts = array<i64: 8, 0>}
// CHECK: %[[L2:[0-9]+]] = tg.matmul
// CHECK: %[[E2:[0-9]+]] = tg.reduce_mean
// CHECK: %[[S2:[0-9]+]] = tg.add %[[S1]], %[[E2]]
// CHECK: %[[THIRD:[0-9]+]] = tg.constant dense<0.333333343> : tensor<f32>
// CHECK: %[[LOSS:[0-9]+]] = tg.mul %[[S2]], %[[THIRD]]
// CHECK: %[[LOGITS:[0-9]+]] = tg.concat %[[L0]], %[[L1]], %[[L2]] {axis = 0 : i64} : (tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<12x2xf32>
// CHECK: return %[[LOSS]], %[[LOGITS]]

// @train_step: the gradient of each micro-batch is added to the running sum
// right after that micro-batch.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %arg1: tensor<12x3xf32> {tg.input = "x"}, %arg2: tensor<12xi32> {tg.input = "y"}
// CHECK-SAME: -> (tensor<f32> {tg.loss = "loss"}, tensor<3x2xf32> {tg.grad_of = 0 : i64})
// CHECK: %[[G0:[0-9]+]] = tg.matmul {{.*}}transpose_lhs = true
// CHECK: %[[G1:[0-9]+]] = tg.matmul {{.*}}transpose_lhs = true
// CHECK: %[[GS1:[0-9]+]] = tg.add %[[G0]], %[[G1]] : (tensor<3x2xf32>, tensor<3x2xf32>)
// CHECK: %[[G2:[0-9]+]] = tg.matmul {{.*}}transpose_lhs = true
// CHECK: %[[GS2:[0-9]+]] = tg.add %[[GS1]], %[[G2]]
// CHECK: %[[GRAD:[0-9]+]] = tg.mul %[[GS2]], %{{[0-9]+}} : (tensor<3x2xf32>, tensor<f32>) -> tensor<3x2xf32>
// CHECK: return %{{[0-9]+}}, %[[GRAD]]

// -----

// Dropout gets another op id per micro-batch (op_id ^ mix64(k); micro-batch
// 0 keeps the model's), the same in the forward and the backward pass.
module attributes {tg.optimizer = {kind = "sgd", learning_rate = 0.5 : f64}, tg.micro_batches = 2 : i64} {
  func.func @forward(%w: tensor<3xf32> {tg.param = {name = "w", init = "ones", scale = 0.0 : f64, seed = 1 : i64, trainable = true}},
                     %x: tensor<2x3xf32> {tg.input = "x"},
                     %seed: tensor<i64> {tg.hyper = "rng_seed"}, %step: tensor<i64> {tg.hyper = "step"})
      -> (tensor<f32> {tg.loss = "loss"}) {
    %0 = tg.mul %x, %w : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
    %1 = tg.dropout %0, %seed, %step {rate = 0.5 : f64, op_id = 7 : i64} : tensor<2x3xf32>
    %2 = tg.reduce_sum %1 {axes = array<i64: 0, 1>} : (tensor<2x3xf32>) -> tensor<f32>
    return %2 : tensor<f32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %arg1: tensor<4x3xf32> {tg.input = "x"}
// CHECK: tg.dropout {{.*}}op_id = 7 : i64
// CHECK: tg.dropout {{.*}}op_id = 7 : i64
// mix64(1) = 0x5692161d100b05e5; 7 ^ that = 6238072747940578786.
// CHECK: tg.dropout {{.*}}op_id = 6238072747940578786 : i64
// CHECK: tg.dropout {{.*}}op_id = 6238072747940578786 : i64

// -----

// Without tg.micro_batches nothing changes.
module attributes {tg.optimizer = {kind = "sgd", learning_rate = 0.5 : f64}} {
  func.func @forward(%w: tensor<3xf32> {tg.param = {name = "w", init = "ones", scale = 0.0 : f64, seed = 1 : i64, trainable = true}},
                     %x: tensor<3xf32> {tg.input = "x"})
      -> (tensor<f32> {tg.loss = "loss"}) {
    %0 = tg.mul %w, %x : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    %1 = tg.reduce_sum %0 {axes = array<i64: 0>} : (tensor<3xf32>) -> tensor<f32>
    return %1 : tensor<f32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %arg1: tensor<3xf32> {tg.input = "x"}
// CHECK-NOT: tg.slice

// -----

// A scalar input has no batch dimension to split.
module attributes {tg.optimizer = {kind = "sgd", learning_rate = 0.5 : f64}, tg.micro_batches = 2 : i64} {
  // expected-error @+1 {{tg-accumulate-micro-batches: input #1 is a scalar; micro-batches split inputs along their first dimension}}
  func.func @forward(%w: tensor<3xf32> {tg.param = {name = "w", init = "ones", scale = 0.0 : f64, seed = 1 : i64, trainable = true}},
                     %x: tensor<f32> {tg.input = "x"})
      -> (tensor<f32> {tg.loss = "loss"}) {
    %0 = tg.mul %w, %x : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
    %1 = tg.reduce_sum %0 {axes = array<i64: 0>} : (tensor<3xf32>) -> tensor<f32>
    return %1 : tensor<f32>
  }
}
