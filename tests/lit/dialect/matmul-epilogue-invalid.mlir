// RUN: tcc-opt %s -split-input-file -verify-diagnostics
// tg.matmul_epilogue's and kern.gemm_epilogue's verifiers reject malformed
// ops with a message naming the problem; tg-autodiff's refusal: fuse-matmul-epilogue-autodiff.mlir.

func.func @bias_length(%x: tensor<4x8xbf16>, %w: tensor<8x16xbf16>, %b: tensor<8xbf16>) {
  // expected-error @+1 {{bias must be (16), got [8]}}
  %0 = tg.matmul_epilogue %x, %w bias %b : (tensor<4x8xbf16>, tensor<8x16xbf16>, tensor<8xbf16>) -> tensor<4x16xbf16>
  return
}

// -----

func.func @bias_type_with_residual(%x: tensor<4x8xbf16>, %w: tensor<8x16xbf16>, %b: tensor<16xbf16>, %r: tensor<4x16xf32>) {
  // expected-error @+1 {{bias element type 'bf16' should be the result's 'f32'}}
  %0 = tg.matmul_epilogue %x, %w bias %b residual %r : (tensor<4x8xbf16>, tensor<8x16xbf16>, tensor<16xbf16>, tensor<4x16xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @result_type_without_residual(%x: tensor<4x8xbf16>, %w: tensor<8x16xbf16>, %b: tensor<16xf32>) {
  // expected-error @+1 {{result element type 'f32' should be 'bf16' (the operands', or f32 for 16-bit operands without an activation)}}
  %0, %1 = tg.matmul_epilogue %x, %w bias %b {activation = "gelu_tanh"} : (tensor<4x8xbf16>, tensor<8x16xbf16>, tensor<16xf32>) -> (tensor<4x16xf32>, tensor<4x16xbf16>)
  return
}

// -----

func.func @residual_shape(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>, %r: tensor<16xf32>) {
  // expected-error @+1 {{residual 'tensor<16xf32>' must have the result's type 'tensor<4x16xf32>'}}
  %0 = tg.matmul_epilogue %x, %w bias %b residual %r : (tensor<4x8xf32>, tensor<8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @no_product(%x: tensor<4x8xf32>, %w: tensor<4x16xf32>, %b: tensor<16xf32>) {
  // expected-error @+1 {{lhs [4, 8] and rhs [4, 16] have no product}}
  %0 = tg.matmul_epilogue %x, %w bias %b : (tensor<4x8xf32>, tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @unknown_activation(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>) {
  // expected-error @+1 {{activation must be none, gelu_tanh or gelu_erf, got 'relu'}}
  %0 = tg.matmul_epilogue %x, %w bias %b {activation = "relu"} : (tensor<4x8xf32>, tensor<8x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @activation_without_pre(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>) {
  // expected-error @+1 {{with an activation must return its pre_activation}}
  %0 = tg.matmul_epilogue %x, %w bias %b {activation = "gelu_tanh"} : (tensor<4x8xf32>, tensor<8x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @pre_without_activation(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>) {
  // expected-error @+1 {{has a pre_activation result without an activation}}
  %0:2 = tg.matmul_epilogue %x, %w bias %b : (tensor<4x8xf32>, tensor<8x16xf32>, tensor<16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>)
  return
}

// -----

func.func @pre_type(%x: tensor<4x8xbf16>, %w: tensor<8x16xbf16>, %b: tensor<16xbf16>) {
  // expected-error @+1 {{pre_activation 'tensor<4x16xf32>' should be the product's type 'tensor<4x16xbf16>'}}
  %0:2 = tg.matmul_epilogue %x, %w bias %b {activation = "gelu_tanh"} : (tensor<4x8xbf16>, tensor<8x16xbf16>, tensor<16xbf16>) -> (tensor<4x16xbf16>, tensor<4x16xf32>)
  return
}

// -----

func.func @kern_rank(%a: memref<2x4x8xbf16>, %b: memref<8x16xbf16>, %bias: memref<16xbf16>, %o: memref<2x4x16xbf16>) {
  // expected-error @+1 {{expects rank-2 a, b and out (one product)}}
  kern.gemm_epilogue %a, %b bias %bias -> %o {activation = "none", transpose_a = false, transpose_b = false} : memref<2x4x8xbf16>, memref<8x16xbf16>, memref<16xbf16> -> memref<2x4x16xbf16>
  return
}

// -----

func.func @kern_out_type(%a: memref<4x8xbf16>, %b: memref<8x16xbf16>, %bias: memref<16xf32>, %o: memref<4x16xf32>) {
  // expected-error @+1 {{an out type other than a's needs a residual or no activation}}
  kern.gemm_epilogue %a, %b bias %bias -> %o {activation = "gelu_tanh", transpose_a = false, transpose_b = false} : memref<4x8xbf16>, memref<8x16xbf16>, memref<16xf32> -> memref<4x16xf32>
  return
}

// -----

func.func @kern_aux_without_activation(%a: memref<4x8xbf16>, %b: memref<8x16xbf16>, %bias: memref<16xbf16>, %o: memref<4x16xbf16>, %aux: memref<4x16xbf16>) {
  // expected-error @+1 {{aux (the pre-activation) needs an activation}}
  kern.gemm_epilogue %a, %b bias %bias -> %o aux %aux : memref<4x16xbf16> {activation = "none", transpose_a = false, transpose_b = false} : memref<4x8xbf16>, memref<8x16xbf16>, memref<16xbf16> -> memref<4x16xbf16>
  return
}

// -----

func.func @dgelu_pre_type(%dy: tensor<4x16xbf16>, %w: tensor<16x32xbf16>, %pre: tensor<4x32xf32>) {
  // expected-error @+1 {{pre 'tensor<4x32xf32>' should be the product's type 'tensor<4x32xbf16>'}}
  %0 = tg.matmul_dgelu %dy, %w pre %pre : (tensor<4x16xbf16>, tensor<16x32xbf16>, tensor<4x32xf32>) -> tensor<4x32xbf16>
  return
}

// -----

func.func @dgelu_approximate(%dy: tensor<4x16xf32>, %w: tensor<16x32xf32>, %pre: tensor<4x32xf32>) {
  // expected-error @+1 {{approximate must be tanh or none, got 'fast'}}
  %0 = tg.matmul_dgelu %dy, %w pre %pre {approximate = "fast"} : (tensor<4x16xf32>, tensor<16x32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
  return
}

// -----

func.func @kern_dgelu_pre(%a: memref<4x16xbf16>, %b: memref<16x32xbf16>, %pre: memref<4x16xbf16>, %o: memref<4x32xbf16>) {
  // expected-error @+1 {{pre must have out's type}}
  kern.gemm_dgelu %a, %b pre %pre -> %o {approximate = "tanh", transpose_a = false, transpose_b = false} : memref<4x16xbf16>, memref<16x32xbf16>, memref<4x16xbf16> -> memref<4x32xbf16>
  return
}

// -----

func.func @bias_grad_batched(%x: tensor<2x8x4xbf16>, %dy: tensor<2x8x16xbf16>) {
  // expected-error @+1 {{lhs and rhs must be rank 2 (one product), got [2, 8, 4] and [2, 8, 16]}}
  %0:2 = tg.matmul_bias_grad %x, %dy {transpose_lhs = true} : (tensor<2x8x4xbf16>, tensor<2x8x16xbf16>) -> (tensor<2x4x16xbf16>, tensor<16xbf16>)
  return
}

// -----

func.func @bias_grad_size(%x: tensor<8x4xbf16>, %dy: tensor<8x16xbf16>) {
  // expected-error @+1 {{bias_grad 'tensor<8xbf16>' should be 'tensor<16xbf16>' (the sums of rhs over its rows)}}
  %0:2 = tg.matmul_bias_grad %x, %dy {transpose_lhs = true} : (tensor<8x4xbf16>, tensor<8x16xbf16>) -> (tensor<4x16xbf16>, tensor<8xbf16>)
  return
}

// -----

func.func @kern_bias_grad_type(%a: memref<8x4xbf16>, %b: memref<8x16xbf16>, %o: memref<4x16xbf16>, %g: memref<16xf32>) {
  // expected-error @+1 {{a, b, out and bias_grad must have one element type}}
  kern.gemm_bias_grad %a, %b -> %o, %g {transpose_a = true} : memref<8x4xbf16>, memref<8x16xbf16> -> memref<4x16xbf16>, memref<16xf32>
  return
}

// -----

func.func @kern_bias_grad_size(%a: memref<8x4xbf16>, %b: memref<8x16xbf16>, %o: memref<4x16xbf16>, %g: memref<4xbf16>) {
  // expected-error @+1 {{bias_grad must be (16), b's columns}}
  kern.gemm_bias_grad %a, %b -> %o, %g {transpose_a = true} : memref<8x4xbf16>, memref<8x16xbf16> -> memref<4x16xbf16>, memref<4xbf16>
  return
}

// -----

func.func @no_bias_no_residual(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>) {
  // expected-error @+1 {{without a bias, needs a residual and no activation}}
  %0 = tg.matmul_epilogue %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @no_bias_activation(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %r: tensor<4x16xf32>) {
  // expected-error @+1 {{without a bias, needs a residual and no activation}}
  %0:2 = tg.matmul_epilogue %x, %w residual %r {activation = "gelu_tanh"} : (tensor<4x8xf32>, tensor<8x16xf32>, tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>)
  return
}

// -----

func.func @kern_no_bias_no_residual(%a: memref<4x8xbf16>, %b: memref<8x16xbf16>, %o: memref<4x16xbf16>) {
  // expected-error @+1 {{without a bias, needs a residual and no activation}}
  kern.gemm_epilogue %a, %b -> %o {activation = "none", transpose_a = false, transpose_b = false} : memref<4x8xbf16>, memref<8x16xbf16> -> memref<4x16xbf16>
  return
}
