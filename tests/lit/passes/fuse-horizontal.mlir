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

// Squares of bf16 gradients with their whole-tensor sums, interleaved as
// the gradient norm is: each square folds into its sum (the sum reads the
// bf16 gradient, no f32 square is written), and the two sums of squares
// group into one kern.multi_sum with `squares`.
// CHECK-LABEL: func.func @norm
// CHECK-SAME: 2 squares folded into their sums
// CHECK-NOT: kern.elementwise ins(%arg
// CHECK: %[[S0:.*]] = kern.alloc : memref<f32>
// CHECK: %[[S1:.*]] = kern.alloc : memref<f32>
// CHECK-NEXT: %[[PART:.*]] = kern.alloc : memref<2xf64>
// CHECK-NEXT: kern.multi_sum(%arg0, %arg1) into(%[[S0]], %[[S1]]) partials %[[PART]] squares {chunk = 65536 : i64, kern.fuse_horizontal = "group 0: 2 kernels: s0, s1"} : (memref<4x3xbf16>, memref<5xbf16>) -> (memref<f32>, memref<f32>), memref<2xf64>
// CHECK-NOT: kern.reduce
// CHECK-NOT: memref<4x3xf32>
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

// -----

// Folded from f32 inputs and from another output: the wte-style kernel
// that writes an accumulated gradient and its square keeps writing the
// gradient, and the sum reads it; the kernel that only squared goes.
// CHECK-LABEL: func.func @fold_sources
// CHECK: kern.elementwise ins(%arg0, %arg1 : memref<6xf32>, memref<6xbf16>) outs(%arg3 : memref<6xf32>)
// CHECK: kern.yield %{{.*}} : f32
// CHECK-NOT: kern.elementwise
// CHECK: kern.multi_sum(%arg3, %arg2) into({{.*}}) partials %{{.*}} squares
// CHECK-SAME: (memref<6xf32>, memref<3xf32>)
func.func @fold_sources(%t: memref<6xf32>, %l: memref<6xbf16>, %g: memref<3xf32>, %acc: memref<6xf32>, %out: memref<f32>) {
  %sq0 = kern.alloc : memref<6xf32>
  kern.elementwise ins(%t, %l : memref<6xf32>, memref<6xbf16>) outs(%sq0, %acc : memref<6xf32>, memref<6xf32>) {
  ^bb0(%a: f32, %b: bf16, %i: i64):
    %w = arith.extf %b : bf16 to f32
    %s = arith.addf %a, %w : f32
    %q = arith.mulf %s, %s : f32
    kern.yield %q, %s : f32, f32
  } loc("wte")
  %s0 = kern.alloc : memref<f32>
  kern.reduce sum %sq0, %s0 {axes = array<i64: 0>} : memref<6xf32>, memref<f32> loc("s0")
  %sq1 = kern.alloc : memref<3xf32>
  kern.elementwise ins(%g : memref<3xf32>) outs(%sq1 : memref<3xf32>) {
  ^bb0(%v: f32, %i: i64):
    %q = arith.mulf %v, %v : f32
    kern.yield %q : f32
  } loc("ln")
  %s1 = kern.alloc : memref<f32>
  kern.reduce sum %sq1, %s1 {axes = array<i64: 0>} : memref<3xf32>, memref<f32> loc("s1")
  kern.elementwise ins(%s0, %s1 : memref<f32>, memref<f32>) outs(%out : memref<f32>) {
  ^bb0(%x: f32, %y: f32, %i: i64):
    %r = arith.addf %x, %y : f32
    kern.yield %r : f32
  }
  return
}

// -----

// Not folded: the square is read by another kernel too; x * y is no
// square; the gradient is written between the square and its sum; the
// kernel itself updates the squared input in place.
// CHECK-LABEL: func.func @not_folded
// CHECK-NOT: squares folded
// CHECK: kern.reduce sum
// CHECK: kern.multi_sum(%{{.*}}, %{{.*}}) into(%{{.*}}, %{{.*}}) partials %{{.*}} {chunk
func.func @not_folded(%g: memref<4xf32>, %h: memref<4xf32>, %keep: memref<4xf32>) {
  %sq0 = kern.alloc : memref<4xf32>
  kern.elementwise ins(%g : memref<4xf32>) outs(%sq0 : memref<4xf32>) {
  ^bb0(%v: f32, %i: i64):
    %q = arith.mulf %v, %v : f32
    kern.yield %q : f32
  } loc("read_twice")
  %s0 = kern.alloc : memref<f32>
  kern.reduce sum %sq0, %s0 {axes = array<i64: 0>} : memref<4xf32>, memref<f32> loc("s0")
  kern.elementwise ins(%sq0 : memref<4xf32>) outs(%keep : memref<4xf32>) {
  ^bb0(%v: f32, %i: i64):
    %e = math.exp %v : f32
    kern.yield %e : f32
  } loc("other_reader")
  %sq1 = kern.alloc : memref<4xf32>
  kern.elementwise ins(%g, %h : memref<4xf32>, memref<4xf32>) outs(%sq1 : memref<4xf32>) {
  ^bb0(%v: f32, %w: f32, %i: i64):
    %q = arith.mulf %v, %w : f32
    kern.yield %q : f32
  } loc("product")
  %s1 = kern.alloc : memref<f32>
  kern.reduce sum %sq1, %s1 {axes = array<i64: 0>} : memref<4xf32>, memref<f32> loc("s1")
  %sq2 = kern.alloc : memref<4xf32>
  kern.elementwise ins(%h : memref<4xf32>) outs(%sq2 : memref<4xf32>) {
  ^bb0(%v: f32, %i: i64):
    %q = arith.mulf %v, %v : f32
    kern.yield %q : f32
  } loc("overwritten")
  kern.fill %h {value = 0.000000e+00 : f64} : memref<4xf32>
  %s2 = kern.alloc : memref<f32>
  kern.reduce sum %sq2, %s2 {axes = array<i64: 0>} : memref<4xf32>, memref<f32> loc("s2")
  %sq3 = kern.alloc : memref<4xf32>
  kern.elementwise ins(%keep : memref<4xf32>) outs(%sq3, %keep : memref<4xf32>, memref<4xf32>) {
  ^bb0(%v: f32, %i: i64):
    %q = arith.mulf %v, %v : f32
    %n = arith.negf %v : f32
    kern.yield %q, %n : f32, f32
  } loc("in_place")
  %s3 = kern.alloc : memref<f32>
  kern.reduce sum %sq3, %s3 {axes = array<i64: 0>} : memref<4xf32>, memref<f32> loc("s3")
  return
}
