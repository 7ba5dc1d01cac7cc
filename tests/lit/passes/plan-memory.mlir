// RUN: tcc-opt %s -kern-plan-memory | FileCheck %s
// kern-plan-memory: temporaries share workspace bytes once dead, never while
// live; views (kern.reshape) keep their source alive; offsets are 64-aligned.

// CHECK-LABEL: module attributes {kern.workspace_bytes = 192 : i64}
// CHECK-LABEL: func.func @chain
// CHECK-SAME: attributes {kern.workspace_bytes = 192 : i64}
func.func @chain(%in: memref<16xf32>, %out: memref<16xf32>) {
  // a: live until c is computed (through its view).
  // CHECK: %[[A:.*]] = kern.workspace_view 0 : memref<16xf32>
  %a = kern.alloc : memref<16xf32>
  kern.elementwise relu(%in) into %a : (memref<16xf32>) -> memref<16xf32>
  %av = kern.reshape %a : memref<16xf32> to memref<4x4xf32>
  // b: may not overlap a (a is read later through %av).
  // CHECK: %[[B:.*]] = kern.workspace_view 64 : memref<16xf32>
  %b = kern.alloc : memref<16xf32>
  kern.elementwise relu(%in) into %b : (memref<16xf32>) -> memref<16xf32>
  // c reads a and b: it gets fresh space, not a's or b's.
  // CHECK: %[[C:.*]] = kern.workspace_view 128 : memref<4x4xf32>
  %c = kern.alloc : memref<4x4xf32>
  %bv = kern.reshape %b : memref<16xf32> to memref<4x4xf32>
  kern.elementwise add(%av, %bv) into %c : (memref<4x4xf32>, memref<4x4xf32>) -> memref<4x4xf32>
  // d: a and b are dead now, so d reuses offset 0.
  // CHECK: %[[D:.*]] = kern.workspace_view 0 : memref<4x4xf32>
  %d = kern.alloc : memref<4x4xf32>
  kern.elementwise relu(%c) into %d : (memref<4x4xf32>) -> memref<4x4xf32>
  %dv = kern.reshape %d : memref<4x4xf32> to memref<16xf32>
  kern.elementwise copy(%dv) into %out : (memref<16xf32>) -> memref<16xf32>
  // CHECK-NOT: kern.alloc
  return
}

// A second function is planned on its own; the module records the maximum.
// CHECK-LABEL: func.func @small
// CHECK-SAME: attributes {kern.workspace_bytes = 64 : i64}
func.func @small(%in: memref<2xf32>, %out: memref<2xf32>) {
  // CHECK: kern.workspace_view 0 : memref<2xf32>
  %a = kern.alloc : memref<2xf32>
  kern.elementwise relu(%in) into %a : (memref<2xf32>) -> memref<2xf32>
  kern.elementwise copy(%a) into %out : (memref<2xf32>) -> memref<2xf32>
  return
}
