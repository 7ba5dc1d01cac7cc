// RUN: tcc-opt %s -split-input-file -verify-diagnostics
// Each verifier rejects malformed ops with a message naming the problem.

func.func @matmul_k_mismatch(%a: tensor<4x3xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+1 {{contraction sizes differ}}
  %0 = tg.matmul %a, %b : (tensor<4x3xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  return
}

// -----

func.func @matmul_wrong_result(%a: tensor<4x3xf32>, %b: tensor<3x5xf32>) {
  // expected-error @+1 {{result shape [4, 4] should be [4, 5]}}
  %0 = tg.matmul %a, %b : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x4xf32>
  return
}

// -----

func.func @matmul_rank(%a: tensor<4xf32>, %b: tensor<3x5xf32>) {
  // expected-error @+1 {{expects rank-2 operands}}
  %0 = tg.matmul %a, %b : (tensor<4xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
  return
}

// -----

func.func @add_no_broadcast(%a: tensor<4x3xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{shapes [4, 3] and [4] do not broadcast}}
  %0 = tg.add %a, %b : (tensor<4x3xf32>, tensor<4xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @add_wrong_result(%a: tensor<4x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{should be the broadcast shape [4, 3]}}
  %0 = tg.add %a, %b : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @add_mixed_dtypes(%a: tensor<3xf32>, %b: tensor<3xf64>) {
  // expected-error @+1 {{one element type}}
  %0 = tg.add %a, %b : (tensor<3xf32>, tensor<3xf64>) -> tensor<3xf32>
  return
}

// -----

func.func @xent_labels(%a: tensor<4x3xf32>, %l: tensor<5xi32>) {
  // expected-error @+1 {{labels must be (4)}}
  %0 = tg.softmax_cross_entropy %a, %l : (tensor<4x3xf32>, tensor<5xi32>) -> tensor<4xf32>
  return
}

// -----

func.func @xent_float_labels(%a: tensor<4x3xf32>, %l: tensor<4xf32>) {
  // expected-error @+1 {{operand #1 must be ranked tensor of 32-bit signless integer or 64-bit signless integer values}}
  %0 = tg.softmax_cross_entropy %a, %l : (tensor<4x3xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @reduce_axis_range(%a: tensor<4x3xf32>) {
  // expected-error @+1 {{axis 2 out of range for rank 2}}
  %0 = tg.reduce_sum %a {axes = array<i64: 2>} : (tensor<4x3xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @reduce_unsorted(%a: tensor<4x3xf32>) {
  // expected-error @+1 {{axes must be sorted and unique}}
  %0 = tg.reduce_sum %a {axes = array<i64: 1, 0>} : (tensor<4x3xf32>) -> tensor<f32>
  return
}

// -----

func.func @reduce_result(%a: tensor<4x3xf32>) {
  // expected-error @+1 {{result shape [3] should be [4]}}
  %0 = tg.reduce_mean %a {axes = array<i64: 1>} : (tensor<4x3xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @reshape_count(%a: tensor<4x3xf32>) {
  // expected-error @+1 {{cannot reshape [4, 3] (12 elements) to [5] (5 elements)}}
  %0 = tg.reshape %a : (tensor<4x3xf32>) -> tensor<5xf32>
  return
}

// -----

func.func @broadcast_bad(%a: tensor<3xf32>) {
  // expected-error @+1 {{cannot broadcast [3] to [3, 4]}}
  %0 = tg.broadcast_to %a : (tensor<3xf32>) -> tensor<3x4xf32>
  return
}

// -----

func.func @constant_type() {
  // expected-error @+1 {{failed to verify that all of {value, result} have same type}}
  %0 = "tg.constant"() {value = dense<1.0> : tensor<2xf32>} : () -> tensor<3xf32>
  return
}

// -----

func.func @sgd_types(%p: tensor<3xf32>, %g: tensor<4xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{all of {param, grad, result} have same type}}
  %0 = "tg.sgd_update"(%p, %g, %lr) : (tensor<3xf32>, tensor<4xf32>, tensor<f32>) -> tensor<3xf32>
  return
}

// -----

func.func @xent_grad_type(%a: tensor<4x3xf32>, %l: tensor<4xi32>, %g: tensor<4xf64>) {
  // expected-error @+1 {{grad must have one entry per row, of the logits' type}}
  %0 = tg.softmax_cross_entropy_grad %a, %l, %g : (tensor<4x3xf32>, tensor<4xi32>, tensor<4xf64>) -> tensor<4x3xf32>
  return
}

// -----

func.func @xent_half_loss_type(%a: tensor<4x3xbf16>, %l: tensor<4xi32>) {
  // expected-error @+1 {{result must be one loss per row: [4] of 'bf16' or f32}}
  %0 = tg.softmax_cross_entropy %a, %l : (tensor<4x3xbf16>, tensor<4xi32>) -> tensor<4xf64>
  return
}

// -----

func.func @xent_f32_logits_low_loss(%a: tensor<4x3xf32>, %l: tensor<4xi32>) {
  // expected-error @+1 {{result must be one loss per row: [4] of 'f32'}}
  %0 = tg.softmax_cross_entropy %a, %l : (tensor<4x3xf32>, tensor<4xi32>) -> tensor<4xbf16>
  return
}

// -----

func.func @xent_grad_half_type(%a: tensor<4x3xf16>, %l: tensor<4xi32>, %g: tensor<4xbf16>) {
  // expected-error @+1 {{grad must have one entry per row, of the logits' type (or f32 with bf16 / f16 logits)}}
  %0 = tg.softmax_cross_entropy_grad %a, %l, %g : (tensor<4x3xf16>, tensor<4xi32>, tensor<4xbf16>) -> tensor<4x3xf16>
  return
}

// -----

func.func @sgd_on_bf16(%p: tensor<3xbf16>, %g: tensor<3xbf16>, %lr: tensor<f32>) {
  // expected-error @+1 {{must be ranked tensor of 32-bit float or 64-bit float values}}
  %0 = tg.sgd_update %p, %g, %lr : tensor<3xbf16>, tensor<f32>
  return
}

// -----

func.func @rope_odd_dim(%x: tensor<2x4x5xf32>, %c: tensor<4x5xf32>) {
  // expected-error @+1 {{the rotated (last) dimension must be even, got 5}}
  %0 = tg.rope %x, %c, %c : (tensor<2x4x5xf32>, tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<2x4x5xf32>
  return
}

// -----

func.func @rope_table_shape(%x: tensor<2x4x6xf32>, %c: tensor<4x6xf32>, %s: tensor<2x4x6xf32>) {
  // expected-error @+1 {{cos and sin must be [4, 6] (the input's last two dimensions), got [4, 6] and [2, 4, 6]}}
  %0 = tg.rope %x, %c, %s : (tensor<2x4x6xf32>, tensor<4x6xf32>, tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  return
}

// -----

func.func @rope_table_type(%x: tensor<2x4x6xf32>, %c: tensor<4x6xf64>) {
  // expected-error @+1 {{cos and sin must be 'f32' like the input, got 'f64'}}
  %0 = tg.rope %x, %c, %c : (tensor<2x4x6xf32>, tensor<4x6xf64>, tensor<4x6xf64>) -> tensor<2x4x6xf32>
  return
}

// -----

func.func @rope_half_table_type(%x: tensor<2x4x6xbf16>, %c: tensor<4x6xf16>) {
  // expected-error @+1 {{cos and sin must be 'bf16' or f32 like the input, got 'f16'}}
  %0 = tg.rope %x, %c, %c : (tensor<2x4x6xbf16>, tensor<4x6xf16>, tensor<4x6xf16>) -> tensor<2x4x6xbf16>
  return
}

// -----

func.func @rope_result(%x: tensor<2x4x6xf32>, %c: tensor<4x6xf32>) {
  // expected-error @+1 {{result type must equal the input type}}
  %0 = tg.rope %x, %c, %c : (tensor<2x4x6xf32>, tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<2x4x6xf64>
  return
}
