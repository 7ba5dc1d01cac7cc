// RUN: tcc-opt %s -split-input-file -tg-unscale-gradients -tg-update-loss-scale -verify-diagnostics
// The loss-scaling passes on a @train_step that was not seeded with the
// scale, or that already has their outputs.

module attributes {tg.loss_scaling = {init_scale = 1024.0 : f64, growth_factor = 2.0 : f64, backoff_factor = 0.5 : f64, growth_interval = 10 : i64}} {
  func.func @forward(%w: tensor<3xf32> {tg.param = {name = "w", init = "ones", scale = 0.0 : f64, seed = 1 : i64, trainable = true}})
      -> (tensor<f32> {tg.loss = "loss"}) {
    %0 = tg.reduce_sum %w {axes = array<i64: 0>} : (tensor<3xf32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
  // expected-error @+1 {{tg-unscale-gradients: @train_step has no "loss_scale" state; tg-autodiff adds it when the module has tg.loss_scaling}}
  func.func @train_step(%w: tensor<3xf32> {tg.param = {name = "w", init = "ones", scale = 0.0 : f64, seed = 1 : i64, trainable = true}})
      -> (tensor<f32> {tg.loss = "loss"}, tensor<3xf32> {tg.grad_of = 0 : i64}) {
    %0 = tg.reduce_sum %w {axes = array<i64: 0>} : (tensor<3xf32>) -> tensor<f32>
    return %0, %w : tensor<f32>, tensor<3xf32>
  }
}

// -----

module attributes {tg.loss_scaling = {init_scale = 1024.0 : f64, growth_factor = 2.0 : f64, backoff_factor = 0.5 : f64, growth_interval = 10 : i64}} {
  // expected-error @+1 {{tg-unscale-gradients: @train_step already reports "skipped"}}
  func.func @train_step(%w: tensor<3xf32> {tg.param = {name = "w", init = "ones", scale = 0.0 : f64, seed = 1 : i64, trainable = true}},
                        %s: tensor<f32> {tg.opt_state = {name = "loss_scale", init_value = 1024.0 : f64}})
      -> (tensor<f32> {tg.loss = "loss"}, tensor<f32> {tg.train_output = "skipped"}, tensor<3xf32> {tg.grad_of = 0 : i64}) {
    %0 = tg.reduce_sum %w {axes = array<i64: 0>} : (tensor<3xf32>) -> tensor<f32>
    return %0, %0, %w : tensor<f32>, tensor<f32>, tensor<3xf32>
  }
}
