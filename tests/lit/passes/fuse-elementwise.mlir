// RUN: tcc-opt %s -split-input-file -kern-fuse-elementwise | FileCheck %s
// kern-fuse-elementwise merges a producer kernel into its only consumer when
// the consumer reads it at its own shape; the temporary disappears.

// A chain x -> exp -> +b (b broadcast) -> relu becomes one kernel; the
// bodies follow each other and the broadcast row stays an input.
// CHECK-LABEL: func.func @chain
// CHECK-NEXT: kern.elementwise ins(%arg1, %arg0 : memref<4xf32>, memref<2x4xf32>) outs(%arg2 : memref<2x4xf32>) {
// CHECK-NEXT: ^bb0(%[[B:.*]]: f32, %[[X:.*]]: f32, %{{.*}}: i64):
// CHECK-NEXT: %[[E:.*]] = math.exp %[[X]] : f32
// CHECK-NEXT: %[[S:.*]] = arith.addf %[[E]], %[[B]] : f32
// CHECK-NEXT: %[[Z:.*]] = arith.constant
// CHECK-NEXT: %[[R:.*]] = arith.maximumf %[[S]], %[[Z]] : f32
// CHECK-NEXT: kern.yield %[[R]] : f32
// CHECK-NEXT: }
// CHECK-NEXT: return
func.func @chain(%x: memref<2x4xf32>, %b: memref<4xf32>, %out: memref<2x4xf32>) {
  %e = kern.alloc : memref<2x4xf32>
  kern.elementwise ins(%x : memref<2x4xf32>) outs(%e : memref<2x4xf32>) {
  ^bb0(%v: f32, %i: i64):
    %r = math.exp %v : f32
    kern.yield %r : f32
  }
  %s = kern.alloc : memref<2x4xf32>
  kern.elementwise ins(%e, %b : memref<2x4xf32>, memref<4xf32>) outs(%s : memref<2x4xf32>) {
  ^bb0(%v: f32, %w: f32, %i: i64):
    %r = arith.addf %v, %w : f32
    kern.yield %r : f32
  }
  kern.elementwise ins(%s : memref<2x4xf32>) outs(%out : memref<2x4xf32>) {
  ^bb0(%v: f32, %i: i64):
    %z = arith.constant 0.0 : f32
    %r = arith.maximumf %v, %z : f32
    kern.yield %r : f32
  }
  return
}

// -----

// Not fused: the consumer broadcasts the producer's output (one value per
// row, needed at every column); a producer read by two kernels.
// CHECK-LABEL: func.func @not_fused
// CHECK-COUNT-4: kern.elementwise
// CHECK-NOT: kern.elementwise
func.func @not_fused(%x: memref<4xf32>, %y: memref<2x4xf32>, %o1: memref<2x4xf32>, %o2: memref<4xf32>, %o3: memref<4xf32>) {
  %e = kern.alloc : memref<4xf32>
  kern.elementwise ins(%x : memref<4xf32>) outs(%e : memref<4xf32>) {
  ^bb0(%v: f32, %i: i64):
    %r = math.exp %v : f32
    kern.yield %r : f32
  }
  kern.elementwise ins(%e, %y : memref<4xf32>, memref<2x4xf32>) outs(%o1 : memref<2x4xf32>) {
  ^bb0(%v: f32, %w: f32, %i: i64):
    %r = arith.mulf %v, %w : f32
    kern.yield %r : f32
  }
  %f = kern.alloc : memref<4xf32>
  kern.elementwise ins(%x : memref<4xf32>) outs(%f : memref<4xf32>) {
  ^bb0(%v: f32, %i: i64):
    %r = math.log %v : f32
    kern.yield %r : f32
  }
  kern.elementwise ins(%f, %f : memref<4xf32>, memref<4xf32>) outs(%o2, %o3 : memref<4xf32>, memref<4xf32>) {
  ^bb0(%v: f32, %w: f32, %i: i64):
    kern.yield %v, %w : f32, f32
  }
  %g = kern.reshape %f : memref<4xf32> to memref<2x2xf32>
  return
}

// -----

// Not fused: a kernel between them overwrites what the producer read (the
// in-place update of %p), so the read cannot move past it.
// CHECK-LABEL: func.func @clobbered
// CHECK-COUNT-3: kern.elementwise
func.func @clobbered(%p: memref<4xf32>, %out: memref<4xf32>) {
  %t = kern.alloc : memref<4xf32>
  kern.elementwise ins(%p : memref<4xf32>) outs(%t : memref<4xf32>) {
  ^bb0(%v: f32, %i: i64):
    %r = math.exp %v : f32
    kern.yield %r : f32
  }
  kern.elementwise ins(%p : memref<4xf32>) outs(%p : memref<4xf32>) {
  ^bb0(%v: f32, %i: i64):
    %r = arith.negf %v : f32
    kern.yield %r : f32
  }
  kern.elementwise ins(%t : memref<4xf32>) outs(%out : memref<4xf32>) {
  ^bb0(%v: f32, %i: i64):
    %r = arith.negf %v : f32
    kern.yield %r : f32
  }
  return
}

// -----

// An optimizer-like update: the consumer writes the parameter in place and
// the producer reads it at the same position, so they fuse; the producer's
// second output, also read after the consumer, stays an output.
// CHECK-LABEL: func.func @inplace
// CHECK-NEXT: %[[M:.*]] = kern.alloc : memref<4xf32>
// CHECK-NEXT: kern.elementwise ins(%arg0, %arg1 : memref<4xf32>, memref<4xf32>) outs(%arg0, %[[M]] : memref<4xf32>, memref<4xf32>) {
// CHECK: kern.yield %{{.*}}, %{{.*}} : f32, f32
// CHECK: kern.elementwise ins(%[[M]] : memref<4xf32>) outs(%arg2 : memref<4xf32>)
// CHECK-NOT: kern.elementwise
func.func @inplace(%p: memref<4xf32>, %g: memref<4xf32>, %out: memref<4xf32>) {
  %d = kern.alloc : memref<4xf32>
  %m = kern.alloc : memref<4xf32>
  kern.elementwise ins(%p, %g : memref<4xf32>, memref<4xf32>) outs(%d, %m : memref<4xf32>, memref<4xf32>) {
  ^bb0(%v: f32, %w: f32, %i: i64):
    %r = arith.mulf %v, %w : f32
    %s = arith.addf %v, %w : f32
    kern.yield %r, %s : f32, f32
  }
  kern.elementwise ins(%p, %d : memref<4xf32>, memref<4xf32>) outs(%p : memref<4xf32>) {
  ^bb0(%v: f32, %w: f32, %i: i64):
    %r = arith.subf %v, %w : f32
    kern.yield %r : f32
  }
  kern.elementwise ins(%m : memref<4xf32>) outs(%out : memref<4xf32>) {
  ^bb0(%v: f32, %i: i64):
    kern.yield %v : f32
  }
  return
}

// -----

// Recompute rather than store: a widening cast read by two later kernels is
// copied in front of each and fuses into both, so the f32 copy is never
// written; both kernels read the 2-byte input, and as siblings (one input,
// nothing between) they then become one kernel that reads it once.
// CHECK-LABEL: func.func @recompute_cheap_producer
// CHECK-NOT: kern.alloc
// CHECK: kern.elementwise ins(%arg0 : memref<8xbf16>) outs(%arg2, %arg1 : memref<8xf32>, memref<8xf32>)
// CHECK: arith.extf
// CHECK: math.exp
// CHECK: arith.extf
// CHECK: math.log
// CHECK-NOT: kern.elementwise
// CHECK-NOT: kern.alloc
func.func @recompute_cheap_producer(%x: memref<8xbf16>, %a: memref<8xf32>, %b: memref<8xf32>) {
  %xf = kern.alloc : memref<8xf32>
  kern.elementwise ins(%x : memref<8xbf16>) outs(%xf : memref<8xf32>) {
  ^bb0(%v: bf16, %i: i64):
    %r = arith.extf %v : bf16 to f32
    kern.yield %r : f32
  }
  kern.elementwise ins(%xf : memref<8xf32>) outs(%a : memref<8xf32>) {
  ^bb0(%v: f32, %i: i64):
    %r = math.exp %v : f32
    kern.yield %r : f32
  }
  kern.elementwise ins(%xf : memref<8xf32>) outs(%b : memref<8xf32>) {
  ^bb0(%v: f32, %i: i64):
    %r = math.log %v : f32
    kern.yield %r : f32
  }
  return
}

// -----

// Not when the producer reads more bytes per element than it writes (a
// narrowing cast): reading its 2-byte output back is cheaper.
// CHECK-LABEL: func.func @keep_narrowing_producer
// CHECK: %[[H:.*]] = kern.alloc : memref<8xbf16>
// CHECK: kern.elementwise ins(%arg0 : memref<8xf32>) outs(%arg1, %[[H]] : memref<8xf32>, memref<8xbf16>)
// CHECK: kern.elementwise ins(%[[H]] : memref<8xbf16>) outs(%arg2 : memref<8xf32>)
func.func @keep_narrowing_producer(%x: memref<8xf32>, %a: memref<8xf32>, %b: memref<8xf32>) {
  %h = kern.alloc : memref<8xbf16>
  kern.elementwise ins(%x : memref<8xf32>) outs(%h : memref<8xbf16>) {
  ^bb0(%v: f32, %i: i64):
    %r = arith.truncf %v : f32 to bf16
    kern.yield %r : bf16
  }
  kern.elementwise ins(%h : memref<8xbf16>) outs(%a : memref<8xf32>) {
  ^bb0(%v: bf16, %i: i64):
    %r = arith.extf %v : bf16 to f32
    kern.yield %r : f32
  }
  kern.elementwise ins(%h : memref<8xbf16>) outs(%b : memref<8xf32>) {
  ^bb0(%v: bf16, %i: i64):
    %e = arith.extf %v : bf16 to f32
    %r = math.exp %e : f32
    kern.yield %r : f32
  }
  return
}

// -----

// Siblings: two kernels of one shape reading %g and %a (SwiGLU's backward:
// d_up = g * a, d_gate = g * b * a here), only an alloc between them,
// become one kernel at the later one's position, writing both outputs;
// the common inputs are read once.
// CHECK-LABEL: func.func @siblings
// CHECK: kern.elementwise ins(%arg0, %arg2, %arg1 : memref<8xf32>, memref<8xf32>, memref<8xf32>) outs(%arg4, %arg3 : memref<8xf32>, memref<8xf32>) attributes {kern.fused_siblings = "siblings fused: d_up + d_gate, 2 input(s) read once"} {
// CHECK: kern.yield %{{.*}}, %{{.*}} : f32, f32
// CHECK-NOT: kern.elementwise
func.func @siblings(%g: memref<8xf32>, %a: memref<8xf32>, %b: memref<8xf32>, %dup: memref<8xf32>, %dgate: memref<8xf32>) {
  kern.elementwise ins(%g, %a : memref<8xf32>, memref<8xf32>) outs(%dup : memref<8xf32>) {
  ^bb0(%v: f32, %w: f32, %i: i64):
    %r = arith.mulf %v, %w : f32
    kern.yield %r : f32
  } loc("d_up")
  %t = kern.alloc : memref<8xf32>
  kern.elementwise ins(%g, %b, %a : memref<8xf32>, memref<8xf32>, memref<8xf32>) outs(%dgate : memref<8xf32>) {
  ^bb0(%v: f32, %w: f32, %x: f32, %i: i64):
    %p = arith.mulf %v, %w : f32
    %r = arith.mulf %p, %x : f32
    kern.yield %r : f32
  } loc("d_gate")
  return
}

// -----

// Not siblings: the later kernel reads what the one before writes (%g:
// it must see the new values); nothing shared with the kernel before; a
// gemm between.
// CHECK-LABEL: func.func @not_siblings
// CHECK: kern.elementwise
// CHECK: kern.elementwise
// CHECK-SAME: kern.fused_siblings = "not fused with the kernel before (first): it reads what the kernel before writes"
// CHECK: kern.elementwise
// CHECK-NOT: kern.fused_siblings
// CHECK: kern.gemm
// CHECK: kern.elementwise
// CHECK-NOT: kern.fused_siblings
// CHECK: return
func.func @not_siblings(%g: memref<8xf32>, %a: memref<8xf32>, %o: memref<8xf32>, %p: memref<8xf32>, %m: memref<4x4xf32>, %n: memref<4x4xf32>) {
  kern.elementwise ins(%a : memref<8xf32>) outs(%g : memref<8xf32>) {
  ^bb0(%v: f32, %i: i64):
    %r = math.exp %v : f32
    kern.yield %r : f32
  } loc("first")
  kern.elementwise ins(%g, %a : memref<8xf32>, memref<8xf32>) outs(%o : memref<8xf32>) {
  ^bb0(%v: f32, %w: f32, %i: i64):
    %r = arith.addf %v, %w : f32
    kern.yield %r : f32
  } loc("second")
  kern.elementwise ins(%p : memref<8xf32>) outs(%p : memref<8xf32>) {
  ^bb0(%v: f32, %i: i64):
    %r = arith.negf %v : f32
    kern.yield %r : f32
  } loc("third")
  kern.gemm %m, %m, %n {alpha = 1.0 : f64, beta = 0.0 : f64, transpose_a = false, transpose_b = false} : memref<4x4xf32>, memref<4x4xf32>, memref<4x4xf32>
  %q = kern.alloc : memref<8xf32>
  kern.elementwise ins(%p, %o : memref<8xf32>, memref<8xf32>) outs(%q : memref<8xf32>) {
  ^bb0(%v: f32, %w: f32, %i: i64):
    %r = arith.addf %v, %w : f32
    kern.yield %r : f32
  } loc("fourth")
  return
}
