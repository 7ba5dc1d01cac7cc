// RUN: tcc-opt %s -tg-autodiff -tg-unscale-gradients -tg-clip-grad-norm -tg-sgd-update -tg-update-loss-scale -cse | FileCheck %s
// With clipping, CSE merges tg-unscale-gradients' sums of squares with
// those of tg-clip-grad-norm's norm: one reduction per gradient, shared by
// the overflow check and the norm.

module attributes {tg.optimizer = {kind = "sgd", learning_rate = 0.5 : f64}, tg.grad_clip = 1.0 : f64, tg.loss_scaling = {init_scale = 1024.0 : f64, growth_factor = 2.0 : f64, backoff_factor = 0.5 : f64, growth_interval = 3 : i64}} {
  func.func @forward(%w: tensor<3xf32> {tg.param = {name = "w", init = "ones", scale = 0.0 : f64, seed = 1 : i64, trainable = true}},
                     %x: tensor<3xf32> {tg.input = "x"})
      -> (tensor<f32> {tg.loss = "loss"}) {
    %0 = tg.mul %w, %x : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    %1 = tg.reduce_sum %0 {axes = array<i64: 0>} : (tensor<3xf32>) -> tensor<f32>
    return %1 : tensor<f32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK: %[[UNSCALED:[0-9]+]] = tg.mul %{{[0-9]+}}, %{{[0-9]+}} : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
// CHECK: %[[SQ:[0-9]+]] = tg.mul %[[UNSCALED]], %[[UNSCALED]]
// CHECK: %[[SUMSQ:[0-9]+]] = tg.reduce_sum %[[SQ]]
// CHECK-NOT: tg.reduce_sum
// CHECK: tg.sub %[[SUMSQ]], %[[SUMSQ]]
// CHECK-NOT: tg.reduce_sum
// CHECK: tg.sqrt %[[SUMSQ]]
// CHECK-NOT: tg.reduce_sum
// CHECK: return
