// RUN: tcc-opt %s -split-input-file -kern-fuse-elementwise | FileCheck %s
// kern-fuse-elementwise computes elementwise kernels linked through reshape
// views in their common refinement, so they fuse; and it recomputes a
// chain that reads fewer bytes than its result has instead of storing it.

// A group norm (N=2, C=4, G=2, S=3): the normalization in the (1, N*G,
// C/G*S) view with a per-group mean, the per-channel weight in (N, C, S).
// Refinement of (1, 4, 6) and (2, 4, 3): (2, 2, 2, 3). The mean (1, 4, 1)
// is a (2, 2, 1, 1) view, the weight (4, 1) a (1, 2, 2, 1) view; one
// kernel, the temporary between them gone.
// CHECK-LABEL: func.func @group_norm_affine
// CHECK-SAME: kern.elementwise_shape_decisions = ["2 kernels of shapes 1x4x6, 2x4x3 computed in 2x2x2x3
// CHECK-DAG: %[[XV:.*]] = kern.reshape %arg0 : memref<2x4x3xf32> to memref<2x2x2x3xf32>
// CHECK-DAG: %[[MV:.*]] = kern.reshape %arg1 : memref<1x4x1xf32> to memref<2x2x1x1xf32>
// CHECK-DAG: %[[WV:.*]] = kern.reshape %arg2 : memref<4x1xf32> to memref<1x2x2x1xf32>
// CHECK-DAG: %[[OV:.*]] = kern.reshape %arg3 : memref<2x4x3xf32> to memref<2x2x2x3xf32>
// CHECK: kern.elementwise ins({{.*}}) outs(%[[OV]] : memref<2x2x2x3xf32>)
// CHECK: arith.subf
// CHECK: arith.mulf
// CHECK-NOT: kern.elementwise
// CHECK: return
func.func @group_norm_affine(%x: memref<2x4x3xf32>, %mean: memref<1x4x1xf32>,
                             %w: memref<4x1xf32>, %out: memref<2x4x3xf32>) {
  %xg = kern.reshape %x : memref<2x4x3xf32> to memref<1x4x6xf32>
  %t = kern.alloc : memref<1x4x6xf32>
  kern.elementwise ins(%xg, %mean : memref<1x4x6xf32>, memref<1x4x1xf32>) outs(%t : memref<1x4x6xf32>) {
  ^bb0(%v: f32, %m: f32, %i: i64):
    %r = arith.subf %v, %m : f32
    kern.yield %r : f32
  }
  %tc = kern.reshape %t : memref<1x4x6xf32> to memref<2x4x3xf32>
  kern.elementwise ins(%tc, %w : memref<2x4x3xf32>, memref<4x1xf32>) outs(%out : memref<2x4x3xf32>) {
  ^bb0(%v: f32, %s: f32, %i: i64):
    %r = arith.mulf %v, %s : f32
    kern.yield %r : f32
  }
  return
}

// -----

// A temporary the cluster writes and a reduction reads in its old shape is
// allocated in the refinement; the reduction reads a view of it.
// CHECK-LABEL: func.func @read_outside
// CHECK: %[[T:.*]] = kern.alloc : memref<2x2x2x3xf32>
// CHECK-NEXT: %[[TV:.*]] = kern.reshape %[[T]] : memref<2x2x2x3xf32> to memref<1x4x6xf32>
// CHECK: kern.elementwise {{.*}} outs(%[[T]] : memref<2x2x2x3xf32>)
// CHECK: kern.reduce sum %[[TV]]
func.func @read_outside(%x: memref<2x4x3xf32>, %mean: memref<1x4x1xf32>,
                        %w: memref<4x1xf32>, %out: memref<2x4x3xf32>, %sum: memref<1x4x1xf32>) {
  %xg = kern.reshape %x : memref<2x4x3xf32> to memref<1x4x6xf32>
  %t = kern.alloc : memref<1x4x6xf32>
  kern.elementwise ins(%xg, %mean : memref<1x4x6xf32>, memref<1x4x1xf32>) outs(%t : memref<1x4x6xf32>) {
  ^bb0(%v: f32, %m: f32, %i: i64):
    %r = arith.subf %v, %m : f32
    kern.yield %r : f32
  }
  %tc = kern.reshape %t : memref<1x4x6xf32> to memref<2x4x3xf32>
  kern.elementwise ins(%tc, %w : memref<2x4x3xf32>, memref<4x1xf32>) outs(%out : memref<2x4x3xf32>) {
  ^bb0(%v: f32, %s: f32, %i: i64):
    %r = arith.mulf %v, %s : f32
    kern.yield %r : f32
  }
  kern.reduce sum %t, %sum {axes = array<i64: 2>} : memref<1x4x6xf32>, memref<1x4x1xf32>
  return
}

// -----

// (6, 4) and (4, 6) have no common refinement (6 does not divide 4 * 6 in
// steps of both): the kernels stay, each in its shape, and the report says
// why.
// CHECK-LABEL: func.func @no_refinement
// CHECK-SAME: kern.elementwise_shape_decisions = ["2 kernels of shapes 6x4, 4x6: kept (no common refinement)"]
// CHECK-COUNT-2: kern.elementwise
func.func @no_refinement(%x: memref<6x4xf32>, %out: memref<4x6xf32>) {
  %t = kern.alloc : memref<6x4xf32>
  kern.elementwise ins(%x : memref<6x4xf32>) outs(%t : memref<6x4xf32>) {
  ^bb0(%v: f32, %i: i64):
    %r = math.exp %v : f32
    kern.yield %r : f32
  }
  %tv = kern.reshape %t : memref<6x4xf32> to memref<4x6xf32>
  kern.elementwise ins(%tv : memref<4x6xf32>) outs(%out : memref<4x6xf32>) {
  ^bb0(%v: f32, %i: i64):
    %r = math.exp %v : f32
    kern.yield %r : f32
  }
  return
}

// -----

// A bf16 normalization read by two kernels: cast to f32, - mean, cast back.
// The last cast alone reads 4 bytes for 2 it writes, but through the
// kernels only it reads, the chain reads the 2-byte input: each reader gets
// its own copy of the chain and nothing between them is stored; the two
// copies, siblings then, become one kernel writing both outputs.
// CHECK-LABEL: func.func @recompute_chain
// CHECK-NOT: kern.alloc
// CHECK: kern.elementwise ins(%arg1, %arg0 : memref<4xf32>, memref<2x4xbf16>) outs(%arg3, %arg2 : memref<2x4xbf16>, memref<2x4xbf16>)
// CHECK-NOT: kern.elementwise
func.func @recompute_chain(%x: memref<2x4xbf16>, %mean: memref<4xf32>,
                           %o1: memref<2x4xbf16>, %o2: memref<2x4xbf16>) {
  %f = kern.alloc : memref<2x4xf32>
  kern.elementwise ins(%x : memref<2x4xbf16>) outs(%f : memref<2x4xf32>) {
  ^bb0(%v: bf16, %i: i64):
    %r = arith.extf %v : bf16 to f32
    kern.yield %r : f32
  }
  %c = kern.alloc : memref<2x4xf32>
  kern.elementwise ins(%f, %mean : memref<2x4xf32>, memref<4xf32>) outs(%c : memref<2x4xf32>) {
  ^bb0(%v: f32, %m: f32, %i: i64):
    %r = arith.subf %v, %m : f32
    kern.yield %r : f32
  }
  %n = kern.alloc : memref<2x4xbf16>
  kern.elementwise ins(%c : memref<2x4xf32>) outs(%n : memref<2x4xbf16>) {
  ^bb0(%v: f32, %i: i64):
    %r = arith.truncf %v : f32 to bf16
    kern.yield %r : bf16
  }
  kern.elementwise ins(%n : memref<2x4xbf16>) outs(%o1 : memref<2x4xbf16>) {
  ^bb0(%v: bf16, %i: i64):
    %r = arith.negf %v : bf16
    kern.yield %r : bf16
  }
  kern.elementwise ins(%n : memref<2x4xbf16>) outs(%o2 : memref<2x4xbf16>) {
  ^bb0(%v: bf16, %i: i64):
    %r = arith.addf %v, %v : bf16
    kern.yield %r : bf16
  }
  return
}
