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

// -----

// Gradients computed in bf16 and cast to f32 late (autodiff puts the
// adjoint of a once-per-step weight cast after the whole backward): each is
// reduced in bf16 (kern-schedule-collectives then issues it right after the
// op computing it) and cast to f32 after the reduction; the late casts go.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: tg.gradient_collective_decisions = ["parameter 0: reduced in bf16, the type it was computed in (half the bytes of f32), then cast to f32", "parameter 2: reduced in bf16{{.*}}"]
// CHECK: %[[G:.*]] = tg.add %arg1, %arg1
// CHECK-NEXT: %[[L1:.*]] = tg.add %[[G]], %arg1
// CHECK-NEXT: %[[L2:.*]] = tg.add %[[L1]], %arg1
// CHECK-NEXT: tg.all_reduce %arg3
// CHECK-NEXT: %[[RG:.*]] = tg.all_reduce %[[G]] {reduction = "mean"} : tensor<4xbf16>
// CHECK-NEXT: %[[C:.*]] = tg.cast %[[RG]] : tensor<4xbf16> to tensor<4xf32>
// CHECK-NEXT: %[[RH:.*]] = tg.all_reduce %[[L2]] {reduction = "mean"} : tensor<4xbf16>
// CHECK-NEXT: %[[H:.*]] = tg.cast %[[RH]] : tensor<4xbf16> to tensor<4xf32>
// CHECK-NEXT: return {{.*}}, %[[C]], %[[H]]
module attributes {tg.data_parallel} {
  func.func @train_step(%w: tensor<4xf32>, %x: tensor<4xbf16>, %v: tensor<4xf32>, %loss: tensor<f32>) -> (tensor<f32> {tg.loss = "loss"}, tensor<4xf32> {tg.grad_of = 0 : i64}, tensor<4xf32> {tg.grad_of = 2 : i64}) {
    %g = tg.add %x, %x : (tensor<4xbf16>, tensor<4xbf16>) -> tensor<4xbf16>
    %l1 = tg.add %g, %x : (tensor<4xbf16>, tensor<4xbf16>) -> tensor<4xbf16>
    %l2 = tg.add %l1, %x : (tensor<4xbf16>, tensor<4xbf16>) -> tensor<4xbf16>
    %c = tg.cast %g : tensor<4xbf16> to tensor<4xf32>
    %h = tg.cast %l2 : tensor<4xbf16> to tensor<4xf32>
    return %loss, %c, %h : tensor<f32>, tensor<4xf32>, tensor<4xf32>
  }
}

// -----

// The same with tg.reduce_gradients_in_f32 (tcc compile --reduce-gradients-in
// f32): reduced in f32, the late cast moves up to right after the op
// computing its operand, so the gradient is final there and
// kern-schedule-collectives can issue its all-reduce there; the ops it moved
// over stay in order. A gradient already final stays.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: tg.gradient_collective_decisions = ["parameter 0: its last cast moved up over 2 ops, to right after the op computing its operand {{.*}}"]
// CHECK: %[[G:.*]] = tg.add %arg1, %arg1
// CHECK-NEXT: %[[C:.*]] = tg.cast %[[G]] : tensor<4xbf16> to tensor<4xf32>
// CHECK-NEXT: %[[L1:.*]] = tg.add %[[G]], %arg1
// CHECK-NEXT: %[[L2:.*]] = tg.add %[[L1]], %arg1
// CHECK-NEXT: %[[H:.*]] = tg.cast %[[L2]]
// CHECK-NEXT: tg.all_reduce %arg3
// CHECK-NEXT: tg.all_reduce %[[C]]
// CHECK-NEXT: tg.all_reduce %[[H]]
module attributes {tg.data_parallel, tg.reduce_gradients_in_f32} {
  func.func @train_step(%w: tensor<4xf32>, %x: tensor<4xbf16>, %v: tensor<4xf32>, %loss: tensor<f32>) -> (tensor<f32> {tg.loss = "loss"}, tensor<4xf32> {tg.grad_of = 0 : i64}, tensor<4xf32> {tg.grad_of = 2 : i64}) {
    %g = tg.add %x, %x : (tensor<4xbf16>, tensor<4xbf16>) -> tensor<4xbf16>
    %l1 = tg.add %g, %x : (tensor<4xbf16>, tensor<4xbf16>) -> tensor<4xbf16>
    %l2 = tg.add %l1, %x : (tensor<4xbf16>, tensor<4xbf16>) -> tensor<4xbf16>
    %c = tg.cast %g : tensor<4xbf16> to tensor<4xf32>
    %h = tg.cast %l2 : tensor<4xbf16> to tensor<4xf32>
    return %loss, %c, %h : tensor<f32>, tensor<4xf32>, tensor<4xf32>
  }
}
