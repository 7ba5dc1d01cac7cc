// RUN: tcc-opt %s -split-input-file -tg-autodiff -verify-diagnostics | FileCheck %s
// tg-autodiff builds @train_step = forward + backward, one gradient result per
// trainable parameter, and drops forward values the step does not need.

module attributes {tg.model_name = "linear"} {
  func.func @forward(%w: tensor<3x2xf32> {tg.param = {name = "w", init = "normal", scale = 1.0 : f64, seed = 1 : i64, trainable = true}},
                     %b: tensor<2xf32> {tg.param = {name = "b", init = "zeros", scale = 0.0 : f64, seed = 2 : i64, trainable = true}},
                     %x: tensor<4x3xf32> {tg.input = "x"}, %y: tensor<4xi32> {tg.input = "y"})
      -> (tensor<f32> {tg.loss = "loss"}, tensor<4x2xf32> {tg.output = "logits"}) {
    %0 = tg.matmul %x, %w : (tensor<4x3xf32>, tensor<3x2xf32>) -> tensor<4x2xf32>
    %1 = tg.add %0, %b : (tensor<4x2xf32>, tensor<2xf32>) -> tensor<4x2xf32>
    %2 = tg.softmax_cross_entropy %1, %y : (tensor<4x2xf32>, tensor<4xi32>) -> tensor<4xf32>
    %3 = tg.reduce_mean %2 {axes = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>
    return %3, %1 : tensor<f32>, tensor<4x2xf32>
  }
}

// @forward is kept unchanged (it is the eval step).
// CHECK-LABEL: func.func @forward
// CHECK: return %{{.*}}, %{{.*}} : tensor<f32>, tensor<4x2xf32>

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: -> (tensor<f32> {tg.loss = "loss"}, tensor<3x2xf32> {tg.grad_of = 0 : i64}, tensor<2xf32> {tg.grad_of = 1 : i64})
// CHECK: %[[MM:[0-9]+]] = tg.matmul %arg2, %arg0
// CHECK: %[[LOGITS:[0-9]+]] = tg.add %[[MM]], %arg1
// CHECK: %[[LOSS:[0-9]+]] = tg.reduce_mean
// The seed: d loss / d loss = 1, spread over the mean.
// CHECK: tg.constant dense<1.000000e+00> : tensor<f32>
// CHECK: tg.constant dense<2.500000e-01> : tensor<f32>
// CHECK: %[[DLOGITS:[0-9]+]] = tg.softmax_cross_entropy_grad %[[LOGITS]], %arg3
// Bias gradient: the broadcast is undone by a sum over the batch.
// CHECK: %[[DBSUM:[0-9]+]] = tg.reduce_sum %[[DLOGITS]] {axes = array<i64: 0>, keep_dims = true}
// CHECK: %[[DB:[0-9]+]] = tg.reshape %[[DBSUM]] : (tensor<1x2xf32>) -> tensor<2xf32>
// Weight gradient x^T dlogits; no gradient for the data input x survives.
// CHECK: %[[DW:[0-9]+]] = tg.matmul %arg2, %[[DLOGITS]] {transpose_lhs = true}
// CHECK-NOT: transpose_rhs
// CHECK: return %[[LOSS]], %[[DW]], %[[DB]]

// -----

// Fan-out: a parameter used twice receives the sum of both gradients.
// A frozen parameter gets no gradient result.
module {
  func.func @forward(%w: tensor<3xf32> {tg.param = {name = "w", init = "ones", scale = 0.0 : f64, seed = 1 : i64, trainable = true}},
                     %f: tensor<3xf32> {tg.param = {name = "frozen", init = "ones", scale = 0.0 : f64, seed = 2 : i64, trainable = false}})
      -> (tensor<f32> {tg.loss = "loss"}) {
    %0 = tg.mul %w, %w : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    %1 = tg.mul %0, %f : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    %2 = tg.reduce_sum %1 {axes = array<i64: 0>} : (tensor<3xf32>) -> tensor<f32>
    return %2 : tensor<f32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: -> (tensor<f32> {tg.loss = "loss"}, tensor<3xf32> {tg.grad_of = 0 : i64})
// CHECK: tg.constant dense<1.000000e+00>
// CHECK: %[[G:[0-9]+]] = tg.mul %{{[0-9]+}}, %arg1
// CHECK: %[[A:[0-9]+]] = tg.mul %[[G]], %arg0
// CHECK: %[[B:[0-9]+]] = tg.mul %[[G]], %arg0
// CHECK: %[[SUM:[0-9]+]] = tg.add %[[A]], %[[B]]
// CHECK: return %{{.*}}, %[[SUM]]

// -----

// An unused trainable parameter gets a zero gradient.
module {
  func.func @forward(%w: tensor<2xf32> {tg.param = {name = "w", init = "ones", scale = 0.0 : f64, seed = 1 : i64, trainable = true}},
                     %u: tensor<5xf32> {tg.param = {name = "unused", init = "ones", scale = 0.0 : f64, seed = 2 : i64, trainable = true}})
      -> (tensor<f32> {tg.loss = "loss"}) {
    %0 = tg.reduce_sum %w {axes = array<i64: 0>} : (tensor<2xf32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK: %[[ZERO:[0-9]+]] = tg.constant dense<0.000000e+00> : tensor<5xf32>
// CHECK: return %{{.*}}, %{{.*}}, %[[ZERO]]

// -----

// expected-error @+1 {{tg-autodiff: no @forward function to differentiate}}
module {
  func.func @other() { return }
}

// -----

module {
  func.func @forward(%w: tensor<3xf32> {tg.param = {name = "w", init = "ones", scale = 0.0 : f64, seed = 1 : i64, trainable = true}})
      -> (tensor<f32> {tg.loss = "loss"}) {
    // expected-error @+1 {{tg-autodiff: op tg.relu_grad has no gradient}}
    %0 = tg.relu_grad %w, %w : tensor<3xf32>
    %1 = tg.reduce_sum %0 {axes = array<i64: 0>} : (tensor<3xf32>) -> tensor<f32>
    return %1 : tensor<f32>
  }
}

// -----

// tg.attention: one tg.attention_grad gives dq, dk and dv, recomputing from
// the forward's result and lse, with the forward's attributes and dropout
// operands; the dropout operands get no gradient.
module {
  func.func @forward(%q: tensor<1x4x3x8xf32> {tg.param = {name = "q", init = "normal", scale = 1.0 : f64, seed = 1 : i64, trainable = true}},
                     %k: tensor<1x2x5x8xf32> {tg.param = {name = "k", init = "normal", scale = 1.0 : f64, seed = 2 : i64, trainable = true}},
                     %v: tensor<1x2x5x8xf32> {tg.param = {name = "v", init = "normal", scale = 1.0 : f64, seed = 3 : i64, trainable = true}},
                     %seed: tensor<i64> {tg.hyper = "rng_seed"}, %step: tensor<i64> {tg.hyper = "step"})
      -> (tensor<f32> {tg.loss = "loss"}) {
    %o, %lse = tg.attention %q, %k, %v dropout(%seed, %step) {scale = 0.25 : f64, causal, dropout_rate = 0.1 : f64, op_id = 5 : i64} : (tensor<1x4x3x8xf32>, tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>, tensor<i64>, tensor<i64>) -> (tensor<1x4x3x8xf32>, tensor<1x4x3xf32>)
    %0 = tg.reduce_sum %o {axes = array<i64: 0, 1, 2, 3>} : (tensor<1x4x3x8xf32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: -> (tensor<f32> {tg.loss = "loss"}, tensor<1x4x3x8xf32> {tg.grad_of = 0 : i64}, tensor<1x2x5x8xf32> {tg.grad_of = 1 : i64}, tensor<1x2x5x8xf32> {tg.grad_of = 2 : i64})
// CHECK: %[[OUT:[a-z_0-9]+]], %[[LSE:[a-z_0-9]+]] = tg.attention %arg0, %arg1, %arg2 dropout(%arg3, %arg4) {causal, dropout_rate = 1.000000e-01 : f64, op_id = 5 : i64, scale = 2.500000e-01 : f64}
// CHECK: %[[G:[0-9]+]] = tg.broadcast_to
// CHECK: %[[DQ:[a-z_0-9]+]], %[[DK:[a-z_0-9]+]], %[[DV:[a-z_0-9]+]] = tg.attention_grad %arg0, %arg1, %arg2, %[[OUT]], %[[LSE]], %[[G]] dropout(%arg3, %arg4) {causal, dropout_rate = 1.000000e-01 : f64, op_id = 5 : i64, scale = 2.500000e-01 : f64}
// CHECK-NOT: tg.attention_grad
// CHECK: return %{{.*}}, %[[DQ]], %[[DK]], %[[DV]]
