// RUN: tcc-opt %s -split-input-file -tg-autodiff -tg-sgd-update -tg-cache-frozen | FileCheck %s
// tg-cache-frozen splits the frozen encoder (inputs and frozen parameters
// only, rows kept apart) off the train step: @encode computes the values
// the trainable part reads, @train_cached takes them as inputs.

module attributes {tg.optimizer = {kind = "sgd", learning_rate = 0.5 : f64}} {
  func.func @forward(%e: tensor<8x16xf32> {tg.param = {name = "enc", init = "normal", scale = 1.0 : f64, seed = 1 : i64, trainable = false}},
                     %w: tensor<16x3xf32> {tg.param = {name = "head", init = "normal", scale = 1.0 : f64, seed = 2 : i64, trainable = true}},
                     %x: tensor<4x8xf32> {tg.input = "x"}, %y: tensor<4xi32> {tg.input = "y"})
      -> (tensor<f32> {tg.loss = "loss"}) {
    %0 = tg.matmul %x, %e : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32> loc("feat")
    %1 = tg.tanh %0 : tensor<4x16xf32> loc("act")
    %2 = tg.matmul %1, %w : (tensor<4x16xf32>, tensor<16x3xf32>) -> tensor<4x3xf32>
    %3 = tg.softmax_cross_entropy %2, %y : (tensor<4x3xf32>, tensor<4xi32>) -> tensor<4xf32>
    %4 = tg.reduce_mean %3 {axes = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>
    return %4 : tensor<f32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: tg.cache_frozen = ["cut: 1 value(s) [act tensor<4x16xf32>]: 64 bytes per sample cached; encoder of 2 ops
// The cached step: the raw input x is gone, the encoder's value comes in.
// CHECK-LABEL: func.func @train_cached
// CHECK-SAME: %{{.*}}: tensor<4xi32> {tg.input = "y"}
// CHECK-NOT: tg.input = "x"
// CHECK-SAME: %{{.*}}: tensor<4x16xf32> {tg.input = "act"}
// CHECK-SAME: attributes {tcc.entry = "train_cached"
// CHECK-NOT: tg.tanh
// CHECK: return
// CHECK-LABEL: func.func @encode
// CHECK-SAME: {tg.param = {{{.*}}name = "enc"
// CHECK-SAME: %{{.*}}: tensor<4x8xf32> {tg.input = "x"}) -> (tensor<4x16xf32> {tg.output = "act"}) attributes {tcc.entry = "encode"}
// CHECK: tg.matmul
// CHECK: tg.tanh

// -----

// A reduction over the batch axis ends the encoder: the product before it
// is still cached per sample (the mean over the batch reads it from the
// cache), and the report says where the encoder ended.
module attributes {tg.optimizer = {kind = "sgd", learning_rate = 0.5 : f64}} {
  func.func @forward(%e: tensor<8x16xf32> {tg.param = {name = "enc", init = "normal", scale = 1.0 : f64, seed = 1 : i64, trainable = false}},
                     %w: tensor<16xf32> {tg.param = {name = "head", init = "normal", scale = 1.0 : f64, seed = 2 : i64, trainable = true}},
                     %x: tensor<4x8xf32> {tg.input = "x"})
      -> (tensor<f32> {tg.loss = "loss"}) {
    %0 = tg.matmul %x, %e : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32> loc("feat")
    %1 = tg.reduce_mean %0 {axes = array<i64: 0>} : (tensor<4x16xf32>) -> tensor<16xf32> loc("pool")
    %2 = tg.mul %1, %w : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
    %3 = tg.reduce_sum %2 {axes = array<i64: 0>} : (tensor<16xf32>) -> tensor<f32>
    return %3 : tensor<f32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: tg.cache_frozen = ["cut: 1 value(s) [feat tensor<4x16xf32>]
// CHECK-SAME: "encoder ends at a reduction over the batch axis at pool (tg.reduce_mean)"]
// CHECK-LABEL: func.func @train_cached
// CHECK: tg.reduce_mean %{{.*}} {axes = array<i64: 0>}
// CHECK-LABEL: func.func @encode
// CHECK-NOT: tg.reduce_mean
// CHECK: return

// -----

// Nothing frozen: nothing to cache.
module attributes {tg.optimizer = {kind = "sgd", learning_rate = 0.5 : f64}} {
  func.func @forward(%w: tensor<8x3xf32> {tg.param = {name = "w", init = "normal", scale = 1.0 : f64, seed = 1 : i64, trainable = true}},
                     %x: tensor<4x8xf32> {tg.input = "x"}, %y: tensor<4xi32> {tg.input = "y"})
      -> (tensor<f32> {tg.loss = "loss"}) {
    %0 = tg.matmul %x, %w : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
    %1 = tg.softmax_cross_entropy %0, %y : (tensor<4x3xf32>, tensor<4xi32>) -> tensor<4xf32>
    %2 = tg.reduce_mean %1 {axes = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>
    return %2 : tensor<f32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: tg.cache_frozen = ["not cut: no frozen parameters"]
// CHECK-NOT: func.func @encode

// -----

// Rotary embeddings (tg.rope) rotate each row by tables shared by every
// sample: the frozen projection and its rotation are cached (a frozen ViT's
// attention inputs).
module attributes {tg.optimizer = {kind = "sgd", learning_rate = 0.5 : f64}} {
  func.func @forward(%e: tensor<8x8xf32> {tg.param = {name = "enc", init = "normal", scale = 1.0 : f64, seed = 1 : i64, trainable = false}},
                     %c: tensor<2x8xf32> {tg.param = {name = "cos", init = "ones", scale = 0.0 : f64, seed = 0 : i64, trainable = false}},
                     %s: tensor<2x8xf32> {tg.param = {name = "sin", init = "zeros", scale = 0.0 : f64, seed = 0 : i64, trainable = false}},
                     %w: tensor<8x3xf32> {tg.param = {name = "head", init = "normal", scale = 1.0 : f64, seed = 2 : i64, trainable = true}},
                     %x: tensor<4x2x8xf32> {tg.input = "x"})
      -> (tensor<f32> {tg.loss = "loss"}) {
    %0 = tg.matmul %x, %e : (tensor<4x2x8xf32>, tensor<8x8xf32>) -> tensor<4x2x8xf32> loc("proj")
    %1 = tg.rope %0, %c, %s : (tensor<4x2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<4x2x8xf32> loc("rot")
    %2 = tg.matmul %1, %w : (tensor<4x2x8xf32>, tensor<8x3xf32>) -> tensor<4x2x3xf32>
    %3 = tg.reduce_sum %2 {axes = array<i64: 0, 1, 2>} : (tensor<4x2x3xf32>) -> tensor<f32>
    return %3 : tensor<f32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: tg.cache_frozen = ["cut: {{[0-9]+}} value(s) [rot tensor<4x2x8xf32>
// CHECK-LABEL: func.func @encode
// CHECK: tg.matmul
// CHECK: tg.rope

// -----

// A cast of the input (tg-amp's bf16 copy on the GPU) keeps the rows: the
// encoder starts at the raw input.
module attributes {tg.optimizer = {kind = "sgd", learning_rate = 0.5 : f64}} {
  func.func @forward(%e: tensor<8x16xbf16> {tg.param = {name = "enc", init = "normal", scale = 1.0 : f64, seed = 1 : i64, trainable = false}},
                     %w: tensor<16x3xf32> {tg.param = {name = "head", init = "normal", scale = 1.0 : f64, seed = 2 : i64, trainable = true}},
                     %x: tensor<4x8xf32> {tg.input = "x"})
      -> (tensor<f32> {tg.loss = "loss"}) {
    %0 = tg.cast %x : tensor<4x8xf32> to tensor<4x8xbf16> loc("x16")
    %1 = tg.matmul %0, %e : (tensor<4x8xbf16>, tensor<8x16xbf16>) -> tensor<4x16xbf16> loc("feat")
    %2 = tg.cast %1 : tensor<4x16xbf16> to tensor<4x16xf32> loc("feat32")
    %3 = tg.matmul %2, %w : (tensor<4x16xf32>, tensor<16x3xf32>) -> tensor<4x3xf32>
    %4 = tg.reduce_sum %3 {axes = array<i64: 0, 1>} : (tensor<4x3xf32>) -> tensor<f32>
    return %4 : tensor<f32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: tg.cache_frozen = ["cut: 1 value(s) [feat32 tensor<4x16xf32>]
// CHECK-LABEL: func.func @encode
// CHECK: tg.cast
// CHECK: tg.matmul
