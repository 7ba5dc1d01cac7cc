// RUN: tcc-opt %s -split-input-file -kern-fuse-horizontal | FileCheck %s
// kern-fuse-horizontal groups independent kernels with one body into one
// multi-tensor kernel, at the first member's place, and says why it
// refuses the others.

// Per-parameter updates p <- p - lr * g of different shapes (one of a
// single element), lr shared: one kern.multi_elementwise, members in
// order, the body kept once.
// CHECK-LABEL: func.func @updates
// CHECK-NEXT: kern.multi_elementwise ins(%arg0, %arg3, %arg6, %arg1, %arg4, %arg6, %arg2, %arg5, %arg6 : memref<5x7xf32>, memref<5x7xf32>, memref<f32>, memref<1xf32>, memref<1xf32>, memref<f32>, memref<3xf32>, memref<3xf32>, memref<f32>) outs(%arg0, %arg1, %arg2 : memref<5x7xf32>, memref<1xf32>, memref<3xf32>)
// CHECK-SAME: kern.fuse_horizontal = "group 0: 3 kernels: p0, p1, p2"
// CHECK-SAME: num_members = 3
// CHECK-NEXT: ^bb0(%[[P:.*]]: f32, %[[G:.*]]: f32, %[[LR:.*]]: f32, %{{.*}}: i64):
// CHECK-NEXT: arith.mulf %[[LR]], %[[G]]
// CHECK-NEXT: arith.subf %[[P]]
// CHECK-NEXT: kern.yield
// CHECK-NEXT: }
// CHECK-NEXT: return
func.func @updates(%p0: memref<5x7xf32>, %p1: memref<1xf32>, %p2: memref<3xf32>,
                   %g0: memref<5x7xf32>, %g1: memref<1xf32>, %g2: memref<3xf32>,
                   %lr: memref<f32>) {
  kern.elementwise ins(%p0, %g0, %lr : memref<5x7xf32>, memref<5x7xf32>, memref<f32>) outs(%p0 : memref<5x7xf32>) {
  ^bb0(%p: f32, %g: f32, %l: f32, %i: i64):
    %d = arith.mulf %l, %g : f32
    %r = arith.subf %p, %d : f32
    kern.yield %r : f32
  } loc("p0")
  kern.elementwise ins(%p1, %g1, %lr : memref<1xf32>, memref<1xf32>, memref<f32>) outs(%p1 : memref<1xf32>) {
  ^bb0(%p: f32, %g: f32, %l: f32, %i: i64):
    %d = arith.mulf %l, %g : f32
    %r = arith.subf %p, %d : f32
    kern.yield %r : f32
  } loc("p1")
  kern.elementwise ins(%p2, %g2, %lr : memref<3xf32>, memref<3xf32>, memref<f32>) outs(%p2 : memref<3xf32>) {
  ^bb0(%p: f32, %g: f32, %l: f32, %i: i64):
    %d = arith.mulf %l, %g : f32
    %r = arith.subf %p, %d : f32
    kern.yield %r : f32
  } loc("p2")
  return
}

// -----

// Casts and squares with their whole-tensor sums, interleaved as the
// gradient norm is: the casts group, the sums group after them; a later
// kernel's output buffer (allocated after the first member) moves up.
// CHECK-LABEL: func.func @norm
// CHECK: %[[A:.*]] = kern.alloc : memref<4x3xf32>
// CHECK: %[[B:.*]] = kern.alloc : memref<5xf32>
// CHECK-NEXT: kern.multi_elementwise ins(%arg0, %arg1 : memref<4x3xbf16>, memref<5xbf16>) outs(%[[A]], %[[B]] : memref<4x3xf32>, memref<5xf32>)
// CHECK: %[[S0:.*]] = kern.alloc : memref<f32>
// CHECK: %[[S1:.*]] = kern.alloc : memref<f32>
// CHECK-NEXT: %[[PART:.*]] = kern.alloc : memref<2xf64>
// CHECK-NEXT: kern.multi_sum(%[[A]], %[[B]]) into(%[[S0]], %[[S1]]) partials %[[PART]] {chunk = 65536 : i64, kern.fuse_horizontal = "group 1: 2 kernels: s0, s1"}
// CHECK-NOT: kern.reduce
// CHECK: kern.elementwise ins(%[[S0]], %[[S1]]
func.func @norm(%g0: memref<4x3xbf16>, %g1: memref<5xbf16>, %out: memref<f32>) {
  %a = kern.alloc : memref<4x3xf32>
  kern.elementwise ins(%g0 : memref<4x3xbf16>) outs(%a : memref<4x3xf32>) {
  ^bb0(%v: bf16, %i: i64):
    %w = arith.extf %v : bf16 to f32
    %r = arith.mulf %w, %w : f32
    kern.yield %r : f32
  } loc("c0")
  %s0 = kern.alloc : memref<f32>
  kern.reduce sum %a, %s0 {axes = array<i64: 0, 1>} : memref<4x3xf32>, memref<f32> loc("s0")
  %b = kern.alloc : memref<5xf32>
  kern.elementwise ins(%g1 : memref<5xbf16>) outs(%b : memref<5xf32>) {
  ^bb0(%v: bf16, %i: i64):
    %w = arith.extf %v : bf16 to f32
    %r = arith.mulf %w, %w : f32
    kern.yield %r : f32
  } loc("c1")
  %s1 = kern.alloc : memref<f32>
  kern.reduce sum %b, %s1 {axes = array<i64: 0>} : memref<5xf32>, memref<f32> loc("s1")
  kern.elementwise ins(%s0, %s1 : memref<f32>, memref<f32>) outs(%out : memref<f32>) {
  ^bb0(%x: f32, %y: f32, %i: i64):
    %r = arith.addf %x, %y : f32
    kern.yield %r : f32
  }
  return
}

// -----

// Refused: the second kernel reads what the first writes (dependent).
// CHECK-LABEL: func.func @dependent
// CHECK-NOT: kern.multi_elementwise
// CHECK: kern.elementwise
// CHECK: kern.elementwise
// CHECK-SAME: kern.fuse_horizontal = "not grouped: reads a buffer another member of the group writes (dependent)"
func.func @dependent(%x: memref<4xf32>, %y: memref<4xf32>, %z: memref<4xf32>) {
  kern.elementwise ins(%x : memref<4xf32>) outs(%y : memref<4xf32>) {
  ^bb0(%v: f32, %i: i64):
    %r = math.exp %v : f32
    kern.yield %r : f32
  }
  kern.elementwise ins(%y : memref<4xf32>) outs(%z : memref<4xf32>) {
  ^bb0(%v: f32, %i: i64):
    %r = math.exp %v : f32
    kern.yield %r : f32
  }
  return
}

// -----

// Refused: the second writes, through a view, the buffer the first reads
// (aliasing).
// CHECK-LABEL: func.func @aliasing
// CHECK-NOT: kern.multi_elementwise
// CHECK: kern.fuse_horizontal = "not grouped: writes a buffer another member of the group reads or writes"
func.func @aliasing(%x: memref<2x2xf32>, %y: memref<2x2xf32>, %z: memref<4xf32>) {
  kern.elementwise ins(%x : memref<2x2xf32>) outs(%y : memref<2x2xf32>) {
  ^bb0(%v: f32, %i: i64):
    %r = math.exp %v : f32
    kern.yield %r : f32
  }
  %xv = kern.reshape %x : memref<2x2xf32> to memref<4xf32>
  kern.elementwise ins(%z : memref<4xf32>) outs(%xv : memref<4xf32>) {
  ^bb0(%v: f32, %i: i64):
    %r = math.exp %v : f32
    kern.yield %r : f32
  }
  return
}

// -----

// Not grouped: a real broadcast input (a row over a matrix); different
// bodies (exp and log); a kernel in between that writes what the later
// one reads; a gemm in between.
// CHECK-LABEL: func.func @refused
// CHECK-NOT: kern.multi_elementwise
// CHECK: kern.elementwise ins(%arg0, %arg1
// CHECK: kern.elementwise ins(%arg0, %arg1
// CHECK: math.exp
// CHECK: math.log
// CHECK: kern.fill %arg3
// CHECK: kern.elementwise ins(%arg3
// CHECK-SAME: "not grouped: kern.fill (between) between the group's first kernel and it writes a buffer it reads"
// CHECK: kern.gemm
// CHECK: kern.elementwise ins(%arg8
// CHECK-SAME: "not grouped: kern.gemm (mm) lies between it and the group's first kernel: grouping would keep buffers alive across it"
func.func @refused(%m: memref<2x4xf32>, %row: memref<4xf32>, %o: memref<2x4xf32>,
                   %a: memref<3xf32>, %b: memref<3xf32>, %c: memref<3xf32>, %d: memref<3xf32>,
                   %e: memref<3xf32>, %f: memref<3xf32>, %k: memref<2x2xf32>) {
  kern.elementwise ins(%m, %row : memref<2x4xf32>, memref<4xf32>) outs(%o : memref<2x4xf32>) {
  ^bb0(%v: f32, %w: f32, %i: i64):
    %r = arith.addf %v, %w : f32
    kern.yield %r : f32
  }
  kern.elementwise ins(%m, %row : memref<2x4xf32>, memref<4xf32>) outs(%o : memref<2x4xf32>) {
  ^bb0(%v: f32, %w: f32, %i: i64):
    %r = arith.addf %v, %w : f32
    kern.yield %r : f32
  }
  kern.elementwise ins(%b : memref<3xf32>) outs(%c : memref<3xf32>) {
  ^bb0(%v: f32, %i: i64):
    %r = math.exp %v : f32
    kern.yield %r : f32
  }
  kern.elementwise ins(%b : memref<3xf32>) outs(%d : memref<3xf32>) {
  ^bb0(%v: f32, %i: i64):
    %r = math.log %v : f32
    kern.yield %r : f32
  }
  kern.fill %a {value = 1.0 : f64} : memref<3xf32> loc("between")
  kern.elementwise ins(%a : memref<3xf32>) outs(%e : memref<3xf32>) {
  ^bb0(%v: f32, %i: i64):
    %r = math.exp %v : f32
    kern.yield %r : f32
  }
  kern.gemm %k, %k, %k {alpha = 1.0 : f64, beta = 0.0 : f64, transpose_a = false, transpose_b = false} : memref<2x2xf32>, memref<2x2xf32>, memref<2x2xf32> loc("mm")
  kern.elementwise ins(%f : memref<3xf32>) outs(%f : memref<3xf32>) {
  ^bb0(%v: f32, %i: i64):
    %r = math.exp %v : f32
    kern.yield %r : f32
  }
  return
}
