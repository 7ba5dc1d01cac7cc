// RUN: tcc-opt %s | tcc-opt | FileCheck %s
// Every elementwise tg op parses, verifies and prints back to the same text.

// CHECK-LABEL: func.func @unary
func.func @unary(%x: tensor<4x3xf32>, %h: tensor<2xbf16>) -> tensor<4x3xf32> {
  // CHECK: tg.neg %{{.*}} : tensor<4x3xf32>
  %0 = tg.neg %x : tensor<4x3xf32>
  // CHECK: tg.exp
  %1 = tg.exp %0 : tensor<4x3xf32>
  // CHECK: tg.log
  %2 = tg.log %1 : tensor<4x3xf32>
  // CHECK: tg.sqrt
  %3 = tg.sqrt %2 : tensor<4x3xf32>
  // CHECK: tg.rsqrt
  %4 = tg.rsqrt %3 : tensor<4x3xf32>
  // CHECK: tg.tanh
  %5 = tg.tanh %4 : tensor<4x3xf32>
  // CHECK: tg.sigmoid
  %6 = tg.sigmoid %5 : tensor<4x3xf32>
  // CHECK: tg.relu
  %7 = tg.relu %6 : tensor<4x3xf32>
  // CHECK: tg.silu
  %8 = tg.silu %7 : tensor<4x3xf32>
  // CHECK: tg.gelu %{{.*}} : tensor<4x3xf32>
  %9 = tg.gelu %8 : tensor<4x3xf32>
  // CHECK: tg.gelu %{{.*}} {approximate = "tanh"} : tensor<4x3xf32>
  %10 = tg.gelu %9 {approximate = "tanh"} : tensor<4x3xf32>
  // CHECK: tg.sin
  %11 = tg.sin %10 : tensor<4x3xf32>
  // CHECK: tg.cos
  %12 = tg.cos %11 : tensor<4x3xf32>
  // CHECK: tg.pow %{{.*}} {exponent = 3.000000e+00 : f64} : tensor<4x3xf32>
  %13 = tg.pow %12 {exponent = 3.0 : f64} : tensor<4x3xf32>
  // CHECK: tg.relu_grad
  %14 = tg.relu_grad %13, %12 : tensor<4x3xf32>
  // CHECK: tg.gelu_grad %{{.*}}, %{{.*}} {approximate = "tanh"} : tensor<4x3xf32>
  %15 = tg.gelu_grad %14, %13 {approximate = "tanh"} : tensor<4x3xf32>
  // Half types are floats too.
  // CHECK: tg.exp %{{.*}} : tensor<2xbf16>
  %16 = tg.exp %h : tensor<2xbf16>
  return %15 : tensor<4x3xf32>
}

// CHECK-LABEL: func.func @binary
func.func @binary(%a: tensor<4x3xf64>, %b: tensor<3xf64>, %s: tensor<f64>) -> tensor<4x3xf64> {
  // CHECK: tg.add %{{.*}}, %{{.*}} : (tensor<4x3xf64>, tensor<3xf64>) -> tensor<4x3xf64>
  %0 = tg.add %a, %b : (tensor<4x3xf64>, tensor<3xf64>) -> tensor<4x3xf64>
  // CHECK: tg.sub %{{.*}}, %{{.*}} : (tensor<f64>, tensor<4x3xf64>) -> tensor<4x3xf64>
  %1 = tg.sub %s, %0 : (tensor<f64>, tensor<4x3xf64>) -> tensor<4x3xf64>
  // CHECK: tg.mul
  %2 = tg.mul %1, %b : (tensor<4x3xf64>, tensor<3xf64>) -> tensor<4x3xf64>
  // CHECK: tg.div
  %3 = tg.div %2, %s : (tensor<4x3xf64>, tensor<f64>) -> tensor<4x3xf64>
  // CHECK: tg.max
  %4 = tg.max %3, %b : (tensor<4x3xf64>, tensor<3xf64>) -> tensor<4x3xf64>
  // CHECK: tg.min
  %5 = tg.min %4, %a : (tensor<4x3xf64>, tensor<4x3xf64>) -> tensor<4x3xf64>
  return %5 : tensor<4x3xf64>
}

// CHECK-LABEL: func.func @compare_select_cast
func.func @compare_select_cast(%a: tensor<4x3xf32>, %b: tensor<3xf32>,
                               %i: tensor<4x1xi64>, %j: tensor<3xi64>)
    -> (tensor<4x3xf32>, tensor<4x3xi32>) {
  // CHECK: tg.equal %{{.*}}, %{{.*}} : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xi1>
  %0 = tg.equal %a, %b : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xi1>
  // CHECK: tg.not_equal
  %1 = tg.not_equal %a, %b : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xi1>
  // CHECK: tg.less
  %2 = tg.less %a, %b : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xi1>
  // CHECK: tg.less_equal
  %3 = tg.less_equal %a, %b : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xi1>
  // CHECK: tg.greater %{{.*}}, %{{.*}} : (tensor<4x1xi64>, tensor<3xi64>) -> tensor<4x3xi1>
  %4 = tg.greater %i, %j : (tensor<4x1xi64>, tensor<3xi64>) -> tensor<4x3xi1>
  // CHECK: tg.greater_equal %{{.*}}, %{{.*}} : (tensor<4x3xi1>, tensor<4x3xi1>) -> tensor<4x3xi1>
  %5 = tg.greater_equal %3, %4 : (tensor<4x3xi1>, tensor<4x3xi1>) -> tensor<4x3xi1>
  // CHECK: tg.select %{{.*}}, %{{.*}}, %{{.*}} : (tensor<4x3xi1>, tensor<4x3xf32>, tensor<f32>) -> tensor<4x3xf32>
  %zero = tg.constant dense<0.0> : tensor<f32>
  %6 = tg.select %5, %a, %zero : (tensor<4x3xi1>, tensor<4x3xf32>, tensor<f32>) -> tensor<4x3xf32>
  // CHECK: tg.cast %{{.*}} : tensor<4x3xf32> to tensor<4x3xbf16>
  %7 = tg.cast %6 : tensor<4x3xf32> to tensor<4x3xbf16>
  // CHECK: tg.cast %{{.*}} : tensor<4x3xbf16> to tensor<4x3xi32>
  %8 = tg.cast %7 : tensor<4x3xbf16> to tensor<4x3xi32>
  return %6, %8 : tensor<4x3xf32>, tensor<4x3xi32>
}

// CHECK-LABEL: func.func @sources_and_dropout
func.func @sources_and_dropout(%x: tensor<2x3xf32>, %seed: tensor<i64>, %step: tensor<i64>)
    -> (tensor<2x3xi64>, tensor<2x3xf32>, tensor<4xi1>) {
  // CHECK: tg.iota {axis = 1 : i64} : tensor<2x3xi64>
  %0 = tg.iota {axis = 1 : i64} : tensor<2x3xi64>
  // CHECK: tg.constant dense<true> : tensor<4xi1>
  %t = tg.constant dense<true> : tensor<4xi1>
  // CHECK: tg.dropout %{{.*}}, %{{.*}}, %{{.*}} {op_id = 12345 : i64, rate = 1.000000e-01 : f64} : tensor<2x3xf32>
  %1 = tg.dropout %x, %seed, %step {op_id = 12345 : i64, rate = 0.1 : f64} : tensor<2x3xf32>
  return %0, %1, %t : tensor<2x3xi64>, tensor<2x3xf32>, tensor<4xi1>
}
