// RUN: tcc-opt %s -split-input-file -tg-autodiff -tg-adamw-update -verify-diagnostics | FileCheck %s
// tg-adamw-update adds the learning-rate and step arguments, the moments of
// each trainable parameter as state arguments, and returns the updated
// parameters and moments. Frozen parameters get neither state nor update;
// no_weight_decay parameters get weight_decay 0 (not printed).

module attributes {tg.optimizer = {kind = "adamw", learning_rate = 1.0e-3 : f64, beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-8 : f64, weight_decay = 0.1 : f64}} {
  func.func @forward(%w: tensor<2x3xf32> {tg.param = {name = "w", init = "ones", scale = 0.0 : f64, seed = 1 : i64, trainable = true}},
                     %f: tensor<3xf32> {tg.param = {name = "frozen", init = "ones", scale = 0.0 : f64, seed = 2 : i64, trainable = false}},
                     %b: tensor<3xf32> {tg.param = {name = "b", init = "zeros", scale = 0.0 : f64, seed = 3 : i64, trainable = true, no_weight_decay = true}})
      -> (tensor<f32> {tg.loss = "loss"}) {
    %0 = tg.mul %w, %f : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
    %1 = tg.add %0, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
    %2 = tg.reduce_sum %1 {axes = array<i64: 0, 1>} : (tensor<2x3xf32>) -> tensor<f32>
    return %2 : tensor<f32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %arg3: tensor<f32> {tg.hyper = "learning_rate"}, %arg4: tensor<i64> {tg.hyper = "step"}
// CHECK-SAME: %arg5: tensor<2x3xf32> {tg.opt_state = {name = "adam_m", param = 0 : i64}}
// CHECK-SAME: %arg6: tensor<2x3xf32> {tg.opt_state = {name = "adam_v", param = 0 : i64}}
// CHECK-SAME: %arg7: tensor<3xf32> {tg.opt_state = {name = "adam_m", param = 2 : i64}}
// CHECK-SAME: %arg8: tensor<3xf32> {tg.opt_state = {name = "adam_v", param = 2 : i64}})
// CHECK-SAME: -> (tensor<f32> {tg.loss = "loss"}, tensor<2x3xf32> {tg.updates_param = 0 : i64}, tensor<3xf32> {tg.updates_param = 2 : i64},
// CHECK-SAME: tensor<2x3xf32> {tg.updates_opt_state = 0 : i64}, tensor<2x3xf32> {tg.updates_opt_state = 1 : i64}, tensor<3xf32> {tg.updates_opt_state = 2 : i64}, tensor<3xf32> {tg.updates_opt_state = 3 : i64})
// CHECK: %[[W:new_param[_0-9]*]], %[[WM:new_m[_0-9]*]], %[[WV:new_v[_0-9]*]] = tg.adamw_update %arg0, %{{[0-9]+}}, %arg5, %arg6, %arg3, %arg4 {beta1 = 9.000000e-01 : f64, beta2 = 0.94999999999999996 : f64, eps = 1.000000e-08 : f64, weight_decay = 1.000000e-01 : f64} : tensor<2x3xf32>, tensor<f32>
// CHECK: %[[B:new_param[_0-9]*]], %[[BM:new_m[_0-9]*]], %[[BV:new_v[_0-9]*]] = tg.adamw_update %arg2, %{{[0-9]+}}, %arg7, %arg8, %arg3, %arg4 {beta1 = 9.000000e-01 : f64, beta2 = 0.94999999999999996 : f64, eps = 1.000000e-08 : f64} : tensor<3xf32>, tensor<f32>
// CHECK-NOT: tg.adamw_update %arg1
// CHECK: return %{{[0-9]+}}, %[[W]], %[[B]], %[[WM]], %[[WV]], %[[BM]], %[[BV]]

// -----

// A step argument that exists already (dropout reads it) is reused.
module attributes {tg.optimizer = {kind = "adamw", learning_rate = 1.0e-3 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64}} {
  func.func @forward(%w: tensor<3xf32> {tg.param = {name = "w", init = "ones", scale = 0.0 : f64, seed = 1 : i64, trainable = true}},
                     %step: tensor<i64> {tg.hyper = "step"})
      -> (tensor<f32> {tg.loss = "loss"}) {
    %0 = tg.reduce_sum %w {axes = array<i64: 0>} : (tensor<3xf32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%arg0: tensor<3xf32> {{.*}}, %arg1: tensor<i64> {tg.hyper = "step"}, %arg2: tensor<f32> {tg.hyper = "learning_rate"}, %arg3: tensor<3xf32> {tg.opt_state = {name = "adam_m", param = 0 : i64}}, %arg4: tensor<3xf32> {tg.opt_state = {name = "adam_v", param = 0 : i64}})
// CHECK-NOT: tg.hyper = "step"
// CHECK: tg.adamw_update %arg0, %{{[0-9]+}}, %arg3, %arg4, %arg2, %arg1

// -----

// An SGD module is left to tg-sgd-update.
module attributes {tg.optimizer = {kind = "sgd", learning_rate = 0.5 : f64}} {
  func.func @forward(%w: tensor<3xf32> {tg.param = {name = "w", init = "ones", scale = 0.0 : f64, seed = 1 : i64, trainable = true}})
      -> (tensor<f32> {tg.loss = "loss"}) {
    %0 = tg.reduce_sum %w {axes = array<i64: 0>} : (tensor<3xf32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: -> (tensor<f32> {tg.loss = "loss"}, tensor<3xf32> {tg.grad_of = 0 : i64})
// CHECK-NOT: tg.adamw_update

// -----

// expected-error @+1 {{tg-adamw-update: the module has no tg.optimizer}}
module {
  func.func @forward(%w: tensor<3xf32> {tg.param = {name = "w", init = "ones", scale = 0.0 : f64, seed = 1 : i64, trainable = true}})
      -> (tensor<f32> {tg.loss = "loss"}) {
    %0 = tg.reduce_sum %w {axes = array<i64: 0>} : (tensor<3xf32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}
