// RUN: tcc-opt %s -split-input-file -tg-lower-to-kern | FileCheck %s
// tg-lower-to-kern folds a widening bf16 / f16 -> f32 cast that only
// reductions read (tg-amp's cast of a reduction's 16-bit input) into the
// reductions: kern.reduce reads the 16-bit buffer into its f32 result, and
// the cast writes nothing. A cast that anything else reads stays.

// CHECK-LABEL: func.func @forward
// CHECK-NOT: kern.elementwise
// CHECK: kern.reduce mean %arg0, %{{.*}} : memref<4x3x2x2xbf16>, memref<1x3x1x1xf32>
// CHECK: kern.reduce max %arg0, %{{.*}} : memref<4x3x2x2xbf16>, memref<3xf32>
func.func @forward(%x: tensor<4x3x2x2xbf16> {tg.input = "x"})
    -> (tensor<1x3x1x1xf32> {tg.output = "m"}, tensor<3xf32> {tg.output = "p"}) {
  %c = tg.cast %x : tensor<4x3x2x2xbf16> to tensor<4x3x2x2xf32>
  %m = tg.reduce_mean %c {axes = array<i64: 0, 2, 3>, keep_dims = true} : (tensor<4x3x2x2xf32>) -> tensor<1x3x1x1xf32>
  %p = tg.reduce_max %c {axes = array<i64: 0, 2, 3>} : (tensor<4x3x2x2xf32>) -> tensor<3xf32>
  return %m, %p : tensor<1x3x1x1xf32>, tensor<3xf32>
}

// -----

// The cast has another reader (an add): it is computed, and the reduction
// reads its f32 result.
// CHECK-LABEL: func.func @forward
// CHECK: kern.elementwise
// CHECK: kern.reduce sum %{{.*}}, %{{.*}} : memref<4x3xf32>, memref<3xf32>
func.func @forward(%x: tensor<4x3xf16> {tg.input = "x"})
    -> (tensor<3xf32> {tg.output = "s"}, tensor<4x3xf32> {tg.output = "d"}) {
  %c = tg.cast %x : tensor<4x3xf16> to tensor<4x3xf32>
  %s = tg.reduce_sum %c {axes = array<i64: 0>} : (tensor<4x3xf32>) -> tensor<3xf32>
  %d = tg.add %c, %c : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  return %s, %d : tensor<3xf32>, tensor<4x3xf32>
}
