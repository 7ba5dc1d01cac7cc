// RUN: tcc-opt %s | tcc-opt | FileCheck %s
// Every tg op parses, verifies and prints back to the same text.

// CHECK-LABEL: func.func @all_ops
func.func @all_ops(%x: tensor<4x3xf32>, %w: tensor<3x5xf32>, %b: tensor<5xf32>,
                   %labels: tensor<4xi32>, %lr: tensor<f32>) -> tensor<f32> {
  // CHECK: tg.constant dense<1.000000e+00> : tensor<f32>
  %one = tg.constant dense<1.0> : tensor<f32>
  // CHECK: tg.matmul %{{.*}}, %{{.*}} : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
  %y = tg.matmul %x, %w : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
  // CHECK: tg.matmul {{.*}} {transpose_lhs = true}
  %g = tg.matmul %x, %y {transpose_lhs = true} : (tensor<4x3xf32>, tensor<4x5xf32>) -> tensor<3x5xf32>
  // CHECK: tg.add
  %z = tg.add %y, %b : (tensor<4x5xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  // CHECK: tg.mul
  %m = tg.mul %z, %one : (tensor<4x5xf32>, tensor<f32>) -> tensor<4x5xf32>
  // CHECK: tg.relu
  %r = tg.relu %m : tensor<4x5xf32>
  // CHECK: tg.relu_grad
  %rg = tg.relu_grad %m, %r : tensor<4x5xf32>
  // CHECK: tg.softmax_cross_entropy
  %l = tg.softmax_cross_entropy %rg, %labels : (tensor<4x5xf32>, tensor<4xi32>) -> tensor<4xf32>
  // CHECK: tg.softmax_cross_entropy_grad
  %lg = tg.softmax_cross_entropy_grad %rg, %labels, %l : (tensor<4x5xf32>, tensor<4xi32>, tensor<4xf32>) -> tensor<4x5xf32>
  // CHECK: tg.reduce_sum {{.*}} {axes = array<i64: 0>, keep_dims = true}
  %s = tg.reduce_sum %lg {axes = array<i64: 0>, keep_dims = true} : (tensor<4x5xf32>) -> tensor<1x5xf32>
  // CHECK: tg.reshape
  %s1 = tg.reshape %s : (tensor<1x5xf32>) -> tensor<5xf32>
  // CHECK: tg.broadcast_to
  %bc = tg.broadcast_to %s1 : (tensor<5xf32>) -> tensor<4x5xf32>
  // CHECK: tg.sgd_update
  %w2 = tg.sgd_update %w, %g, %lr : tensor<3x5xf32>, tensor<f32>
  // CHECK: tg.reduce_mean
  %mean = tg.reduce_mean %bc {axes = array<i64: 0, 1>} : (tensor<4x5xf32>) -> tensor<f32>
  return %mean : tensor<f32>
}

// Mixed precision: structural ops on bf16 / f16; softmax cross-entropy of
// 16-bit logits with an f32 per-row loss and f32 upstream gradient.
// CHECK-LABEL: func.func @half_ops
func.func @half_ops(%x: tensor<4x3xbf16>, %w: tensor<3x5xbf16>, %h: tensor<4x5xf16>,
                    %labels: tensor<4xi32>) -> (tensor<4x5xbf16>, tensor<4x5xf16>) {
  // CHECK: tg.matmul %{{.*}}, %{{.*}} : (tensor<4x3xbf16>, tensor<3x5xbf16>) -> tensor<4x5xbf16>
  %y = tg.matmul %x, %w : (tensor<4x3xbf16>, tensor<3x5xbf16>) -> tensor<4x5xbf16>
  // CHECK: tg.softmax_cross_entropy {{.*}} : (tensor<4x5xbf16>, tensor<4xi32>) -> tensor<4xf32>
  %l = tg.softmax_cross_entropy %y, %labels : (tensor<4x5xbf16>, tensor<4xi32>) -> tensor<4xf32>
  // CHECK: tg.softmax_cross_entropy_grad {{.*}} : (tensor<4x5xbf16>, tensor<4xi32>, tensor<4xf32>) -> tensor<4x5xbf16>
  %g = tg.softmax_cross_entropy_grad %y, %labels, %l : (tensor<4x5xbf16>, tensor<4xi32>, tensor<4xf32>) -> tensor<4x5xbf16>
  // CHECK: tg.softmax_cross_entropy {{.*}} : (tensor<4x5xf16>, tensor<4xi32>) -> tensor<4xf16>
  %lh = tg.softmax_cross_entropy %h, %labels : (tensor<4x5xf16>, tensor<4xi32>) -> tensor<4xf16>
  // CHECK: tg.softmax_cross_entropy_grad {{.*}} : (tensor<4x5xf16>, tensor<4xi32>, tensor<4xf16>) -> tensor<4x5xf16>
  %gh = tg.softmax_cross_entropy_grad %h, %labels, %lh : (tensor<4x5xf16>, tensor<4xi32>, tensor<4xf16>) -> tensor<4x5xf16>
  return %g, %gh : tensor<4x5xbf16>, tensor<4x5xf16>
}
