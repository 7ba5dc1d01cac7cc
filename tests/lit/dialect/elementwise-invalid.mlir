// RUN: tcc-opt %s -split-input-file -verify-diagnostics
// The elementwise verifiers reject malformed ops with a message naming the
// problem.

func.func @sub_no_broadcast(%a: tensor<4x3xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{shapes [4, 3] and [4] do not broadcast}}
  %0 = tg.sub %a, %b : (tensor<4x3xf32>, tensor<4xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @div_wrong_result(%a: tensor<4x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{result shape [4] should be the broadcast shape [4, 3]}}
  %0 = tg.div %a, %b : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @max_mixed_dtypes(%a: tensor<3xf32>, %b: tensor<3xf64>) {
  // expected-error @+1 {{operands and result must have one element type}}
  %0 = tg.max %a, %b : (tensor<3xf32>, tensor<3xf64>) -> tensor<3xf32>
  return
}

// -----

func.func @min_integer(%a: tensor<3xi32>, %b: tensor<3xi32>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values}}
  %0 = tg.min %a, %b : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi32>
  return
}

// -----

func.func @exp_integer(%a: tensor<3xi64>) {
  // expected-error @+1 {{must be ranked tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values}}
  %0 = tg.exp %a : tensor<3xi64>
  return
}

// -----

func.func @gelu_approximate(%a: tensor<3xf32>) {
  // expected-error @+1 {{approximate must be "none" or "tanh", got "erf"}}
  %0 = tg.gelu %a {approximate = "erf"} : tensor<3xf32>
  return
}

// -----

func.func @gelu_grad_approximate(%a: tensor<3xf32>) {
  // expected-error @+1 {{approximate must be "none" or "tanh", got "fast"}}
  %0 = tg.gelu_grad %a, %a {approximate = "fast"} : tensor<3xf32>
  return
}

// -----

func.func @pow_needs_exponent(%a: tensor<3xf32>) {
  // expected-error @+1 {{requires attribute 'exponent'}}
  %0 = "tg.pow"(%a) : (tensor<3xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @compare_dtypes(%a: tensor<3xf32>, %b: tensor<3xi32>) {
  // expected-error @+1 {{compares one element type, got 'f32' and 'i32'}}
  %0 = tg.less %a, %b : (tensor<3xf32>, tensor<3xi32>) -> tensor<3xi1>
  return
}

// -----

func.func @compare_result_not_bool(%a: tensor<3xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{result #0 must be ranked tensor of 1-bit signless integer values}}
  %0 = tg.equal %a, %b : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @compare_shapes(%a: tensor<2x3xf32>, %b: tensor<2xf32>) {
  // expected-error @+1 {{shapes [2, 3] and [2] do not broadcast}}
  %0 = tg.greater %a, %b : (tensor<2x3xf32>, tensor<2xf32>) -> tensor<2x3xi1>
  return
}

// -----

func.func @select_condition_not_bool(%c: tensor<3xf32>, %a: tensor<3xf32>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of 1-bit signless integer values}}
  %0 = tg.select %c, %a, %a : (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @select_value_dtypes(%c: tensor<3xi1>, %a: tensor<3xf32>, %b: tensor<3xf64>) {
  // expected-error @+1 {{true_value, false_value and result must have one element type, got 'f32', 'f64' and 'f32'}}
  %0 = tg.select %c, %a, %b : (tensor<3xi1>, tensor<3xf32>, tensor<3xf64>) -> tensor<3xf32>
  return
}

// -----

func.func @select_shapes(%c: tensor<4xi1>, %a: tensor<3xf32>) {
  // expected-error @+1 {{shapes [4] and [3] do not broadcast}}
  %0 = tg.select %c, %a, %a : (tensor<4xi1>, tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @select_result_shape(%c: tensor<2x1xi1>, %a: tensor<3xf32>) {
  // expected-error @+1 {{result shape [3] should be the broadcast shape [2, 3]}}
  %0 = tg.select %c, %a, %a : (tensor<2x1xi1>, tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @cast_shape(%a: tensor<3xf32>) {
  // expected-error @+1 {{changes the element type only: input shape [3] differs from result shape [4]}}
  %0 = tg.cast %a : tensor<3xf32> to tensor<4xf64>
  return
}

// -----

func.func @iota_scalar() {
  // expected-error @+1 {{needs a result of rank >= 1}}
  %0 = tg.iota {axis = 0 : i64} : tensor<i64>
  return
}

// -----

func.func @iota_axis() {
  // expected-error @+1 {{axis 2 out of range for rank 2}}
  %0 = tg.iota {axis = 2 : i64} : tensor<2x3xi64>
  return
}

// -----

func.func @iota_negative_axis() {
  // expected-error @+1 {{axis -1 out of range for rank 2}}
  %0 = tg.iota {axis = -1 : i64} : tensor<2x3xi64>
  return
}

// -----

func.func @iota_bool() {
  // expected-error @+1 {{result must be integer or float, not i1}}
  %0 = tg.iota {axis = 0 : i64} : tensor<3xi1>
  return
}

// -----

func.func @dropout_rate(%x: tensor<3xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{rate must be in [0, 1), got 1}}
  %0 = tg.dropout %x, %s, %s {op_id = 1 : i64, rate = 1.0 : f64} : tensor<3xf32>
  return
}

// -----

func.func @dropout_negative_rate(%x: tensor<3xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{rate must be in [0, 1), got -0.5}}
  %0 = tg.dropout %x, %s, %s {op_id = 1 : i64, rate = -0.5 : f64} : tensor<3xf32>
  return
}

// -----

func.func @dropout_seed_type(%x: tensor<3xf32>, %s: tensor<i32>) {
  // expected-error @+1 {{operand #1 must be 0D tensor of 64-bit signless integer values}}
  %0 = "tg.dropout"(%x, %s, %s) {op_id = 1 : i64, rate = 0.5 : f64} : (tensor<3xf32>, tensor<i32>, tensor<i32>) -> tensor<3xf32>
  return
}

// -----

func.func @dropout_result_type(%x: tensor<3xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{all of {input, result} have same type}}
  %0 = "tg.dropout"(%x, %s, %s) {op_id = 1 : i64, rate = 0.5 : f64} : (tensor<3xf32>, tensor<i64>, tensor<i64>) -> tensor<3xf64>
  return
}

// -----

func.func @unary_result_type(%x: tensor<3xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %0 = "tg.tanh"(%x) : (tensor<3xf32>) -> tensor<3xf64>
  return
}
