// RUN: tcc-opt %s -split-input-file -tg-lower-to-kern | FileCheck %s
// tg-lower-to-kern writes updated parameters and optimizer state back into
// their argument buffers: directly from the kernel computing them when
// nothing touches the argument afterwards and the kernel reads it only at
// the position it writes; otherwise through a copy at the very end.

// Optimizer state and parameter updated in place by their kernels.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[W:.*]]: memref<3xf32> {tg.param = {{.*}}}, %[[M:.*]]: memref<3xf32> {tg.opt_state = {name = "momentum", param = 0 : i64}}, %[[G:.*]]: memref<3xf32> {tg.input = "g"}, %[[LR:.*]]: memref<f32> {tg.hyper = "learning_rate"})
func.func @train_step(%w: tensor<3xf32> {tg.param = {name = "w", init = "ones", scale = 0.0 : f64, seed = 1 : i64, trainable = true}},
                      %m: tensor<3xf32> {tg.opt_state = {param = 0 : i64, name = "momentum"}},
                      %g: tensor<3xf32> {tg.input = "g"},
                      %lr: tensor<f32> {tg.hyper = "learning_rate"})
    -> (tensor<3xf32> {tg.updates_param = 0 : i64}, tensor<3xf32> {tg.updates_opt_state = 0 : i64}) {
  %mu = tg.constant dense<0.9> : tensor<f32>
  // CHECK: %[[T:.*]] = kern.alloc : memref<3xf32>
  // CHECK: kern.elementwise ins(%[[M]] : memref<3xf32>) outs(%[[T]] : memref<3xf32>)
  %0 = tg.mul %m, %mu : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  // m' = 0.9 m + g goes straight into m.
  // CHECK: kern.elementwise ins(%[[T]], %[[G]] : memref<3xf32>, memref<3xf32>) outs(%[[M]] : memref<3xf32>)
  %1 = tg.add %0, %g : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  // w' = w - lr m' goes straight into w.
  // CHECK: kern.elementwise ins(%[[W]], %[[M]], %[[LR]] : memref<3xf32>, memref<3xf32>, memref<f32>) outs(%[[W]] : memref<3xf32>)
  // CHECK-NEXT: ^bb0
  // CHECK-NEXT: arith.mulf
  // CHECK-NEXT: arith.subf
  // CHECK-NEXT: kern.yield
  // CHECK-NEXT: }
  // CHECK-NEXT: return
  %2 = tg.sgd_update %w, %1, %lr : tensor<3xf32>, tensor<f32>
  return %2, %1 : tensor<3xf32>, tensor<3xf32>
}

// -----

// The old parameter is still read after its update (by an output, directly
// and through a view): the update lands in a temporary and is copied into
// the parameter last, after every read of the old value.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[W:.*]]: memref<4xf32> {{.*}}, %[[LR:.*]]: memref<f32> {tg.hyper = "learning_rate"}, %[[Y:.*]]: memref<4xf32> {tg.output = "y"}, %[[Z:.*]]: memref<2x2xf32> {tg.output = "z"})
func.func @train_step(%w: tensor<4xf32> {tg.param = {name = "w", init = "ones", scale = 0.0 : f64, seed = 1 : i64, trainable = true}},
                      %lr: tensor<f32> {tg.hyper = "learning_rate"})
    -> (tensor<4xf32> {tg.updates_param = 0 : i64}, tensor<4xf32> {tg.output = "y"}, tensor<2x2xf32> {tg.output = "z"}) {
  // CHECK: %[[V:.*]] = kern.reshape %[[W]] : memref<4xf32> to memref<2x2xf32>
  %v = tg.reshape %w : (tensor<4xf32>) -> tensor<2x2xf32>
  // CHECK: %[[NEW:.*]] = kern.alloc : memref<4xf32>
  // CHECK: kern.elementwise ins(%[[W]], %[[LR]] : {{.*}}) outs(%[[NEW]] : memref<4xf32>)
  %0 = tg.sgd_update %w, %w, %lr : tensor<4xf32>, tensor<f32>
  // CHECK: kern.elementwise ins(%[[W]] : memref<4xf32>) outs(%{{.*}} : memref<4xf32>)
  %1 = tg.relu %w : tensor<4xf32>
  // CHECK: kern.elementwise ins(%[[V]] : memref<2x2xf32>) outs(%[[Z]] : memref<2x2xf32>)
  // CHECK: kern.elementwise ins(%[[NEW]] : memref<4xf32>) outs(%[[W]] : memref<4xf32>)
  // CHECK-NEXT: ^bb0(%[[S:.*]]: f32, %{{.*}}: i64):
  // CHECK-NEXT: kern.yield %[[S]] : f32
  // CHECK-NEXT: }
  // CHECK-NEXT: return
  return %0, %1, %v : tensor<4xf32>, tensor<4xf32>, tensor<2x2xf32>
}

// -----

// An output that is an argument, or a value returned twice: copies. An
// updated parameter that is the parameter itself: nothing to do.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[X:.*]]: memref<3xf32> {tg.input = "x"}, %[[W:.*]]: memref<3xf32> {tg.param = {{.*}}}, %[[A:.*]]: memref<3xf32> {tg.output = "a"}, %[[B:.*]]: memref<3xf32> {tg.output = "b"}, %[[C:.*]]: memref<3xf32> {tg.output = "c"})
func.func @forward(%x: tensor<3xf32> {tg.input = "x"},
                   %w: tensor<3xf32> {tg.param = {name = "w", init = "ones", scale = 0.0 : f64, seed = 1 : i64, trainable = true}})
    -> (tensor<3xf32> {tg.output = "a"}, tensor<3xf32> {tg.output = "b"}, tensor<3xf32> {tg.output = "c"},
        tensor<3xf32> {tg.updates_param = 0 : i64}) {
  // CHECK: kern.elementwise ins(%[[X]] : memref<3xf32>) outs(%[[B]] : memref<3xf32>)
  // CHECK-NEXT: ^bb0
  // CHECK-NEXT: math.exp
  %0 = tg.exp %x : tensor<3xf32>
  // CHECK: kern.elementwise ins(%[[X]] : memref<3xf32>) outs(%[[A]] : memref<3xf32>)
  // CHECK: kern.elementwise ins(%[[B]] : memref<3xf32>) outs(%[[C]] : memref<3xf32>)
  // CHECK-NEXT: ^bb0
  // CHECK-NEXT: kern.yield
  // CHECK-NEXT: }
  // CHECK-NEXT: return
  return %x, %0, %0, %w : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
}
