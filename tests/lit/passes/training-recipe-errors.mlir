// The training-recipe passes need @train_step (tg-autodiff makes it); each
// says so by name rather than failing obscurely.
// RUN: tcc-opt %s -tg-accumulate-micro-batches -verify-diagnostics
// RUN: tcc-opt %s -tg-clip-grad-norm -verify-diagnostics
// RUN: tcc-opt %s -tg-sgd-update -verify-diagnostics
// RUN: tcc-opt %s -tg-adamw-update -verify-diagnostics
// RUN: tcc-opt %s -tg-emit-gradients -verify-diagnostics

// expected-error-re @+1 {{tg-{{(accumulate-micro-batches|clip-grad-norm|sgd-update|adamw-update|emit-gradients)}}: no @train_step (run tg-autodiff first)}}
module attributes {tg.optimizer = {kind = "sgd", learning_rate = 0.5 : f64}, tg.micro_batches = 2 : i64, tg.grad_clip = 1.0 : f64} {
  func.func @forward(%w: tensor<3xf32> {tg.param = {name = "w", init = "ones", scale = 0.0 : f64, seed = 1 : i64, trainable = true}})
      -> (tensor<f32> {tg.loss = "loss"}) {
    %0 = tg.reduce_sum %w {axes = array<i64: 0>} : (tensor<3xf32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}
