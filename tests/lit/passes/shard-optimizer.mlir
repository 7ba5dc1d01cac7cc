// RUN: tcc-opt %s -split-input-file -tg-autodiff -tg-all-reduce-gradients -tg-clip-grad-norm -tg-adamw-update -verify-diagnostics | FileCheck %s
// ZeRO-1 (tg.shard_optimizer = 2): tg-all-reduce-gradients reduce-scatters
// the gradient of w (6 elements: 3 per rank, marked tg.grad_shard) and keeps
// b (3 elements, 2 ranks do not divide it) whole; tg-clip-grad-norm sums
// the shard's squares over the ranks (all_reduce sum) before adding b's;
// tg-adamw-update copies out this rank's shard of w, updates it with state
// of 3 elements (shard_ranks = 2) and all-gathers it into w, after every
// update; b is updated whole.

module attributes {tg.data_parallel, tg.shard_optimizer = 2 : i64, tg.grad_clip = 1.0 : f64, tg.optimizer = {kind = "adamw", learning_rate = 1.0e-3 : f64, beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64}} {
  func.func @forward(%w: tensor<2x3xf32> {tg.param = {name = "w", init = "ones", scale = 0.0 : f64, seed = 1 : i64, trainable = true}},
                     %b: tensor<3xf32> {tg.param = {name = "b", init = "zeros", scale = 0.0 : f64, seed = 2 : i64, trainable = true}},
                     %x: tensor<2x3xf32> {tg.input = "x"})
      -> (tensor<f32> {tg.loss = "loss"}) {
    %0 = tg.mul %w, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    %1 = tg.add %0, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
    %2 = tg.reduce_sum %1 {axes = array<i64: 0, 1>} : (tensor<2x3xf32>) -> tensor<f32>
    return %2 : tensor<f32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %arg5: tensor<3xf32> {tg.opt_state = {name = "adam_m", param = 0 : i64, shard_ranks = 2 : i64}}
// CHECK-SAME: %arg6: tensor<3xf32> {tg.opt_state = {name = "adam_v", param = 0 : i64, shard_ranks = 2 : i64}}
// CHECK-SAME: %arg7: tensor<3xf32> {tg.opt_state = {name = "adam_m", param = 1 : i64}}
// CHECK-SAME: %arg8: tensor<3xf32> {tg.opt_state = {name = "adam_v", param = 1 : i64}}
// CHECK-SAME: -> (tensor<f32> {tg.loss = "loss"}, tensor<f32> {tg.train_output = "grad_norm"}, tensor<2x3xf32> {tg.updates_param = 0 : i64}, tensor<3xf32> {tg.updates_param = 1 : i64}
// CHECK-SAME: tg.gradient_collective_decisions = ["w: sharded: 6 elements, 3 per rank {{.*}}", "b: kept whole: 2 ranks do not divide its 3 elements {{.*}}"]
// CHECK: %[[L:[0-9]+]] = tg.all_reduce %{{[0-9]+}} {reduction = "mean"} : tensor<f32>
// CHECK: %[[GW:[0-9]+]] = tg.reduce_scatter %{{[0-9]+}} {ranks = 2 : i64, reduction = "mean"} : (tensor<2x3xf32>) -> tensor<3xf32>
// CHECK: %[[GB:[0-9]+]] = tg.all_reduce %{{[0-9]+}} {reduction = "mean"} : tensor<3xf32>
// CHECK: %[[SQW:[0-9]+]] = tg.mul %[[GW]], %[[GW]] : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
// CHECK: %[[SQB:[0-9]+]] = tg.mul %[[GB]], %[[GB]]
// CHECK: %[[SHARDS:[0-9]+]] = tg.all_reduce %{{[0-9]+}} {reduction = "sum"} : tensor<f32>
// CHECK: tg.add %{{[0-9]+}}, %[[SHARDS]]
// CHECK: %[[WS:[0-9]+]] = tg.rank_shard %arg0 {ranks = 2 : i64} : (tensor<2x3xf32>) -> tensor<3xf32>
// CHECK: %[[W:new_param[_0-9]*]], %{{.*}}, %{{.*}} = tg.adamw_update %[[WS]], %{{[0-9]+}}, %arg5, %arg6, %arg3, %arg4 {{.*}} : tensor<3xf32>, tensor<f32>
// CHECK: %[[B:new_param[_0-9]*]], %{{.*}}, %{{.*}} = tg.adamw_update %arg1, %{{[0-9]+}}, %arg7, %arg8, %arg3, %arg4 {{.*}} : tensor<3xf32>, tensor<f32>
// CHECK: %[[WALL:[0-9]+]] = tg.all_gather %[[W]] {ranks = 2 : i64} : (tensor<3xf32>) -> tensor<2x3xf32>
// CHECK: return %[[L]], %{{[0-9]+}}, %[[WALL]], %[[B]]

// -----

// Loss scaling is refused: each rank would see an overflow in its shard only.
// expected-error @+1 {{tg-all-reduce-gradients: the optimizer cannot be sharded (--shard-optimizer) with loss scaling}}
module attributes {tg.data_parallel, tg.shard_optimizer = 2 : i64, tg.loss_scaling = {init_scale = 1024.0 : f64, growth_factor = 2.0 : f64, backoff_factor = 0.5 : f64, growth_interval = 10 : i64}, tg.optimizer = {kind = "adamw", learning_rate = 1.0e-3 : f64}} {
  func.func @forward(%w: tensor<4xf32> {tg.param = {name = "w", init = "ones", scale = 0.0 : f64, seed = 1 : i64, trainable = true}})
      -> (tensor<f32> {tg.loss = "loss"}) {
    %0 = tg.reduce_sum %w {axes = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}
