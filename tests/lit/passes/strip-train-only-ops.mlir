// RUN: tcc-opt %s -tg-autodiff -tg-strip-train-only-ops | FileCheck %s
// After autodiff, tg-strip-train-only-ops makes @forward an eval function
// (every dropout replaced by its input) and leaves @train_step's dropouts,
// whose backward is a dropout of the gradient with the same key.

module {
  func.func @forward(%w: tensor<4xf32> {tg.param = {name = "w", init = "ones", scale = 0.0 : f64, seed = 1 : i64, trainable = true}},
                     %x: tensor<2x4xf32> {tg.input = "x"},
                     %seed: tensor<i64> {tg.hyper = "rng_seed"}, %step: tensor<i64> {tg.hyper = "step"})
      -> (tensor<f32> {tg.loss = "loss"}, tensor<2x4xf32> {tg.output = "h"}) {
    %0 = tg.mul %x, %w : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %1 = tg.dropout %0, %seed, %step {op_id = 11 : i64, rate = 0.25 : f64} : tensor<2x4xf32>
    %2 = tg.tanh %1 : tensor<2x4xf32>
    %3 = tg.dropout %2, %seed, %step {op_id = 12 : i64, rate = 0.5 : f64} : tensor<2x4xf32>
    %4 = tg.reduce_mean %3 {axes = array<i64: 0, 1>} : (tensor<2x4xf32>) -> tensor<f32>
    return %4, %3 : tensor<f32>, tensor<2x4xf32>
  }
}

// CHECK-LABEL: func.func @forward
// CHECK-NOT: tg.dropout
// CHECK: %[[MUL:[0-9]+]] = tg.mul %arg1, %arg0
// CHECK-NEXT: %[[TANH:[0-9]+]] = tg.tanh %[[MUL]] : tensor<2x4xf32>
// CHECK-NEXT: %[[MEAN:[0-9]+]] = tg.reduce_mean %[[TANH]]
// CHECK-NEXT: return %[[MEAN]], %[[TANH]]

// CHECK-LABEL: func.func @train_step
// CHECK: %[[D1:[0-9]+]] = tg.dropout %{{.*}}, %arg2, %arg3 {op_id = 11 : i64, rate = 2.500000e-01 : f64}
// CHECK: tg.tanh %[[D1]]
// CHECK: tg.dropout %{{.*}}, %arg2, %arg3 {op_id = 12 : i64, rate = 5.000000e-01 : f64}
// The backward: the same two masks, in reverse order.
// CHECK: tg.dropout %{{.*}}, %arg2, %arg3 {op_id = 12 : i64, rate = 5.000000e-01 : f64}
// CHECK: tg.dropout %{{.*}}, %arg2, %arg3 {op_id = 11 : i64, rate = 2.500000e-01 : f64}
// CHECK: return

