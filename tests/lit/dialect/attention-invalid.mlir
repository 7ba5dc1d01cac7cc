// RUN: tcc-opt %s -split-input-file -verify-diagnostics
// The verifiers of tg.attention and tg.attention_grad (TgAttentionOps.cpp)
// reject each malformed op with a message naming the problem.

func.func @q_rank(%q: tensor<2x3x8xf32>, %k: tensor<2x1x5x8xf32>) {
  // expected-error @+1 {{q must be (B, H, T, D), got [2, 3, 8]}}
  %0:2 = tg.attention %q, %k, %k {scale = 1.0 : f64} : (tensor<2x3x8xf32>, tensor<2x1x5x8xf32>, tensor<2x1x5x8xf32>) -> (tensor<2x3x8xf32>, tensor<2x3xf32>)
  return
}

// -----

func.func @k_rank(%q: tensor<2x1x3x8xf32>, %k: tensor<2x5x8xf32>) {
  // expected-error @+1 {{k and v must both be (B, Hkv, S, D), got k [2, 5, 8] and v [2, 5, 8]}}
  %0:2 = tg.attention %q, %k, %k {scale = 1.0 : f64} : (tensor<2x1x3x8xf32>, tensor<2x5x8xf32>, tensor<2x5x8xf32>) -> (tensor<2x1x3x8xf32>, tensor<2x1x3xf32>)
  return
}

// -----

func.func @k_v_shapes(%q: tensor<2x1x3x8xf32>, %k: tensor<2x1x5x8xf32>, %v: tensor<2x1x4x8xf32>) {
  // expected-error @+1 {{k and v must both be (B, Hkv, S, D), got k [2, 1, 5, 8] and v [2, 1, 4, 8]}}
  %0:2 = tg.attention %q, %k, %v {scale = 1.0 : f64} : (tensor<2x1x3x8xf32>, tensor<2x1x5x8xf32>, tensor<2x1x4x8xf32>) -> (tensor<2x1x3x8xf32>, tensor<2x1x3xf32>)
  return
}

// -----

func.func @batch_mismatch(%q: tensor<2x1x3x8xf32>, %k: tensor<3x1x5x8xf32>) {
  // expected-error @+1 {{k and v must share q's batch B and head size D: q [2, 1, 3, 8], k [3, 1, 5, 8]}}
  %0:2 = tg.attention %q, %k, %k {scale = 1.0 : f64} : (tensor<2x1x3x8xf32>, tensor<3x1x5x8xf32>, tensor<3x1x5x8xf32>) -> (tensor<2x1x3x8xf32>, tensor<2x1x3xf32>)
  return
}

// -----

func.func @head_size_mismatch(%q: tensor<2x1x3x8xf32>, %k: tensor<2x1x5x4xf32>) {
  // expected-error @+1 {{k and v must share q's batch B and head size D: q [2, 1, 3, 8], k [2, 1, 5, 4]}}
  %0:2 = tg.attention %q, %k, %k {scale = 1.0 : f64} : (tensor<2x1x3x8xf32>, tensor<2x1x5x4xf32>, tensor<2x1x5x4xf32>) -> (tensor<2x1x3x8xf32>, tensor<2x1x3xf32>)
  return
}

// -----

func.func @heads_not_a_multiple(%q: tensor<2x4x3x8xf32>, %k: tensor<2x3x5x8xf32>) {
  // expected-error @+1 {{q's head count H = 4 must be a multiple of k/v's head count Hkv = 3}}
  %0:2 = tg.attention %q, %k, %k {scale = 1.0 : f64} : (tensor<2x4x3x8xf32>, tensor<2x3x5x8xf32>, tensor<2x3x5x8xf32>) -> (tensor<2x4x3x8xf32>, tensor<2x4x3xf32>)
  return
}

// -----

func.func @zero_kv_heads(%q: tensor<2x4x3x8xf32>, %k: tensor<2x0x5x8xf32>) {
  // expected-error @+1 {{q's head count H = 4 must be a multiple of k/v's head count Hkv = 0}}
  %0:2 = tg.attention %q, %k, %k {scale = 1.0 : f64} : (tensor<2x4x3x8xf32>, tensor<2x0x5x8xf32>, tensor<2x0x5x8xf32>) -> (tensor<2x4x3x8xf32>, tensor<2x4x3xf32>)
  return
}

// -----

func.func @mixed_element_types(%q: tensor<2x1x3x8xf32>, %k: tensor<2x1x5x8xbf16>) {
  // expected-error @+1 {{q, k and v must have one element type, got 'f32', 'bf16', 'bf16'}}
  %0:2 = tg.attention %q, %k, %k {scale = 1.0 : f64} : (tensor<2x1x3x8xf32>, tensor<2x1x5x8xbf16>, tensor<2x1x5x8xbf16>) -> (tensor<2x1x3x8xf32>, tensor<2x1x3xf32>)
  return
}

// -----

func.func @lse_shape(%q: tensor<2x1x3x8xf32>, %k: tensor<2x1x5x8xf32>) {
  // expected-error @+1 {{lse must be (B, H, T) = [2, 1, 3] of 'f32', got [2, 1, 5] of 'f32'}}
  %0:2 = tg.attention %q, %k, %k {scale = 1.0 : f64} : (tensor<2x1x3x8xf32>, tensor<2x1x5x8xf32>, tensor<2x1x5x8xf32>) -> (tensor<2x1x3x8xf32>, tensor<2x1x5xf32>)
  return
}

// -----

func.func @lse_16_bit(%q: tensor<2x1x3x8xbf16>, %k: tensor<2x1x5x8xbf16>) {
  // expected-error @+1 {{lse must be (B, H, T) = [2, 1, 3] of 'f32', got [2, 1, 3] of 'bf16'}}
  %0:2 = tg.attention %q, %k, %k {scale = 1.0 : f64} : (tensor<2x1x3x8xbf16>, tensor<2x1x5x8xbf16>, tensor<2x1x5x8xbf16>) -> (tensor<2x1x3x8xbf16>, tensor<2x1x3xbf16>)
  return
}

// -----

func.func @lse_f64_inputs(%q: tensor<2x1x3x8xf64>, %k: tensor<2x1x5x8xf64>) {
  // expected-error @+1 {{lse must be (B, H, T) = [2, 1, 3] of 'f64', got [2, 1, 3] of 'f32'}}
  %0:2 = tg.attention %q, %k, %k {scale = 1.0 : f64} : (tensor<2x1x3x8xf64>, tensor<2x1x5x8xf64>, tensor<2x1x5x8xf64>) -> (tensor<2x1x3x8xf64>, tensor<2x1x3xf32>)
  return
}

// -----

func.func @scale_not_finite(%q: tensor<2x1x3x8xf32>, %k: tensor<2x1x5x8xf32>) {
  // expected-error @+1 {{scale must be finite, got inf}}
  %0:2 = tg.attention %q, %k, %k {scale = 0x7FF0000000000000 : f64} : (tensor<2x1x3x8xf32>, tensor<2x1x5x8xf32>, tensor<2x1x5x8xf32>) -> (tensor<2x1x3x8xf32>, tensor<2x1x3xf32>)
  return
}

// -----

func.func @rate_one(%q: tensor<2x1x3x8xf32>, %k: tensor<2x1x5x8xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{dropout_rate must be in [0, 1), got 1}}
  %0:2 = tg.attention %q, %k, %k dropout(%s, %s) {scale = 1.0 : f64, dropout_rate = 1.0 : f64, op_id = 1 : i64} : (tensor<2x1x3x8xf32>, tensor<2x1x5x8xf32>, tensor<2x1x5x8xf32>, tensor<i64>, tensor<i64>) -> (tensor<2x1x3x8xf32>, tensor<2x1x3xf32>)
  return
}

// -----

func.func @rate_negative(%q: tensor<2x1x3x8xf32>, %k: tensor<2x1x5x8xf32>) {
  // expected-error @+1 {{dropout_rate must be in [0, 1), got -0.25}}
  %0:2 = tg.attention %q, %k, %k {scale = 1.0 : f64, dropout_rate = -0.25 : f64} : (tensor<2x1x3x8xf32>, tensor<2x1x5x8xf32>, tensor<2x1x5x8xf32>) -> (tensor<2x1x3x8xf32>, tensor<2x1x3xf32>)
  return
}

// -----

func.func @rate_without_operands(%q: tensor<2x1x3x8xf32>, %k: tensor<2x1x5x8xf32>) {
  // expected-error @+1 {{dropout_rate > 0 needs the dropout(rng_seed, step) operands}}
  %0:2 = tg.attention %q, %k, %k {scale = 1.0 : f64, dropout_rate = 0.1 : f64, op_id = 1 : i64} : (tensor<2x1x3x8xf32>, tensor<2x1x5x8xf32>, tensor<2x1x5x8xf32>) -> (tensor<2x1x3x8xf32>, tensor<2x1x3xf32>)
  return
}

// -----

func.func @operands_without_rate(%q: tensor<2x1x3x8xf32>, %k: tensor<2x1x5x8xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{dropout operands given with dropout_rate 0}}
  %0:2 = tg.attention %q, %k, %k dropout(%s, %s) {scale = 1.0 : f64, op_id = 1 : i64} : (tensor<2x1x3x8xf32>, tensor<2x1x5x8xf32>, tensor<2x1x5x8xf32>, tensor<i64>, tensor<i64>) -> (tensor<2x1x3x8xf32>, tensor<2x1x3xf32>)
  return
}

// -----

func.func @seed_without_step(%q: tensor<2x1x3x8xf32>, %k: tensor<2x1x5x8xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{rng_seed and step must be given together}}
  %0:2 = "tg.attention"(%q, %k, %k, %s) <{scale = 1.0 : f64, dropout_rate = 0.1 : f64, op_id = 1 : i64, operandSegmentSizes = array<i32: 1, 1, 1, 1, 0>}> : (tensor<2x1x3x8xf32>, tensor<2x1x5x8xf32>, tensor<2x1x5x8xf32>, tensor<i64>) -> (tensor<2x1x3x8xf32>, tensor<2x1x3xf32>)
  return
}

// -----

func.func @rate_without_op_id(%q: tensor<2x1x3x8xf32>, %k: tensor<2x1x5x8xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{dropout_rate > 0 needs op_id (the dropout mask's stream)}}
  %0:2 = tg.attention %q, %k, %k dropout(%s, %s) {scale = 1.0 : f64, dropout_rate = 0.1 : f64} : (tensor<2x1x3x8xf32>, tensor<2x1x5x8xf32>, tensor<2x1x5x8xf32>, tensor<i64>, tensor<i64>) -> (tensor<2x1x3x8xf32>, tensor<2x1x3xf32>)
  return
}

// -----

func.func @result_type(%q: tensor<2x1x3x8xf32>, %k: tensor<2x1x5x8xf32>) {
  // expected-error @+1 {{result must have q's type 'tensor<2x1x3x8xf32>'}}
  %0:2 = tg.attention %q, %k, %k {scale = 1.0 : f64} : (tensor<2x1x3x8xf32>, tensor<2x1x5x8xf32>, tensor<2x1x5x8xf32>) -> (tensor<2x1x3x4xf32>, tensor<2x1x3xf32>)
  return
}

// -----

func.func @grad_contract(%q: tensor<2x4x3x8xf32>, %k: tensor<2x3x5x8xf32>, %o: tensor<2x4x3x8xf32>, %lse: tensor<2x4x3xf32>) {
  // attention_grad shares attention's contract.
  // expected-error @+1 {{q's head count H = 4 must be a multiple of k/v's head count Hkv = 3}}
  %0:3 = tg.attention_grad %q, %k, %k, %o, %lse, %o {scale = 1.0 : f64} : (tensor<2x4x3x8xf32>, tensor<2x3x5x8xf32>, tensor<2x3x5x8xf32>, tensor<2x4x3x8xf32>, tensor<2x4x3xf32>, tensor<2x4x3x8xf32>) -> (tensor<2x4x3x8xf32>, tensor<2x3x5x8xf32>, tensor<2x3x5x8xf32>)
  return
}

// -----

func.func @grad_lse(%q: tensor<2x1x3x8xf32>, %k: tensor<2x1x5x8xf32>, %lse: tensor<2x1x3xf64>) {
  // expected-error @+1 {{lse must be (B, H, T) = [2, 1, 3] of 'f32', got [2, 1, 3] of 'f64'}}
  %0:3 = tg.attention_grad %q, %k, %k, %q, %lse, %q {scale = 1.0 : f64} : (tensor<2x1x3x8xf32>, tensor<2x1x5x8xf32>, tensor<2x1x5x8xf32>, tensor<2x1x3x8xf32>, tensor<2x1x3xf64>, tensor<2x1x3x8xf32>) -> (tensor<2x1x3x8xf32>, tensor<2x1x5x8xf32>, tensor<2x1x5x8xf32>)
  return
}

// -----

func.func @grad_rate_without_operands(%q: tensor<2x1x3x8xf32>, %k: tensor<2x1x5x8xf32>, %lse: tensor<2x1x3xf32>) {
  // expected-error @+1 {{dropout_rate > 0 needs the dropout(rng_seed, step) operands}}
  %0:3 = tg.attention_grad %q, %k, %k, %q, %lse, %q {scale = 1.0 : f64, dropout_rate = 0.5 : f64, op_id = 1 : i64} : (tensor<2x1x3x8xf32>, tensor<2x1x5x8xf32>, tensor<2x1x5x8xf32>, tensor<2x1x3x8xf32>, tensor<2x1x3xf32>, tensor<2x1x3x8xf32>) -> (tensor<2x1x3x8xf32>, tensor<2x1x5x8xf32>, tensor<2x1x5x8xf32>)
  return
}

// -----

func.func @grad_out_type(%q: tensor<2x1x3x8xf32>, %k: tensor<2x1x5x8xf32>, %o: tensor<2x1x3x8xf64>, %lse: tensor<2x1x3xf32>) {
  // expected-error @+1 {{out and grad must have q's type 'tensor<2x1x3x8xf32>'}}
  %0:3 = tg.attention_grad %q, %k, %k, %o, %lse, %q {scale = 1.0 : f64} : (tensor<2x1x3x8xf32>, tensor<2x1x5x8xf32>, tensor<2x1x5x8xf32>, tensor<2x1x3x8xf64>, tensor<2x1x3xf32>, tensor<2x1x3x8xf32>) -> (tensor<2x1x3x8xf32>, tensor<2x1x5x8xf32>, tensor<2x1x5x8xf32>)
  return
}

// -----

func.func @grad_grad_type(%q: tensor<2x1x3x8xf32>, %k: tensor<2x1x5x8xf32>, %g: tensor<2x1x5x8xf32>, %lse: tensor<2x1x3xf32>) {
  // expected-error @+1 {{out and grad must have q's type 'tensor<2x1x3x8xf32>'}}
  %0:3 = tg.attention_grad %q, %k, %k, %q, %lse, %g {scale = 1.0 : f64} : (tensor<2x1x3x8xf32>, tensor<2x1x5x8xf32>, tensor<2x1x5x8xf32>, tensor<2x1x3x8xf32>, tensor<2x1x3xf32>, tensor<2x1x5x8xf32>) -> (tensor<2x1x3x8xf32>, tensor<2x1x5x8xf32>, tensor<2x1x5x8xf32>)
  return
}

// -----

func.func @grad_dk_type(%q: tensor<2x1x3x8xf32>, %k: tensor<2x1x5x8xf32>, %lse: tensor<2x1x3xf32>) {
  // expected-error @+1 {{dq, dk, dv must have the types of q, k, v}}
  %0:3 = tg.attention_grad %q, %k, %k, %q, %lse, %q {scale = 1.0 : f64} : (tensor<2x1x3x8xf32>, tensor<2x1x5x8xf32>, tensor<2x1x5x8xf32>, tensor<2x1x3x8xf32>, tensor<2x1x3xf32>, tensor<2x1x3x8xf32>) -> (tensor<2x1x3x8xf32>, tensor<2x1x3x8xf32>, tensor<2x1x5x8xf32>)
  return
}

// -----

func.func @grad_dq_type(%q: tensor<2x1x3x8xf32>, %k: tensor<2x1x5x8xf32>, %lse: tensor<2x1x3xf32>) {
  // expected-error @+1 {{dq, dk, dv must have the types of q, k, v}}
  %0:3 = tg.attention_grad %q, %k, %k, %q, %lse, %q {scale = 1.0 : f64} : (tensor<2x1x3x8xf32>, tensor<2x1x5x8xf32>, tensor<2x1x5x8xf32>, tensor<2x1x3x8xf32>, tensor<2x1x3xf32>, tensor<2x1x3x8xf32>) -> (tensor<2x1x3x8xf64>, tensor<2x1x5x8xf32>, tensor<2x1x5x8xf32>)
  return
}

// -----

func.func @grad_dv_type(%q: tensor<2x1x3x8xf32>, %k: tensor<2x1x5x8xf32>, %lse: tensor<2x1x3xf32>) {
  // expected-error @+1 {{dq, dk, dv must have the types of q, k, v}}
  %0:3 = tg.attention_grad %q, %k, %k, %q, %lse, %q {scale = 1.0 : f64} : (tensor<2x1x3x8xf32>, tensor<2x1x5x8xf32>, tensor<2x1x5x8xf32>, tensor<2x1x3x8xf32>, tensor<2x1x3xf32>, tensor<2x1x3x8xf32>) -> (tensor<2x1x3x8xf32>, tensor<2x1x5x8xf32>, tensor<2x1x5x4xf32>)
  return
}
