// RUN: tcc-opt %s -split-input-file -tg-all-reduce-gradients | FileCheck %s
// tg-all-reduce-gradients: with tg.data_parallel, every gradient result
// (tg.grad_of) and the loss (tg.loss) of @train_step are averaged over the
// ranks; other results stay; without the attribute nothing changes.

// CHECK-LABEL: func.func @train_step
// CHECK: %[[L:.*]] = tg.all_reduce %arg1 {reduction = "mean"} : tensor<f32>
// CHECK: %[[G:.*]] = tg.all_reduce %arg2 {reduction = "mean"} : tensor<4xf32>
// CHECK-NOT: tg.all_reduce
// CHECK: return %[[L]], %[[G]], %arg0
module attributes {tg.data_parallel} {
  func.func @train_step(%w: tensor<4xf32>, %loss: tensor<f32>, %g: tensor<4xf32>) -> (tensor<f32> {tg.loss = "loss"}, tensor<4xf32> {tg.grad_of = 0 : i64}, tensor<4xf32>) {
    return %loss, %g, %w : tensor<f32>, tensor<4xf32>, tensor<4xf32>
  }
}

// -----

// CHECK-LABEL: func.func @train_step
// CHECK-NOT: tg.all_reduce
module {
  func.func @train_step(%loss: tensor<f32>, %g: tensor<4xf32>) -> (tensor<f32> {tg.loss = "loss"}, tensor<4xf32> {tg.grad_of = 0 : i64}) {
    return %loss, %g : tensor<f32>, tensor<4xf32>
  }
}
