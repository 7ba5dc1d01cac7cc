// RUN: tcc-opt %s -tg-lower-to-kern | FileCheck %s
// tg-lower-to-kern writes the cross-entropy gradient over the logits when
// nothing reads the logits afterwards (a language model's largest buffer),
// and into a buffer of its own when something does.

module {
  // CHECK-LABEL: func.func @last_reader
  // CHECK: kern.gemm %{{.*}}, %{{.*}}, %[[LOGITS:[0-9a-z]+]]
  // CHECK: kern.softmax_cross_entropy_grad %[[LOGITS]], %{{.*}}, %{{.*}}, %[[LOGITS]] :
  func.func @last_reader(%x: tensor<4x3xf32>, %w: tensor<3x5xf32>,
                         %labels: tensor<4xi32>, %g: tensor<4xf32>)
      -> tensor<4x5xf32> {
    %logits = tg.matmul %x, %w : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
    %d = tg.softmax_cross_entropy_grad %logits, %labels, %g : (tensor<4x5xf32>, tensor<4xi32>, tensor<4xf32>) -> tensor<4x5xf32>
    %y = tg.relu %d : tensor<4x5xf32>
    return %y : tensor<4x5xf32>
  }

  // The logits read after the gradient (through a reshape view): the
  // gradient gets a buffer of its own.
  // CHECK-LABEL: func.func @read_after
  // CHECK: kern.gemm %{{.*}}, %{{.*}}, %[[LOGITS:[0-9a-z]+]]
  // CHECK: %[[OUT:[0-9a-z]+]] = kern.alloc : memref<4x5xf32>
  // CHECK: kern.softmax_cross_entropy_grad %[[LOGITS]], %{{.*}}, %{{.*}}, %[[OUT]] :
  func.func @read_after(%x: tensor<4x3xf32>, %w: tensor<3x5xf32>,
                        %labels: tensor<4xi32>, %g: tensor<4xf32>)
      -> tensor<4x5xf32> {
    %logits = tg.matmul %x, %w : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
    %d = tg.softmax_cross_entropy_grad %logits, %labels, %g : (tensor<4x5xf32>, tensor<4xi32>, tensor<4xf32>) -> tensor<4x5xf32>
    %flat = tg.reshape %logits : (tensor<4x5xf32>) -> tensor<20xf32>
    %back = tg.reshape %flat : (tensor<20xf32>) -> tensor<4x5xf32>
    %s = tg.add %d, %back : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
    return %s : tensor<4x5xf32>
  }

  // The logits are an argument (the caller's buffer): never written.
  // CHECK-LABEL: func.func @argument
  // CHECK: %[[OUT:[0-9a-z]+]] = kern.alloc : memref<4x5xf32>
  // CHECK: kern.softmax_cross_entropy_grad %arg0, %{{.*}}, %{{.*}}, %[[OUT]] :
  func.func @argument(%logits: tensor<4x5xf32>, %labels: tensor<4xi32>,
                      %g: tensor<4xf32>) -> tensor<4x5xf32> {
    %d = tg.softmax_cross_entropy_grad %logits, %labels, %g : (tensor<4x5xf32>, tensor<4xi32>, tensor<4xf32>) -> tensor<4x5xf32>
    %y = tg.relu %d : tensor<4x5xf32>
    return %y : tensor<4x5xf32>
  }
}
