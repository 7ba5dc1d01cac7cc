// RUN: tcc-opt %s -kern-fold-attention-layout | FileCheck %s
// RUN: tcc-opt %s -kern-fold-attention-layout -kern-fold-attention-layout | FileCheck %s
// kern-fold-attention-layout with rotary embeddings between the copies and
// the attention, as an imported LLaMA block has them (B 2, T 4, H 2, Hkv 1,
// D 8; packed qkv 16 + 8 + 8 = 32): q and k are sliced from the packed
// projection, transposed to (B, H, T, D) and rotated; the backward rotates
// dq and dk back (transposed rope), transposes and concatenates them with
// dv. The rotations read q and k straight from the packed buffer and write
// dq and dk straight into the packed gradient, so no slice, transpose or
// concat is left. Then a rotation whose input is read elsewhere (kept).

// CHECK-LABEL: func.func @llama_block
// CHECK-NOT: kern.slice
// CHECK-NOT: kern.transpose
// CHECK: kern.rope %[[QKV:.*]], %arg1, %arg2, %[[QR:.*]] {kern.fold_layout = ["x: folded kern.slice 'split', kern.transpose 'q.bhtd': offset 0, strides 128/8/32", "out: kept: no copy reads it"], layout = array<i64: 0, 128, 8, 32, 0, 64, 32, 8>, sizes = array<i64: 2, 2, 4, 8>}
// CHECK: kern.rope %[[QKV]], %arg1, %arg2, %[[KR:.*]] {kern.fold_layout = ["x: folded kern.slice 'split', kern.transpose 'k.bhtd': offset 16, strides 128/8/32", "out: kept: no copy reads it"], layout = array<i64: 16, 128, 8, 32, 0, 32, 32, 8>, sizes = array<i64: 2, 1, 4, 8>}
// CHECK: kern.attention %[[QR]], %[[KR]], %[[QKV]] into
// CHECK-SAME: "v: folded kern.slice 'split', kern.transpose 'v.bhtd': offset 24, strides 128/8/32"
// CHECK: %[[DQKV:.*]] = kern.alloc : memref<2x4x32xf32>
// CHECK: kern.attention_grad %[[QR]], %[[KR]], %[[QKV]], {{.*}} into %[[DQ:.*]], %[[DK:.*]], %[[DQKV]] workspace
// CHECK-SAME: "dq: kept: no copy reads it"
// CHECK-SAME: "dv: folded kern.transpose 'dv.bthd', kern.concat 'dsplit': offset 24, strides 128/8/32"
// CHECK: kern.rope %[[DQ]], %arg1, %arg2, %[[DQKV]] {kern.fold_layout = ["x: kept: no copy produces it", "out: folded kern.transpose 'dq.bthd', kern.concat 'dsplit': offset 0, strides 128/8/32"], layout = array<i64: 0, 64, 32, 8, 0, 128, 8, 32>, sizes = array<i64: 2, 2, 4, 8>, transposed = true}
// CHECK: kern.rope %[[DK]], %arg1, %arg2, %[[DQKV]] {kern.fold_layout = ["x: kept: no copy produces it", "out: folded kern.transpose 'dk.bthd', kern.concat 'dsplit': offset 16, strides 128/8/32"], layout = array<i64: 0, 32, 32, 8, 16, 128, 8, 32>, sizes = array<i64: 2, 1, 4, 8>, transposed = true}
// CHECK-NOT: kern.concat
// CHECK: kern.reduce sum %[[DQKV]]
func.func @llama_block(%x: memref<2x4x32xf32>, %cos: memref<4x8xf32>, %sin: memref<4x8xf32>,
                       %dout: memref<2x2x4x8xf32>, %loss: memref<1x1x32xf32>) {
  %qkv = kern.alloc : memref<2x4x32xf32>
  kern.elementwise ins(%x : memref<2x4x32xf32>) outs(%qkv : memref<2x4x32xf32>) {
  ^bb0(%a: f32, %i: i64):
    %m = arith.mulf %a, %a : f32
    kern.yield %m : f32
  }
  %s0 = kern.alloc : memref<2x4x16xf32>
  kern.slice %qkv, %s0 {starts = array<i64: 0, 0, 0>} : memref<2x4x32xf32>, memref<2x4x16xf32> loc("split")
  %s1 = kern.alloc : memref<2x4x8xf32>
  kern.slice %qkv, %s1 {starts = array<i64: 0, 0, 16>} : memref<2x4x32xf32>, memref<2x4x8xf32> loc("split")
  %s2 = kern.alloc : memref<2x4x8xf32>
  kern.slice %qkv, %s2 {starts = array<i64: 0, 0, 24>} : memref<2x4x32xf32>, memref<2x4x8xf32> loc("split")
  %h0 = kern.reshape %s0 : memref<2x4x16xf32> to memref<2x4x2x8xf32>
  %qt = kern.alloc : memref<2x2x4x8xf32>
  kern.transpose %h0, %qt {perm = array<i64: 0, 2, 1, 3>} : memref<2x4x2x8xf32>, memref<2x2x4x8xf32> loc("q.bhtd")
  %qr = kern.alloc : memref<2x2x4x8xf32>
  kern.rope %qt, %cos, %sin, %qr : memref<2x2x4x8xf32>, memref<4x8xf32>, memref<4x8xf32>, memref<2x2x4x8xf32> loc("q.rope")
  %h1 = kern.reshape %s1 : memref<2x4x8xf32> to memref<2x4x1x8xf32>
  %kt = kern.alloc : memref<2x1x4x8xf32>
  kern.transpose %h1, %kt {perm = array<i64: 0, 2, 1, 3>} : memref<2x4x1x8xf32>, memref<2x1x4x8xf32> loc("k.bhtd")
  %kr = kern.alloc : memref<2x1x4x8xf32>
  kern.rope %kt, %cos, %sin, %kr : memref<2x1x4x8xf32>, memref<4x8xf32>, memref<4x8xf32>, memref<2x1x4x8xf32> loc("k.rope")
  %h2 = kern.reshape %s2 : memref<2x4x8xf32> to memref<2x4x1x8xf32>
  %vt = kern.alloc : memref<2x1x4x8xf32>
  kern.transpose %h2, %vt {perm = array<i64: 0, 2, 1, 3>} : memref<2x4x1x8xf32>, memref<2x1x4x8xf32> loc("v.bhtd")
  %o = kern.alloc : memref<2x2x4x8xf32>
  %lse = kern.alloc : memref<2x2x4xf32>
  kern.attention %qr, %kr, %vt into %o, %lse {causal, scale = 0.35 : f64} : memref<2x2x4x8xf32>, memref<2x1x4x8xf32>, memref<2x1x4x8xf32> -> memref<2x2x4x8xf32>, memref<2x2x4xf32>
  // Backward.
  %dq = kern.alloc : memref<2x2x4x8xf32>
  %dk = kern.alloc : memref<2x1x4x8xf32>
  %dv = kern.alloc : memref<2x1x4x8xf32>
  %ws = kern.alloc : memref<16xf32>
  kern.attention_grad %qr, %kr, %vt, %o, %lse, %dout into %dq, %dk, %dv workspace %ws {causal, scale = 0.35 : f64} : memref<2x2x4x8xf32>, memref<2x1x4x8xf32>, memref<2x1x4x8xf32>, memref<2x2x4x8xf32>, memref<2x2x4xf32>, memref<2x2x4x8xf32> -> memref<2x2x4x8xf32>, memref<2x1x4x8xf32>, memref<2x1x4x8xf32>, memref<16xf32>
  %dqr = kern.alloc : memref<2x2x4x8xf32>
  kern.rope %dq, %cos, %sin, %dqr {transposed = true} : memref<2x2x4x8xf32>, memref<4x8xf32>, memref<4x8xf32>, memref<2x2x4x8xf32> loc("q.rope")
  %dkr = kern.alloc : memref<2x1x4x8xf32>
  kern.rope %dk, %cos, %sin, %dkr {transposed = true} : memref<2x1x4x8xf32>, memref<4x8xf32>, memref<4x8xf32>, memref<2x1x4x8xf32> loc("k.rope")
  %tq = kern.alloc : memref<2x4x2x8xf32>
  kern.transpose %dqr, %tq {perm = array<i64: 0, 2, 1, 3>} : memref<2x2x4x8xf32>, memref<2x4x2x8xf32> loc("dq.bthd")
  %tk = kern.alloc : memref<2x4x1x8xf32>
  kern.transpose %dkr, %tk {perm = array<i64: 0, 2, 1, 3>} : memref<2x1x4x8xf32>, memref<2x4x1x8xf32> loc("dk.bthd")
  %tv = kern.alloc : memref<2x4x1x8xf32>
  kern.transpose %dv, %tv {perm = array<i64: 0, 2, 1, 3>} : memref<2x1x4x8xf32>, memref<2x4x1x8xf32> loc("dv.bthd")
  %cq = kern.reshape %tq : memref<2x4x2x8xf32> to memref<2x4x16xf32>
  %ck = kern.reshape %tk : memref<2x4x1x8xf32> to memref<2x4x8xf32>
  %cv = kern.reshape %tv : memref<2x4x1x8xf32> to memref<2x4x8xf32>
  %dqkv = kern.alloc : memref<2x4x32xf32>
  kern.concat(%cq, %ck, %cv) into %dqkv {axis = 2 : i64} : (memref<2x4x16xf32>, memref<2x4x8xf32>, memref<2x4x8xf32>) -> memref<2x4x32xf32> loc("dsplit")
  kern.reduce sum %dqkv, %loss {axes = array<i64: 0, 1>} : memref<2x4x32xf32>, memref<1x1x32xf32>
  return
}

// The transposed q is read by something else too: the copy stays, and the
// rotation reads it as it is.
// CHECK-LABEL: func.func @rope_input_read_elsewhere
// CHECK: kern.transpose
// CHECK: kern.rope
// CHECK-SAME: "x: kept: kern.transpose 'q.bhtd''s result is also read by kern.reduce 'peek'"
// CHECK-NOT: layout =
func.func @rope_input_read_elsewhere(%qkv: memref<2x4x16xf32>, %cos: memref<4x8xf32>,
                                     %sin: memref<4x8xf32>, %peek: memref<1x1x1x8xf32>,
                                     %qr: memref<2x2x4x8xf32>) {
  %h0 = kern.reshape %qkv : memref<2x4x16xf32> to memref<2x4x2x8xf32>
  %qt = kern.alloc : memref<2x2x4x8xf32>
  kern.transpose %h0, %qt {perm = array<i64: 0, 2, 1, 3>} : memref<2x4x2x8xf32>, memref<2x2x4x8xf32> loc("q.bhtd")
  kern.reduce sum %qt, %peek {axes = array<i64: 0, 1, 2>} : memref<2x2x4x8xf32>, memref<1x1x1x8xf32> loc("peek")
  kern.rope %qt, %cos, %sin, %qr : memref<2x2x4x8xf32>, memref<4x8xf32>, memref<4x8xf32>, memref<2x2x4x8xf32> loc("q.rope")
  return
}

// A rotation of a 3-D tensor has no (B, H, T, D) view: it keeps its copies.
// CHECK-LABEL: func.func @rope_not_4d
// CHECK: kern.transpose
// CHECK: kern.rope {{.*}}kern.fold_layout = ["x: kept: the rotated tensor is not 4-D (B, H, T, D)", "out: kept: the rotated tensor is not 4-D (B, H, T, D)"]
// CHECK-NOT: layout =
func.func @rope_not_4d(%x: memref<4x2x8xf32>, %cos: memref<4x8xf32>, %sin: memref<4x8xf32>,
                       %out: memref<2x4x8xf32>) {
  %t = kern.alloc : memref<2x4x8xf32>
  kern.transpose %x, %t {perm = array<i64: 1, 0, 2>} : memref<4x2x8xf32>, memref<2x4x8xf32> loc("x.t")
  kern.rope %t, %cos, %sin, %out : memref<2x4x8xf32>, memref<4x8xf32>, memref<4x8xf32>, memref<2x4x8xf32> loc("rope3")
  return
}
