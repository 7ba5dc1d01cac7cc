// RUN: tcc-opt %s -tg-lower-to-kern | FileCheck %s
// tg.rope becomes one kern.rope on buffers; its cached tables become
// kern.constant buffers (static data), its gradient form keeps `transposed`.

// CHECK-LABEL: func.func @f
// CHECK-SAME: (%[[X:.*]]: memref<2x2x4xbf16>, %[[OUT:.*]]: memref<2x2x4xbf16>)
// CHECK: %[[Y:.*]] = kern.alloc : memref<2x2x4xbf16>
// CHECK-DAG: %[[S:.*]] = kern.constant dense<{{\[\[}}0.000000e+00, {{.*}}7.500000e-01{{.*}}> : tensor<2x4xf32> : memref<2x4xf32>
// CHECK-DAG: %[[C:.*]] = kern.constant dense<{{\[\[}}1.000000e+00, {{.*}}2.500000e-01{{.*}}> : tensor<2x4xf32> : memref<2x4xf32>
// CHECK: kern.rope %[[X]], %[[C]], %[[S]], %[[Y]] : memref<2x2x4xbf16>, memref<2x4xf32>, memref<2x4xf32>, memref<2x2x4xbf16>
// CHECK: kern.rope %[[Y]], %[[C]], %[[S]], %[[OUT]] {transposed = true}
func.func @f(%x: tensor<2x2x4xbf16>) -> tensor<2x2x4xbf16> {
  %c = tg.constant dense<[[1.0, 1.0, 1.0, 1.0], [0.5, 0.25, 0.5, 0.25]]> : tensor<2x4xf32>
  %s = tg.constant dense<[[0.0, 0.0, 0.0, 0.0], [0.75, 0.5, 0.75, 0.5]]> : tensor<2x4xf32>
  %y = tg.rope %x, %c, %s : (tensor<2x2x4xbf16>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x2x4xbf16>
  %z = tg.rope %y, %c, %s {transposed = true} : (tensor<2x2x4xbf16>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x2x4xbf16>
  return %z : tensor<2x2x4xbf16>
}
