// RUN: tcc-opt %s -split-input-file -tg-lower-to-kern -verify-diagnostics
// What tg-lower-to-kern refuses, with the reason.

func.func @forward(%w: tensor<3xf32> {tg.param = {name = "w", init = "ones", scale = 0.0 : f64, seed = 1 : i64, trainable = true}})
    -> (tensor<3xf32> {tg.output = "y"}) {
  // expected-error @+1 {{tg-lower-to-kern: only float splat constants are supported so far}}
  %0 = tg.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %1 = tg.add %w, %0 : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %1 : tensor<3xf32>
}

// -----

// An in-place update is illegal while the old value is still read after it.
func.func @train_step(%w: tensor<3xf32> {tg.param = {name = "w", init = "ones", scale = 0.0 : f64, seed = 1 : i64, trainable = true}},
                      %lr: tensor<f32> {tg.hyper = "learning_rate"})
    -> (tensor<3xf32> {tg.updates_param = 0 : i64}, tensor<3xf32> {tg.output = "y"}) {
  // expected-error @+1 {{parameter is read after its update}}
  %0 = tg.sgd_update %w, %w, %lr : tensor<3xf32>, tensor<f32>
  %1 = tg.relu %w : tensor<3xf32>
  return %0, %1 : tensor<3xf32>, tensor<3xf32>
}
