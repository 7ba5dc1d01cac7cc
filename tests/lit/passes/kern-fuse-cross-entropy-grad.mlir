// RUN: tcc-opt %s -kern-fuse-cross-entropy-grad | FileCheck %s
// kern-fuse-cross-entropy-grad: the loss and the gradient of one softmax
// cross-entropy from one pass over the logits, when the gradient's upstream
// value does not depend on the loss; the ops reading the loss move after.

module {
  // A mean loss: its gradient is a constant (1/N), computed between the two.
  // CHECK-LABEL: func.func @mean_loss
  // CHECK-NOT: kern.softmax_cross_entropy %
  // CHECK: kern.fill
  // CHECK: kern.elementwise
  // CHECK: kern.softmax_cross_entropy_with_grad %arg0, %arg1, %[[G:.*]], %[[LOSS:.*]], %arg0 :
  // CHECK-NEXT: kern.reduce mean %[[LOSS]], %arg2
  // CHECK-NOT: kern.softmax_cross_entropy_grad
  // CHECK: return
  func.func @mean_loss(%logits: memref<4x5xf32>, %labels: memref<4xi32>,
                       %loss: memref<f32>) {
    %l = kern.alloc : memref<4xf32>
    kern.softmax_cross_entropy %logits, %labels, %l : memref<4x5xf32>, memref<4xi32>, memref<4xf32>
    kern.reduce mean %l, %loss {axes = array<i64: 0>} : memref<4xf32>, memref<f32>
    %one = kern.alloc : memref<f32>
    kern.fill %one {value = 1.0 : f64} : memref<f32>
    %g = kern.alloc : memref<4xf32>
    kern.elementwise ins(%one : memref<f32>) outs(%g : memref<4xf32>) {
    ^bb0(%x: f32, %i: i64):
      %c = arith.constant 2.5e-01 : f32
      %y = arith.mulf %x, %c : f32
      kern.yield %y : f32
    }
    kern.softmax_cross_entropy_grad %logits, %labels, %g, %logits : memref<4x5xf32>, memref<4xi32>, memref<4xf32>, memref<4x5xf32>
    return
  }

  // The upstream gradient is computed from the loss: not fused.
  // CHECK-LABEL: func.func @grad_reads_loss
  // CHECK: kern.softmax_cross_entropy %
  // CHECK: kern.softmax_cross_entropy_grad
  // CHECK-NOT: kern.softmax_cross_entropy_with_grad
  func.func @grad_reads_loss(%logits: memref<4x5xf32>, %labels: memref<4xi32>,
                             %d: memref<4x5xf32>) {
    %l = kern.alloc : memref<4xf32>
    kern.softmax_cross_entropy %logits, %labels, %l : memref<4x5xf32>, memref<4xi32>, memref<4xf32>
    %g = kern.alloc : memref<4xf32>
    kern.elementwise ins(%l : memref<4xf32>) outs(%g : memref<4xf32>) {
    ^bb0(%x: f32, %i: i64):
      %y = arith.mulf %x, %x : f32
      kern.yield %y : f32
    }
    kern.softmax_cross_entropy_grad %logits, %labels, %g, %d : memref<4x5xf32>, memref<4xi32>, memref<4xf32>, memref<4x5xf32>
    return
  }

  // The logits change between the two: not fused.
  // CHECK-LABEL: func.func @logits_written_between
  // CHECK: kern.softmax_cross_entropy %
  // CHECK: kern.fill %arg0
  // CHECK: kern.softmax_cross_entropy_grad
  // CHECK-NOT: kern.softmax_cross_entropy_with_grad
  func.func @logits_written_between(%logits: memref<4x5xf32>, %labels: memref<4xi32>,
                                    %g: memref<4xf32>, %d: memref<4x5xf32>) {
    %l = kern.alloc : memref<4xf32>
    kern.softmax_cross_entropy %logits, %labels, %l : memref<4x5xf32>, memref<4xi32>, memref<4xf32>
    kern.fill %logits {value = 0.0 : f64} : memref<4x5xf32>
    kern.softmax_cross_entropy_grad %logits, %labels, %g, %d : memref<4x5xf32>, memref<4xi32>, memref<4xf32>, memref<4x5xf32>
    return
  }

  // Something that stays between the two writes what a moved op (the
  // loss's reader) also writes: not fused.
  // CHECK-LABEL: func.func @moved_write_conflict
  // CHECK: kern.softmax_cross_entropy %
  // CHECK: kern.softmax_cross_entropy_grad
  // CHECK-NOT: kern.softmax_cross_entropy_with_grad
  func.func @moved_write_conflict(%logits: memref<4x5xf32>, %labels: memref<4xi32>,
                                  %g: memref<4xf32>, %d: memref<4x5xf32>,
                                  %out: memref<f32>) {
    %l = kern.alloc : memref<4xf32>
    kern.softmax_cross_entropy %logits, %labels, %l : memref<4x5xf32>, memref<4xi32>, memref<4xf32>
    kern.reduce mean %l, %out {axes = array<i64: 0>} : memref<4xf32>, memref<f32>
    kern.fill %out {value = 0.0 : f64} : memref<f32>
    kern.softmax_cross_entropy_grad %logits, %labels, %g, %d : memref<4x5xf32>, memref<4xi32>, memref<4xf32>, memref<4x5xf32>
    return
  }
}
