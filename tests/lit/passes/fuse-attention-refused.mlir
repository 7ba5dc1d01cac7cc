// RUN: tcc-opt %s -split-input-file -tg-fuse-attention | FileCheck %s
// Near misses: each is left as written, and its softmax records which op
// failed which condition (the report's line; the node is the op's name).

// The probabilities are also returned: fusing would compute them twice.
// CHECK-LABEL: func.func @probs_used_twice
// CHECK: tg.softmax {{.*}}tg.fuse_attention = "not fused at tg.softmax (probs): the probabilities feed another op besides the product with v (fusing would compute them twice)"
// CHECK-NOT: tg.attention
func.func @probs_used_twice(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4x4xf32>) {
  %s = tg.matmul %q, %k {transpose_rhs = true} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32> loc("scores")
  %p = tg.softmax %s {axis = 3 : i64} : tensor<1x2x4x4xf32> loc("probs")
  %o = tg.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> loc("context")
  return %o, %p : tensor<1x2x4x8xf32>, tensor<1x2x4x4xf32>
}

// -----

// The raw scores are read by another op too.
// CHECK-LABEL: func.func @scores_used_twice
// CHECK: tg.softmax {{.*}}tg.fuse_attention = "not fused at tg.matmul (scores): the scores feed another op besides the scale/mask/softmax chain"
func.func @scores_used_twice(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4x4xf32>) {
  %s = tg.matmul %q, %k {transpose_rhs = true} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32> loc("scores")
  %m = tg.causal_mask %s : tensor<1x2x4x4xf32> loc("masked")
  %p = tg.softmax %m {axis = 3 : i64} : tensor<1x2x4x4xf32> loc("probs")
  %o = tg.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> loc("context")
  return %o, %s : tensor<1x2x4x8xf32>, tensor<1x2x4x4xf32>
}

// -----

// The scaled scores are read by another op besides the mask.
// CHECK-LABEL: func.func @scaled_used_twice
// CHECK: tg.softmax {{.*}}tg.fuse_attention = "not fused at tg.mul (scaled): its result (the scores) feeds another op besides the softmax chain"
func.func @scaled_used_twice(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4x4xf32>) {
  %s = tg.matmul %q, %k {transpose_rhs = true} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32> loc("scores")
  %c = tg.constant dense<0.5> : tensor<f32>
  %sc = tg.mul %s, %c : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32> loc("scaled")
  %m = tg.causal_mask %sc : tensor<1x2x4x4xf32> loc("masked")
  %p = tg.softmax %m {axis = 3 : i64} : tensor<1x2x4x4xf32> loc("probs")
  %o = tg.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> loc("context")
  return %o, %sc : tensor<1x2x4x8xf32>, tensor<1x2x4x4xf32>
}

// -----

// softmax over the queries, not the keys.
// CHECK-LABEL: func.func @axis_not_last
// CHECK: tg.softmax {{.*}}tg.fuse_attention = "not fused at tg.softmax (probs): softmax axis is not the last (it normalizes over axis 2, not the keys)"
func.func @axis_not_last(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %s = tg.matmul %q, %k {transpose_rhs = true} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32> loc("scores")
  %p = tg.softmax %s {axis = 2 : i64} : tensor<1x2x4x4xf32> loc("probs")
  %o = tg.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> loc("context")
  return %o : tensor<1x2x4x8xf32>
}

// -----

// A finite mask value is not exact masking: masked keys keep a weight.
// CHECK-LABEL: func.func @finite_causal_mask
// CHECK: tg.softmax {{.*}}tg.fuse_attention = "not fused at tg.causal_mask (masked): mask value -1e+09 is finite: the fused kernel masks exactly (weight 0); a finite value leaves masked keys a weight exp(value - max) and a fully masked row a uniform one, so it is fused only as -inf"
func.func @finite_causal_mask(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %s = tg.matmul %q, %k {transpose_rhs = true} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32> loc("scores")
  %m = tg.causal_mask %s {value = -1.0e9 : f64} : tensor<1x2x4x4xf32> loc("masked")
  %p = tg.softmax %m {axis = 3 : i64} : tensor<1x2x4x4xf32> loc("probs")
  %o = tg.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> loc("context")
  return %o : tensor<1x2x4x8xf32>
}

// -----

// Additive masks: one that also hides the diagonal, one with -1e9.
// CHECK-LABEL: func.func @additive_not_causal
// CHECK: tg.softmax {{.*}}tg.fuse_attention = "not fused at tg.add (masked): additive mask is not 0 on and below the diagonal and -inf above
func.func @additive_not_causal(%q: tensor<1x1x2x8xf32>, %k: tensor<1x1x2x8xf32>, %v: tensor<1x1x2x8xf32>) -> tensor<1x1x2x8xf32> {
  %s = tg.matmul %q, %k {transpose_rhs = true} : (tensor<1x1x2x8xf32>, tensor<1x1x2x8xf32>) -> tensor<1x1x2x2xf32> loc("scores")
  %mask = tg.constant dense<[[0xFF800000, 0xFF800000], [0.0, 0xFF800000]]> : tensor<2x2xf32>
  %m = tg.add %s, %mask : (tensor<1x1x2x2xf32>, tensor<2x2xf32>) -> tensor<1x1x2x2xf32> loc("masked")
  %p = tg.softmax %m {axis = 3 : i64} : tensor<1x1x2x2xf32> loc("probs")
  %o = tg.matmul %p, %v : (tensor<1x1x2x2xf32>, tensor<1x1x2x8xf32>) -> tensor<1x1x2x8xf32> loc("context")
  return %o : tensor<1x1x2x8xf32>
}

// CHECK-LABEL: func.func @additive_finite
// CHECK: tg.softmax {{.*}}tg.fuse_attention = "not fused at tg.add (masked): additive mask has finite negative values: the fused kernel masks exactly
func.func @additive_finite(%q: tensor<1x1x2x8xf32>, %k: tensor<1x1x2x8xf32>, %v: tensor<1x1x2x8xf32>) -> tensor<1x1x2x8xf32> {
  %s = tg.matmul %q, %k {transpose_rhs = true} : (tensor<1x1x2x8xf32>, tensor<1x1x2x8xf32>) -> tensor<1x1x2x2xf32> loc("scores")
  %mask = tg.constant dense<[[0.0, -1.0e9], [0.0, 0.0]]> : tensor<2x2xf32>
  %m = tg.add %s, %mask : (tensor<1x1x2x2xf32>, tensor<2x2xf32>) -> tensor<1x1x2x2xf32> loc("masked")
  %p = tg.softmax %m {axis = 3 : i64} : tensor<1x1x2x2xf32> loc("probs")
  %o = tg.matmul %p, %v : (tensor<1x1x2x2xf32>, tensor<1x1x2x8xf32>) -> tensor<1x1x2x8xf32> loc("context")
  return %o : tensor<1x1x2x8xf32>
}

// -----

// select with an upper-triangular keep condition (anti-causal).
// CHECK-LABEL: func.func @select_not_lower_triangular
// CHECK: tg.softmax {{.*}}tg.fuse_attention = "not fused at tg.select (masked): mask is not lower-triangular: the condition does not keep exactly the keys j <= i + (S - T) of a (T, S) mask shared by every head"
func.func @select_not_lower_triangular(%q: tensor<1x1x2x8xf32>, %k: tensor<1x1x2x8xf32>, %v: tensor<1x1x2x8xf32>) -> tensor<1x1x2x8xf32> {
  %s = tg.matmul %q, %k {transpose_rhs = true} : (tensor<1x1x2x8xf32>, tensor<1x1x2x8xf32>) -> tensor<1x1x2x2xf32> loc("scores")
  %keep = tg.constant dense<[[true, true], [false, true]]> : tensor<2x2xi1>
  %ninf = tg.constant dense<0xFF800000> : tensor<f32>
  %m = tg.select %keep, %s, %ninf : (tensor<2x2xi1>, tensor<1x1x2x2xf32>, tensor<f32>) -> tensor<1x1x2x2xf32> loc("masked")
  %p = tg.softmax %m {axis = 3 : i64} : tensor<1x1x2x2xf32> loc("probs")
  %o = tg.matmul %p, %v : (tensor<1x1x2x2xf32>, tensor<1x1x2x8xf32>) -> tensor<1x1x2x8xf32> loc("context")
  return %o : tensor<1x1x2x8xf32>
}

// -----

// A scale that is an input, not a splat constant.
// CHECK-LABEL: func.func @scale_not_constant
// CHECK: tg.softmax {{.*}}tg.fuse_attention = "not fused at tg.mul (scaled): scale is not a splat constant (of a type that does not enlarge the scores)"
func.func @scale_not_constant(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>, %t: tensor<f32>) -> tensor<1x2x4x8xf32> {
  %s = tg.matmul %q, %k {transpose_rhs = true} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32> loc("scores")
  %sc = tg.mul %s, %t : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32> loc("scaled")
  %p = tg.softmax %sc {axis = 3 : i64} : tensor<1x2x4x4xf32> loc("probs")
  %o = tg.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> loc("context")
  return %o : tensor<1x2x4x8xf32>
}

// -----

// A negative scale applied after the mask would turn -inf into +inf.
// CHECK-LABEL: func.func @negative_scale_after_mask
// CHECK: tg.softmax {{.*}}tg.fuse_attention = "not fused at tg.mul (scaled): scale -0.5 <= 0 after the mask would turn its -inf into +inf or NaN"
func.func @negative_scale_after_mask(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %s = tg.matmul %q, %k {transpose_rhs = true} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32> loc("scores")
  %m = tg.causal_mask %s : tensor<1x2x4x4xf32> loc("masked")
  %c = tg.constant dense<-0.5> : tensor<f32>
  %sc = tg.mul %m, %c : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32> loc("scaled")
  %p = tg.softmax %sc {axis = 3 : i64} : tensor<1x2x4x4xf32> loc("probs")
  %o = tg.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> loc("context")
  return %o : tensor<1x2x4x8xf32>
}

// -----

// Causal with more queries than keys: the first rows mask every key.
// CHECK-LABEL: func.func @causal_more_queries
// CHECK: tg.softmax {{.*}}tg.fuse_attention = "not fused at tg.softmax (probs): causal with more queries than keys (T = 4 > S = 2): the first rows mask every key (NaN unfused)"
func.func @causal_more_queries(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x2x8xf32>, %v: tensor<1x2x2x8xf32>) -> tensor<1x2x4x8xf32> {
  %s = tg.matmul %q, %k {transpose_rhs = true} : (tensor<1x2x4x8xf32>, tensor<1x2x2x8xf32>) -> tensor<1x2x4x2xf32> loc("scores")
  %m = tg.causal_mask %s : tensor<1x2x4x2xf32> loc("masked")
  %p = tg.softmax %m {axis = 3 : i64} : tensor<1x2x4x2xf32> loc("probs")
  %o = tg.matmul %p, %v : (tensor<1x2x4x2xf32>, tensor<1x2x2x8xf32>) -> tensor<1x2x4x8xf32> loc("context")
  return %o : tensor<1x2x4x8xf32>
}

// -----

// q . k without a transpose: k is given as (D, S), not q.k^T of a k.
// CHECK-LABEL: func.func @k_not_transposed
// CHECK: tg.softmax {{.*}}tg.fuse_attention = "not fused at tg.matmul (scores): k is not transposed (neither transpose_rhs nor a tg.transpose of its last two dimensions): not q.k^T"
func.func @k_not_transposed(%q: tensor<1x2x4x8xf32>, %kt: tensor<1x2x8x4xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %s = tg.matmul %q, %kt : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32> loc("scores")
  %p = tg.softmax %s {axis = 3 : i64} : tensor<1x2x4x4xf32> loc("probs")
  %o = tg.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> loc("context")
  return %o : tensor<1x2x4x8xf32>
}

// -----

// v's head size differs from q's and k's.
// CHECK-LABEL: func.func @v_head_size
// CHECK: tg.softmax {{.*}}tg.fuse_attention = "not fused at tg.matmul (context): v's head size 16 differs from q's and k's (8)"
func.func @v_head_size(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x16xf32>) -> tensor<1x2x4x16xf32> {
  %s = tg.matmul %q, %k {transpose_rhs = true} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32> loc("scores")
  %p = tg.softmax %s {axis = 3 : i64} : tensor<1x2x4x4xf32> loc("probs")
  %o = tg.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x16xf32>) -> tensor<1x2x4x16xf32> loc("context")
  return %o : tensor<1x2x4x16xf32>
}

// -----

// k shared by every head, v per head: no single grouping.
// CHECK-LABEL: func.func @kv_groups_differ
// CHECK: tg.softmax {{.*}}tg.fuse_attention = "not fused at tg.matmul (context): k and v are shared by different groups of query heads (2 and 1)"
func.func @kv_groups_differ(%q: tensor<1x2x4x8xf32>, %k: tensor<1x1x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %s = tg.matmul %q, %k {transpose_rhs = true} : (tensor<1x2x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<1x2x4x4xf32> loc("scores")
  %p = tg.softmax %s {axis = 3 : i64} : tensor<1x2x4x4xf32> loc("probs")
  %o = tg.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> loc("context")
  return %o : tensor<1x2x4x8xf32>
}

// -----

// k broadcast over the batch but not the heads: (1, H, S, D) for (B, H):
// batch row b*H + h reads row h, not a head grouping.
// CHECK-LABEL: func.func @kv_shared_over_batch
// CHECK: tg.softmax {{.*}}tg.fuse_attention = "not fused at tg.matmul (scores): k or v broadcasts over the batch dimensions in a pattern that is not head grouping
func.func @kv_shared_over_batch(%q: tensor<2x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<2x2x4x8xf32> {
  %s = tg.matmul %q, %k {transpose_rhs = true} : (tensor<2x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<2x2x4x4xf32> loc("scores")
  %p = tg.softmax %s {axis = 3 : i64} : tensor<2x2x4x4xf32> loc("probs")
  %o = tg.matmul %p, %v : (tensor<2x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<2x2x4x8xf32> loc("context")
  return %o : tensor<2x2x4x8xf32>
}

// -----

// Softmax over something else entirely (a classifier head), and a softmax
// whose probabilities are summed, not multiplied by v.
// CHECK-LABEL: func.func @not_attention
// CHECK: tg.softmax {{.*}}tg.fuse_attention = "not fused at tg.tanh (hidden): the softmax input is not a (scaled, masked) q.k^T product: found tg.tanh"
// CHECK: tg.softmax {{.*}}tg.fuse_attention = "not fused at tg.reduce_sum (total): the probabilities feed tg.reduce_sum, not a product with v"
func.func @not_attention(%x: tensor<3x5xf32>, %q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>) -> (tensor<3x5xf32>, tensor<f32>) {
  %h = tg.tanh %x : tensor<3x5xf32> loc("hidden")
  %p = tg.softmax %h {axis = 1 : i64} : tensor<3x5xf32> loc("classes")
  %s = tg.matmul %q, %k {transpose_rhs = true} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32> loc("scores")
  %p2 = tg.softmax %s {axis = 3 : i64} : tensor<1x2x4x4xf32> loc("probs")
  %t = tg.reduce_sum %p2 {axes = array<i64: 0, 1, 2, 3>} : (tensor<1x2x4x4xf32>) -> tensor<f32> loc("total")
  return %p, %t : tensor<3x5xf32>, tensor<f32>
}
