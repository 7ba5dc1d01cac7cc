// RUN: tcc-opt %s -split-input-file -tg-derive-generate | FileCheck %s
// tg-derive-generate: a GPT-like @forward (tokens (B, T) -> logits (B, T, V),
// causal tg.attention) gets @prefill and @decode (tcc.entry) with the KV
// caches as entry state; a forward that is not one says why on @forward.

// CHECK-LABEL: func.func @forward
// CHECK-SAME: tg.derive_generate = ["derived @prefill: tokens (2, 3) + lengths (2) -> logits (2, 5) at each row's last prompt position; writes 2 caches (2, 1, 3, 4) f32", "derived @decode: tokens (2) at pos (2) -> logits (2, 5); writes k, v at pos and attends over positions <= pos of 2 caches (2, 1, 3, 4) f32"]
// Decode: the token and the position embedding gathered at pos, k and v
// written where iota == pos, keys after pos masked, the caches returned.
// CHECK-LABEL: func.func @decode
// CHECK-SAME: %[[WTE:[a-z0-9]+]]: tensor<5x4xf32> {tg.param = {{.*}}name = "wte"
// CHECK-SAME: %[[WPE:[a-z0-9]+]]: tensor<3x4xf32> {tg.param = {{.*}}name = "wpe"
// CHECK-SAME: %[[TOK:[a-z0-9]+]]: tensor<2xi32> {tg.input = "tokens"}
// CHECK-SAME: %[[POS:[a-z0-9]+]]: tensor<2xi32> {tg.input = "pos"}
// CHECK-SAME: %[[KC:[a-z0-9]+]]: tensor<2x1x3x4xf32> {tcc.entry_state = "kv.0.k"}
// CHECK-SAME: %[[VC:[a-z0-9]+]]: tensor<2x1x3x4xf32> {tcc.entry_state = "kv.0.v"}
// CHECK-SAME: -> (tensor<2x5xf32> {tg.output = "logits"}, tensor<2x1x3x4xf32> {tcc.updates_entry_state = 0 : i64}, tensor<2x1x3x4xf32> {tcc.updates_entry_state = 1 : i64})
// CHECK-SAME: tcc.entry = "decode"
// CHECK: %[[T2:.*]] = tg.reshape %[[TOK]] : (tensor<2xi32>) -> tensor<2x1xi32>
// CHECK: tg.gather %[[WTE]], %[[T2]] : (tensor<5x4xf32>, tensor<2x1xi32>) -> tensor<2x1x4xf32>
// CHECK: %[[P2:.*]] = tg.reshape %[[POS]] : (tensor<2xi32>) -> tensor<2x1xi32>
// CHECK: tg.gather %[[WPE]], %[[P2]] : (tensor<3x4xf32>, tensor<2x1xi32>) -> tensor<2x1x4xf32>
// CHECK: %[[IOTA:.*]] = tg.iota {axis = 2 : i64} : tensor<1x1x3x1xi32>
// CHECK: %[[HERE:.*]] = tg.equal %[[IOTA]], %{{.*}} : (tensor<1x1x3x1xi32>, tensor<2x1x1x1xi32>) -> tensor<2x1x3x1xi1>
// CHECK: %[[K:.*]] = tg.select %[[HERE]], %{{.*}}, %[[KC]] : (tensor<2x1x3x1xi1>, tensor<2x1x1x4xf32>, tensor<2x1x3x4xf32>) -> tensor<2x1x3x4xf32>
// CHECK: %[[V:.*]] = tg.select %[[HERE]], %{{.*}}, %[[VC]]
// CHECK: tg.matmul %{{.*}}, %[[K]] {transpose_rhs = true} : (tensor<2x1x1x4xf32>, tensor<2x1x3x4xf32>) -> tensor<2x1x1x3xf32>
// CHECK: tg.greater_equal %{{.*}}, %{{.*}} : (tensor<2x1x1x1xi32>, tensor<1x1x1x3xi32>) -> tensor<2x1x1x3xi1>
// CHECK: tg.constant dense<0xFF800000> : tensor<f32>
// CHECK: tg.matmul %{{.*}}, %[[V]] : (tensor<2x1x1x3xf32>, tensor<2x1x3x4xf32>) -> tensor<2x1x1x4xf32>
// CHECK: %[[L:.*]] = tg.matmul %{{.*}}, %[[WTE]] {transpose_rhs = true} : (tensor<2x1x4xf32>, tensor<5x4xf32>) -> tensor<2x1x5xf32>
// CHECK: %[[L2:.*]] = tg.reshape %[[L]] : (tensor<2x1x5xf32>) -> tensor<2x5xf32>
// CHECK: return %[[L2]], %[[K]], %[[V]]
// Prefill: the forward as it is (the attention without its dropout), the
// logits at lengths - 1, each attention's k and v as the caches.
// CHECK-LABEL: func.func @prefill
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<2x3xi32> {tg.input = "tokens"}, %[[LEN:[a-z0-9]+]]: tensor<2xi32> {tg.input = "lengths"}
// CHECK-SAME: tcc.entry = "prefill"
// CHECK: %[[Q:.*]] = tg.transpose
// CHECK: %{{.*}}, %{{.*}} = tg.attention %[[Q]], %[[Q]], %[[Q]] {causal, scale = 5.000000e-01 : f64} :
// CHECK: tg.iota {axis = 1 : i64} : tensor<1x3x1xf32>
// CHECK: tg.cast %{{.*}} : tensor<2x1x1xi32> to tensor<2x1x1xf32>
// CHECK: tg.reduce_sum %{{.*}} {axes = array<i64: 1>} : (tensor<2x3x5xf32>) -> tensor<2x5xf32>
// CHECK: return %{{.*}}, %[[Q]], %[[Q]] : tensor<2x5xf32>, tensor<2x1x3x4xf32>, tensor<2x1x3x4xf32>
func.func @forward(%wte: tensor<5x4xf32> {tg.param = {init = "normal", name = "wte", scale = 1.0 : f64, seed = 1 : i64, trainable = true}},
                   %wpe: tensor<3x4xf32> {tg.param = {init = "normal", name = "wpe", scale = 1.0 : f64, seed = 2 : i64, trainable = true}},
                   %seed: tensor<i64> {tg.hyper = "rng_seed"}, %step: tensor<i64> {tg.hyper = "step"},
                   %tok: tensor<2x3xi32> {tg.input = "tokens"}) -> (tensor<2x3x5xf32> {tg.output = "logits"}) {
  %e = tg.gather %wte, %tok : (tensor<5x4xf32>, tensor<2x3xi32>) -> tensor<2x3x4xf32>
  %x = tg.add %e, %wpe : (tensor<2x3x4xf32>, tensor<3x4xf32>) -> tensor<2x3x4xf32>
  %h = tg.reshape %x : (tensor<2x3x4xf32>) -> tensor<2x3x1x4xf32>
  %q = tg.transpose %h {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x3x1x4xf32>) -> tensor<2x1x3x4xf32>
  %r, %lse = tg.attention %q, %q, %q dropout(%seed, %step) {causal, scale = 0.5 : f64, dropout_rate = 0.1 : f64, op_id = 7 : i64} : (tensor<2x1x3x4xf32>, tensor<2x1x3x4xf32>, tensor<2x1x3x4xf32>, tensor<i64>, tensor<i64>) -> (tensor<2x1x3x4xf32>, tensor<2x1x3xf32>)
  %t = tg.transpose %r {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x1x3x4xf32>) -> tensor<2x3x1x4xf32>
  %c = tg.reshape %t : (tensor<2x3x1x4xf32>) -> tensor<2x3x4xf32>
  %l = tg.matmul %c, %wte {transpose_rhs = true} : (tensor<2x3x4xf32>, tensor<5x4xf32>) -> tensor<2x3x5xf32>
  return %l : tensor<2x3x5xf32>
}

// -----

// Not causal: no entries.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: tg.derive_generate = ["not derived: tg.attention 'att' is not causal"]
// CHECK-NOT: func.func @decode
func.func @forward(%w: tensor<5x4xf32> {tg.param = {init = "normal", name = "w", scale = 1.0 : f64, seed = 1 : i64, trainable = true}},
                   %tok: tensor<2x3xi32> {tg.input = "tokens"}) -> (tensor<2x3x5xf32> {tg.output = "logits"}) {
  %e = tg.gather %w, %tok : (tensor<5x4xf32>, tensor<2x3xi32>) -> tensor<2x3x4xf32>
  %q = tg.reshape %e : (tensor<2x3x4xf32>) -> tensor<2x1x3x4xf32>
  %r, %lse = tg.attention %q, %q, %q {scale = 0.5 : f64} : (tensor<2x1x3x4xf32>, tensor<2x1x3x4xf32>, tensor<2x1x3x4xf32>) -> (tensor<2x1x3x4xf32>, tensor<2x1x3xf32>) loc("att")
  %c = tg.reshape %r : (tensor<2x1x3x4xf32>) -> tensor<2x3x4xf32>
  %l = tg.matmul %c, %w {transpose_rhs = true} : (tensor<2x3x4xf32>, tensor<5x4xf32>) -> tensor<2x3x5xf32>
  return %l : tensor<2x3x5xf32>
}

// -----

// A position table under activations of another layout: decode refused,
// prefill dropped with it.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: tg.derive_generate = ["not derived: decode: tg.add 'mix': a position-dependent operand that is not a (T, ...) table under (B, T, ...) activations"]
// CHECK-NOT: func.func @prefill
func.func @forward(%w: tensor<5x4xf32> {tg.param = {init = "normal", name = "w", scale = 1.0 : f64, seed = 1 : i64, trainable = true}},
                   %p: tensor<3x1xf32> {tg.param = {init = "normal", name = "p", scale = 1.0 : f64, seed = 2 : i64, trainable = true}},
                   %tok: tensor<2x3xi32> {tg.input = "tokens"}) -> (tensor<2x3x5xf32> {tg.output = "logits"}) {
  %e = tg.gather %w, %tok : (tensor<5x4xf32>, tensor<2x3xi32>) -> tensor<2x3x4xf32>
  %q = tg.reshape %e : (tensor<2x3x4xf32>) -> tensor<2x1x3x4xf32>
  %r, %lse = tg.attention %q, %q, %q {causal, scale = 0.5 : f64} : (tensor<2x1x3x4xf32>, tensor<2x1x3x4xf32>, tensor<2x1x3x4xf32>) -> (tensor<2x1x3x4xf32>, tensor<2x1x3xf32>)
  %m = tg.add %r, %p : (tensor<2x1x3x4xf32>, tensor<3x1xf32>) -> tensor<2x1x3x4xf32> loc("mix")
  %c = tg.reshape %m : (tensor<2x1x3x4xf32>) -> tensor<2x3x4xf32>
  %l = tg.matmul %c, %w {transpose_rhs = true} : (tensor<2x3x4xf32>, tensor<5x4xf32>) -> tensor<2x3x5xf32>
  return %l : tensor<2x3x5xf32>
}
