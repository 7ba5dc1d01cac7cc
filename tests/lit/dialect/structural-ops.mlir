// RUN: tcc-opt %s | tcc-opt | FileCheck %s
// Every structural and NN tg op parses, verifies and prints back to the same
// text (attributes at their defaults are elided).

// CHECK-LABEL: func.func @linear_algebra
func.func @linear_algebra(%x: tensor<2x3x4xf32>, %w: tensor<4x5xf32>,
                          %wt: tensor<5x4xf32>, %k: tensor<2x1x4x6xf32>,
                          %q: tensor<3x6x4xf32>) {
  // CHECK: tg.matmul %{{.*}}, %{{.*}} : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
  %0 = tg.matmul %x, %w : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
  // CHECK: tg.matmul %{{.*}}, %{{.*}} {transpose_rhs = true} : (tensor<2x3x4xf32>, tensor<5x4xf32>) -> tensor<2x3x5xf32>
  %1 = tg.matmul %x, %wt {transpose_rhs = true} : (tensor<2x3x4xf32>, tensor<5x4xf32>) -> tensor<2x3x5xf32>
  // Batch dimensions (2, 1) and (3) broadcast to (2, 3).
  // CHECK: tg.matmul %{{.*}}, %{{.*}} {transpose_lhs = true, transpose_rhs = true} : (tensor<2x1x4x6xf32>, tensor<3x6x4xf32>) -> tensor<2x3x6x6xf32>
  %2 = tg.matmul %k, %q {transpose_lhs = true, transpose_rhs = true} : (tensor<2x1x4x6xf32>, tensor<3x6x4xf32>) -> tensor<2x3x6x6xf32>
  return
}

// CHECK-LABEL: func.func @nn
func.func @nn(%x: tensor<2x3x4xf32>, %g: tensor<4xf32>, %b: tensor<4xf32>,
              %t: tensor<2x3xi32>, %table: tensor<10x4xf32>,
              %ids: tensor<2x3xi64>, %s: tensor<2x3x5xf64>) {
  // CHECK: tg.reduce_max %{{.*}} {axes = array<i64: 1, 2>, keep_dims = true} : (tensor<2x3x4xf32>) -> tensor<2x1x1xf32>
  %0 = tg.reduce_max %x {axes = array<i64: 1, 2>, keep_dims = true} : (tensor<2x3x4xf32>) -> tensor<2x1x1xf32>
  // CHECK: tg.softmax %{{.*}} {axis = 2 : i64} : tensor<2x3x4xf32>
  %1 = tg.softmax %x {axis = 2 : i64} : tensor<2x3x4xf32>
  // CHECK: tg.log_softmax %{{.*}} {axis = 0 : i64} : tensor<2x3x4xf32>
  %2 = tg.log_softmax %x {axis = 0 : i64} : tensor<2x3x4xf32>
  // CHECK: tg.cross_entropy %{{.*}}, %{{.*}} : (tensor<2x3x4xf32>, tensor<2x3xi32>) -> tensor<f32>
  %3 = tg.cross_entropy %x, %t : (tensor<2x3x4xf32>, tensor<2x3xi32>) -> tensor<f32>
  // CHECK: tg.cross_entropy %{{.*}}, %{{.*}} {ignore_index = -100 : i64} : (tensor<2x3x4xf32>, tensor<2x3xi32>) -> tensor<f32>
  %4 = tg.cross_entropy %x, %t {ignore_index = -100 : i64} : (tensor<2x3x4xf32>, tensor<2x3xi32>) -> tensor<f32>
  // CHECK: tg.layer_norm %{{.*}} weight %{{.*}} bias %{{.*}} : (tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  %5 = tg.layer_norm %x weight %g bias %b : (tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  // CHECK: tg.layer_norm %{{.*}} {eps = 1.000000e-03 : f64} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %6 = tg.layer_norm %x {eps = 1.0e-3 : f64} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  // CHECK: tg.layer_norm %{{.*}} bias %{{.*}} : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  %7 = tg.layer_norm %x bias %b : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  // CHECK: tg.rms_norm %{{.*}} weight %{{.*}} : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  %8 = tg.rms_norm %x weight %g : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  // CHECK: tg.rms_norm %{{.*}} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %9 = tg.rms_norm %x {eps = 1.0e-6 : f64} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  // CHECK: tg.gather %{{.*}}, %{{.*}} : (tensor<10x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  %10 = tg.gather %table, %ids : (tensor<10x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  // CHECK: tg.scatter_add %{{.*}}, %{{.*}} : (tensor<2x3xi64>, tensor<2x3x4xf32>) -> tensor<10x4xf32>
  %11 = tg.scatter_add %ids, %10 : (tensor<2x3xi64>, tensor<2x3x4xf32>) -> tensor<10x4xf32>
  // The default value -inf is elided.
  // CHECK: tg.causal_mask %{{.*}} : tensor<2x3x5xf64>
  %12 = tg.causal_mask %s : tensor<2x3x5xf64>
  // CHECK: tg.causal_mask %{{.*}} {value = -1.000000e+04 : f64} : tensor<2x3x5xf64>
  %13 = tg.causal_mask %s {value = -1.0e4 : f64} : tensor<2x3x5xf64>
  return
}

// CHECK-LABEL: func.func @shapes
func.func @shapes(%x: tensor<2x3x4xf32>, %y: tensor<2x5x4xf32>, %ids: tensor<6xi32>) {
  // CHECK: tg.transpose %{{.*}} {perm = array<i64: 2, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
  %0 = tg.transpose %x {perm = array<i64: 2, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
  // CHECK: tg.slice %{{.*}} {ends = array<i64: 2, 3, 3>, starts = array<i64: 0, 1, 1>} : (tensor<2x3x4xf32>) -> tensor<2x2x2xf32>
  %1 = tg.slice %x {starts = array<i64: 0, 1, 1>, ends = array<i64: 2, 3, 3>} : (tensor<2x3x4xf32>) -> tensor<2x2x2xf32>
  // Integer tensors slice, transpose and concat too.
  // CHECK: tg.slice %{{.*}} : (tensor<6xi32>) -> tensor<3xi32>
  %2 = tg.slice %ids {starts = array<i64: 3>, ends = array<i64: 6>} : (tensor<6xi32>) -> tensor<3xi32>
  // CHECK: tg.concat %{{.*}}, %{{.*}} {axis = 1 : i64} : (tensor<2x3x4xf32>, tensor<2x5x4xf32>) -> tensor<2x8x4xf32>
  %3 = tg.concat %x, %y {axis = 1 : i64} : (tensor<2x3x4xf32>, tensor<2x5x4xf32>) -> tensor<2x8x4xf32>
  // CHECK: tg.concat %{{.*}} {axis = 0 : i64} : (tensor<6xi32>) -> tensor<6xi32>
  %4 = tg.concat %ids {axis = 0 : i64} : (tensor<6xi32>) -> tensor<6xi32>
  // CHECK: %{{.*}}:3 = tg.split %{{.*}} {axis = 1 : i64} : (tensor<2x8x4xf32>) -> (tensor<2x2x4xf32>, tensor<2x5x4xf32>, tensor<2x1x4xf32>)
  %5:3 = tg.split %3 {axis = 1 : i64} : (tensor<2x8x4xf32>) -> (tensor<2x2x4xf32>, tensor<2x5x4xf32>, tensor<2x1x4xf32>)
  return
}
