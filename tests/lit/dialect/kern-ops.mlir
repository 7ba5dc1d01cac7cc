// RUN: tcc-opt %s | tcc-opt | FileCheck %s
// Every kern op parses, verifies and prints back to the same text.

// CHECK-LABEL: func.func @kern_ops
func.func @kern_ops(%a: memref<2x4x3xf32>, %b: memref<3x5xf32>, %l: memref<4xi32>,
                    %ids: memref<2x3xi64>, %table: memref<7x5xf32>) {
  // CHECK: kern.workspace_view 0
  %c = kern.workspace_view 0 : memref<2x4x5xf32>
  // A batched lhs against a shared rank-2 rhs.
  // CHECK: kern.gemm
  kern.gemm %a, %b, %c {alpha = 1.0 : f64, beta = 0.0 : f64, transpose_a = false, transpose_b = false} : memref<2x4x3xf32>, memref<3x5xf32>, memref<2x4x5xf32>
  %d = kern.workspace_view 256 : memref<2x4x5xf32>
  %m = kern.workspace_view 512 : memref<2x4x5xi1>
  // CHECK: kern.elementwise ins(%{{.*}}, %{{.*}} : memref<2x4x5xf32>, memref<5xf32>) outs(%{{.*}}, %{{.*}} : memref<2x4x5xf32>, memref<2x4x5xi1>) {
  // CHECK-NEXT: ^bb0(%{{.*}}: f32, %{{.*}}: f32, %{{.*}}: i64):
  // CHECK: kern.yield %{{.*}}, %{{.*}} : f32, i1
  %row = kern.workspace_view 640 : memref<5xf32>
  kern.elementwise ins(%c, %row : memref<2x4x5xf32>, memref<5xf32>) outs(%d, %m : memref<2x4x5xf32>, memref<2x4x5xi1>) {
  ^bb0(%x: f32, %y: f32, %i: i64):
    %s = arith.addf %x, %y : f32
    %z = arith.constant 0.0 : f32
    %p = arith.cmpf ogt, %s, %z : f32
    %r = arith.select %p, %s, %z : f32
    %e = math.exp %r : f32
    kern.yield %e, %p : f32, i1
  }
  // No inputs: a value of the position alone (iota).
  // CHECK: kern.elementwise outs(%{{.*}} : memref<5xf32>) {
  kern.elementwise outs(%row : memref<5xf32>) {
  ^bb0(%i: i64):
    %f = arith.sitofp %i : i64 to f32
    kern.yield %f : f32
  }
  %loss = kern.workspace_view 768 : memref<4xf32>
  %flat = kern.reshape %d : memref<2x4x5xf32> to memref<8x5xf32>
  %four = kern.workspace_view 832 : memref<4x5xf32>
  // CHECK: kern.slice %{{.*}}, %{{.*}} {starts = array<i64: 2, 0>}
  kern.slice %flat, %four {starts = array<i64: 2, 0>} : memref<8x5xf32>, memref<4x5xf32>
  // CHECK: kern.softmax_cross_entropy
  kern.softmax_cross_entropy %four, %l, %loss : memref<4x5xf32>, memref<4xi32>, memref<4xf32>
  // CHECK: kern.softmax_cross_entropy_with_grad %[[F:.*]], %{{.*}}, %{{.*}}, %{{.*}}, %[[F]] :
  kern.softmax_cross_entropy_with_grad %four, %l, %loss, %loss, %four : memref<4x5xf32>, memref<4xi32>, memref<4xf32>, memref<4xf32>, memref<4x5xf32>
  %s = kern.workspace_view 960 : memref<2x5xf32>
  // CHECK: kern.reduce sum %{{.*}}, %{{.*}} {axes = array<i64: 1>}
  kern.reduce sum %d, %s {axes = array<i64: 1>} : memref<2x4x5xf32>, memref<2x5xf32>
  // CHECK: kern.reduce max
  kern.reduce max %d, %s {axes = array<i64: 1>} : memref<2x4x5xf32>, memref<2x5xf32>
  // CHECK: kern.reshape
  %v = kern.reshape %s : memref<2x5xf32> to memref<10xf32>
  // CHECK: kern.fill
  kern.fill %d {value = 0.0 : f64} : memref<2x4x5xf32>
  %t = kern.workspace_view 1024 : memref<5x2x4xf32>
  // CHECK: kern.transpose %{{.*}}, %{{.*}} {perm = array<i64: 2, 0, 1>}
  kern.transpose %d, %t {perm = array<i64: 2, 0, 1>} : memref<2x4x5xf32>, memref<5x2x4xf32>
  %cat = kern.workspace_view 1280 : memref<4x5xf32>
  // CHECK: kern.concat(%{{.*}}, %{{.*}}) into %{{.*}} {axis = 0 : i64}
  kern.concat(%s, %s) into %cat {axis = 0 : i64} : (memref<2x5xf32>, memref<2x5xf32>) -> memref<4x5xf32>
  %emb = kern.workspace_view 1408 : memref<2x3x5xf32>
  // CHECK: kern.gather
  kern.gather %table, %ids, %emb : memref<7x5xf32>, memref<2x3xi64>, memref<2x3x5xf32>
  // CHECK: kern.scatter_add
  kern.scatter_add %emb, %ids, %table : memref<2x3x5xf32>, memref<2x3xi64>, memref<7x5xf32>
  // CHECK: kern.constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32> : memref<2xf32>
  %k = kern.constant dense<[1.0, 2.0]> : tensor<2xf32> : memref<2xf32>
  return
}

// Flash attention, grouped heads (H = 4 over Hkv = 2), with dropout, and its
// backward with the deterministic flag and its workspace
// (B*H*T = 12 floats).
// CHECK-LABEL: func.func @kern_attention
// CHECK: kern.attention %arg0, %arg1, %arg1 dropout(%arg6, %arg7) into %arg2, %arg3 {causal, dropout_rate = 1.000000e-01 : f64, op_id = 5 : i64, scale = 1.250000e-01 : f64} : memref<1x4x3x8xbf16>, memref<1x2x5x8xbf16>, memref<1x2x5x8xbf16>, memref<i64>, memref<i64> -> memref<1x4x3x8xbf16>, memref<1x4x3xf32>
// CHECK: kern.attention_grad %arg0, %arg1, %arg1, %arg2, %arg3, %arg2 into %arg2, %arg4, %arg4 workspace %arg5 {deterministic, scale = 1.250000e-01 : f64} : memref<1x4x3x8xbf16>, memref<1x2x5x8xbf16>, memref<1x2x5x8xbf16>, memref<1x4x3x8xbf16>, memref<1x4x3xf32>, memref<1x4x3x8xbf16> -> memref<1x4x3x8xbf16>, memref<1x2x5x8xbf16>, memref<1x2x5x8xbf16>, memref<12xf32>
func.func @kern_attention(%q: memref<1x4x3x8xbf16>, %k: memref<1x2x5x8xbf16>, %o: memref<1x4x3x8xbf16>,
                          %l: memref<1x4x3xf32>, %dk: memref<1x2x5x8xbf16>, %ws: memref<12xf32>,
                          %seed: memref<i64>, %step: memref<i64>) {
  kern.attention %q, %k, %k dropout(%seed, %step) into %o, %l {scale = 0.125 : f64, causal, dropout_rate = 0.1 : f64, op_id = 5 : i64} : memref<1x4x3x8xbf16>, memref<1x2x5x8xbf16>, memref<1x2x5x8xbf16>, memref<i64>, memref<i64> -> memref<1x4x3x8xbf16>, memref<1x4x3xf32>
  kern.attention_grad %q, %k, %k, %o, %l, %o into %o, %dk, %dk workspace %ws {scale = 0.125 : f64, deterministic} : memref<1x4x3x8xbf16>, memref<1x2x5x8xbf16>, memref<1x2x5x8xbf16>, memref<1x4x3x8xbf16>, memref<1x4x3xf32>, memref<1x4x3x8xbf16> -> memref<1x4x3x8xbf16>, memref<1x2x5x8xbf16>, memref<1x2x5x8xbf16>, memref<12xf32>
  return
}
