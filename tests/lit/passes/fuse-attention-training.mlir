// RUN: tcc-opt %s -tg-fuse-attention -tg-amp=precision=bf16 -tg-autodiff -tg-strip-train-only-ops -tg-accumulate-micro-batches | FileCheck %s
// The fused op through the passes before lowering: tg-amp computes it in
// bf16 with an f32 lse; autodiff gives one tg.attention_grad reading the
// saved lse; the eval @forward has its dropout off; each micro-batch gets
// its own dropout mask, the same in the forward and the gradient.

module attributes {tg.micro_batches = 2 : i64} {
  func.func @forward(%w: tensor<16x16xf32> {tg.param = {name = "w", init = "normal", scale = 0.02 : f64, seed = 1 : i64, trainable = true}},
                     %x: tensor<2x4x8x16xf32> {tg.input = "x"},
                     %seed: tensor<i64> {tg.hyper = "rng_seed"}, %step: tensor<i64> {tg.hyper = "step"})
      -> (tensor<f32> {tg.loss = "loss"}) {
    %q = tg.matmul %x, %w : (tensor<2x4x8x16xf32>, tensor<16x16xf32>) -> tensor<2x4x8x16xf32>
    %s = tg.matmul %q, %x {transpose_rhs = true} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
    %c = tg.constant dense<0.25> : tensor<f32>
    %sc = tg.mul %s, %c : (tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xf32>
    %m = tg.causal_mask %sc : tensor<2x4x8x8xf32>
    %p = tg.softmax %m {axis = 3 : i64} : tensor<2x4x8x8xf32>
    %d = tg.dropout %p, %seed, %step {op_id = 7 : i64, rate = 0.1 : f64} : tensor<2x4x8x8xf32>
    %o = tg.matmul %d, %x : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
    %l = tg.reduce_mean %o {axes = array<i64: 0, 1, 2, 3>} : (tensor<2x4x8x16xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// CHECK-LABEL: func.func @forward
// CHECK: tg.attention %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}} {causal, scale = 2.500000e-01 : f64, tg.amp = "bf16: attention (f32 accumulation and softmax; lse fp32)"
// CHECK-SAME: tg.fuse_attention = "fused: {{[^"]*}}scale=0.25 (eval: dropout off)"
// CHECK-SAME: (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>) -> (tensor<2x4x8x16xbf16>, tensor<2x4x8xf32>)
// CHECK-NOT: tg.dropout
// CHECK-NOT: dropout(
// CHECK-NOT: dropout_rate
// CHECK: return

// CHECK-LABEL: func.func @train_step
// Micro-batch 0 keeps the model's mask (op_id 7)...
// CHECK: %[[R0:[a-z0-9_]+]], %[[L0:[a-z0-9_]+]] = tg.attention {{.*}} dropout(%arg2, %arg3) {causal, dropout_rate = 1.000000e-01 : f64, op_id = 7 : i64
// CHECK: tg.attention_grad %{{.*}}, %[[R0]], %[[L0]], %{{.*}} dropout(%arg2, %arg3) {causal, dropout_rate = 1.000000e-01 : f64, op_id = 7 : i64
// CHECK-SAME: -> (tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>)
// ... micro-batch 1 gets another one, shared by forward and gradient.
// CHECK: tg.attention {{.*}} dropout(%arg2, %arg3) {causal, dropout_rate = 1.000000e-01 : f64, op_id = [[ID1:-?[0-9]+]] : i64
// CHECK: tg.attention_grad {{.*}} op_id = [[ID1]] : i64
// CHECK: return
// CHECK-NOT: tg.softmax
