// RUN: tcc-opt %s -kern-plan-memory | FileCheck %s
// kern-plan-memory: temporaries share workspace bytes once dead, never while
// live; views (kern.reshape) keep their source alive; offsets are 64-aligned;
// each output of a multi-output kernel is its own live buffer; i1 buffers
// take a byte per element. Every function records its planned bytes by
// element type, all buffers summed (kern.planned_bytes_by_dtype) and those
// live where the arena is fullest (kern.peak_bytes_by_dtype).

// CHECK-LABEL: module attributes {kern.workspace_bytes = 576 : i64}
// a, b and c (64 bytes each) are live together at c; d comes after a and b
// die, so the peak is those three.
// CHECK-LABEL: func.func @chain
// CHECK-SAME: attributes {kern.peak_bytes_by_dtype = {{\[}}[f32, 192]],
// CHECK-SAME: kern.planned_bytes_by_dtype = {{\[}}[f32, 256]], kern.workspace_bytes = 192 : i64}
func.func @chain(%in: memref<16xf32>, %out: memref<16xf32>) {
  // a: live until c is computed (through its view).
  // CHECK: %[[A:.*]] = kern.workspace_view 0 : memref<16xf32>
  %a = kern.alloc : memref<16xf32>
  kern.elementwise ins(%in : memref<16xf32>) outs(%a : memref<16xf32>) {
  ^bb0(%x: f32, %i: i64):
    %e = math.exp %x : f32
    kern.yield %e : f32
  }
  %av = kern.reshape %a : memref<16xf32> to memref<4x4xf32>
  // b: may not overlap a (a is read later through %av).
  // CHECK: %[[B:.*]] = kern.workspace_view 64 : memref<16xf32>
  %b = kern.alloc : memref<16xf32>
  kern.elementwise ins(%in : memref<16xf32>) outs(%b : memref<16xf32>) {
  ^bb0(%x: f32, %i: i64):
    %e = math.exp %x : f32
    kern.yield %e : f32
  }
  // c reads a and b: it gets fresh space, not a's or b's.
  // CHECK: %[[C:.*]] = kern.workspace_view 128 : memref<4x4xf32>
  %c = kern.alloc : memref<4x4xf32>
  %bv = kern.reshape %b : memref<16xf32> to memref<4x4xf32>
  kern.elementwise ins(%av, %bv : memref<4x4xf32>, memref<4x4xf32>) outs(%c : memref<4x4xf32>) {
  ^bb0(%x: f32, %y: f32, %i: i64):
    %s = arith.addf %x, %y : f32
    kern.yield %s : f32
  }
  // d: a and b are dead now, so d reuses offset 0.
  // CHECK: %[[D:.*]] = kern.workspace_view 0 : memref<4x4xf32>
  %d = kern.alloc : memref<4x4xf32>
  kern.transpose %c, %d {perm = array<i64: 1, 0>} : memref<4x4xf32>, memref<4x4xf32>
  %dv = kern.reshape %d : memref<4x4xf32> to memref<16xf32>
  kern.elementwise ins(%dv : memref<16xf32>) outs(%out : memref<16xf32>) {
  ^bb0(%x: f32, %i: i64):
    kern.yield %x : f32
  }
  // CHECK-NOT: kern.alloc
  return
}

// Two outputs of one kernel are live together (neither may take the
// other's bytes); the i1 mask of 100 elements takes 100 bytes (128 with
// alignment). The parameter, updated in place, is no temporary and takes no
// workspace.
// CHECK-LABEL: func.func @multi
// CHECK-SAME: attributes {kern.peak_bytes_by_dtype = {{\[}}[f32, 448], [i1, 128]],
// CHECK-SAME: kern.planned_bytes_by_dtype = {{\[}}[f32, 448], [i1, 128]], kern.workspace_bytes = 576 : i64}
func.func @multi(%p: memref<100xf32>, %out: memref<100xf32>) {
  // CHECK: kern.workspace_view 0 : memref<100xf32>
  // CHECK: kern.workspace_view 448 : memref<100xi1>
  %s = kern.alloc : memref<100xf32>
  %m = kern.alloc : memref<100xi1>
  kern.elementwise ins(%p : memref<100xf32>) outs(%p, %s, %m : memref<100xf32>, memref<100xf32>, memref<100xi1>) {
  ^bb0(%x: f32, %i: i64):
    %z = arith.constant 0.0 : f32
    %c = arith.cmpf ogt, %x, %z : f32
    %e = math.exp %x : f32
    kern.yield %z, %e, %c : f32, f32, i1
  }
  kern.elementwise ins(%m, %s : memref<100xi1>, memref<100xf32>) outs(%out : memref<100xf32>) {
  ^bb0(%c: i1, %x: f32, %i: i64):
    %z = arith.constant 0.0 : f32
    %r = arith.select %c, %x, %z : f32
    kern.yield %r : f32
  }
  return
}

// Mixed precision: a bf16 activation h (128 bytes) is widened to f32 g (256),
// g is summed into f32 r (64), r narrowed to bf16 k (64). The arena is
// fullest while h and g are both live (384 bytes); later ones find h (then
// g) dead. Entries are in order of first appearance.
// CHECK-LABEL: func.func @mixed
// CHECK-SAME: attributes {kern.peak_bytes_by_dtype = {{\[}}[bf16, 128], [f32, 256]],
// CHECK-SAME: kern.planned_bytes_by_dtype = {{\[}}[bf16, 192], [f32, 320]], kern.workspace_bytes = 384 : i64}
func.func @mixed(%in: memref<64xf32>, %out: memref<8xbf16>) {
  %h = kern.alloc : memref<64xbf16>
  kern.elementwise ins(%in : memref<64xf32>) outs(%h : memref<64xbf16>) {
  ^bb0(%x: f32, %i: i64):
    %t = arith.truncf %x : f32 to bf16
    kern.yield %t : bf16
  }
  %g = kern.alloc : memref<64xf32>
  kern.elementwise ins(%h : memref<64xbf16>) outs(%g : memref<64xf32>) {
  ^bb0(%x: bf16, %i: i64):
    %w = arith.extf %x : bf16 to f32
    kern.yield %w : f32
  }
  %r = kern.alloc : memref<8xf32>
  %gv = kern.reshape %g : memref<64xf32> to memref<8x8xf32>
  kern.reduce sum %gv, %r {axes = array<i64: 1>} : memref<8x8xf32>, memref<8xf32>
  %k = kern.alloc : memref<8xbf16>
  kern.elementwise ins(%r : memref<8xf32>) outs(%k : memref<8xbf16>) {
  ^bb0(%x: f32, %i: i64):
    %t = arith.truncf %x : f32 to bf16
    kern.yield %t : bf16
  }
  kern.elementwise ins(%k : memref<8xbf16>) outs(%out : memref<8xbf16>) {
  ^bb0(%x: bf16, %i: i64):
    kern.yield %x : bf16
  }
  return
}
