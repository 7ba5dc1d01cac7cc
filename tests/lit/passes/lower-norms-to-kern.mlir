// RUN: tcc-opt %s -split-input-file -tg-lower-to-kern | FileCheck %s
// tg.layer_norm / tg.rms_norm and their gradient ops become one kern op
// each. A cast that is the norm result's only user folds into the kernel
// (it writes bf16 directly), and a widening cast read only as the grad of
// norm gradients folds too (they read the bf16 source); the weight / bias
// sums get a (P, 2, C) f32 workspace (P = 1 for 6 rows).

// CHECK-LABEL: func.func @forward_cast
// CHECK-SAME: (%[[X:.*]]: memref<2x3x8xf32>, %[[W:.*]]: memref<8xf32>, %[[B:.*]]: memref<8xf32>, %[[OUT:.*]]: memref<2x3x8xbf16>)
// CHECK-NOT: kern.elementwise
// CHECK: kern.layer_norm %[[X]] weight %[[W]] bias %[[B]] into %[[OUT]] {eps = 1.000000e-05 : f64} : memref<2x3x8xf32> weight memref<8xf32> bias memref<8xf32> -> memref<2x3x8xbf16>
// CHECK-NEXT: return
func.func @forward_cast(%x: tensor<2x3x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<2x3x8xbf16> {
  %y = tg.layer_norm %x weight %w bias %b : (tensor<2x3x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
  %c = tg.cast %y : tensor<2x3x8xf32> to tensor<2x3x8xbf16>
  return %c : tensor<2x3x8xbf16>
}

// -----

// A result with a second user keeps its own type; the cast stays.
// CHECK-LABEL: func.func @forward_two_users
// CHECK: kern.layer_norm %{{.*}} into %[[Y:.*]] {eps = 9.9999999999999995E-7 : f64, rms} : memref<6x8xf32> -> memref<6x8xf32>
// CHECK: kern.elementwise
func.func @forward_two_users(%x: tensor<6x8xf32>) -> (tensor<6x8xbf16>, tensor<6x8xf32>) {
  %y = tg.rms_norm %x : (tensor<6x8xf32>) -> tensor<6x8xf32>
  %c = tg.cast %y : tensor<6x8xf32> to tensor<6x8xbf16>
  return %c, %y : tensor<6x8xbf16>, tensor<6x8xf32>
}

// -----

// CHECK-LABEL: func.func @grad_cast
// CHECK-SAME: (%[[G:.*]]: memref<6x8xbf16>, %[[X:.*]]: memref<6x8xf32>, %[[W:.*]]: memref<8xf32>, %[[DX:.*]]: memref<6x8xf32>, %[[DW:.*]]: memref<8xf32>, %[[DB:.*]]: memref<8xf32>)
// CHECK-NOT: kern.elementwise
// CHECK: %[[WS:.*]] = kern.alloc : memref<1x2x8xf32>
// CHECK: kern.layer_norm_grad %[[G]], %[[X]] weight %[[W]] into %[[DX]] weight_grad %[[DW]] bias_grad %[[DB]] workspace %[[WS]] {eps = 1.000000e-05 : f64} : memref<6x8xbf16>, memref<6x8xf32> weight memref<8xf32> -> memref<6x8xf32> weight_grad memref<8xf32> bias_grad memref<8xf32> workspace memref<1x2x8xf32>
func.func @grad_cast(%g: tensor<6x8xbf16>, %x: tensor<6x8xf32>, %w: tensor<8xf32>) -> (tensor<6x8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %gf = tg.cast %g : tensor<6x8xbf16> to tensor<6x8xf32>
  %dx, %dw, %db = tg.layer_norm_grad %gf, %x weight %w {eps = 1.0e-5 : f64} : tensor<6x8xf32>, tensor<6x8xf32> weight tensor<8xf32> -> tensor<6x8xf32> weight_grad tensor<8xf32> bias_grad tensor<8xf32>
  return %dx, %dw, %db : tensor<6x8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// Only the input gradient: no workspace.
// CHECK-LABEL: func.func @rms_grad_plain
// CHECK: kern.layer_norm_grad %{{.*}}, %{{.*}} into %{{.*}} {eps = 1.000000e-05 : f64, rms} : memref<6x8xf32>, memref<6x8xf32> -> memref<6x8xf32>
func.func @rms_grad_plain(%g: tensor<6x8xf32>, %x: tensor<6x8xf32>) -> tensor<6x8xf32> {
  %dx = tg.rms_norm_grad %g, %x {eps = 1.0e-5 : f64} : tensor<6x8xf32>, tensor<6x8xf32> -> tensor<6x8xf32>
  return %dx : tensor<6x8xf32>
}

// -----

// The residual stream's gradient (%r, computed before the norm gradient)
// plus the norm's input gradient: one kernel writing the sum (`plus`).
// CHECK-LABEL: func.func @grad_plus_residual
// CHECK-SAME: (%[[G:.*]]: memref<6x8xf32>, %[[X:.*]]: memref<6x8xf32>, %[[R:.*]]: memref<6x8xf32>, %[[OUT:.*]]: memref<6x8xf32>)
// CHECK-NOT: kern.elementwise
// CHECK: kern.layer_norm_grad %[[G]], %[[X]] plus %[[R]] into %[[OUT]] {eps = 1.000000e-05 : f64} : memref<6x8xf32>, memref<6x8xf32> plus memref<6x8xf32> -> memref<6x8xf32>
// CHECK-NEXT: return
func.func @grad_plus_residual(%g: tensor<6x8xf32>, %x: tensor<6x8xf32>, %r: tensor<6x8xf32>) -> tensor<6x8xf32> {
  %dx = tg.layer_norm_grad %g, %x {eps = 1.0e-5 : f64} : tensor<6x8xf32>, tensor<6x8xf32> -> tensor<6x8xf32>
  %sum = tg.add %r, %dx : (tensor<6x8xf32>, tensor<6x8xf32>) -> tensor<6x8xf32>
  return %sum : tensor<6x8xf32>
}

// -----

// An input gradient read twice keeps its own buffer: the add stays.
// CHECK-LABEL: func.func @grad_used_twice
// CHECK: kern.layer_norm_grad %{{[^ ]*}}, %{{[^ ]*}} into
// CHECK: kern.elementwise
func.func @grad_used_twice(%g: tensor<6x8xf32>, %x: tensor<6x8xf32>, %r: tensor<6x8xf32>) -> (tensor<6x8xf32>, tensor<6x8xf32>) {
  %dx = tg.layer_norm_grad %g, %x {eps = 1.0e-5 : f64} : tensor<6x8xf32>, tensor<6x8xf32> -> tensor<6x8xf32>
  %sum = tg.add %r, %dx : (tensor<6x8xf32>, tensor<6x8xf32>) -> tensor<6x8xf32>
  return %sum, %dx : tensor<6x8xf32>, tensor<6x8xf32>
}

// -----

// The summed gradient cast to bf16 (the operand of the matmul gradients
// under AMP) is written by the norm kernel too (`cast`); the f32 sum stays
// for its other reader. No elementwise kernel is left.
// CHECK-LABEL: func.func @grad_plus_residual_cast
// CHECK-SAME: (%[[G:.*]]: memref<6x8xf32>, %[[X:.*]]: memref<6x8xf32>, %[[R:.*]]: memref<6x8xf32>, %[[SUM:.*]]: memref<6x8xf32>, %[[C:.*]]: memref<6x8xbf16>)
// CHECK-NOT: kern.elementwise
// CHECK: kern.layer_norm_grad %[[G]], %[[X]] plus %[[R]] into %[[SUM]] cast %[[C]] {eps = 1.000000e-05 : f64} : memref<6x8xf32>, memref<6x8xf32> plus memref<6x8xf32> -> memref<6x8xf32> cast memref<6x8xbf16>
// CHECK-NEXT: return
func.func @grad_plus_residual_cast(%g: tensor<6x8xf32>, %x: tensor<6x8xf32>, %r: tensor<6x8xf32>) -> (tensor<6x8xf32>, tensor<6x8xbf16>) {
  %dx = tg.layer_norm_grad %g, %x {eps = 1.0e-5 : f64} : tensor<6x8xf32>, tensor<6x8xf32> -> tensor<6x8xf32>
  %sum = tg.add %r, %dx : (tensor<6x8xf32>, tensor<6x8xf32>) -> tensor<6x8xf32>
  %c = tg.cast %sum : tensor<6x8xf32> to tensor<6x8xbf16>
  return %sum, %c : tensor<6x8xf32>, tensor<6x8xbf16>
}

// -----

// Without a residual add the input gradient's own cast folds the same way;
// of two casts only the first folds (the second stays an elementwise
// kernel reading the f32 gradient).
// CHECK-LABEL: func.func @grad_two_casts
// CHECK: kern.layer_norm_grad %{{[^ ]*}}, %{{[^ ]*}} into %[[DX:[^ ]*]] cast %[[C1:[^ ]*]] {eps
// CHECK-SAME: -> memref<6x8xf32> cast memref<6x8xbf16>
// CHECK: kern.elementwise ins(%[[DX]] : memref<6x8xf32>) outs(%{{.*}} : memref<6x8xf16>)
func.func @grad_two_casts(%g: tensor<6x8xf32>, %x: tensor<6x8xf32>) -> (tensor<6x8xbf16>, tensor<6x8xf16>) {
  %dx = tg.layer_norm_grad %g, %x {eps = 1.0e-5 : f64} : tensor<6x8xf32>, tensor<6x8xf32> -> tensor<6x8xf32>
  %c1 = tg.cast %dx : tensor<6x8xf32> to tensor<6x8xbf16>
  %c2 = tg.cast %dx : tensor<6x8xf32> to tensor<6x8xf16>
  return %c1, %c2 : tensor<6x8xbf16>, tensor<6x8xf16>
}

// -----

// A cast read only as another norm gradient's grad is read through its
// source (the widening fold), so the producer writes no cast copy.
// CHECK-LABEL: func.func @grad_cast_read_as_grad
// CHECK: kern.layer_norm_grad %{{[^ ]*}}, %{{[^ ]*}} into %[[DX:[^ ]*]] {eps
// CHECK-NOT: cast
// CHECK: kern.layer_norm_grad %[[DX]], %{{[^ ]*}} into %{{[^ ]*}} {eps
func.func @grad_cast_read_as_grad(%g: tensor<6x8xbf16>, %x: tensor<6x8xbf16>, %x2: tensor<6x8xf32>) -> tensor<6x8xf32> {
  %dx = tg.layer_norm_grad %g, %x {eps = 1.0e-5 : f64} : tensor<6x8xbf16>, tensor<6x8xbf16> -> tensor<6x8xbf16>
  %c = tg.cast %dx : tensor<6x8xbf16> to tensor<6x8xf32>
  %dx2 = tg.layer_norm_grad %c, %x2 {eps = 1.0e-5 : f64} : tensor<6x8xf32>, tensor<6x8xf32> -> tensor<6x8xf32>
  return %dx2 : tensor<6x8xf32>
}

// -----

// Two norms of one input: the sum of their input gradients folds into the
// second gradient kernel only, which adds the first one's buffer (`plus`);
// the first writes its own (this crashed before: both claimed the add).
// CHECK-LABEL: func.func @two_norm_grads_summed
// CHECK-SAME: (%[[G1:[^:]*]]: memref<6x8xf32>, %[[G2:[^:]*]]: memref<6x8xf32>, %[[X:[^:]*]]: memref<6x8xf32>, %[[OUT:[^:]*]]: memref<6x8xf32>)
// CHECK-NOT: kern.elementwise
// CHECK: %[[D1:.*]] = kern.alloc
// CHECK: kern.layer_norm_grad %[[G1]], %[[X]] into %[[D1]] {eps = 1.000000e-05 : f64}
// CHECK: kern.layer_norm_grad %[[G2]], %[[X]] plus %[[D1]] into %[[OUT]] {eps = 9.9999999999999995E-7 : f64}
// CHECK-NEXT: return
func.func @two_norm_grads_summed(%g1: tensor<6x8xf32>, %g2: tensor<6x8xf32>, %x: tensor<6x8xf32>) -> tensor<6x8xf32> {
  %dx1 = tg.layer_norm_grad %g1, %x {eps = 1.0e-5 : f64} : tensor<6x8xf32>, tensor<6x8xf32> -> tensor<6x8xf32>
  %dx2 = tg.layer_norm_grad %g2, %x {eps = 1.0e-6 : f64} : tensor<6x8xf32>, tensor<6x8xf32> -> tensor<6x8xf32>
  %sum = tg.add %dx2, %dx1 : (tensor<6x8xf32>, tensor<6x8xf32>) -> tensor<6x8xf32>
  return %sum : tensor<6x8xf32>
}

// -----

// Batch norm's reductions: a (P, 2, C) f32 workspace when the channels are
// cut into parts (64 x 1024 values per channel: 16 parts), none for small
// inputs.
// CHECK-LABEL: func.func @batch_norm_reductions
// CHECK: %[[WS:.*]] = kern.alloc : memref<16x2x3xf32>
// CHECK: kern.batch_norm_stats %arg0 into %{{.*}}, %{{.*}} workspace %[[WS]] : memref<64x3x32x32xbf16> -> memref<3xf32>, memref<3xf32> workspace memref<16x2x3xf32>
// CHECK: kern.batch_norm_grad_sums %arg1, %arg0, {{.*}} workspace %{{.*}} : memref<64x3x32x32xf32>, memref<64x3x32x32xbf16>, memref<3xf32>, memref<3xf32> -> memref<3xf32>, memref<3xf32> workspace memref<16x2x3xf32>
// CHECK: kern.batch_norm_stats %arg2 into %{{.*}}, %{{.*}} : memref<2x3x2x2xf32> -> memref<3xf32>, memref<3xf32>
func.func @batch_norm_reductions(%x: tensor<64x3x32x32xbf16>, %g: tensor<64x3x32x32xf32>, %small: tensor<2x3x2x2xf32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) {
  %m, %v = tg.batch_norm_stats %x : tensor<64x3x32x32xbf16> -> tensor<3xf32>, tensor<3xf32>
  %s, %d = tg.batch_norm_grad_sums %g, %x, %m, %v : tensor<64x3x32x32xf32>, tensor<64x3x32x32xbf16>, tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>, tensor<3xf32>
  %m2, %v2 = tg.batch_norm_stats %small : tensor<2x3x2x2xf32> -> tensor<3xf32>, tensor<3xf32>
  return %s, %d, %m2 : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
}
