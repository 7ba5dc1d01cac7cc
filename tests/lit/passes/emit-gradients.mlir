// RUN: tcc-opt %s -split-input-file -tg-autodiff -tg-emit-gradients -verify-diagnostics | FileCheck %s
// tg-emit-gradients turns each gradient result into the train output
// "grad:<param name>"; nothing updates the parameters.

module attributes {tg.optimizer = {kind = "adamw", learning_rate = 1.0e-3 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.1 : f64}} {
  func.func @forward(%w: tensor<3xf32> {tg.param = {name = "fc.weight", init = "ones", scale = 0.0 : f64, seed = 1 : i64, trainable = true}},
                     %f: tensor<3xf32> {tg.param = {name = "frozen", init = "ones", scale = 0.0 : f64, seed = 2 : i64, trainable = false}},
                     %b: tensor<3xf32> {tg.param = {name = "fc.bias", init = "ones", scale = 0.0 : f64, seed = 3 : i64, trainable = true}})
      -> (tensor<f32> {tg.loss = "loss"}) {
    %0 = tg.mul %w, %f : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    %1 = tg.add %0, %b : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    %2 = tg.reduce_sum %1 {axes = array<i64: 0>} : (tensor<3xf32>) -> tensor<f32>
    return %2 : tensor<f32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %arg2: tensor<3xf32> {tg.param = {{.*}}name = "fc.bias"{{.*}}}})
// CHECK-SAME: -> (tensor<f32> {tg.loss = "loss"}, tensor<3xf32> {tg.train_output = "grad:fc.weight"}, tensor<3xf32> {tg.train_output = "grad:fc.bias"})
// CHECK-NOT: update
