// RUN: tcc-opt %s -split-input-file -tg-autodiff -tg-sgd-update -verify-diagnostics | FileCheck %s
// tg-sgd-update adds the learning-rate argument and turns each gradient
// result into the updated parameter.

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
// CHECK-DAG: %[[W:[0-9]+]] = tg.sgd_update %arg0, %{{[0-9]+}}, %arg3
// CHECK-DAG: %[[V:[0-9]+]] = tg.sgd_update %arg2, %{{[0-9]+}}, %arg3
// CHECK-NOT: tg.sgd_update %arg1
// CHECK: return %{{[0-9]+}}, %[[W]], %[[V]]

// -----

// expected-error @+1 {{tg-sgd-update: module optimizer is not sgd}}
module {
  func.func @forward(%w: tensor<3xf32> {tg.param = {name = "w", init = "ones", scale = 0.0 : f64, seed = 1 : i64, trainable = true}})
      -> (tensor<f32> {tg.loss = "loss"}) {
    %0 = tg.reduce_sum %w {axes = array<i64: 0>} : (tensor<3xf32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}
