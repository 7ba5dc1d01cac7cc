// RUN: tcc-opt %s -split-input-file -tg-lower-to-kern | FileCheck %s
// tg-lower-to-kern, generic part: every op with a scalar function
// (ScalarOpInterface) becomes one kern.elementwise carrying that function;
// operands broadcast to the result shape, appear once each, and splat
// constants are folded into the body.

// CHECK-LABEL: func.func @forward
func.func @forward(%x: tensor<2x3xf32> {tg.input = "x"}, %v: tensor<3xf32> {tg.input = "v"},
                   %seed: tensor<i64> {tg.hyper = "rng_seed"}, %step: tensor<i64> {tg.hyper = "step"})
    -> (tensor<2x3xf32> {tg.output = "a"}, tensor<2x3xf32> {tg.output = "b"}, tensor<2x3xi32> {tg.output = "c"}) {
  %half = tg.constant dense<0.5> : tensor<f32>
  // Broadcast operand: the row v is an input of shape (3).
  // CHECK: %[[D:.*]] = kern.alloc : memref<2x3xf32>
  // CHECK: kern.elementwise ins(%arg0, %arg1 : memref<2x3xf32>, memref<3xf32>) outs(%[[D]] : memref<2x3xf32>) {
  // CHECK-NEXT: ^bb0(%[[A:.*]]: f32, %[[B:.*]]: f32, %{{.*}}: i64):
  // CHECK-NEXT: %[[S:.*]] = arith.subf %[[A]], %[[B]] : f32
  // CHECK-NEXT: kern.yield %[[S]] : f32
  %0 = tg.sub %x, %v : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // The splat 0.5 is no buffer: it is a constant of the body.
  // CHECK: kern.elementwise ins(%[[D]] : memref<2x3xf32>)
  // CHECK: arith.constant 5.000000e-01 : f32
  // CHECK: arith.mulf
  %1 = tg.mul %0, %half : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  // x * x reads its buffer once.
  // CHECK: kern.elementwise ins(%[[M:.*]] : memref<2x3xf32>)
  // CHECK-NEXT: ^bb0(%[[Y:.*]]: f32, %{{.*}}: i64):
  // CHECK-NEXT: arith.mulf %[[Y]], %[[Y]] : f32
  %2 = tg.mul %1, %1 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: math.exp
  %3 = tg.exp %2 : tensor<2x3xf32>
  // Comparisons produce i1 buffers, select reads them.
  // CHECK: %[[C:.*]] = kern.alloc : memref<2x3xi1>
  // CHECK: kern.elementwise ins(%arg0, %arg1 : memref<2x3xf32>, memref<3xf32>) outs(%[[C]] : memref<2x3xi1>)
  // CHECK: arith.cmpf ogt
  // CHECK: kern.yield %{{.*}} : i1
  %4 = tg.greater %x, %v : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  // The result goes straight into the output buffer %arg4.
  // CHECK: kern.elementwise ins(%[[C]], %{{.*}}, %arg0 : memref<2x3xi1>, memref<2x3xf32>, memref<2x3xf32>) outs(%arg4 : memref<2x3xf32>)
  // CHECK: arith.select
  %5 = tg.select %4, %3, %x : (tensor<2x3xi1>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  // No operands: iota is a function of the flat index alone.
  // CHECK: kern.elementwise outs(%arg6 : memref<2x3xi32>) {
  // CHECK-NEXT: ^bb0(%[[I:.*]]: i64):
  // CHECK: arith.remui %[[I]]
  %6 = tg.iota {axis = 1 : i64} : tensor<2x3xi32>
  // Dropout reads the rank-0 rng_seed and step buffers.
  // CHECK: kern.elementwise ins(%arg4, %arg2, %arg3 : memref<2x3xf32>, memref<i64>, memref<i64>) outs(%arg5 : memref<2x3xf32>)
  // CHECK: arith.muli
  %7 = tg.dropout %5, %seed, %step {rate = 0.25 : f64, op_id = 7 : i64} : tensor<2x3xf32>
  return %5, %7, %6 : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xi32>
}

// -----

// Structural primitives: one kern op each; reshape is a view; split becomes
// slices (unused pieces cost nothing); a dense constant is a kern.constant.
// CHECK-LABEL: func.func @forward
func.func @forward(%x: tensor<2x3x4xf32> {tg.input = "x"}, %w: tensor<4x5xf32> {tg.input = "w"},
                   %t: tensor<7x4xf32> {tg.input = "t"}, %ids: tensor<2x3xi32> {tg.input = "ids"})
    -> (tensor<2x3x5xf32> {tg.output = "mm"}, tensor<4x2x3xf32> {tg.output = "tr"}, tensor<2x2x4xf32> {tg.output = "sl"},
        tensor<2x6x4xf32> {tg.output = "cat"}, tensor<2x3x4xf32> {tg.output = "g"}, tensor<7x4xf32> {tg.output = "sa"},
        tensor<2x4xf32> {tg.output = "mx"}, tensor<2x1x4xf32> {tg.output = "p0"}, tensor<3xf32> {tg.output = "k"},
        tensor<6x4xf32> {tg.output = "flat"}) {
  // CHECK: kern.gemm %arg0, %arg1, %arg4 {{.*}} : memref<2x3x4xf32>, memref<4x5xf32>, memref<2x3x5xf32>
  %0 = tg.matmul %x, %w : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
  // CHECK: kern.transpose %arg0, %arg5 {perm = array<i64: 2, 0, 1>}
  %1 = tg.transpose %x {perm = array<i64: 2, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
  // CHECK: kern.slice %arg0, %arg6 {starts = array<i64: 0, 1, 0>}
  %2 = tg.slice %x {starts = array<i64: 0, 1, 0>, ends = array<i64: 2, 3, 4>} : (tensor<2x3x4xf32>) -> tensor<2x2x4xf32>
  // CHECK: kern.concat(%arg0, %arg0) into %arg7 {axis = 1 : i64}
  %3 = tg.concat %x, %x {axis = 1 : i64} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x6x4xf32>
  // CHECK: kern.gather %arg2, %arg3, %arg8
  %4 = tg.gather %t, %ids : (tensor<7x4xf32>, tensor<2x3xi32>) -> tensor<2x3x4xf32>
  // CHECK: kern.scatter_add %arg0, %arg3, %arg9
  %5 = tg.scatter_add %ids, %x : (tensor<2x3xi32>, tensor<2x3x4xf32>) -> tensor<7x4xf32>
  // CHECK: kern.reduce max %arg0, %arg10 {axes = array<i64: 1>}
  %6 = tg.reduce_max %x {axes = array<i64: 1>} : (tensor<2x3x4xf32>) -> tensor<2x4xf32>
  // CHECK: kern.slice %arg0, %arg11 {starts = array<i64: 0, 0, 0>}
  // CHECK-NOT: kern.slice
  %7:2 = tg.split %x {axis = 1 : i64} : (tensor<2x3x4xf32>) -> (tensor<2x1x4xf32>, tensor<2x2x4xf32>)
  // Constants are materialized where first needed (here: the return).
  %8 = tg.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  // CHECK: %[[V:.*]] = kern.reshape %arg0 : memref<2x3x4xf32> to memref<6x4xf32>
  %9 = tg.reshape %x : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
  // CHECK: %[[K:.*]] = kern.constant dense<[1.000000e+00, 2.000000e+00, 3.000000e+00]> : tensor<3xf32> : memref<3xf32>
  // CHECK: kern.elementwise ins(%[[K]] : memref<3xf32>) outs(%arg12 : memref<3xf32>)
  // An output that is a view is copied into its buffer.
  // CHECK: kern.elementwise ins(%[[V]] : memref<6x4xf32>) outs(%arg13 : memref<6x4xf32>)
  return %0, %1, %2, %3, %4, %5, %6, %7#0, %8, %9 : tensor<2x3x5xf32>, tensor<4x2x3xf32>, tensor<2x2x4xf32>, tensor<2x6x4xf32>, tensor<2x3x4xf32>, tensor<7x4xf32>, tensor<2x4xf32>, tensor<2x1x4xf32>, tensor<3xf32>, tensor<6x4xf32>
}
