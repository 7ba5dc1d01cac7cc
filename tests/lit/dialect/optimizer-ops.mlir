// RUN: tcc-opt %s | tcc-opt | FileCheck %s
// The optimizer ops print and parse back; default weight decays are elided.

// CHECK-LABEL: func.func @updates
func.func @updates(%p: tensor<4x3xf32>, %g: tensor<4x3xf32>, %m: tensor<4x3xf32>,
                   %v: tensor<4x3xf32>, %lr: tensor<f32>, %step: tensor<i64>,
                   %p64: tensor<5xf64>, %g64: tensor<5xf64>)
    -> (tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>,
        tensor<4x3xf32>, tensor<5xf64>) {
  // CHECK: tg.sgd_update %arg0, %arg1, %arg4 : tensor<4x3xf32>, tensor<f32>
  %0 = tg.sgd_update %p, %g, %lr : tensor<4x3xf32>, tensor<f32>
  // CHECK: tg.sgd_update %arg6, %arg7, %arg4 {weight_decay = 1.000000e-02 : f64} : tensor<5xf64>, tensor<f32>
  %1 = tg.sgd_update %p64, %g64, %lr {weight_decay = 0.01 : f64} : tensor<5xf64>, tensor<f32>
  // CHECK: tg.momentum_update %arg0, %arg1, %arg2, %arg4 {momentum = 9.000000e-01 : f64} : tensor<4x3xf32>, tensor<f32>
  %2:2 = tg.momentum_update %p, %g, %m, %lr {momentum = 0.9 : f64} : tensor<4x3xf32>, tensor<f32>
  // CHECK: tg.adamw_update %arg0, %arg1, %arg2, %arg3, %arg4, %arg5 {beta1 = 9.000000e-01 : f64, beta2 = 0.99899999999999999 : f64, eps = 1.000000e-08 : f64, weight_decay = 1.000000e-01 : f64} : tensor<4x3xf32>, tensor<f32>
  %3:3 = tg.adamw_update %p, %g, %m, %v, %lr, %step {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.1 : f64} : tensor<4x3xf32>, tensor<f32>
  return %0, %2#0, %2#1, %3#0, %3#2, %1 : tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<5xf64>
}
