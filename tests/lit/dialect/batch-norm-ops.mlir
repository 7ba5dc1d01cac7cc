// RUN: tcc-opt %s -split-input-file -verify-diagnostics | FileCheck %s
// Batch norm's ops (tg.batch_norm, its two reductions, their kern forms)
// print and parse back, and reject malformed ops naming the problem.

// CHECK-LABEL: func.func @round_trip
// CHECK: tg.batch_norm %arg0 weight %arg1 bias %arg1 {eps = 1.000000e-03 : f64} : (tensor<4x3x5x5xbf16>, tensor<3xf32>, tensor<3xf32>) -> (tensor<4x3x5x5xbf16>, tensor<3xf32>, tensor<3xf32>)
// CHECK: tg.batch_norm_stats %arg0 : tensor<4x3x5x5xbf16> -> tensor<3xf32>, tensor<3xf32>
// CHECK: tg.batch_norm_grad_sums %arg2, %arg0, %{{.*}}, %{{.*}} : tensor<4x3x5x5xf32>, tensor<4x3x5x5xbf16>, tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>, tensor<3xf32>
func.func @round_trip(%x: tensor<4x3x5x5xbf16>, %w: tensor<3xf32>, %g: tensor<4x3x5x5xf32>) {
  %y, %m, %v = tg.batch_norm %x weight %w bias %w {eps = 1.0e-3 : f64} : (tensor<4x3x5x5xbf16>, tensor<3xf32>, tensor<3xf32>) -> (tensor<4x3x5x5xbf16>, tensor<3xf32>, tensor<3xf32>)
  %m2, %v2 = tg.batch_norm_stats %x : tensor<4x3x5x5xbf16> -> tensor<3xf32>, tensor<3xf32>
  %s, %d = tg.batch_norm_grad_sums %g, %x, %m2, %v2 : tensor<4x3x5x5xf32>, tensor<4x3x5x5xbf16>, tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>, tensor<3xf32>
  return
}

// -----

// CHECK-LABEL: func.func @kern_round_trip
// CHECK: kern.batch_norm_stats %arg0 into %arg1, %arg1 workspace %arg2 : memref<64x3x32x32xbf16> -> memref<3xf32>, memref<3xf32> workspace memref<16x2x3xf32>
// CHECK: kern.batch_norm_grad_sums %arg0, %arg0, %arg1, %arg1 into %arg1, %arg1 workspace %arg2 : memref<64x3x32x32xbf16>, memref<64x3x32x32xbf16>, memref<3xf32>, memref<3xf32> -> memref<3xf32>, memref<3xf32> workspace memref<16x2x3xf32>
func.func @kern_round_trip(%x: memref<64x3x32x32xbf16>, %m: memref<3xf32>, %ws: memref<16x2x3xf32>) {
  kern.batch_norm_stats %x into %m, %m workspace %ws : memref<64x3x32x32xbf16> -> memref<3xf32>, memref<3xf32> workspace memref<16x2x3xf32>
  kern.batch_norm_grad_sums %x, %x, %m, %m into %m, %m workspace %ws : memref<64x3x32x32xbf16>, memref<64x3x32x32xbf16>, memref<3xf32>, memref<3xf32> -> memref<3xf32>, memref<3xf32> workspace memref<16x2x3xf32>
  return
}

// -----

func.func @rank_one(%x: tensor<5xf32>) {
  // expected-error @+1 {{input must be (N, C, ...) (rank >= 2), got [5]}}
  %m, %v = tg.batch_norm_stats %x : tensor<5xf32> -> tensor<5xf32>, tensor<5xf32>
  return
}

// -----

func.func @stats_not_f32(%x: tensor<4x3xbf16>) {
  // expected-error @+1 {{mean must be (3) of 'f32' (the channels of [4, 3]), got 'tensor<3xbf16>'}}
  %m, %v = tg.batch_norm_stats %x : tensor<4x3xbf16> -> tensor<3xbf16>, tensor<3xf32>
  return
}

// -----

func.func @result_type(%x: tensor<4x3xf32>) {
  // expected-error @+1 {{result must have the input's type 'tensor<4x3xf32>'}}
  %y, %m, %v = tg.batch_norm %x : (tensor<4x3xf32>) -> (tensor<4x3xbf16>, tensor<3xf32>, tensor<3xf32>)
  return
}

// -----

func.func @weight_shape(%x: tensor<4x3xf32>, %w: tensor<4xf32>) {
  // expected-error @+1 {{weight must be (3), got [4]}}
  %y, %m, %v = tg.batch_norm %x weight %w : (tensor<4x3xf32>, tensor<4xf32>) -> (tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>)
  return
}

// -----

func.func @grad_shape(%g: tensor<4x2xf32>, %x: tensor<4x3xf32>, %m: tensor<3xf32>) {
  // expected-error @+1 {{grad must have the input's shape [4, 3], got [4, 2]}}
  %s, %d = tg.batch_norm_grad_sums %g, %x, %m, %m : tensor<4x2xf32>, tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>, tensor<3xf32>
  return
}

// -----

func.func @missing_workspace(%x: memref<64x3x32x32xbf16>, %m: memref<3xf32>) {
  // expected-error @+1 {{takes a workspace exactly when its 65536 values per channel are cut into parts (here 16)}}
  kern.batch_norm_stats %x into %m, %m : memref<64x3x32x32xbf16> -> memref<3xf32>, memref<3xf32>
  return
}

// -----

func.func @workspace_shape(%x: memref<64x3x32x32xbf16>, %m: memref<3xf32>, %ws: memref<8x2x3xf32>) {
  // expected-error @+1 {{workspace must be [16, 2, 3] of 'f32' (batchNormParts)}}
  kern.batch_norm_stats %x into %m, %m workspace %ws : memref<64x3x32x32xbf16> -> memref<3xf32>, memref<3xf32> workspace memref<8x2x3xf32>
  return
}

// -----

func.func @unneeded_workspace(%x: memref<2x3x2x2xf32>, %m: memref<3xf32>, %ws: memref<1x2x3xf32>) {
  // expected-error @+1 {{takes a workspace exactly when its 8 values per channel are cut into parts (here 1)}}
  kern.batch_norm_stats %x into %m, %m workspace %ws : memref<2x3x2x2xf32> -> memref<3xf32>, memref<3xf32> workspace memref<1x2x3xf32>
  return
}
