// RUN: tcc-opt %s -split-input-file -tg-fuse-cross-entropy | FileCheck %s
// tg-fuse-cross-entropy rewrites cross_entropy without ignore_index into the
// mean of the per-row fused softmax_cross_entropy over (N, C) logits, and
// leaves cross_entropy with ignore_index (and everything else) alone.

// CHECK-LABEL: func.func @batched
func.func @batched(%l: tensor<2x3x4xf32>, %t: tensor<2x3xi32>) -> tensor<f32> {
  // CHECK: %[[L:.*]] = tg.reshape %arg0 : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
  // CHECK: %[[T:.*]] = tg.reshape %arg1 : (tensor<2x3xi32>) -> tensor<6xi32>
  // CHECK: %[[X:.*]] = tg.softmax_cross_entropy %[[L]], %[[T]] : (tensor<6x4xf32>, tensor<6xi32>) -> tensor<6xf32>
  // CHECK: %[[M:.*]] = tg.reduce_mean %[[X]] {axes = array<i64: 0>} : (tensor<6xf32>) -> tensor<f32>
  // CHECK: return %[[M]]
  // CHECK-NOT: tg.cross_entropy
  %0 = tg.cross_entropy %l, %t : (tensor<2x3x4xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// One position: logits (C) are one row.
// CHECK-LABEL: func.func @single
func.func @single(%l: tensor<5xf32>, %t: tensor<i64>) -> tensor<f32> {
  // CHECK: tg.reshape %arg0 : (tensor<5xf32>) -> tensor<1x5xf32>
  // CHECK: tg.reshape %arg1 : (tensor<i64>) -> tensor<1xi64>
  // CHECK: tg.softmax_cross_entropy {{.*}} : (tensor<1x5xf32>, tensor<1xi64>) -> tensor<1xf32>
  %0 = tg.cross_entropy %l, %t : (tensor<5xf32>, tensor<i64>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// ignore_index changes the mean's divisor: left for tg-decompose.
// CHECK-LABEL: func.func @ignored
func.func @ignored(%l: tensor<2x3x4xf32>, %t: tensor<2x3xi32>) -> tensor<f32> {
  // CHECK-NEXT: %[[R:.*]] = tg.cross_entropy %arg0, %arg1 {ignore_index = -100 : i64}
  // CHECK-NEXT: return %[[R]]
  %0 = tg.cross_entropy %l, %t {ignore_index = -100 : i64} : (tensor<2x3x4xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// The data input a cross-entropy reads as its targets (through reshapes and
// casts) gets tg.labels: the step descriptor's label_input. An integer
// input feeding an embedding (a category) does not.
// CHECK-LABEL: func.func @labels
// CHECK-SAME: %arg1: tensor<4xi32> {tg.input = "cat"}
// CHECK-SAME: %arg2: tensor<4x1xi64> {tg.input = "label", tg.labels}
func.func @labels(%emb: tensor<10x3xf32>,
                  %cat: tensor<4xi32> {tg.input = "cat"},
                  %label: tensor<4x1xi64> {tg.input = "label"}) -> tensor<f32> {
  %l = tg.gather %emb, %cat : (tensor<10x3xf32>, tensor<4xi32>) -> tensor<4x3xf32>
  %t = tg.reshape %label : (tensor<4x1xi64>) -> tensor<4xi64>
  %0 = tg.cross_entropy %l, %t : (tensor<4x3xf32>, tensor<4xi64>) -> tensor<f32>
  return %0 : tensor<f32>
}
