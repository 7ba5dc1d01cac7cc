// RUN: tcc-opt %s -split-input-file -tg-lower-to-kern -verify-diagnostics
// What tg-lower-to-kern refuses, with the reason.

// Composite ops must have been decomposed into primitives first.
func.func @forward(%x: tensor<2x3xf32> {tg.input = "x"}) -> (tensor<2x3xf32> {tg.output = "y"}) {
  // expected-error @+1 {{tg-lower-to-kern: no lowering for tg.softmax (composite ops are rewritten by tg-decompose first)}}
  %0 = tg.softmax %x {axis = 1 : i64} : tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// expected-error @+1 {{tg-lower-to-kern: result 0 updates an argument that does not exist}}
func.func @train_step(%w: tensor<3xf32> {tg.param = {name = "w", init = "ones", scale = 0.0 : f64, seed = 1 : i64, trainable = true}},
                      %lr: tensor<f32> {tg.hyper = "learning_rate"})
    -> (tensor<3xf32> {tg.updates_opt_state = 0 : i64}) {
  %0 = tg.sgd_update %w, %w, %lr : tensor<3xf32>, tensor<f32>
  return %0 : tensor<3xf32>
}

// -----

// Parameter 1 would receive parameter 0, which is itself overwritten.
// expected-error @+1 {{tg-lower-to-kern: result 1 is the value of another updated argument}}
func.func @train_step(%w: tensor<3xf32> {tg.param = {name = "w", init = "ones", scale = 0.0 : f64, seed = 1 : i64, trainable = true}},
                      %u: tensor<3xf32> {tg.param = {name = "u", init = "ones", scale = 0.0 : f64, seed = 2 : i64, trainable = true}},
                      %lr: tensor<f32> {tg.hyper = "learning_rate"})
    -> (tensor<3xf32> {tg.updates_param = 0 : i64}, tensor<3xf32> {tg.updates_param = 1 : i64}) {
  %0 = tg.sgd_update %w, %w, %lr : tensor<3xf32>, tensor<f32>
  return %0, %w : tensor<3xf32>, tensor<3xf32>
}
