// RUN: tcc-opt %s -split-input-file -tg-fuse-matmul-epilogue="target=cuda" | FileCheck %s
// RUN: tcc-opt %s -split-input-file -tg-fuse-matmul-epilogue="target=cpu" | FileCheck %s --check-prefix=CPU
// RUN: tcc-opt %s -split-input-file -tg-fuse-matmul-epilogue="target=cuda enabled=false" | FileCheck %s --check-prefix=OFF
// RUN: tcc-opt %s -split-input-file -tg-fuse-matmul-epilogue="target=cuda bias-gradient=false" | FileCheck %s --check-prefix=NOBG
// The backward's bias gradient (reduce_sum of dY over its rows) joins the
// weight-gradient product that reads the same dY: one tg.matmul_bias_grad
// (cuBLASLt's BGRADA epilogue); each near miss with the report's reason.

// GPT-2's layout: dY (B, T, N) summed over B and T with keep_dims, its
// readers (the reshape to (N)) placed before the product; dW = X^T dY on
// the (B*T, .) reshapes. The readers move after the fused op.
// CHECK-LABEL: func.func @gpt2_layout
// CHECK: %[[W:.*]], %[[G:.*]] = tg.matmul_bias_grad %{{.*}}, %{{.*}} {tg.fuse_epilogue = "fused: bias gradient (reduce_sum 'fc.biased' of the rhs over its rows)", transpose_lhs = true} : (tensor<8x8xbf16>, tensor<8x16xbf16>) -> (tensor<8x16xbf16>, tensor<16xbf16>)
// CHECK-NEXT: %[[K:.*]] = tg.reshape %[[G]] : (tensor<16xbf16>) -> tensor<1x1x16xbf16>
// CHECK-NEXT: %[[B:.*]] = tg.reshape %[[K]] : (tensor<1x1x16xbf16>) -> tensor<16xbf16>
// CHECK-NOT: tg.reduce_sum
// CHECK: return %[[W]], %[[B]]
// CPU-LABEL: func.func @gpt2_layout
// CPU: tg.matmul_bias_grad
// OFF-LABEL: func.func @gpt2_layout
// OFF: tg.reduce_sum
// Bias-gradient fusion off alone (tcc compile --no-fuse-bias-grad): the
// product stays a tg.matmul, the report says why, the sum stays.
// NOBG-LABEL: func.func @gpt2_layout
// NOBG: tg.reduce_sum
// NOBG: tg.matmul {{.*}}tg.fuse_epilogue = "not fused: bias gradient (reduce_sum 'fc.biased' of the rhs over its rows) left out: bias-gradient fusion is off (tcc compile --no-fuse-bias-grad)"
// NOBG-NOT: = tg.matmul_bias_grad
// OFF: tg.matmul {{.*}}"not fused: matches (bias_grad), but fusion is off (tcc compile --no-fuse-epilogue)"
func.func @gpt2_layout(%x: tensor<2x4x8xbf16>, %dy: tensor<2x4x16xbf16>) -> (tensor<8x16xbf16>, tensor<16xbf16>) {
  %s = tg.reduce_sum %dy {axes = array<i64: 0, 1>, keep_dims = true} : (tensor<2x4x16xbf16>) -> tensor<1x1x16xbf16> loc("fc.biased")
  %db = tg.reshape %s : (tensor<1x1x16xbf16>) -> tensor<16xbf16> loc("fc.biased")
  %x2 = tg.reshape %x : (tensor<2x4x8xbf16>) -> tensor<8x8xbf16>
  %dy2 = tg.reshape %dy : (tensor<2x4x16xbf16>) -> tensor<8x16xbf16>
  %dw = tg.matmul %x2, %dy2 {transpose_lhs = true} : (tensor<8x8xbf16>, tensor<8x16xbf16>) -> tensor<8x16xbf16> loc("fc")
  return %dw, %db : tensor<8x16xbf16>, tensor<16xbf16>
}

// -----

// A rank-2 dY summed over axis 0 without keep_dims: the bias gradient is
// the fused op's result itself; the sum after the product works too.
// CHECK-LABEL: func.func @rank2_after
// CHECK: %[[W:.*]], %[[G:.*]] = tg.matmul_bias_grad %arg0, %arg1 {{.*}}"fused: bias gradient (reduce_sum
// CHECK-NEXT: return %[[W]], %[[G]]
func.func @rank2_after(%x: tensor<8x4xf32>, %dy: tensor<8x16xf32>) -> (tensor<4x16xf32>, tensor<16xf32>) {
  %dw = tg.matmul %x, %dy {transpose_lhs = true} : (tensor<8x4xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %db = tg.reduce_sum %dy {axes = array<i64: 0>} : (tensor<8x16xf32>) -> tensor<16xf32>
  return %dw, %db : tensor<4x16xf32>, tensor<16xf32>
}

// -----

// A transposed rhs: the columns are summed, not the rows of the product's
// rhs, and cuBLASLt has no BGRADA algorithm for it; refused on both targets.
// CHECK-LABEL: func.func @transposed_rhs
// CHECK: tg.matmul {{.*}}"not fused: bias gradient (reduce_sum {{.*}} of the rhs over its rows) left out: the rhs is transposed (cuBLASLt has no BGRADA algorithm for a transposed B: H200, 2026-11-25)"
// CPU-LABEL: func.func @transposed_rhs
// CPU: tg.matmul {{.*}}"not fused: bias gradient {{.*}} left out: the rhs is transposed
func.func @transposed_rhs(%x: tensor<8x4xf32>, %dy: tensor<16x8xf32>) -> (tensor<4x16xf32>, tensor<8xf32>) {
  %db = tg.reduce_sum %dy {axes = array<i64: 0>} : (tensor<16x8xf32>) -> tensor<8xf32>
  %dw = tg.matmul %x, %dy {transpose_lhs = true, transpose_rhs = true} : (tensor<8x4xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  return %dw, %db : tensor<4x16xf32>, tensor<8xf32>
}

// -----

// A rank-3 lhs (batched rows): tg.matmul_bias_grad is one rank-2 product.
// (A batched rhs is refused before: "batched rhs".)
// CHECK-LABEL: func.func @batched
// CHECK: tg.matmul {{.*}}"not fused: bias gradient {{.*}} left out: the product is batched (tg.matmul_bias_grad is one (M, K) x (K, N) product)"
func.func @batched(%x: tensor<2x4x8xf32>, %dy: tensor<8x16xf32>) -> (tensor<2x4x16xf32>, tensor<16xf32>) {
  %db = tg.reduce_sum %dy {axes = array<i64: 0>} : (tensor<8x16xf32>) -> tensor<16xf32>
  %dw = tg.matmul %x, %dy : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  return %dw, %db : tensor<2x4x16xf32>, tensor<16xf32>
}

// -----

// A sum over only some of the rows is not the bias gradient: no match, the
// matmul keeps its usual reason.
// CHECK-LABEL: func.func @partial_sum
// CHECK: tg.reduce_sum
// CHECK: tg.matmul {{.*}}"not fused: the product is unused"
func.func @partial_sum(%x: tensor<8x4xf32>, %dy: tensor<2x4x16xf32>) -> tensor<4x16xf32> {
  %s = tg.reduce_sum %dy {axes = array<i64: 0>} : (tensor<2x4x16xf32>) -> tensor<4x16xf32>
  %dy2 = tg.reshape %dy : (tensor<2x4x16xf32>) -> tensor<8x16xf32>
  %dw = tg.matmul %x, %dy2 {transpose_lhs = true} : (tensor<8x4xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  return %s : tensor<4x16xf32>
}

// -----

// f64 on cuda: cuBLASLt's epilogues take 16-bit and f32 products; cpu fuses.
// CHECK-LABEL: func.func @f64
// CHECK: tg.matmul {{.*}}"not fused: f64 product
// CPU-LABEL: func.func @f64
// CPU: tg.matmul_bias_grad
func.func @f64(%x: tensor<8x4xf64>, %dy: tensor<8x16xf64>) -> (tensor<4x16xf64>, tensor<16xf64>) {
  %db = tg.reduce_sum %dy {axes = array<i64: 0>} : (tensor<8x16xf64>) -> tensor<16xf64>
  %dw = tg.matmul %x, %dy {transpose_lhs = true} : (tensor<8x4xf64>, tensor<8x16xf64>) -> tensor<4x16xf64>
  return %dw, %db : tensor<4x16xf64>, tensor<16xf64>
}
