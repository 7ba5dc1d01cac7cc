// RUN: tcc-opt %s -split-input-file -verify-diagnostics
// The optimizer ops' verifiers reject hyper-parameters PyTorch would refuse
// and mismatched operand types.

func.func @adamw_beta1(%p: tensor<3xf32>, %lr: tensor<f32>, %step: tensor<i64>) {
  // expected-error @+1 {{beta1 must be in [0, 1), got 1}}
  %0:3 = tg.adamw_update %p, %p, %p, %p, %lr, %step {beta1 = 1.0 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64} : tensor<3xf32>, tensor<f32>
  return
}

// -----

func.func @adamw_beta2(%p: tensor<3xf32>, %lr: tensor<f32>, %step: tensor<i64>) {
  // expected-error @+1 {{beta2 must be in [0, 1), got -0.5}}
  %0:3 = tg.adamw_update %p, %p, %p, %p, %lr, %step {beta1 = 0.9 : f64, beta2 = -0.5 : f64, eps = 1.0e-8 : f64} : tensor<3xf32>, tensor<f32>
  return
}

// -----

func.func @adamw_eps(%p: tensor<3xf32>, %lr: tensor<f32>, %step: tensor<i64>) {
  // expected-error @+1 {{eps must be > 0, got 0}}
  %0:3 = tg.adamw_update %p, %p, %p, %p, %lr, %step {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 0.0 : f64} : tensor<3xf32>, tensor<f32>
  return
}

// -----

func.func @adamw_weight_decay(%p: tensor<3xf32>, %lr: tensor<f32>, %step: tensor<i64>) {
  // expected-error @+1 {{weight_decay must be >= 0, got -0.1}}
  %0:3 = tg.adamw_update %p, %p, %p, %p, %lr, %step {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = -0.1 : f64} : tensor<3xf32>, tensor<f32>
  return
}

// -----

func.func @adamw_state_type(%p: tensor<3xf32>, %m: tensor<4xf32>, %lr: tensor<f32>, %step: tensor<i64>) {
  // expected-error @+1 {{all of {param, grad, m, v, new_param, new_m, new_v} have same type}}
  %0:3 = "tg.adamw_update"(%p, %p, %m, %p, %lr, %step) {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64} : (tensor<3xf32>, tensor<3xf32>, tensor<4xf32>, tensor<3xf32>, tensor<f32>, tensor<i64>) -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>)
  return
}

// -----

func.func @adamw_step_type(%p: tensor<3xf32>, %lr: tensor<f32>, %step: tensor<f32>) {
  // expected-error @+1 {{operand #5 must be 0D tensor of 64-bit signless integer values}}
  %0:3 = "tg.adamw_update"(%p, %p, %p, %p, %lr, %step) {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64} : (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<f32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>)
  return
}

// -----

func.func @momentum_range(%p: tensor<3xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{momentum must be in [0, 1), got 1.5}}
  %0:2 = tg.momentum_update %p, %p, %p, %lr {momentum = 1.5 : f64} : tensor<3xf32>, tensor<f32>
  return
}

// -----

func.func @sgd_weight_decay(%p: tensor<3xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{weight_decay must be >= 0, got -1}}
  %0 = tg.sgd_update %p, %p, %lr {weight_decay = -1.0 : f64} : tensor<3xf32>, tensor<f32>
  return
}

// -----

func.func @sgd_lr_not_scalar(%p: tensor<3xf32>, %lr: tensor<3xf32>) {
  // expected-error @+1 {{operand #2 must be 0D tensor}}
  %0 = "tg.sgd_update"(%p, %p, %lr) : (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return
}
