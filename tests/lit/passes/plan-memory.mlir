// RUN: tcc-opt %s -kern-plan-memory | FileCheck %s
// kern-plan-memory: temporaries share workspace bytes once dead, never while
// live; views (kern.reshape) keep their source alive; offsets are 64-aligned;
// each output of a multi-output kernel is its own live buffer; i1 buffers
// take a byte per element.

// CHECK-LABEL: module attributes {kern.workspace_bytes = 576 : i64}
// CHECK-LABEL: func.func @chain
// CHECK-SAME: attributes {kern.workspace_bytes = 192 : i64}
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
// CHECK-SAME: attributes {kern.workspace_bytes = 576 : i64}
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
