// RUN: tcc-opt %s | tcc-opt | FileCheck %s
// tg.attention and tg.attention_grad parse, verify and print back to the same
// text, with and without dropout (attributes at their defaults are elided).

// CHECK-LABEL: func.func @attention
func.func @attention(%q: tensor<2x4x3x8xf32>, %k: tensor<2x2x5x8xf32>,
                     %v: tensor<2x2x5x8xf32>, %seed: tensor<i64>,
                     %step: tensor<i64>) {
  // Grouped heads (H 4, Hkv 2), T 3 queries over S 5 keys, causal.
  // CHECK: %{{.*}}, %{{.*}} = tg.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 0.35355339059327373 : f64} : (tensor<2x4x3x8xf32>, tensor<2x2x5x8xf32>, tensor<2x2x5x8xf32>) -> (tensor<2x4x3x8xf32>, tensor<2x4x3xf32>)
  %0:2 = tg.attention %q, %k, %v {scale = 0.35355339059327373 : f64, causal} : (tensor<2x4x3x8xf32>, tensor<2x2x5x8xf32>, tensor<2x2x5x8xf32>) -> (tensor<2x4x3x8xf32>, tensor<2x4x3xf32>)
  // CHECK: tg.attention %{{.*}}, %{{.*}}, %{{.*}} dropout(%{{.*}}, %{{.*}}) {dropout_rate = 1.000000e-01 : f64, op_id = 42 : i64, scale = 1.250000e-01 : f64} : (tensor<2x4x3x8xf32>, tensor<2x2x5x8xf32>, tensor<2x2x5x8xf32>, tensor<i64>, tensor<i64>) -> (tensor<2x4x3x8xf32>, tensor<2x4x3xf32>)
  %1:2 = tg.attention %q, %k, %v dropout(%seed, %step) {scale = 0.125 : f64, dropout_rate = 0.1 : f64, op_id = 42 : i64} : (tensor<2x4x3x8xf32>, tensor<2x2x5x8xf32>, tensor<2x2x5x8xf32>, tensor<i64>, tensor<i64>) -> (tensor<2x4x3x8xf32>, tensor<2x4x3xf32>)
  return
}

// CHECK-LABEL: func.func @attention_16_bit_and_f64
func.func @attention_16_bit_and_f64(%h: tensor<1x2x4x16xbf16>,
                                    %hkv: tensor<1x1x4x16xbf16>,
                                    %d: tensor<1x1x2x4xf64>) {
  // 16-bit inputs keep lse in f32; f64 inputs have an f64 lse. One key/value
  // head for two query heads (multi-query).
  // CHECK: tg.attention %{{.*}}, %{{.*}}, %{{.*}} {scale = 2.500000e-01 : f64} : (tensor<1x2x4x16xbf16>, tensor<1x1x4x16xbf16>, tensor<1x1x4x16xbf16>) -> (tensor<1x2x4x16xbf16>, tensor<1x2x4xf32>)
  %0:2 = tg.attention %h, %hkv, %hkv {scale = 0.25 : f64} : (tensor<1x2x4x16xbf16>, tensor<1x1x4x16xbf16>, tensor<1x1x4x16xbf16>) -> (tensor<1x2x4x16xbf16>, tensor<1x2x4xf32>)
  // CHECK: tg.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 5.000000e-01 : f64} : (tensor<1x1x2x4xf64>, tensor<1x1x2x4xf64>, tensor<1x1x2x4xf64>) -> (tensor<1x1x2x4xf64>, tensor<1x1x2xf64>)
  %1:2 = tg.attention %d, %d, %d {scale = 0.5 : f64, causal} : (tensor<1x1x2x4xf64>, tensor<1x1x2x4xf64>, tensor<1x1x2x4xf64>) -> (tensor<1x1x2x4xf64>, tensor<1x1x2xf64>)
  return
}

// CHECK-LABEL: func.func @attention_grad
func.func @attention_grad(%q: tensor<2x4x3x8xf32>, %k: tensor<2x2x5x8xf32>,
                          %v: tensor<2x2x5x8xf32>, %out: tensor<2x4x3x8xf32>,
                          %lse: tensor<2x4x3xf32>, %g: tensor<2x4x3x8xf32>,
                          %seed: tensor<i64>, %step: tensor<i64>) {
  // CHECK: %{{.*}}, %{{.*}}, %{{.*}} = tg.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 0.35355339059327373 : f64} : (tensor<2x4x3x8xf32>, tensor<2x2x5x8xf32>, tensor<2x2x5x8xf32>, tensor<2x4x3x8xf32>, tensor<2x4x3xf32>, tensor<2x4x3x8xf32>) -> (tensor<2x4x3x8xf32>, tensor<2x2x5x8xf32>, tensor<2x2x5x8xf32>)
  %0:3 = tg.attention_grad %q, %k, %v, %out, %lse, %g {scale = 0.35355339059327373 : f64, causal} : (tensor<2x4x3x8xf32>, tensor<2x2x5x8xf32>, tensor<2x2x5x8xf32>, tensor<2x4x3x8xf32>, tensor<2x4x3xf32>, tensor<2x4x3x8xf32>) -> (tensor<2x4x3x8xf32>, tensor<2x2x5x8xf32>, tensor<2x2x5x8xf32>)
  // CHECK: tg.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} dropout(%{{.*}}, %{{.*}}) {causal, dropout_rate = 5.000000e-01 : f64, op_id = -7 : i64, scale = 1.000000e+00 : f64} : (tensor<2x4x3x8xf32>, tensor<2x2x5x8xf32>, tensor<2x2x5x8xf32>, tensor<2x4x3x8xf32>, tensor<2x4x3xf32>, tensor<2x4x3x8xf32>, tensor<i64>, tensor<i64>) -> (tensor<2x4x3x8xf32>, tensor<2x2x5x8xf32>, tensor<2x2x5x8xf32>)
  %1:3 = tg.attention_grad %q, %k, %v, %out, %lse, %g dropout(%seed, %step) {scale = 1.0 : f64, causal, dropout_rate = 0.5 : f64, op_id = -7 : i64} : (tensor<2x4x3x8xf32>, tensor<2x2x5x8xf32>, tensor<2x2x5x8xf32>, tensor<2x4x3x8xf32>, tensor<2x4x3xf32>, tensor<2x4x3x8xf32>, tensor<i64>, tensor<i64>) -> (tensor<2x4x3x8xf32>, tensor<2x2x5x8xf32>, tensor<2x2x5x8xf32>)
  return
}
