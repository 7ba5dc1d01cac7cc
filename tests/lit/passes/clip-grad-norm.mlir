// RUN: tcc-opt %s -split-input-file -tg-autodiff -tg-clip-grad-norm -verify-diagnostics | FileCheck %s
// tg-clip-grad-norm computes the global norm of all gradients from tg
// primitives, reports it as the train output "grad_norm" and scales every
// gradient by min(max_norm / (norm + 1e-6), 1).

module attributes {tg.optimizer = {kind = "sgd", learning_rate = 0.5 : f64}, tg.grad_clip = 2.5 : f64} {
  func.func @forward(%w: tensor<2x3xf32> {tg.param = {name = "w", init = "ones", scale = 0.0 : f64, seed = 1 : i64, trainable = true}},
                     %b: tensor<3xf32> {tg.param = {name = "b", init = "ones", scale = 0.0 : f64, seed = 2 : i64, trainable = true}},
                     %x: tensor<2x3xf32> {tg.input = "x"})
      -> (tensor<f32> {tg.loss = "loss"}) {
    %0 = tg.mul %w, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    %1 = tg.add %0, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
    %2 = tg.reduce_sum %1 {axes = array<i64: 0, 1>} : (tensor<2x3xf32>) -> tensor<f32>
    return %2 : tensor<f32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: -> (tensor<f32> {tg.loss = "loss"}, tensor<f32> {tg.train_output = "grad_norm"}, tensor<2x3xf32> {tg.grad_of = 0 : i64}, tensor<3xf32> {tg.grad_of = 1 : i64})
// CHECK: %[[SQW:[0-9]+]] = tg.mul %[[GW:[0-9]+]], %[[GW]] : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: %[[SW:[0-9]+]] = tg.reduce_sum %[[SQW]] {axes = array<i64: 0, 1>} : (tensor<2x3xf32>) -> tensor<f32>
// CHECK: %[[SQB:[0-9]+]] = tg.mul %[[GB:[0-9]+]], %[[GB]] : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
// CHECK: %[[SB:[0-9]+]] = tg.reduce_sum %[[SQB]] {axes = array<i64: 0>}
// CHECK: %[[SUM:[0-9]+]] = tg.add %[[SW]], %[[SB]]
// CHECK: %[[NORM:[0-9]+]] = tg.sqrt %[[SUM]] : tensor<f32>
// CHECK: %[[EPS:[0-9]+]] = tg.constant dense<9.99999997E-7> : tensor<f32>
// CHECK: %[[DEN:[0-9]+]] = tg.add %[[NORM]], %[[EPS]]
// CHECK: %[[MAX:[0-9]+]] = tg.constant dense<2.500000e+00> : tensor<f32>
// CHECK: %[[COEF:[0-9]+]] = tg.div %[[MAX]], %[[DEN]]
// CHECK: %[[ONE:[0-9]+]] = tg.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[SCALE:[0-9]+]] = tg.min %[[COEF]], %[[ONE]]
// CHECK: %[[CW:[0-9]+]] = tg.mul %[[GW]], %[[SCALE]] : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
// CHECK: %[[CB:[0-9]+]] = tg.mul %[[GB]], %[[SCALE]] : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
// CHECK: return %{{[0-9]+}}, %[[NORM]], %[[CW]], %[[CB]]

// -----

// Without tg.grad_clip nothing changes.
module attributes {tg.optimizer = {kind = "sgd", learning_rate = 0.5 : f64}} {
  func.func @forward(%w: tensor<3xf32> {tg.param = {name = "w", init = "ones", scale = 0.0 : f64, seed = 1 : i64, trainable = true}})
      -> (tensor<f32> {tg.loss = "loss"}) {
    %0 = tg.reduce_sum %w {axes = array<i64: 0>} : (tensor<3xf32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: -> (tensor<f32> {tg.loss = "loss"}, tensor<3xf32> {tg.grad_of = 0 : i64})
// CHECK-NOT: tg.sqrt

// -----

// expected-error @+1 {{tg-clip-grad-norm: tg.grad_clip must be a finite number > 0, got -1}}
module attributes {tg.optimizer = {kind = "sgd", learning_rate = 0.5 : f64}, tg.grad_clip = -1.0 : f64} {
  func.func @forward(%w: tensor<3xf32> {tg.param = {name = "w", init = "ones", scale = 0.0 : f64, seed = 1 : i64, trainable = true}})
      -> (tensor<f32> {tg.loss = "loss"}) {
    %0 = tg.reduce_sum %w {axes = array<i64: 0>} : (tensor<3xf32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}

// -----

// Gradients of f32 and f64 parameters cannot share one norm.
// expected-error @+2 {{tg-clip-grad-norm: gradients of different element types ('f32' and 'f64') cannot share one norm}}
module attributes {tg.optimizer = {kind = "sgd", learning_rate = 0.5 : f64}, tg.grad_clip = 1.0 : f64} {
  func.func @forward(%w: tensor<3xf32> {tg.param = {name = "w", init = "ones", scale = 0.0 : f64, seed = 1 : i64, trainable = true}},
                     %v: tensor<3xf64> {tg.param = {name = "v", init = "ones", scale = 0.0 : f64, seed = 2 : i64, trainable = true}})
      -> (tensor<f32> {tg.loss = "loss"}) {
    %0 = tg.reduce_sum %w {axes = array<i64: 0>} : (tensor<3xf32>) -> tensor<f32>
    %1 = tg.reduce_sum %v {axes = array<i64: 0>} : (tensor<3xf64>) -> tensor<f64>
    return %0 : tensor<f32>
  }
}
