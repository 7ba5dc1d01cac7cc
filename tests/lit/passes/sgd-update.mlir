// RUN: tcc-opt %s -split-input-file -tg-autodiff -tg-sgd-update -verify-diagnostics | FileCheck %s
// tg-sgd-update adds the learning-rate argument and turns each gradient
// result into the updated parameter; with momentum, each trainable parameter
// gets a buffer argument and an updated-buffer result.

module attributes {tg.optimizer = {kind = "sgd", learning_rate = 0.5 : f64}} {
  func.func @forward(%w: tensor<3xf32> {tg.param = {name = "w", init = "ones", scale = 0.0 : f64, seed = 1 : i64, trainable = true}},
                     %f: tensor<3xf32> {tg.param = {name = "frozen", init = "ones", scale = 0.0 : f64, seed = 2 : i64, trainable = false}},
                     %v: tensor<3xf32> {tg.param = {name = "v", init = "ones", scale = 0.0 : f64, seed = 3 : i64, trainable = true}})
      -> (tensor<f32> {tg.loss = "loss"}) {
    %0 = tg.mul %w, %f : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    %1 = tg.mul %0, %v : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    %2 = tg.reduce_sum %1 {axes = array<i64: 0>} : (tensor<3xf32>) -> tensor<f32>
    return %2 : tensor<f32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %arg3: tensor<f32> {tg.hyper = "learning_rate"}
// Parameter indices count parameters, frozen ones included: v is parameter 2.
// CHECK-SAME: -> (tensor<f32> {tg.loss = "loss"}, tensor<3xf32> {tg.updates_param = 0 : i64}, tensor<3xf32> {tg.updates_param = 2 : i64})
// Without weight decay the attribute keeps its default and is not printed.
// CHECK-DAG: %[[W:[0-9]+]] = tg.sgd_update %arg0, %{{[0-9]+}}, %arg3 : tensor<3xf32>, tensor<f32>
// CHECK-DAG: %[[V:[0-9]+]] = tg.sgd_update %arg2, %{{[0-9]+}}, %arg3 : tensor<3xf32>, tensor<f32>
// CHECK-NOT: tg.sgd_update %arg1
// CHECK: return %{{[0-9]+}}, %[[W]], %[[V]]

// -----

// Momentum and weight decay; b is exempt from weight decay.
module attributes {tg.optimizer = {kind = "sgd", learning_rate = 0.5 : f64, momentum = 0.9 : f64, weight_decay = 0.01 : f64}} {
  func.func @forward(%w: tensor<3xf32> {tg.param = {name = "w", init = "ones", scale = 0.0 : f64, seed = 1 : i64, trainable = true}},
                     %f: tensor<3xf32> {tg.param = {name = "frozen", init = "ones", scale = 0.0 : f64, seed = 2 : i64, trainable = false}},
                     %b: tensor<3xf32> {tg.param = {name = "b", init = "ones", scale = 0.0 : f64, seed = 3 : i64, trainable = true, no_weight_decay = true}})
      -> (tensor<f32> {tg.loss = "loss"}) {
    %0 = tg.mul %w, %f : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    %1 = tg.add %0, %b : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    %2 = tg.reduce_sum %1 {axes = array<i64: 0>} : (tensor<3xf32>) -> tensor<f32>
    return %2 : tensor<f32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %arg3: tensor<f32> {tg.hyper = "learning_rate"}
// CHECK-SAME: %arg4: tensor<3xf32> {tg.opt_state = {name = "momentum", param = 0 : i64}}
// CHECK-SAME: %arg5: tensor<3xf32> {tg.opt_state = {name = "momentum", param = 2 : i64}}
// CHECK-SAME: -> (tensor<f32> {tg.loss = "loss"}, tensor<3xf32> {tg.updates_param = 0 : i64}, tensor<3xf32> {tg.updates_param = 2 : i64}, tensor<3xf32> {tg.updates_opt_state = 0 : i64}, tensor<3xf32> {tg.updates_opt_state = 1 : i64})
// CHECK: %[[W:new_param[_0-9]*]], %[[WB:new_momentum_buffer[_0-9]*]] = tg.momentum_update %arg0, %{{[0-9]+}}, %arg4, %arg3 {momentum = 9.000000e-01 : f64, weight_decay = 1.000000e-02 : f64}
// CHECK: %[[B:new_param[_0-9]*]], %[[BB:new_momentum_buffer[_0-9]*]] = tg.momentum_update %arg2, %{{[0-9]+}}, %arg5, %arg3 {momentum = 9.000000e-01 : f64} :
// CHECK: return %{{[0-9]+}}, %[[W]], %[[B]], %[[WB]], %[[BB]]

// -----

// Another optimizer's module is left to its own pass.
module attributes {tg.optimizer = {kind = "adamw", learning_rate = 0.5 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64}} {
  func.func @forward(%w: tensor<3xf32> {tg.param = {name = "w", init = "ones", scale = 0.0 : f64, seed = 1 : i64, trainable = true}})
      -> (tensor<f32> {tg.loss = "loss"}) {
    %0 = tg.reduce_sum %w {axes = array<i64: 0>} : (tensor<3xf32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: -> (tensor<f32> {tg.loss = "loss"}, tensor<3xf32> {tg.grad_of = 0 : i64})
// CHECK-NOT: tg.sgd_update

// -----

// expected-error @+1 {{tg-sgd-update: the module has no tg.optimizer = {kind = ...}}}
module {
  func.func @forward(%w: tensor<3xf32> {tg.param = {name = "w", init = "ones", scale = 0.0 : f64, seed = 1 : i64, trainable = true}})
      -> (tensor<f32> {tg.loss = "loss"}) {
    %0 = tg.reduce_sum %w {axes = array<i64: 0>} : (tensor<3xf32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}
