// RUN: tcc-opt %s -kern-fold-attention-layout | FileCheck %s
// RUN: tcc-opt %s -kern-fold-attention-layout -kern-fold-attention-layout | FileCheck %s
// kern-fold-attention-layout on GPT-2's attention block at kern level (B 2,
// T 4, H 2, D 8, C 16, packed qkv 48): the three slices, the q/k/v
// transposes, the context transpose, the grad transpose, the dq/dk/dv
// transposes and their concat all fold into strides of kern.attention /
// kern.attention_grad and are erased. Then the refusals, each with its
// reason in kern.fold_layout. A second run changes nothing (ops strided
// already keep their layout and report).

// CHECK-LABEL: func.func @gpt2_block
// CHECK-NOT: kern.slice
// CHECK-NOT: kern.transpose
// CHECK: %[[CTX:.*]] = kern.alloc : memref<2x4x2x8xf32>
// CHECK: kern.attention %[[QKV:.*]], %[[QKV]], %[[QKV]] into %[[CTX]], %[[LSE:.*]] {causal, kern.fold_layout = ["q: folded kern.slice 'split', kern.transpose 'q.bhtd': offset 0, strides 192/8/48", "k: folded kern.slice 'split', kern.transpose 'k.bhtd': offset 16, strides 192/8/48", "v: folded kern.slice 'split', kern.transpose 'v.bhtd': offset 32, strides 192/8/48", "out: folded kern.transpose 'context.bthd': offset 0, strides 64/8/16"], layout = array<i64: 0, 192, 8, 48, 16, 192, 8, 48, 32, 192, 8, 48, 0, 64, 8, 16>, scale = 3.500000e-01 : f64, sizes = array<i64: 2, 2, 2, 4, 4, 8>} : memref<2x4x48xf32>, memref<2x4x48xf32>, memref<2x4x48xf32> -> memref<2x4x2x8xf32>, memref<2x2x4xf32>
// The gradient buffer is allocated before the backward writes into it.
// CHECK: %[[DQKV:.*]] = kern.alloc : memref<2x4x48xf32>
// CHECK: kern.attention_grad %[[QKV]], %[[QKV]], %[[QKV]], %[[CTX]], %[[LSE]], %[[DOUT:.*]] into %[[DQKV]], %[[DQKV]], %[[DQKV]] workspace
// CHECK-SAME: "grad: folded kern.transpose 'dcontext.bhtd': offset 0, strides 64/8/16"
// CHECK-SAME: "dq: folded kern.transpose 'dq.bthd', kern.concat 'dsplit': offset 0, strides 192/8/48"
// CHECK-SAME: "dk: folded kern.transpose 'dk.bthd', kern.concat 'dsplit': offset 16, strides 192/8/48"
// CHECK-SAME: "dv: folded kern.transpose 'dv.bthd', kern.concat 'dsplit': offset 32, strides 192/8/48"
// CHECK-SAME: layout = array<i64: 0, 192, 8, 48, 16, 192, 8, 48, 32, 192, 8, 48, 0, 64, 8, 16, 0, 64, 8, 16, 0, 192, 8, 48, 16, 192, 8, 48, 32, 192, 8, 48>
// CHECK-NOT: kern.concat
// CHECK: kern.reduce sum %[[DQKV]]
func.func @gpt2_block(%x: memref<2x4x48xf32>, %dctx: memref<2x4x16xf32>, %loss: memref<1x1x48xf32>) {
  %qkv = kern.alloc : memref<2x4x48xf32>
  kern.elementwise ins(%x : memref<2x4x48xf32>) outs(%qkv : memref<2x4x48xf32>) {
  ^bb0(%a: f32, %i: i64):
    %m = arith.mulf %a, %a : f32
    kern.yield %m : f32
  }
  %s0 = kern.alloc : memref<2x4x16xf32>
  kern.slice %qkv, %s0 {starts = array<i64: 0, 0, 0>} : memref<2x4x48xf32>, memref<2x4x16xf32> loc("split")
  %s1 = kern.alloc : memref<2x4x16xf32>
  kern.slice %qkv, %s1 {starts = array<i64: 0, 0, 16>} : memref<2x4x48xf32>, memref<2x4x16xf32> loc("split")
  %s2 = kern.alloc : memref<2x4x16xf32>
  kern.slice %qkv, %s2 {starts = array<i64: 0, 0, 32>} : memref<2x4x48xf32>, memref<2x4x16xf32> loc("split")
  %h0 = kern.reshape %s0 : memref<2x4x16xf32> to memref<2x4x2x8xf32>
  %q = kern.alloc : memref<2x2x4x8xf32>
  kern.transpose %h0, %q {perm = array<i64: 0, 2, 1, 3>} : memref<2x4x2x8xf32>, memref<2x2x4x8xf32> loc("q.bhtd")
  %h1 = kern.reshape %s1 : memref<2x4x16xf32> to memref<2x4x2x8xf32>
  %k = kern.alloc : memref<2x2x4x8xf32>
  kern.transpose %h1, %k {perm = array<i64: 0, 2, 1, 3>} : memref<2x4x2x8xf32>, memref<2x2x4x8xf32> loc("k.bhtd")
  %h2 = kern.reshape %s2 : memref<2x4x16xf32> to memref<2x4x2x8xf32>
  %v = kern.alloc : memref<2x2x4x8xf32>
  kern.transpose %h2, %v {perm = array<i64: 0, 2, 1, 3>} : memref<2x4x2x8xf32>, memref<2x2x4x8xf32> loc("v.bhtd")
  %o = kern.alloc : memref<2x2x4x8xf32>
  %lse = kern.alloc : memref<2x2x4xf32>
  kern.attention %q, %k, %v into %o, %lse {causal, scale = 0.35 : f64} : memref<2x2x4x8xf32>, memref<2x2x4x8xf32>, memref<2x2x4x8xf32> -> memref<2x2x4x8xf32>, memref<2x2x4xf32>
  %ctx = kern.alloc : memref<2x4x2x8xf32>
  kern.transpose %o, %ctx {perm = array<i64: 0, 2, 1, 3>} : memref<2x2x4x8xf32>, memref<2x4x2x8xf32> loc("context.bthd")
  %ctxc = kern.reshape %ctx : memref<2x4x2x8xf32> to memref<2x4x16xf32>
  %sum = kern.alloc : memref<1x1x16xf32>
  kern.reduce sum %ctxc, %sum {axes = array<i64: 0, 1>} : memref<2x4x16xf32>, memref<1x1x16xf32>
  // Backward.
  %dh = kern.reshape %dctx : memref<2x4x16xf32> to memref<2x4x2x8xf32>
  %dout = kern.alloc : memref<2x2x4x8xf32>
  kern.transpose %dh, %dout {perm = array<i64: 0, 2, 1, 3>} : memref<2x4x2x8xf32>, memref<2x2x4x8xf32> loc("dcontext.bhtd")
  %dq = kern.alloc : memref<2x2x4x8xf32>
  %dk = kern.alloc : memref<2x2x4x8xf32>
  %dv = kern.alloc : memref<2x2x4x8xf32>
  %ws = kern.alloc : memref<16xf32>
  kern.attention_grad %q, %k, %v, %o, %lse, %dout into %dq, %dk, %dv workspace %ws {causal, scale = 0.35 : f64} : memref<2x2x4x8xf32>, memref<2x2x4x8xf32>, memref<2x2x4x8xf32>, memref<2x2x4x8xf32>, memref<2x2x4xf32>, memref<2x2x4x8xf32> -> memref<2x2x4x8xf32>, memref<2x2x4x8xf32>, memref<2x2x4x8xf32>, memref<16xf32>
  %tq = kern.alloc : memref<2x4x2x8xf32>
  kern.transpose %dq, %tq {perm = array<i64: 0, 2, 1, 3>} : memref<2x2x4x8xf32>, memref<2x4x2x8xf32> loc("dq.bthd")
  %tk = kern.alloc : memref<2x4x2x8xf32>
  kern.transpose %dk, %tk {perm = array<i64: 0, 2, 1, 3>} : memref<2x2x4x8xf32>, memref<2x4x2x8xf32> loc("dk.bthd")
  %tv = kern.alloc : memref<2x4x2x8xf32>
  kern.transpose %dv, %tv {perm = array<i64: 0, 2, 1, 3>} : memref<2x2x4x8xf32>, memref<2x4x2x8xf32> loc("dv.bthd")
  %cq = kern.reshape %tq : memref<2x4x2x8xf32> to memref<2x4x16xf32>
  %ck = kern.reshape %tk : memref<2x4x2x8xf32> to memref<2x4x16xf32>
  %cv = kern.reshape %tv : memref<2x4x2x8xf32> to memref<2x4x16xf32>
  %dqkv = kern.alloc : memref<2x4x48xf32>
  kern.concat(%cq, %ck, %cv) into %dqkv {axis = 2 : i64} : (memref<2x4x16xf32>, memref<2x4x16xf32>, memref<2x4x16xf32>) -> memref<2x4x48xf32> loc("dsplit")
  kern.reduce sum %dqkv, %loss {axes = array<i64: 0, 1>} : memref<2x4x48xf32>, memref<1x1x48xf32>
  return
}

// A transposed q that something else reads too stays a copy (k, v fold).
// CHECK-LABEL: func.func @q_read_elsewhere
// CHECK: kern.transpose
// CHECK: kern.attention
// CHECK-SAME: "q: kept: kern.transpose 'q.bhtd''s result is also read by kern.reduce 'peek'"
// CHECK-SAME: "k: folded
// Written into its buffer after the copy: the slice must stay.
// CHECK-LABEL: func.func @source_written_after_copy
// CHECK: kern.slice
// CHECK: kern.attention
// CHECK-SAME: "q: kept: kern.fill 'overwrite' writes the source of kern.slice 'split' after (or around) the copy"
// Head stride 6 floats = 24 bytes: not the kernels' 16-byte rows.
// CHECK-LABEL: func.func @misaligned_heads
// CHECK: kern.attention
// CHECK-SAME: "q: kept: offset / strides 0, 144, 6, 36 are not multiples of 16 bytes"
// CHECK-NOT: layout =
// CHECK-LABEL: func.func @concat_with_other_inputs
// CHECK: kern.attention_grad
// CHECK-SAME: "dq: kept: kern.concat 'mixed' has inputs that are no foldable attention or rope output (1 of 2 fold)"
// CHECK: kern.concat
func.func @q_read_elsewhere(%qkv: memref<2x4x48xf32>, %peek: memref<1x1x1x8xf32>) {
  %s0 = kern.alloc : memref<2x4x16xf32>
  kern.slice %qkv, %s0 {starts = array<i64: 0, 0, 0>} : memref<2x4x48xf32>, memref<2x4x16xf32> loc("split")
  %h0 = kern.reshape %s0 : memref<2x4x16xf32> to memref<2x4x2x8xf32>
  %q = kern.alloc : memref<2x2x4x8xf32>
  kern.transpose %h0, %q {perm = array<i64: 0, 2, 1, 3>} : memref<2x4x2x8xf32>, memref<2x2x4x8xf32> loc("q.bhtd")
  %s1 = kern.alloc : memref<2x4x16xf32>
  kern.slice %qkv, %s1 {starts = array<i64: 0, 0, 16>} : memref<2x4x48xf32>, memref<2x4x16xf32> loc("split")
  %h1 = kern.reshape %s1 : memref<2x4x16xf32> to memref<2x4x2x8xf32>
  %k = kern.alloc : memref<2x2x4x8xf32>
  kern.transpose %h1, %k {perm = array<i64: 0, 2, 1, 3>} : memref<2x4x2x8xf32>, memref<2x2x4x8xf32> loc("k.bhtd")
  kern.reduce sum %q, %peek {axes = array<i64: 0, 1, 2>} : memref<2x2x4x8xf32>, memref<1x1x1x8xf32> loc("peek")
  %o = kern.alloc : memref<2x2x4x8xf32>
  %lse = kern.alloc : memref<2x2x4xf32>
  kern.attention %q, %k, %k into %o, %lse {scale = 0.35 : f64} : memref<2x2x4x8xf32>, memref<2x2x4x8xf32>, memref<2x2x4x8xf32> -> memref<2x2x4x8xf32>, memref<2x2x4xf32>
  return
}
func.func @source_written_after_copy(%qkv: memref<2x4x48xf32>, %out: memref<2x2x4x8xf32>) {
  %s0 = kern.alloc : memref<2x4x16xf32>
  kern.slice %qkv, %s0 {starts = array<i64: 0, 0, 0>} : memref<2x4x48xf32>, memref<2x4x16xf32> loc("split")
  %h0 = kern.reshape %s0 : memref<2x4x16xf32> to memref<2x4x2x8xf32>
  %q = kern.alloc : memref<2x2x4x8xf32>
  kern.transpose %h0, %q {perm = array<i64: 0, 2, 1, 3>} : memref<2x4x2x8xf32>, memref<2x2x4x8xf32> loc("q.bhtd")
  kern.fill %qkv {value = 0.0 : f64} : memref<2x4x48xf32> loc("overwrite")
  %lse = kern.alloc : memref<2x2x4xf32>
  kern.attention %q, %q, %q into %out, %lse {scale = 0.35 : f64} : memref<2x2x4x8xf32>, memref<2x2x4x8xf32>, memref<2x2x4x8xf32> -> memref<2x2x4x8xf32>, memref<2x2x4xf32>
  return
}
func.func @misaligned_heads(%qkv: memref<2x4x36xf32>, %out: memref<2x2x4x6xf32>) {
  %s0 = kern.alloc : memref<2x4x12xf32>
  kern.slice %qkv, %s0 {starts = array<i64: 0, 0, 0>} : memref<2x4x36xf32>, memref<2x4x12xf32> loc("split")
  %h0 = kern.reshape %s0 : memref<2x4x12xf32> to memref<2x4x2x6xf32>
  %q = kern.alloc : memref<2x2x4x6xf32>
  kern.transpose %h0, %q {perm = array<i64: 0, 2, 1, 3>} : memref<2x4x2x6xf32>, memref<2x2x4x6xf32> loc("q.bhtd")
  %lse = kern.alloc : memref<2x2x4xf32>
  kern.attention %q, %q, %q into %out, %lse {scale = 0.35 : f64} : memref<2x2x4x6xf32>, memref<2x2x4x6xf32>, memref<2x2x4x6xf32> -> memref<2x2x4x6xf32>, memref<2x2x4xf32>
  return
}
func.func @concat_with_other_inputs(%q: memref<2x2x4x8xf32>, %o: memref<2x2x4x8xf32>, %lse: memref<2x2x4xf32>, %g: memref<2x2x4x8xf32>, %other: memref<2x4x16xf32>, %dk: memref<2x2x4x8xf32>, %dv: memref<2x2x4x8xf32>, %sink: memref<1x1x32xf32>) {
  %dq = kern.alloc : memref<2x2x4x8xf32>
  %ws = kern.alloc : memref<16xf32>
  kern.attention_grad %q, %q, %q, %o, %lse, %g into %dq, %dk, %dv workspace %ws {scale = 0.35 : f64} : memref<2x2x4x8xf32>, memref<2x2x4x8xf32>, memref<2x2x4x8xf32>, memref<2x2x4x8xf32>, memref<2x2x4xf32>, memref<2x2x4x8xf32> -> memref<2x2x4x8xf32>, memref<2x2x4x8xf32>, memref<2x2x4x8xf32>, memref<16xf32>
  %tq = kern.alloc : memref<2x4x2x8xf32>
  kern.transpose %dq, %tq {perm = array<i64: 0, 2, 1, 3>} : memref<2x2x4x8xf32>, memref<2x4x2x8xf32> loc("dq.bthd")
  %cq = kern.reshape %tq : memref<2x4x2x8xf32> to memref<2x4x16xf32>
  %both = kern.alloc : memref<2x4x32xf32>
  kern.concat(%cq, %other) into %both {axis = 2 : i64} : (memref<2x4x16xf32>, memref<2x4x16xf32>) -> memref<2x4x32xf32> loc("mixed")
  kern.reduce sum %both, %sink {axes = array<i64: 0, 1>} : memref<2x4x32xf32>, memref<1x1x32xf32>
  return
}
