// RUN: tcc-opt %s -tg-autodiff -tg-sgd-update -tg-lower-to-kern | FileCheck %s
// RUN: tcc-opt %s -tg-autodiff -tg-sgd-update -tg-lower-to-kern -kern-plan-memory | FileCheck %s --check-prefix=PLAN
// RUN: sed 's/module attributes {/module attributes {tg.deterministic, /' %s | tcc-opt -tg-autodiff -tg-sgd-update -tg-lower-to-kern | FileCheck %s --check-prefix=DET
// tg.attention / tg.attention_grad become kern.attention /
// kern.attention_grad: the lse is a (B, H, T) buffer, the backward gets an
// f32 workspace of attentionBackwardWorkspaceFloats elements, and nothing
// of size B*H*T*S is allocated. Grouped heads (H = 4, Hkv = 2), causal,
// T = 3 queries over S = 5 keys, dropout with the step's rng_seed / step.

module attributes {tg.optimizer = {kind = "sgd", learning_rate = 0.5 : f64}} {
  func.func @forward(%q: tensor<2x4x3x8xf32> {tg.param = {name = "q", init = "normal", scale = 1.0 : f64, seed = 1 : i64, trainable = true}},
                     %k: tensor<2x2x5x8xf32> {tg.param = {name = "k", init = "normal", scale = 1.0 : f64, seed = 2 : i64, trainable = true}},
                     %v: tensor<2x2x5x8xf32> {tg.param = {name = "v", init = "normal", scale = 1.0 : f64, seed = 3 : i64, trainable = true}},
                     %seed: tensor<i64> {tg.hyper = "rng_seed"}, %step: tensor<i64> {tg.hyper = "step"})
      -> (tensor<f32> {tg.loss = "loss"}) {
    %o, %lse = tg.attention %q, %k, %v dropout(%seed, %step) {scale = 0.35355339059327373 : f64, causal, dropout_rate = 0.25 : f64, op_id = 77 : i64}
      : (tensor<2x4x3x8xf32>, tensor<2x2x5x8xf32>, tensor<2x2x5x8xf32>, tensor<i64>, tensor<i64>) -> (tensor<2x4x3x8xf32>, tensor<2x4x3xf32>)
    %s = tg.reduce_sum %o {axes = array<i64: 0, 1, 2, 3>} : (tensor<2x4x3x8xf32>) -> tensor<f32>
    return %s : tensor<f32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-DAG: %[[OUT:.*]] = kern.alloc : memref<2x4x3x8xf32>
// CHECK-DAG: %[[LSE:.*]] = kern.alloc : memref<2x4x3xf32>
// CHECK: kern.attention %arg0, %arg1, %arg2 dropout(%arg3, %arg4) into %[[OUT]], %[[LSE]] {causal, dropout_rate = 2.500000e-01 : f64, op_id = 77 : i64, scale = 0.35355339059327373 : f64} : memref<2x4x3x8xf32>, memref<2x2x5x8xf32>, memref<2x2x5x8xf32>, memref<i64>, memref<i64> -> memref<2x4x3x8xf32>, memref<2x4x3xf32>
// B*H*T = 24 floats (the row sums).
// CHECK: %[[WS:.*]] = kern.alloc : memref<24xf32>
// CHECK: kern.attention_grad %arg0, %arg1, %arg2, %[[OUT]], %[[LSE]], %{{.*}} dropout(%arg3, %arg4) into %{{.*}}, %{{.*}}, %{{.*}} workspace %[[WS]] {causal, dropout_rate = 2.500000e-01 : f64, op_id = 77 : i64, scale = 0.35355339059327373 : f64} :
// CHECK-SAME: -> memref<2x4x3x8xf32>, memref<2x2x5x8xf32>, memref<2x2x5x8xf32>, memref<24xf32>
// No buffer of B*H*T*S = 2*4*3*5 elements.
// CHECK-NOT: memref<2x4x3x5x
// CHECK-NOT: memref<120x

// The memory plan places the lse and the workspace like any temporary.
// PLAN-LABEL: func.func @train_step
// PLAN-DAG: kern.workspace_view {{[0-9]+}} : memref<2x4x3xf32>
// PLAN-DAG: kern.workspace_view {{[0-9]+}} : memref<24xf32>
// PLAN-NOT: kern.alloc

// tcc compile --deterministic (the module's tg.deterministic) reaches the
// backward; without it the attribute is absent (CHECK-NOT below).
// Deterministic: the same workspace.
// DET: kern.attention_grad {{.*}} {causal, deterministic, dropout_rate
// DET-SAME: memref<24xf32>
// CHECK-NOT: deterministic
