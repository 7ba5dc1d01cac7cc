// RUN: tcc-opt %s -split-input-file -verify-diagnostics
// Each verifier of a structural or NN op rejects malformed ops with a
// message naming the problem.

func.func @matmul_batches(%a: tensor<2x3x4xf32>, %b: tensor<3x4x5xf32>) {
  // expected-error @+1 {{batch dimensions [2] and [3] do not broadcast}}
  %0 = tg.matmul %a, %b : (tensor<2x3x4xf32>, tensor<3x4x5xf32>) -> tensor<2x3x5xf32>
  return
}

// -----

func.func @matmul_batched_result(%a: tensor<2x3x4xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+1 {{result shape [3, 5] should be [2, 3, 5]}}
  %0 = tg.matmul %a, %b : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<3x5xf32>
  return
}

// -----

func.func @matmul_batched_k(%a: tensor<2x3x4xf32>, %b: tensor<2x3x5xf32>) {
  // expected-error @+1 {{contraction sizes differ: lhs [2, 3, 4] and rhs [2, 3, 5] give K = 4 vs 3}}
  %0 = tg.matmul %a, %b : (tensor<2x3x4xf32>, tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
  return
}

// -----

func.func @reduce_max_result(%a: tensor<4x3xf32>) {
  // expected-error @+1 {{result shape [3] should be [4]}}
  %0 = tg.reduce_max %a {axes = array<i64: 1>} : (tensor<4x3xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @softmax_axis(%a: tensor<4x3xf32>) {
  // expected-error @+1 {{axis 2 out of range for [4, 3]}}
  %0 = tg.softmax %a {axis = 2 : i64} : tensor<4x3xf32>
  return
}

// -----

func.func @log_softmax_negative_axis(%a: tensor<4x3xf32>) {
  // expected-error @+1 {{axis -1 out of range for [4, 3]}}
  %0 = tg.log_softmax %a {axis = -1 : i64} : tensor<4x3xf32>
  return
}

// -----

func.func @cross_entropy_targets(%a: tensor<2x3x4xf32>, %t: tensor<2x4xi32>) {
  // expected-error @+1 {{targets must be [2, 3] to match logits [2, 3, 4], got [2, 4]}}
  %0 = tg.cross_entropy %a, %t : (tensor<2x3x4xf32>, tensor<2x4xi32>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_not_scalar(%a: tensor<3x4xf32>, %t: tensor<3xi32>) {
  // expected-error @+1 {{result #0 must be 0D tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values}}
  %0 = tg.cross_entropy %a, %t : (tensor<3x4xf32>, tensor<3xi32>) -> tensor<3xf32>
  return
}

// -----

func.func @cross_entropy_dtype(%a: tensor<3x4xf32>, %t: tensor<3xi32>) {
  // expected-error @+1 {{result must be a scalar of the logits' type 'f32'}}
  %0 = tg.cross_entropy %a, %t : (tensor<3x4xf32>, tensor<3xi32>) -> tensor<f64>
  return
}

// -----

func.func @layer_norm_weight(%a: tensor<3x4xf32>, %w: tensor<3xf32>) {
  // expected-error @+1 {{weight must be [4] of 'f32', got [3] of 'f32'}}
  %0 = tg.layer_norm %a weight %w : (tensor<3x4xf32>, tensor<3xf32>) -> tensor<3x4xf32>
  return
}

// -----

func.func @layer_norm_bias_dtype(%a: tensor<3x4xf32>, %b: tensor<4xf64>) {
  // expected-error @+1 {{bias must be [4] of 'f32', got [4] of 'f64'}}
  %0 = tg.layer_norm %a bias %b : (tensor<3x4xf32>, tensor<4xf64>) -> tensor<3x4xf32>
  return
}

// -----

func.func @rms_norm_scalar(%a: tensor<f32>) {
  // expected-error @+1 {{normalizes over the last axis; got a scalar}}
  %0 = tg.rms_norm %a : (tensor<f32>) -> tensor<f32>
  return
}

// -----

func.func @rms_norm_result(%a: tensor<3x4xf32>) {
  // expected-error @+1 {{result type must equal the input type}}
  %0 = tg.rms_norm %a : (tensor<3x4xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @causal_mask_rank(%a: tensor<4xf32>) {
  // expected-error @+1 {{input must be (..., T, S), got [4]}}
  %0 = tg.causal_mask %a : tensor<4xf32>
  return
}

// -----

func.func @gather_result(%t: tensor<10x4xf32>, %i: tensor<2x3xi32>) {
  // expected-error @+1 {{result must be [2, 3, 4] of 'f32' (ids shape, then the table's row shape), got [2, 3] of 'f32'}}
  %0 = tg.gather %t, %i : (tensor<10x4xf32>, tensor<2x3xi32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @gather_float_ids(%t: tensor<10x4xf32>, %i: tensor<2xf32>) {
  // expected-error @+1 {{operand #1 must be ranked tensor of 32-bit signless integer or 64-bit signless integer values}}
  %0 = tg.gather %t, %i : (tensor<10x4xf32>, tensor<2xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @scatter_add_updates(%i: tensor<2x3xi32>, %u: tensor<2x4xf32>) {
  // expected-error @+1 {{updates must be [2, 3, 4] of 'f32' (ids shape, then the result's row shape), got [2, 4] of 'f32'}}
  %0 = tg.scatter_add %i, %u : (tensor<2x3xi32>, tensor<2x4xf32>) -> tensor<10x4xf32>
  return
}

// -----

func.func @transpose_perm(%a: tensor<2x3x4xf32>) {
  // expected-error @+1 {{perm [0, 0, 1] is not a permutation of the 3 dimensions of [2, 3, 4]}}
  %0 = tg.transpose %a {perm = array<i64: 0, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<2x2x3xf32>
  return
}

// -----

func.func @transpose_perm_length(%a: tensor<2x3x4xf32>) {
  // expected-error @+1 {{perm [1, 0] is not a permutation of the 3 dimensions}}
  %0 = tg.transpose %a {perm = array<i64: 1, 0>} : (tensor<2x3x4xf32>) -> tensor<3x2xf32>
  return
}

// -----

func.func @transpose_result(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{result shape [2, 3] should be [3, 2]}}
  %0 = tg.transpose %a {perm = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @slice_range(%a: tensor<4x3xf32>) {
  // expected-error @+1 {{dimension 1: [2, 4) is not a non-empty range within [0, 3)}}
  %0 = tg.slice %a {starts = array<i64: 0, 2>, ends = array<i64: 4, 4>} : (tensor<4x3xf32>) -> tensor<4x2xf32>
  return
}

// -----

func.func @slice_empty(%a: tensor<4x3xf32>) {
  // expected-error @+1 {{dimension 0: [2, 2) is not a non-empty range}}
  %0 = tg.slice %a {starts = array<i64: 2, 0>, ends = array<i64: 2, 3>} : (tensor<4x3xf32>) -> tensor<0x3xf32>
  return
}

// -----

func.func @slice_rank(%a: tensor<4x3xf32>) {
  // expected-error @+1 {{needs one start and one end per dimension of [4, 3], got starts [1] and ends [2]}}
  %0 = tg.slice %a {starts = array<i64: 1>, ends = array<i64: 2>} : (tensor<4x3xf32>) -> tensor<1x3xf32>
  return
}

// -----

func.func @slice_result(%a: tensor<4x3xf32>) {
  // expected-error @+1 {{result shape [2, 3] should be [1, 3]}}
  %0 = tg.slice %a {starts = array<i64: 1, 0>, ends = array<i64: 2, 3>} : (tensor<4x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @concat_mismatch(%a: tensor<2x3xf32>, %b: tensor<3x3xf32>) {
  // expected-error @+1 {{input #1 [3, 3] of 'f32' must match [2, 6] of 'f32' except along axis 1}}
  %0 = tg.concat %a, %b {axis = 1 : i64} : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x6xf32>
  return
}

// -----

func.func @concat_sizes(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) {
  // expected-error @+1 {{sizes along axis 1 add up to 6, expected 5}}
  %0 = tg.concat %a, %b {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x5xf32>
  return
}

// -----

func.func @concat_dtype(%a: tensor<2x3xf32>, %b: tensor<2x3xf64>) {
  // expected-error @+1 {{input #1 [2, 3] of 'f64' must match [2, 6] of 'f32' except along axis 1}}
  %0 = tg.concat %a, %b {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2x3xf64>) -> tensor<2x6xf32>
  return
}

// -----

func.func @concat_none() {
  // expected-error @+1 {{needs at least one input}}
  %0 = tg.concat {axis = 0 : i64} : () -> tensor<2xf32>
  return
}

// -----

func.func @split_sizes(%a: tensor<5x3xf32>) {
  // expected-error @+1 {{sizes along axis 0 add up to 4, expected 5}}
  %0:2 = tg.split %a {axis = 0 : i64} : (tensor<5x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>)
  return
}

// -----

func.func @split_axis(%a: tensor<5x3xf32>) {
  // expected-error @+1 {{axis 2 out of range for [5, 3]}}
  %0:2 = tg.split %a {axis = 2 : i64} : (tensor<5x3xf32>) -> (tensor<2x3xf32>, tensor<3x3xf32>)
  return
}

// -----

func.func @split_other_dims(%a: tensor<5x3xf32>) {
  // expected-error @+1 {{result #1 [3, 2] of 'f32' must match [5, 3] of 'f32' except along axis 0}}
  %0:2 = tg.split %a {axis = 0 : i64} : (tensor<5x3xf32>) -> (tensor<2x3xf32>, tensor<3x2xf32>)
  return
}
