// RUN: tcc-opt %s -split-input-file -tg-fuse-attention | FileCheck %s
// tg-fuse-attention: the ways users write scaled dot-product attention from
// primitives each become one tg.attention; the decision is recorded on it
// (tg.fuse_attention, the report's line).

// The GPT form (models/Gpt.cpp): scores = q.k^T, times a 1/sqrt(D) splat,
// causal_mask, softmax, dropout, times v. Nothing is reshaped: q, k, v are
// already (B, H, T, D).
// CHECK-LABEL: func.func @gpt
// CHECK-NEXT: %[[R:.*]], %{{.*}} = tg.attention %arg0, %arg1, %arg2 dropout(%arg3, %arg4) {causal, dropout_rate = 1.000000e-01 : f64, op_id = 7 : i64, scale = 2.500000e-01 : f64, tg.fuse_attention = "fused: B=2 H=4 Hkv=4 T=8 S=8 D=16 causal scale=0.25 dropout=0.1"} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<i64>, tensor<i64>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8xf32>)
// CHECK-NEXT: return %[[R]]
func.func @gpt(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>,
               %seed: tensor<i64>, %step: tensor<i64>) -> tensor<2x4x8x16xf32> {
  %s = tg.matmul %q, %k {transpose_rhs = true} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
  %c = tg.constant dense<0.25> : tensor<f32>
  %sc = tg.mul %s, %c : (tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xf32>
  %m = tg.causal_mask %sc : tensor<2x4x8x8xf32>
  %p = tg.softmax %m {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %d = tg.dropout %p, %seed, %step {op_id = 7 : i64, rate = 0.1 : f64} : tensor<2x4x8x8xf32>
  %o = tg.matmul %d, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// Divided by sqrt(D) after the mask, k transposed by tg.transpose, no
// dropout; D = 64 and 128 are the CUDA kernels' sizes.
// CHECK-LABEL: func.func @div_after_mask
// CHECK-NEXT: tg.attention %arg0, %arg1, %arg2 {causal, scale = 1.250000e-01 : f64, tg.fuse_attention = "fused: B=1 H=2 Hkv=2 T=4 S=4 D=64 causal scale=0.125"} : (tensor<1x2x4x64xf32>, tensor<1x2x4x64xf32>, tensor<1x2x4x64xf32>) -> (tensor<1x2x4x64xf32>, tensor<1x2x4xf32>)
// CHECK-NOT: tg.transpose
// CHECK-NOT: tg.constant
func.func @div_after_mask(%q: tensor<1x2x4x64xf32>, %k: tensor<1x2x4x64xf32>, %v: tensor<1x2x4x64xf32>) -> tensor<1x2x4x64xf32> {
  %kt = tg.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x2x4x64xf32>) -> tensor<1x2x64x4xf32>
  %s = tg.matmul %q, %kt : (tensor<1x2x4x64xf32>, tensor<1x2x64x4xf32>) -> tensor<1x2x4x4xf32>
  %m = tg.causal_mask %s : tensor<1x2x4x4xf32>
  %c = tg.constant dense<8.0> : tensor<1x1x1x1xf32>
  %sc = tg.div %m, %c : (tensor<1x2x4x4xf32>, tensor<1x1x1x1xf32>) -> tensor<1x2x4x4xf32>
  %p = tg.softmax %sc {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o = tg.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x64xf32>) -> tensor<1x2x4x64xf32>
  return %o : tensor<1x2x4x64xf32>
}

// -----

// The scale on q before the product (and a second one on k, as some code
// splits D^-1/2 into two D^-1/4): both move into the op. Not causal.
// CHECK-LABEL: func.func @scale_on_q_and_k
// CHECK-NEXT: tg.attention %arg0, %arg1, %arg2 {scale = 1.250000e-01 : f64, tg.fuse_attention = "fused: B=2 H=3 Hkv=3 T=5 S=6 D=128 not-causal scale=0.125"}
// CHECK-NOT: tg.mul
func.func @scale_on_q_and_k(%q: tensor<2x3x5x128xf32>, %k: tensor<2x3x6x128xf32>, %v: tensor<2x3x6x128xf32>) -> tensor<2x3x5x128xf32> {
  %c = tg.constant dense<0.25> : tensor<f32>
  %c2 = tg.constant dense<0.5> : tensor<f32>
  %qs = tg.mul %c, %q : (tensor<f32>, tensor<2x3x5x128xf32>) -> tensor<2x3x5x128xf32>
  %ks = tg.mul %k, %c2 : (tensor<2x3x6x128xf32>, tensor<f32>) -> tensor<2x3x6x128xf32>
  %s = tg.matmul %qs, %ks {transpose_rhs = true} : (tensor<2x3x5x128xf32>, tensor<2x3x6x128xf32>) -> tensor<2x3x5x6xf32>
  %p = tg.softmax %s {axis = 3 : i64} : tensor<2x3x5x6xf32>
  %o = tg.matmul %p, %v : (tensor<2x3x5x6xf32>, tensor<2x3x6x128xf32>) -> tensor<2x3x5x128xf32>
  return %o : tensor<2x3x5x128xf32>
}

// -----

// An additive mask constant (0 on and below the diagonal, -inf above),
// broadcast over batch and heads; here T < S: query i sees keys up to
// i + (S - T), as causal_mask.
// CHECK-LABEL: func.func @additive_mask
// CHECK-NEXT: tg.attention %arg0, %arg1, %arg2 {causal, scale = 1.000000e+00 : f64, tg.fuse_attention = "fused: B=1 H=2 Hkv=2 T=2 S=3 D=8 causal scale=1"}
// CHECK-NOT: tg.add
func.func @additive_mask(%q: tensor<1x2x2x8xf32>, %k: tensor<1x2x3x8xf32>, %v: tensor<1x2x3x8xf32>) -> tensor<1x2x2x8xf32> {
  %s = tg.matmul %q, %k {transpose_rhs = true} : (tensor<1x2x2x8xf32>, tensor<1x2x3x8xf32>) -> tensor<1x2x2x3xf32>
  %mask = tg.constant dense<[[0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0]]> : tensor<2x3xf32>
  %m = tg.add %mask, %s : (tensor<2x3xf32>, tensor<1x2x2x3xf32>) -> tensor<1x2x2x3xf32>
  %p = tg.softmax %m {axis = 3 : i64} : tensor<1x2x2x3xf32>
  %o = tg.matmul %p, %v : (tensor<1x2x2x3xf32>, tensor<1x2x3x8xf32>) -> tensor<1x2x2x8xf32>
  return %o : tensor<1x2x2x8xf32>
}

// -----

// select(lower-triangular keep, scores, -inf), then the scale (positive:
// -inf stays -inf); and select(upper-triangular drop, -inf, scores).
// CHECK-LABEL: func.func @select_mask
// CHECK-NEXT: tg.attention %arg0, %arg1, %arg2 {causal, scale = 5.000000e-01 : f64, tg.fuse_attention = "fused: B=1 H=1 Hkv=1 T=3 S=3 D=4 causal scale=0.5"}
func.func @select_mask(%q: tensor<1x1x3x4xf32>, %k: tensor<1x1x3x4xf32>, %v: tensor<1x1x3x4xf32>) -> tensor<1x1x3x4xf32> {
  %s = tg.matmul %q, %k {transpose_rhs = true} : (tensor<1x1x3x4xf32>, tensor<1x1x3x4xf32>) -> tensor<1x1x3x3xf32>
  %keep = tg.constant dense<[[true, false, false], [true, true, false], [true, true, true]]> : tensor<3x3xi1>
  %ninf = tg.constant dense<0xFF800000> : tensor<f32>
  %m = tg.select %keep, %s, %ninf : (tensor<3x3xi1>, tensor<1x1x3x3xf32>, tensor<f32>) -> tensor<1x1x3x3xf32>
  %c = tg.constant dense<0.5> : tensor<f32>
  %sc = tg.mul %m, %c : (tensor<1x1x3x3xf32>, tensor<f32>) -> tensor<1x1x3x3xf32>
  %p = tg.softmax %sc {axis = 3 : i64} : tensor<1x1x3x3xf32>
  %o = tg.matmul %p, %v : (tensor<1x1x3x3xf32>, tensor<1x1x3x4xf32>) -> tensor<1x1x3x4xf32>
  return %o : tensor<1x1x3x4xf32>
}

// CHECK-LABEL: func.func @select_drop_upper
// CHECK-NEXT: tg.attention %arg0, %arg1, %arg2 {causal, scale = 1.000000e+00 : f64
func.func @select_drop_upper(%q: tensor<1x1x3x4xf32>, %k: tensor<1x1x3x4xf32>, %v: tensor<1x1x3x4xf32>) -> tensor<1x1x3x4xf32> {
  %s = tg.matmul %q, %k {transpose_rhs = true} : (tensor<1x1x3x4xf32>, tensor<1x1x3x4xf32>) -> tensor<1x1x3x3xf32>
  %drop = tg.constant dense<[[[[false, true, true], [false, false, true], [false, false, false]]]]> : tensor<1x1x3x3xi1>
  %ninf = tg.constant dense<0xFF800000> : tensor<1x1x3x3xf32>
  %m = tg.select %drop, %ninf, %s : (tensor<1x1x3x3xi1>, tensor<1x1x3x3xf32>, tensor<1x1x3x3xf32>) -> tensor<1x1x3x3xf32>
  %p = tg.softmax %m {axis = 3 : i64} : tensor<1x1x3x3xf32>
  %o = tg.matmul %p, %v : (tensor<1x1x3x3xf32>, tensor<1x1x3x4xf32>) -> tensor<1x1x3x4xf32>
  return %o : tensor<1x1x3x4xf32>
}

// -----

// Grouped-query attention by matmul broadcasting: q (B, Hkv, G, T, D)
// against k, v (B, Hkv, 1, S, D) becomes q (B, H = Hkv*G, T, D) and k, v
// (B, Hkv, S, D); the result is reshaped back.
// CHECK-LABEL: func.func @gqa_broadcast
// CHECK-DAG: %[[Q:.*]] = tg.reshape %arg0 : (tensor<2x2x3x5x16xf32>) -> tensor<2x6x5x16xf32>
// CHECK-DAG: %[[K:.*]] = tg.reshape %arg1 : (tensor<2x2x1x5x16xf32>) -> tensor<2x2x5x16xf32>
// CHECK-DAG: %[[V:.*]] = tg.reshape %arg2 : (tensor<2x2x1x5x16xf32>) -> tensor<2x2x5x16xf32>
// CHECK: %[[R:.*]], %{{.*}} = tg.attention %[[Q]], %[[K]], %[[V]] {causal, scale = 2.500000e-01 : f64, tg.fuse_attention = "fused: B=2 H=6 Hkv=2 T=5 S=5 D=16 causal scale=0.25"} : (tensor<2x6x5x16xf32>, tensor<2x2x5x16xf32>, tensor<2x2x5x16xf32>) -> (tensor<2x6x5x16xf32>, tensor<2x6x5xf32>)
// CHECK: %[[O:.*]] = tg.reshape %[[R]] : (tensor<2x6x5x16xf32>) -> tensor<2x2x3x5x16xf32>
// CHECK: return %[[O]]
func.func @gqa_broadcast(%q: tensor<2x2x3x5x16xf32>, %k: tensor<2x2x1x5x16xf32>, %v: tensor<2x2x1x5x16xf32>) -> tensor<2x2x3x5x16xf32> {
  %s = tg.matmul %q, %k {transpose_rhs = true} : (tensor<2x2x3x5x16xf32>, tensor<2x2x1x5x16xf32>) -> tensor<2x2x3x5x5xf32>
  %c = tg.constant dense<0.25> : tensor<f32>
  %sc = tg.mul %s, %c : (tensor<2x2x3x5x5xf32>, tensor<f32>) -> tensor<2x2x3x5x5xf32>
  %m = tg.causal_mask %sc : tensor<2x2x3x5x5xf32>
  %p = tg.softmax %m {axis = 4 : i64} : tensor<2x2x3x5x5xf32>
  %o = tg.matmul %p, %v : (tensor<2x2x3x5x5xf32>, tensor<2x2x1x5x16xf32>) -> tensor<2x2x3x5x16xf32>
  return %o : tensor<2x2x3x5x16xf32>
}

// -----

// Grouped-query attention written as repeat_kv: k, v (B, Hkv, S, D) ->
// reshape (B, Hkv, 1, S, D) -> broadcast_to (B, Hkv, G, S, D) -> reshape
// (B, H, S, D). The expansion is not needed any more and goes.
// CHECK-LABEL: func.func @gqa_repeat_kv
// CHECK-NEXT: tg.attention %arg0, %arg1, %arg2 {causal, scale = 2.500000e-01 : f64, tg.fuse_attention = "fused: B=2 H=4 Hkv=2 T=3 S=3 D=16 causal scale=0.25"} : (tensor<2x4x3x16xf32>, tensor<2x2x3x16xf32>, tensor<2x2x3x16xf32>) -> (tensor<2x4x3x16xf32>, tensor<2x4x3xf32>)
// CHECK-NOT: tg.broadcast_to
func.func @gqa_repeat_kv(%q: tensor<2x4x3x16xf32>, %k: tensor<2x2x3x16xf32>, %v: tensor<2x2x3x16xf32>) -> tensor<2x4x3x16xf32> {
  %k1 = tg.reshape %k : (tensor<2x2x3x16xf32>) -> tensor<2x2x1x3x16xf32>
  %k2 = tg.broadcast_to %k1 : (tensor<2x2x1x3x16xf32>) -> tensor<2x2x2x3x16xf32>
  %k3 = tg.reshape %k2 : (tensor<2x2x2x3x16xf32>) -> tensor<2x4x3x16xf32>
  %v1 = tg.reshape %v : (tensor<2x2x3x16xf32>) -> tensor<2x2x1x3x16xf32>
  %v2 = tg.broadcast_to %v1 : (tensor<2x2x1x3x16xf32>) -> tensor<2x2x2x3x16xf32>
  %v3 = tg.reshape %v2 : (tensor<2x2x2x3x16xf32>) -> tensor<2x4x3x16xf32>
  %s = tg.matmul %q, %k3 {transpose_rhs = true} : (tensor<2x4x3x16xf32>, tensor<2x4x3x16xf32>) -> tensor<2x4x3x3xf32>
  %c = tg.constant dense<0.25> : tensor<f32>
  %sc = tg.mul %s, %c : (tensor<2x4x3x3xf32>, tensor<f32>) -> tensor<2x4x3x3xf32>
  %m = tg.causal_mask %sc : tensor<2x4x3x3xf32>
  %p = tg.softmax %m {axis = 3 : i64} : tensor<2x4x3x3xf32>
  %o = tg.matmul %p, %v3 : (tensor<2x4x3x3xf32>, tensor<2x4x3x16xf32>) -> tensor<2x4x3x16xf32>
  return %o : tensor<2x4x3x16xf32>
}

// -----

// Multi-query attention: one k/v head (B, 1, S, D) for every query head.
// CHECK-LABEL: func.func @mqa
// CHECK-NEXT: tg.attention %arg0, %arg1, %arg2 {scale = 1.000000e+00 : f64, tg.fuse_attention = "fused: B=2 H=4 Hkv=1 T=3 S=7 D=8 not-causal scale=1"} : (tensor<2x4x3x8xf32>, tensor<2x1x7x8xf32>, tensor<2x1x7x8xf32>)
func.func @mqa(%q: tensor<2x4x3x8xf32>, %k: tensor<2x1x7x8xf32>, %v: tensor<2x1x7x8xf32>) -> tensor<2x4x3x8xf32> {
  %s = tg.matmul %q, %k {transpose_rhs = true} : (tensor<2x4x3x8xf32>, tensor<2x1x7x8xf32>) -> tensor<2x4x3x7xf32>
  %p = tg.softmax %s {axis = 3 : i64} : tensor<2x4x3x7xf32>
  %o = tg.matmul %p, %v : (tensor<2x4x3x7xf32>, tensor<2x1x7x8xf32>) -> tensor<2x4x3x8xf32>
  return %o : tensor<2x4x3x8xf32>
}

// -----

// Single-head (T, D) attention in f64 (the interpreter's precision): B = H
// = 1, lse in f64; any head size fuses on the cpu target.
// CHECK-LABEL: func.func @single_head_f64
// CHECK-DAG: %[[Q:.*]] = tg.reshape %arg0 : (tensor<6x12xf64>) -> tensor<1x1x6x12xf64>
// CHECK: tg.attention %[[Q]], %{{.*}}, %{{.*}} {causal, scale = 1.000000e+00 : f64, tg.fuse_attention = "fused: B=1 H=1 Hkv=1 T=6 S=6 D=12 causal scale=1"} : (tensor<1x1x6x12xf64>, tensor<1x1x6x12xf64>, tensor<1x1x6x12xf64>) -> (tensor<1x1x6x12xf64>, tensor<1x1x6xf64>)
// CHECK: tg.reshape %{{.*}} : (tensor<1x1x6x12xf64>) -> tensor<6x12xf64>
func.func @single_head_f64(%q: tensor<6x12xf64>, %k: tensor<6x12xf64>, %v: tensor<6x12xf64>) -> tensor<6x12xf64> {
  %s = tg.matmul %q, %k {transpose_rhs = true} : (tensor<6x12xf64>, tensor<6x12xf64>) -> tensor<6x6xf64>
  %m = tg.causal_mask %s : tensor<6x6xf64>
  %p = tg.softmax %m {axis = 1 : i64} : tensor<6x6xf64>
  %o = tg.matmul %p, %v : (tensor<6x6xf64>, tensor<6x12xf64>) -> tensor<6x12xf64>
  return %o : tensor<6x12xf64>
}
