// RUN: tcc-opt %s -split-input-file -tg-chunk-loss-head="chunks=2" | FileCheck %s
// RUN: tcc-opt %s -split-input-file -tg-chunk-loss-head | FileCheck %s --check-prefix=OFF
// tg-chunk-loss-head: the loss head (logits = X W^T, cross-entropy, its
// gradient, dX = G W and dW = G^T X) computed in row chunks at the place of
// the logits' matmul; dW summed in f32 by GEMM epilogues with a residual,
// read directly by the cast to f32 that read dW; what cannot be chunked
// says why.

// Rows 8 = 2 x 4 in 2 chunks of 4. The upstream gradient (made after the
// logits) moves up to them; dW (bf16) was cast to f32: the f32 sum replaces
// the cast.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: tg.loss_chunk_decisions = ["chunked head: 2 chunks of 4 rows; the live logits drop from 160 B to 80 B
// CHECK: %[[UP:.*]] = tg.constant dense<1.250000e-01> : tensor<8xf32>
// CHECK-NOT: tg.reshape %arg0
// CHECK: %[[X:.*]] = tg.reshape %arg0 {{.*}}-> tensor<8x4xbf16>
// CHECK-NOT: tg.reshape %arg0
// CHECK: %[[X0:.*]] = tg.slice %[[X]] {ends = array<i64: 4, 4>, starts = array<i64: 0, 0>
// CHECK: %[[L0:.*]] = tg.matmul %[[X0]], %arg1 {{{.*}}transpose_rhs = true} : (tensor<4x4xbf16>, tensor<10x4xbf16>) -> tensor<4x10xbf16>
// CHECK: tg.softmax_cross_entropy %[[L0]]
// CHECK: %[[G0:.*]] = tg.softmax_cross_entropy_grad %[[L0]]
// CHECK: tg.matmul %[[G0]], %arg1 {{.*}}-> tensor<4x4xbf16>
// CHECK: %[[S0:.*]] = tg.matmul_epilogue %[[G0]], %[[X0]] bias %{{.*}} {{{.*}}transpose_lhs = true} : ({{.*}}) -> tensor<10x4xf32>
// CHECK: %[[X1:.*]] = tg.slice %[[X]] {ends = array<i64: 8, 4>, starts = array<i64: 4, 0>
// CHECK: %[[S1:.*]] = tg.matmul_epilogue %{{.*}}, %[[X1]] bias %{{.*}} residual %[[S0]]
// CHECK: %[[LOSS:.*]] = tg.concat {{.*}} -> tensor<8xf32>
// CHECK: %[[DX:.*]] = tg.concat {{.*}} -> tensor<8x4xbf16>
// CHECK: tg.reshape %[[DX]] {{.*}}-> tensor<2x4x4xbf16>
// CHECK: tg.reduce_mean %[[LOSS]]
// CHECK-NOT: tg.cast
// CHECK: return %{{.*}}, %{{.*}}, %[[S1]]
// OFF-LABEL: func.func @train_step
// OFF-NOT: tg.loss_chunk
// OFF: tg.matmul %arg0, %arg1 {transpose_rhs = true} : (tensor<2x4x4xbf16>, tensor<10x4xbf16>) -> tensor<2x4x10xbf16>
func.func @train_step(%x: tensor<2x4x4xbf16>, %w: tensor<10x4xbf16>, %labels: tensor<8xi32>) -> (tensor<f32>, tensor<2x4x4xbf16>, tensor<10x4xf32>) {
  %logits = tg.matmul %x, %w {transpose_rhs = true} : (tensor<2x4x4xbf16>, tensor<10x4xbf16>) -> tensor<2x4x10xbf16> loc("head")
  %rows = tg.reshape %logits : (tensor<2x4x10xbf16>) -> tensor<8x10xbf16>
  %loss = tg.softmax_cross_entropy %rows, %labels : (tensor<8x10xbf16>, tensor<8xi32>) -> tensor<8xf32>
  %mean = tg.reduce_mean %loss {axes = array<i64: 0>} : (tensor<8xf32>) -> tensor<f32>
  %up = tg.constant dense<0.125> : tensor<8xf32>
  %g = tg.softmax_cross_entropy_grad %rows, %labels, %up : (tensor<8x10xbf16>, tensor<8xi32>, tensor<8xf32>) -> tensor<8x10xbf16>
  %g3 = tg.reshape %g : (tensor<8x10xbf16>) -> tensor<2x4x10xbf16>
  %dx = tg.matmul %g3, %w : (tensor<2x4x10xbf16>, tensor<10x4xbf16>) -> tensor<2x4x4xbf16>
  %x2 = tg.reshape %x : (tensor<2x4x4xbf16>) -> tensor<8x4xbf16>
  %dw = tg.matmul %g, %x2 {transpose_lhs = true} : (tensor<8x10xbf16>, tensor<8x4xbf16>) -> tensor<10x4xbf16>
  %dw32 = tg.cast %dw : tensor<10x4xbf16> to tensor<10x4xf32>
  return %mean, %dx, %dw32 : tensor<f32>, tensor<2x4x4xbf16>, tensor<10x4xf32>
}

// -----

// The logits are also returned: the head stays whole, and the report says
// what else reads them.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: tg.loss_chunk_decisions = ["not chunked: head: the logits are also read by func.return"]
// CHECK: tg.matmul %arg0, %arg1 {transpose_rhs = true} : (tensor<8x4xf32>, tensor<10x4xf32>) -> tensor<8x10xf32>
// CHECK-NOT: tg.loss_chunk =
func.func @train_step(%x: tensor<8x4xf32>, %w: tensor<10x4xf32>, %labels: tensor<8xi32>) -> (tensor<8xf32>, tensor<8x10xf32>, tensor<8x10xf32>) {
  %logits = tg.matmul %x, %w {transpose_rhs = true} : (tensor<8x4xf32>, tensor<10x4xf32>) -> tensor<8x10xf32> loc("head")
  %loss = tg.softmax_cross_entropy %logits, %labels : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<8xf32>
  %up = tg.constant dense<0.125> : tensor<8xf32>
  %g = tg.softmax_cross_entropy_grad %logits, %labels, %up : (tensor<8x10xf32>, tensor<8xi32>, tensor<8xf32>) -> tensor<8x10xf32>
  return %loss, %logits, %g : tensor<8xf32>, tensor<8x10xf32>, tensor<8x10xf32>
}

// -----

// The upstream gradient depends on the loss itself: it cannot move up to
// the logits' matmul.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: tg.loss_chunk_decisions = ["not chunked: head: the loss's upstream gradient depends on the forward"]
func.func @train_step(%x: tensor<8x4xf32>, %w: tensor<10x4xf32>, %labels: tensor<8xi32>) -> (tensor<8xf32>, tensor<8x4xf32>) {
  %logits = tg.matmul %x, %w {transpose_rhs = true} : (tensor<8x4xf32>, tensor<10x4xf32>) -> tensor<8x10xf32> loc("head")
  %loss = tg.softmax_cross_entropy %logits, %labels : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<8xf32>
  %g = tg.softmax_cross_entropy_grad %logits, %labels, %loss : (tensor<8x10xf32>, tensor<8xi32>, tensor<8xf32>) -> tensor<8x10xf32>
  %dx = tg.matmul %g, %w : (tensor<8x10xf32>, tensor<10x4xf32>) -> tensor<8x4xf32>
  return %loss, %dx : tensor<8xf32>, tensor<8x4xf32>
}
