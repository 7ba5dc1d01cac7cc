// RUN: tcc-opt %s -split-input-file -tg-autodiff -tg-unscale-gradients -tg-adamw-update -tg-update-loss-scale -verify-diagnostics | FileCheck %s
// Dynamic loss scaling (tg.loss_scaling): tg-autodiff seeds the backward
// pass with the f32 state "loss_scale"; tg-unscale-gradients multiplies each
// gradient by 1 / S and reports "loss_scale" and "skipped" (the summed
// squares of all gradients are not finite); tg-update-loss-scale keeps the old
// parameters and state on a skipped step, makes AdamW count only applied
// steps, and updates S, the good-step counter and the skipped-step count.

module attributes {tg.optimizer = {kind = "adamw", learning_rate = 0.5 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64}, tg.loss_scaling = {init_scale = 1024.0 : f64, growth_factor = 2.0 : f64, backoff_factor = 0.5 : f64, growth_interval = 3 : i64}} {
  func.func @forward(%w: tensor<3xf32> {tg.param = {name = "w", init = "ones", scale = 0.0 : f64, seed = 1 : i64, trainable = true}},
                     %x: tensor<3xf32> {tg.input = "x"})
      -> (tensor<f32> {tg.loss = "loss"}) {
    %0 = tg.mul %w, %x : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    %1 = tg.reduce_sum %0 {axes = array<i64: 0>} : (tensor<3xf32>) -> tensor<f32>
    return %1 : tensor<f32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[W:arg0]]: tensor<3xf32> {tg.param
// CHECK-SAME: %[[S:arg2]]: tensor<f32> {tg.opt_state = {init_value = 1.024000e+03 : f64, name = "loss_scale"}}
// CHECK-SAME: %[[STEP:arg4]]: tensor<i64> {tg.hyper = "step"}
// CHECK-SAME: %[[M:arg5]]: tensor<3xf32> {tg.opt_state = {name = "adam_m", param = 0 : i64}}
// CHECK-SAME: %[[V:arg6]]: tensor<3xf32> {tg.opt_state = {name = "adam_v", param = 0 : i64}}
// CHECK-SAME: %[[GOOD:arg7]]: tensor<f32> {tg.opt_state = {init_value = 0.000000e+00 : f64, name = "loss_scale_good_steps"}}
// CHECK-SAME: %[[SKIPS:arg8]]: tensor<f32> {tg.opt_state = {init_value = 0.000000e+00 : f64, name = "loss_scale_skipped_steps"}}
// CHECK-SAME: -> (tensor<f32> {tg.loss = "loss"}, tensor<3xf32> {tg.updates_param = 0 : i64}, tensor<f32> {tg.train_output = "loss_scale"}, tensor<f32> {tg.train_output = "skipped"}, tensor<3xf32> {tg.updates_opt_state = 1 : i64}, tensor<3xf32> {tg.updates_opt_state = 2 : i64}, tensor<f32> {tg.updates_opt_state = 0 : i64}, tensor<f32> {tg.updates_opt_state = 3 : i64}, tensor<f32> {tg.updates_opt_state = 4 : i64}, tensor<f32> {tg.train_output = "skipped_steps"})
// The seed of the backward pass is S (broadcast to the gradient's shape).
// CHECK: %[[LOSS:[0-9]+]] = tg.reduce_sum
// CHECK: %[[SEED:[0-9]+]] = tg.reshape %[[S]]
// CHECK: %[[SEEDB:[0-9]+]] = tg.broadcast_to %[[SEED]]
// CHECK: %[[G:[0-9]+]] = tg.mul %[[SEEDB]], %arg1
// Unscale, then the check: the summed squares (as tg-clip-grad-norm builds
// them) are not finite, i.e. x - x is NaN.
// CHECK: %[[ONE:[0-9]+]] = tg.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[INV:[0-9]+]] = tg.div %[[ONE]], %[[S]]
// CHECK: %[[UNSCALED:[0-9]+]] = tg.mul %[[G]], %[[INV]]
// CHECK: %[[SQ:[0-9]+]] = tg.mul %[[UNSCALED]], %[[UNSCALED]]
// CHECK: %[[SUMSQ:[0-9]+]] = tg.reduce_sum %[[SQ]] {axes = array<i64: 0>}
// CHECK: %[[DIFF:[0-9]+]] = tg.sub %[[SUMSQ]], %[[SUMSQ]]
// CHECK: %[[FOUND:[0-9]+]] = tg.not_equal %[[DIFF]], %[[DIFF]]
// CHECK: %[[SKIPPED:[0-9]+]] = tg.select %[[FOUND]], %{{[0-9]+}}, %{{[0-9]+}}
// CHECK: %[[USED:[0-9]+]] = tg.mul %[[S]], %{{[0-9]+}}
// AdamW's step: step - skipped updates so far, in f64.
// CHECK: %[[STEPF:[0-9]+]] = tg.cast %[[STEP]] : tensor<i64> to tensor<f64>
// CHECK: %[[SKIPSF:[0-9]+]] = tg.cast %[[SKIPS]] : tensor<f32> to tensor<f64>
// CHECK: %[[APPLIEDF:[0-9]+]] = tg.sub %[[STEPF]], %[[SKIPSF]]
// CHECK: %[[APPLIED:[0-9]+]] = tg.cast %[[APPLIEDF]] : tensor<f64> to tensor<i64>
// CHECK: %[[NEWW:.*]], %[[NEWM:.*]], %[[NEWV:.*]] = tg.adamw_update %[[W]], %[[UNSCALED]], %[[M]], %[[V]], %arg3, %[[APPLIED]]
// A skipped step keeps the old parameter and moments.
// CHECK: %[[SKIP:[0-9]+]] = tg.not_equal %[[SKIPPED]], %{{[0-9]+}}
// CHECK: %[[W2:[0-9]+]] = tg.select %[[SKIP]], %[[W]], %[[NEWW]]
// CHECK: %[[M2:[0-9]+]] = tg.select %[[SKIP]], %[[M]], %[[NEWM]]
// CHECK: %[[V2:[0-9]+]] = tg.select %[[SKIP]], %[[V]], %[[NEWV]]
// The scale: x2 when good + 1 == 3 (and finite), x0.5 on a skipped step.
// CHECK: %[[NEXTGOOD:[0-9]+]] = tg.add %[[GOOD]], %{{[0-9]+}}
// CHECK: %[[INTERVAL:[0-9]+]] = tg.constant dense<3.000000e+00> : tensor<f32>
// CHECK: %[[GROW:[0-9]+]] = tg.equal %[[NEXTGOOD]], %[[INTERVAL]]
// CHECK: %[[TWO:[0-9]+]] = tg.constant dense<2.000000e+00> : tensor<f32>
// CHECK: %[[GROWN:[0-9]+]] = tg.mul %[[S]], %[[TWO]]
// CHECK: %[[GROWN0:[0-9]+]] = tg.mul %[[GROWN]], %[[Z:[0-9]+]]
// CHECK: %[[FINITE:[0-9]+]] = tg.equal %[[GROWN0]], %[[Z]]
// CHECK: %[[IFFINITE:[0-9]+]] = tg.select %[[FINITE]], %[[GROWN]], %[[S]]
// CHECK: %[[IFGOOD:[0-9]+]] = tg.select %[[GROW]], %[[IFFINITE]], %[[S]]
// CHECK: %[[HALF:[0-9]+]] = tg.constant dense<5.000000e-01> : tensor<f32>
// CHECK: %[[HALVED:[0-9]+]] = tg.mul %[[S]], %[[HALF]]
// CHECK: %[[NEWS:[0-9]+]] = tg.select %[[SKIP]], %[[HALVED]], %[[IFGOOD]]
// CHECK: %[[GOOD1:[0-9]+]] = tg.select %[[GROW]], %[[Z]], %[[NEXTGOOD]]
// CHECK: %[[NEWGOOD:[0-9]+]] = tg.select %[[SKIP]], %[[Z]], %[[GOOD1]]
// CHECK: %[[NEWSKIPS:[0-9]+]] = tg.add %[[SKIPS]], %[[SKIPPED]]
// CHECK: return %[[LOSS]], %[[W2]], %[[USED]], %[[SKIPPED]], %[[M2]], %[[V2]], %[[NEWS]], %[[NEWGOOD]], %[[NEWSKIPS]], %[[NEWSKIPS]]

// -----

// Without tg.loss_scaling nothing changes: the seed is 1, no new state.
module attributes {tg.optimizer = {kind = "sgd", learning_rate = 0.5 : f64}} {
  func.func @forward(%w: tensor<3xf32> {tg.param = {name = "w", init = "ones", scale = 0.0 : f64, seed = 1 : i64, trainable = true}})
      -> (tensor<f32> {tg.loss = "loss"}) {
    %0 = tg.reduce_sum %w {axes = array<i64: 0>} : (tensor<3xf32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-NOT: loss_scale
// CHECK-NOT: tg.select
// CHECK: return

// -----

// expected-error @+1 {{tg-autodiff: tg.loss_scaling: growth_interval must be from 1 to 16777216, got 0}}
module attributes {tg.optimizer = {kind = "sgd", learning_rate = 0.5 : f64}, tg.loss_scaling = {init_scale = 1024.0 : f64, growth_factor = 2.0 : f64, backoff_factor = 0.5 : f64, growth_interval = 0 : i64}} {
  func.func @forward(%w: tensor<3xf32> {tg.param = {name = "w", init = "ones", scale = 0.0 : f64, seed = 1 : i64, trainable = true}})
      -> (tensor<f32> {tg.loss = "loss"}) {
    %0 = tg.reduce_sum %w {axes = array<i64: 0>} : (tensor<3xf32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}

// -----

// expected-error @+1 {{tg-autodiff: tg.loss_scaling must be {init_scale, growth_factor, backoff_factor (f64), growth_interval (i64)}, got {init_scale = 1.024000e+03 : f64}}}
module attributes {tg.optimizer = {kind = "sgd", learning_rate = 0.5 : f64}, tg.loss_scaling = {init_scale = 1024.0 : f64}} {
  func.func @forward(%w: tensor<3xf32> {tg.param = {name = "w", init = "ones", scale = 0.0 : f64, seed = 1 : i64, trainable = true}})
      -> (tensor<f32> {tg.loss = "loss"}) {
    %0 = tg.reduce_sum %w {axes = array<i64: 0>} : (tensor<3xf32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}

// -----

// expected-error @+1 {{tg-autodiff: tg.loss_scaling: backoff_factor must be in (0, 1), got 2}}
module attributes {tg.optimizer = {kind = "sgd", learning_rate = 0.5 : f64}, tg.loss_scaling = {init_scale = 1024.0 : f64, growth_factor = 2.0 : f64, backoff_factor = 2.0 : f64, growth_interval = 10 : i64}} {
  func.func @forward(%w: tensor<3xf32> {tg.param = {name = "w", init = "ones", scale = 0.0 : f64, seed = 1 : i64, trainable = true}})
      -> (tensor<f32> {tg.loss = "loss"}) {
    %0 = tg.reduce_sum %w {axes = array<i64: 0>} : (tensor<3xf32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}
