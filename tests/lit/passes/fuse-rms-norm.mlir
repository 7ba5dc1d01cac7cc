// RUN: tcc-opt %s -split-input-file -tg-fuse-rms-norm | FileCheck %s
// tg-fuse-rms-norm: RMSNorm written out in primitives becomes tg.rms_norm;
// near misses stay as they are, with the failing condition recorded.

// LLaMA's form as from_torch imports it: x * rsqrt(mean(x * x) + eps) * w.
// CHECK-LABEL: func.func @llama
// CHECK-NOT: tg.constant
// CHECK: %[[N:.*]] = tg.rms_norm %arg0 weight %arg1 {eps = 9.9999999747524271E-7 : f64, tg.fuse_rms_norm = "fused: x of a function argument, eps 1.00e-06, weight"}
// CHECK-NOT: tg.reduce_mean
// CHECK-NOT: tg.rsqrt
// CHECK: return %[[N]]
func.func @llama(%x: tensor<2x3x8xf32>, %w: tensor<8xf32>) -> tensor<2x3x8xf32> {
  %sq = tg.mul %x, %x : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %ms = tg.reduce_mean %sq {axes = array<i64: 2>, keep_dims = true} : (tensor<2x3x8xf32>) -> tensor<2x3x1xf32>
  %eps = tg.constant dense<9.99999997E-7> : tensor<f32>
  %a = tg.add %ms, %eps : (tensor<2x3x1xf32>, tensor<f32>) -> tensor<2x3x1xf32>
  %r = tg.rsqrt %a : tensor<2x3x1xf32>
  %n = tg.mul %x, %r : (tensor<2x3x8xf32>, tensor<2x3x1xf32>) -> tensor<2x3x8xf32>
  %y = tg.mul %n, %w : (tensor<2x3x8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
  return %y : tensor<2x3x8xf32>
}

// -----

// pow(x, 2), eps first, x / sqrt(...), weight first; and no weight at all
// (the normalized value read by a matmul).
// CHECK-LABEL: func.func @variants
// CHECK: %[[A:.*]] = tg.rms_norm %arg0 weight %arg1 {eps = 9.9999997473787516E-6 : f64, tg.fuse_rms_norm = "fused: x of a function argument, eps 1.00e-05, weight"}
// CHECK: %[[B:.*]] = tg.rms_norm %arg0 {eps = 0.000000e+00 : f64, tg.fuse_rms_norm = "fused: x of a function argument, eps 0.00e+00, no weight"}
// CHECK-NOT: tg.sqrt
// CHECK: tg.matmul %[[B]]
func.func @variants(%x: tensor<4x8xf32>, %w: tensor<8xf32>, %m: tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %sq = tg.pow %x {exponent = 2.0 : f64} : tensor<4x8xf32>
  %ms = tg.reduce_mean %sq {axes = array<i64: 1>, keep_dims = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %eps = tg.constant dense<1.0E-5> : tensor<f32>
  %a = tg.add %eps, %ms : (tensor<f32>, tensor<4x1xf32>) -> tensor<4x1xf32>
  %s = tg.sqrt %a : tensor<4x1xf32>
  %n = tg.div %x, %s : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %y = tg.mul %w, %n : (tensor<8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %sq2 = tg.mul %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %ms2 = tg.reduce_mean %sq2 {axes = array<i64: 1>, keep_dims = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %zero = tg.constant dense<0.0> : tensor<f32>
  %a2 = tg.add %ms2, %zero : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %r2 = tg.rsqrt %a2 : tensor<4x1xf32>
  %n2 = tg.mul %r2, %x : (tensor<4x1xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %z = tg.matmul %n2, %m : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %y, %z : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Near misses: the square read elsewhere; a mean over another axis; the
// rsqrt read elsewhere (fusing would keep the statistics and add the norm).
// CHECK-LABEL: func.func @not_fused
// CHECK: tg.reduce_mean {{.*}} {axes = array<i64: 1>, keep_dims = true, tg.fuse_rms_norm = "not fused: the square is read elsewhere"}
// CHECK: tg.reduce_mean {{.*}} {axes = array<i64: 0>, keep_dims = true, tg.fuse_rms_norm = "not fused: the mean is not over the last axis alone with keep_dims"}
// CHECK: tg.reduce_mean {{.*}} {axes = array<i64: 1>, keep_dims = true, tg.fuse_rms_norm = "not fused: the rsqrt is not multiplied by the squared x alone"}
// CHECK-NOT: tg.rms_norm
func.func @not_fused(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<1x8xf32>, tensor<4x8xf32>, tensor<4x1xf32>) {
  %eps = tg.constant dense<1.0E-5> : tensor<f32>
  %sq = tg.mul %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %ms = tg.reduce_mean %sq {axes = array<i64: 1>, keep_dims = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %a = tg.add %ms, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %r = tg.rsqrt %a : tensor<4x1xf32>
  %n = tg.mul %x, %r : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %sq1 = tg.mul %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %ms1 = tg.reduce_mean %sq1 {axes = array<i64: 0>, keep_dims = true} : (tensor<4x8xf32>) -> tensor<1x8xf32>
  %sq2 = tg.mul %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %ms2 = tg.reduce_mean %sq2 {axes = array<i64: 1>, keep_dims = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %a2 = tg.add %ms2, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %r2 = tg.rsqrt %a2 : tensor<4x1xf32>
  %n2 = tg.mul %x, %r2 : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  return %n, %sq, %ms1, %n2, %r2 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<1x8xf32>, tensor<4x8xf32>, tensor<4x1xf32>
}
