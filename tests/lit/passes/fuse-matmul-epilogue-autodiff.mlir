// RUN: tcc-opt %s -tg-autodiff -verify-diagnostics
// tg.matmul_epilogue exists only after autodiff: tg-autodiff refuses it
// with a message saying so (not a missing-interface crash).

module {
  func.func @forward(%x: tensor<4x8xf32> {tg.input = "x"}, %w: tensor<8x16xf32> {tg.param = {name = "w", init = "normal", scale = 1.0 : f64, seed = 1 : i64, trainable = true}}, %b: tensor<16xf32> {tg.param = {name = "b", init = "zeros", scale = 0.0 : f64, seed = 2 : i64, trainable = true}}) -> (tensor<f32> {tg.loss = "loss"}) {
    // expected-error @+1 {{tg-autodiff: tg.matmul_epilogue has no gradient: tg-fuse-matmul-epilogue creates it after the training recipe}}
    %0 = tg.matmul_epilogue %x, %w bias %b : (tensor<4x8xf32>, tensor<8x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
    %1 = tg.reduce_sum %0 {axes = array<i64: 0, 1>} : (tensor<4x16xf32>) -> tensor<f32>
    return %1 : tensor<f32>
  }
}
