// RUN: tcc-opt %s -split-input-file -tg-fuse-matmul-epilogue="target=cuda" | FileCheck %s
// RUN: tcc-opt %s -split-input-file -tg-fuse-matmul-epilogue="target=cpu" | FileCheck %s --check-prefix=CPU
// RUN: tcc-opt %s -split-input-file -tg-fuse-matmul-epilogue="target=cuda enabled=false" | FileCheck %s --check-prefix=OFF
// Each fused pattern (GPT-2's four: bias, bias+gelu with the backward's
// gelu_grad reading the pre-activation, bias+cast+residual) and each near
// miss with the reason the report gives.

// c_attn: bias only (the split reads the sum).
// CHECK-LABEL: func.func @bias
// CHECK: %[[R:.*]] = tg.matmul_epilogue %arg0, %arg1 bias %arg2 {{.*}}tg.fuse_epilogue = "fused: bias"} : (tensor<2x4x8xbf16>, tensor<8x16xbf16>, tensor<16xbf16>) -> tensor<2x4x16xbf16>
// CHECK-NEXT: tg.split %[[R]]
// CHECK-NOT: tg.add
// OFF-LABEL: func.func @bias
// OFF: tg.matmul {{.*}}tg.fuse_epilogue = "not fused: matches (bias), but fusion is off (tcc compile --no-fuse-epilogue)"
// OFF: tg.add
func.func @bias(%x: tensor<2x4x8xbf16>, %w: tensor<8x16xbf16>, %b: tensor<16xbf16>) -> (tensor<2x4x8xbf16>, tensor<2x4x8xbf16>) {
  %p = tg.matmul %x, %w : (tensor<2x4x8xbf16>, tensor<8x16xbf16>) -> tensor<2x4x16xbf16> loc("c_attn")
  %s = tg.add %p, %b : (tensor<2x4x16xbf16>, tensor<16xbf16>) -> tensor<2x4x16xbf16> loc("c_attn.biased")
  %q:2 = tg.split %s {axis = 2 : i64} : (tensor<2x4x16xbf16>) -> (tensor<2x4x8xbf16>, tensor<2x4x8xbf16>)
  return %q#0, %q#1 : tensor<2x4x8xbf16>, tensor<2x4x8xbf16>
}

// -----

// c_fc: bias + tanh gelu; the backward's gelu_grad reads the pre-activation.
// CHECK-LABEL: func.func @bias_gelu
// CHECK: %[[R:.*]], %[[PRE:.*]] = tg.matmul_epilogue %arg0, %arg1 bias %arg2 {activation = "gelu_tanh", {{.*}}tg.fuse_epilogue = "fused: bias+gelu_tanh"} : (tensor<4x8xbf16>, tensor<8x16xbf16>, tensor<16xbf16>) -> (tensor<4x16xbf16>, tensor<4x16xbf16>)
// CHECK: tg.gelu_grad %[[PRE]], %arg3
// CHECK-NOT: tg.gelu {{.*}}
func.func @bias_gelu(%x: tensor<4x8xbf16>, %w: tensor<8x16xbf16>, %b: tensor<16xbf16>, %dy: tensor<4x16xbf16>) -> (tensor<4x16xbf16>, tensor<4x16xbf16>) {
  %p = tg.matmul %x, %w : (tensor<4x8xbf16>, tensor<8x16xbf16>) -> tensor<4x16xbf16> loc("c_fc")
  %s = tg.add %p, %b : (tensor<4x16xbf16>, tensor<16xbf16>) -> tensor<4x16xbf16> loc("c_fc.biased")
  %g = tg.gelu %s {approximate = "tanh"} : tensor<4x16xbf16> loc("gelu")
  %d = tg.gelu_grad %s, %dy {approximate = "tanh"} : tensor<4x16xbf16> loc("gelu")
  return %g, %d : tensor<4x16xbf16>, tensor<4x16xbf16>
}

// -----

// c_proj: bias, cast to f32 and the f32 residual stream (add in either
// order); the bf16 bias is cast to f32, the epilogue's type.
// CHECK-LABEL: func.func @bias_cast_residual
// CHECK: %[[B32:.*]] = tg.cast %arg2 {{.*}}: tensor<16xbf16> to tensor<16xf32>
// CHECK: tg.matmul_epilogue %arg0, %arg1 bias %[[B32]] residual %arg3 {{.*}}tg.fuse_epilogue = "fused: bias+residual(f32)"} : (tensor<4x8xbf16>, tensor<8x16xbf16>, tensor<16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
// CHECK-NOT: tg.add
func.func @bias_cast_residual(%x: tensor<4x8xbf16>, %w: tensor<8x16xbf16>, %b: tensor<16xbf16>, %res: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %p = tg.matmul %x, %w : (tensor<4x8xbf16>, tensor<8x16xbf16>) -> tensor<4x16xbf16> loc("c_proj")
  %s = tg.add %b, %p : (tensor<16xbf16>, tensor<4x16xbf16>) -> tensor<4x16xbf16> loc("c_proj.biased")
  %c = tg.cast %s : tensor<4x16xbf16> to tensor<4x16xf32>
  %r = tg.add %res, %c : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32> loc("residual")
  return %r : tensor<4x16xf32>
}

// -----

// Residual of the product's own type, no cast.
// CHECK-LABEL: func.func @bias_residual_same_type
// CHECK: tg.matmul_epilogue %arg0, %arg1 bias %arg2 residual %arg3 {{.*}}"fused: bias+residual(f32)"}
func.func @bias_residual_same_type(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>, %res: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %p = tg.matmul %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %s = tg.add %p, %b : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %r = tg.add %s, %res : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}

// -----

// erf gelu: cuda fuses the bias only (cuBLASLt's GELU is the tanh form);
// cpu fuses it.
// CHECK-LABEL: func.func @erf_gelu
// CHECK: tg.matmul_epilogue {{.*}}"fused: bias; gelu (erf) left out: cuBLASLt's GELU epilogue is the tanh form"
// CHECK: tg.gelu
// CPU-LABEL: func.func @erf_gelu
// CPU: tg.matmul_epilogue {{.*}}activation = "gelu_erf"{{.*}}"fused: bias+gelu_erf"
// CPU-NOT: tg.gelu
// CPU: return
func.func @erf_gelu(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>) -> tensor<4x16xf32> {
  %p = tg.matmul %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %s = tg.add %p, %b : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %g = tg.gelu %s {approximate = "none"} : tensor<4x16xf32>
  return %g : tensor<4x16xf32>
}

// -----

// gelu then residual: cuBLASLt adds C before the activation, so cuda keeps
// the residual add; cpu fuses all three.
// CHECK-LABEL: func.func @gelu_then_residual
// CHECK: tg.matmul_epilogue {{.*}}"fused: bias+gelu_tanh; residual add left out: cuBLASLt applies the activation after adding C (beta * residual)"
// CHECK: tg.add
// CPU-LABEL: func.func @gelu_then_residual
// CPU: tg.matmul_epilogue {{.*}} residual {{.*}}"fused: bias+gelu_tanh+residual(f32)"
// CPU-NOT: tg.add
// CPU: return
func.func @gelu_then_residual(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>, %res: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %p = tg.matmul %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %s = tg.add %p, %b : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %g = tg.gelu %s {approximate = "tanh"} : tensor<4x16xf32>
  %r = tg.add %g, %res : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}

// -----

// Near misses: no bias add after the product.
// CHECK-LABEL: func.func @no_bias
// CHECK: tg.matmul {{.*}}tg.fuse_epilogue = "not fused: its user tg.gelu is not a bias add"
func.func @no_bias(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %p = tg.matmul %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %m = tg.gelu %p {approximate = "tanh"} : tensor<4x16xf32>
  return %m : tensor<4x16xf32>
}

// -----

// The product is read elsewhere too (the epilogue would hide it).
// CHECK-LABEL: func.func @product_read_twice
// CHECK: tg.matmul {{.*}}"not fused: the product has 2 readers (the epilogue would hide it)"
func.func @product_read_twice(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %p = tg.matmul %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %s = tg.add %p, %b : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  return %s, %p : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// The added operand is not an (N) vector but the product's full shape: a
// residual, fused without a bias.
// CHECK-LABEL: func.func @not_a_bias
// CHECK: tg.matmul_epilogue %arg0, %arg1 residual %arg2 {{.*}}"fused: residual(f32), no bias"} : (tensor<4x8xf32>, tensor<8x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
// CHECK-NOT: tg.add
func.func @not_a_bias(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %p = tg.matmul %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %s = tg.add %p, %b : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  return %s : tensor<4x16xf32>
}

// -----

// A bias-free layer onto the f32 residual stream (LLaMA's attention and MLP
// outputs): the product, its cast and the residual add become one GEMM
// (cuBLASLt's default epilogue with beta = 1); no cast of a bias.
// CHECK-LABEL: func.func @no_bias_cast_residual
// CHECK: %[[R:.*]] = tg.matmul_epilogue %arg0, %arg1 residual %arg2 {{.*}}tg.fuse_epilogue = "fused: residual(f32), no bias"} : (tensor<2x4x8xbf16>, tensor<8x16xbf16>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
// CHECK-NOT: tg.cast
// CHECK-NOT: tg.add
// CHECK: return %[[R]]
// CPU-LABEL: func.func @no_bias_cast_residual
// CPU: tg.matmul_epilogue %arg0, %arg1 residual %arg2 {{.*}}"fused: residual(f32), no bias"
// OFF-LABEL: func.func @no_bias_cast_residual
// OFF: tg.matmul {{.*}}"not fused: matches (residual(f32), no bias), but fusion is off (tcc compile --no-fuse-epilogue)"
// OFF: tg.add
func.func @no_bias_cast_residual(%x: tensor<2x4x8xbf16>, %w: tensor<8x16xbf16>, %res: tensor<2x4x16xf32>) -> tensor<2x4x16xf32> {
  %p = tg.matmul %x, %w : (tensor<2x4x8xbf16>, tensor<8x16xbf16>) -> tensor<2x4x16xbf16> loc("o_proj")
  %c = tg.cast %p : tensor<2x4x16xbf16> to tensor<2x4x16xf32>
  %r = tg.add %res, %c : (tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32> loc("residual")
  return %r : tensor<2x4x16xf32>
}

// -----

// The backward's input gradient of SwiGLU's two products, dX = dG Wg^T +
// dU Wu^T: the first product (in block order) takes the other as its
// residual (C), with the transposed weight (a plain product for cuBLASLt);
// the fused op stands where the add was.
// CHECK-LABEL: func.func @no_bias_sum_of_products
// CHECK: %[[U:.*]] = tg.matmul %arg1, %arg3
// CHECK: tg.matmul_epilogue %arg0, %arg2 residual %[[U]] {tg.fuse_epilogue = "fused: residual(bf16), no bias", transpose_rhs = true}
// CHECK-NOT: tg.add
func.func @no_bias_sum_of_products(%dg: tensor<4x16xbf16>, %du: tensor<4x16xbf16>, %wg: tensor<8x16xbf16>, %wu: tensor<8x16xbf16>) -> tensor<4x8xbf16> {
  %g = tg.matmul %dg, %wg {transpose_rhs = true} : (tensor<4x16xbf16>, tensor<8x16xbf16>) -> tensor<4x8xbf16> loc("gate.dx")
  %u = tg.matmul %du, %wu {transpose_rhs = true} : (tensor<4x16xbf16>, tensor<8x16xbf16>) -> tensor<4x8xbf16> loc("up.dx")
  %s = tg.add %g, %u : (tensor<4x8xbf16>, tensor<4x8xbf16>) -> tensor<4x8xbf16> loc("dx")
  return %s : tensor<4x8xbf16>
}

// -----

// Without a bias, a broadcast residual is refused, and on cuda a
// transposed lhs (cpu fuses it).
// CHECK-LABEL: func.func @no_bias_near_misses
// CHECK: tg.matmul {{.*}}"not fused: no bias; residual add left out: the residual broadcasts"
// CHECK: tg.matmul {{.*}}"not fused: no bias; residual add left out: transposed lhs"
// CPU-LABEL: func.func @no_bias_near_misses
// CPU: tg.matmul {{.*}}"not fused: no bias; residual add left out: the residual broadcasts"
// CPU: tg.matmul_epilogue {{.*}}"fused: residual(f32), no bias"
func.func @no_bias_near_misses(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %v: tensor<4x1xf32>, %xt: tensor<8x4xf32>, %res: tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %p = tg.matmul %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %a = tg.add %v, %p : (tensor<4x1xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %q = tg.matmul %xt, %w {transpose_lhs = true} : (tensor<8x4xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %b = tg.add %q, %res : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  return %a, %b : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// A batched weight: no single GEMM.
// CHECK-LABEL: func.func @batched_rhs
// CHECK: tg.matmul {{.*}}"not fused: batched rhs: the epilogue GEMM takes one (K, N) matrix"
func.func @batched_rhs(%x: tensor<2x4x8xf32>, %w: tensor<2x8x16xf32>, %b: tensor<16xf32>) -> tensor<2x4x16xf32> {
  %p = tg.matmul %x, %w : (tensor<2x4x8xf32>, tensor<2x8x16xf32>) -> tensor<2x4x16xf32>
  %s = tg.add %p, %b : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  return %s : tensor<2x4x16xf32>
}

// -----

// A transposed batched lhs: its rows are not one matrix.
// CHECK-LABEL: func.func @transposed_batched_lhs
// CHECK: tg.matmul {{.*}}"not fused: transposed batched lhs: its rows are not one (M, K) matrix"
func.func @transposed_batched_lhs(%x: tensor<2x8x4xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>) -> tensor<2x4x16xf32> {
  %p = tg.matmul %x, %w {transpose_lhs = true} : (tensor<2x8x4xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %s = tg.add %p, %b : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  return %s : tensor<2x4x16xf32>
}

// -----

// f64: cuBLASLt has no f64 bias epilogue; cpu fuses.
// CHECK-LABEL: func.func @f64_product
// CHECK: tg.matmul {{.*}}"not fused: f64 product: cuBLASLt's bias epilogues take 16-bit and f32 products"
// CPU-LABEL: func.func @f64_product
// CPU: tg.matmul_epilogue {{.*}}"fused: bias"
func.func @f64_product(%x: tensor<4x8xf64>, %w: tensor<8x16xf64>, %b: tensor<16xf64>) -> tensor<4x16xf64> {
  %p = tg.matmul %x, %w : (tensor<4x8xf64>, tensor<8x16xf64>) -> tensor<4x16xf64>
  %s = tg.add %p, %b : (tensor<4x16xf64>, tensor<16xf64>) -> tensor<4x16xf64>
  return %s : tensor<4x16xf64>
}

// -----

// N not a multiple of 8: cuBLASLt's GELU aux matrix cannot be laid out, so
// cuda fuses the bias only.
// CHECK-LABEL: func.func @gelu_odd_n
// CHECK: tg.matmul_epilogue {{.*}}"fused: bias; gelu left out: N is not a multiple of 8 (cuBLASLt's GELU aux leading dimension)"
// CHECK: tg.gelu
func.func @gelu_odd_n(%x: tensor<4x8xf32>, %w: tensor<8x12xf32>, %b: tensor<12xf32>) -> tensor<4x12xf32> {
  %p = tg.matmul %x, %w : (tensor<4x8xf32>, tensor<8x12xf32>) -> tensor<4x12xf32>
  %s = tg.add %p, %b : (tensor<4x12xf32>, tensor<12xf32>) -> tensor<4x12xf32>
  %g = tg.gelu %s {approximate = "tanh"} : tensor<4x12xf32>
  return %g : tensor<4x12xf32>
}

// -----

// The residual sum narrows the f32 product to bf16: not a GEMM C/D type.
// CHECK-LABEL: func.func @narrowing_residual
// CHECK: tg.matmul_epilogue {{.*}}"fused: bias; residual add left out: the sum is neither of the product's type nor f32 after a 16-bit product (the GEMM's C/D types)"
// CHECK: tg.cast
// CHECK: tg.add
func.func @narrowing_residual(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>, %res: tensor<4x16xbf16>) -> tensor<4x16xbf16> {
  %p = tg.matmul %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %s = tg.add %p, %b : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %c = tg.cast %s : tensor<4x16xf32> to tensor<4x16xbf16>
  %r = tg.add %c, %res : (tensor<4x16xbf16>, tensor<4x16xbf16>) -> tensor<4x16xbf16>
  return %r : tensor<4x16xbf16>
}

// -----

// A residual that broadcasts is left out.
// CHECK-LABEL: func.func @broadcast_residual
// CHECK: tg.matmul_epilogue {{.*}}"fused: bias; residual add left out: the residual broadcasts"
// CHECK: tg.add
func.func @broadcast_residual(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>, %res: tensor<16xf32>) -> tensor<4x16xf32> {
  %p = tg.matmul %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %s = tg.add %p, %b : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %r = tg.add %s, %res : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}

// -----

// The backward: gelu_grad of a product (dY W^T) at the saved pre-activation
// becomes one tg.matmul_dgelu (cuBLASLt's DGELU epilogue).
// CHECK-LABEL: func.func @dgelu
// CHECK: %[[D:.*]] = tg.matmul_dgelu %arg0, %arg1 pre %arg2 {approximate = "tanh", {{.*}}tg.fuse_epilogue = "fused: dgelu_tanh (gelu_grad of the product)"{{.*}}} : (tensor<2x4x16xbf16>, tensor<32x16xbf16>, tensor<2x4x32xbf16>) -> tensor<2x4x32xbf16>
// CHECK-NEXT: return %[[D]]
// OFF-LABEL: func.func @dgelu
// OFF: tg.matmul {{.*}}"not fused: matches (dgelu), but fusion is off (tcc compile --no-fuse-epilogue)"
// OFF: tg.gelu_grad
func.func @dgelu(%dy: tensor<2x4x16xbf16>, %w: tensor<32x16xbf16>, %pre: tensor<2x4x32xbf16>) -> tensor<2x4x32xbf16> {
  %g = tg.matmul %dy, %w {transpose_rhs = true} : (tensor<2x4x16xbf16>, tensor<32x16xbf16>) -> tensor<2x4x32xbf16> loc("c_fc.dx")
  %d = tg.gelu_grad %pre, %g {approximate = "tanh"} : tensor<2x4x32xbf16> loc("gelu")
  return %d : tensor<2x4x32xbf16>
}

// -----

// erf gelu_grad: cuda has no erf DGELU epilogue; cpu fuses it.
// CHECK-LABEL: func.func @dgelu_erf
// CHECK: tg.matmul {{.*}}"not fused: gelu_grad (erf): cuBLASLt's DGELU epilogue is the tanh form"
// CPU-LABEL: func.func @dgelu_erf
// CPU: tg.matmul_dgelu {{.*}}"fused: dgelu_erf (gelu_grad of the product)"
func.func @dgelu_erf(%dy: tensor<4x16xf32>, %w: tensor<16x32xf32>, %pre: tensor<4x32xf32>) -> tensor<4x32xf32> {
  %g = tg.matmul %dy, %w : (tensor<4x16xf32>, tensor<16x32xf32>) -> tensor<4x32xf32>
  %d = tg.gelu_grad %pre, %g : tensor<4x32xf32>
  return %d : tensor<4x32xf32>
}

// -----

// The product is gelu_grad's input (the pre-activation), not its gradient.
// CHECK-LABEL: func.func @product_is_gelu_input
// CHECK: tg.matmul {{.*}}"not fused: its user tg.gelu_grad is not a bias add"
func.func @product_is_gelu_input(%x: tensor<4x16xf32>, %w: tensor<16x32xf32>, %g: tensor<4x32xf32>) -> tensor<4x32xf32> {
  %p = tg.matmul %x, %w : (tensor<4x16xf32>, tensor<16x32xf32>) -> tensor<4x32xf32>
  %d = tg.gelu_grad %p, %g {approximate = "tanh"} : tensor<4x32xf32>
  return %d : tensor<4x32xf32>
}

// -----

// Transposed operands: cuda fuses none into the forward epilogues (the
// device check found GELU_AUX_BIAS wrong with transposed 16-bit A and B);
// cpu fuses them.
// CHECK-LABEL: func.func @transposed_rhs
// CHECK: tg.matmul {{.*}}"not fused: transposed rhs: not a layout the cuBLASLt bias epilogues were checked with"
// CPU-LABEL: func.func @transposed_rhs
// CPU: tg.matmul_epilogue {{.*}}"fused: bias"
func.func @transposed_rhs(%x: tensor<4x8xbf16>, %w: tensor<16x8xbf16>, %b: tensor<16xbf16>) -> tensor<4x16xbf16> {
  %p = tg.matmul %x, %w {transpose_rhs = true} : (tensor<4x8xbf16>, tensor<16x8xbf16>) -> tensor<4x16xbf16>
  %s = tg.add %p, %b : (tensor<4x16xbf16>, tensor<16xbf16>) -> tensor<4x16xbf16>
  return %s : tensor<4x16xbf16>
}

// -----

// CHECK-LABEL: func.func @transposed_lhs
// CHECK: tg.matmul {{.*}}"not fused: transposed lhs: not a layout the cuBLASLt epilogues were checked with"
func.func @transposed_lhs(%x: tensor<8x4xbf16>, %w: tensor<8x16xbf16>, %b: tensor<16xbf16>) -> tensor<4x16xbf16> {
  %p = tg.matmul %x, %w {transpose_lhs = true} : (tensor<8x4xbf16>, tensor<8x16xbf16>) -> tensor<4x16xbf16>
  %s = tg.add %p, %b : (tensor<4x16xbf16>, tensor<16xbf16>) -> tensor<4x16xbf16>
  return %s : tensor<4x16xbf16>
}
