// RUN: tcc-opt %s -split-input-file -tg-fp8-scaling -verify-diagnostics | FileCheck %s
// tg-fp8-scaling: a function that updates parameters and holds FP8
// products (tg.fp8) gets the whole-step state "fp8_scaling", two records of
// 32 floats per product, zeros at the start; a function that updates no
// parameter (eval's @forward) and one without FP8 products are unchanged.

// CHECK-LABEL: func.func @forward(
// CHECK-NOT: fp8_scaling
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: %{{.*}}: tensor<6x32xf32> {tg.opt_state = {init_value = 0.000000e+00 : f64, name = "fp8_scaling"}})
// CHECK-LABEL: func.func @train_bf16(
// CHECK-NOT: fp8_scaling
// CHECK: return
module {
  func.func @forward(%x: tensor<16x16xbf16> {tg.input = "x"},
                     %w: tensor<16x16xbf16> {tg.param = {name = "w", init = "ones", scale = 0.0 : f64, seed = 1 : i64, trainable = true}})
      -> (tensor<16x16xbf16> {tg.output = "y"}) {
    %0 = tg.matmul %x, %w {tg.fp8 = "e4m3xe4m3"} : (tensor<16x16xbf16>, tensor<16x16xbf16>) -> tensor<16x16xbf16>
    return %0 : tensor<16x16xbf16>
  }
  func.func @train_step(%x: tensor<16x16xbf16> {tg.input = "x"},
                        %w: tensor<16x16xbf16> {tg.param = {name = "w", init = "ones", scale = 0.0 : f64, seed = 1 : i64, trainable = true}})
      -> (tensor<16x16xbf16> {tg.updates_param = 0 : i64}) {
    %0 = tg.matmul %x, %w {tg.fp8 = "e4m3xe4m3"} : (tensor<16x16xbf16>, tensor<16x16xbf16>) -> tensor<16x16xbf16>
    %1 = tg.matmul %0, %w {tg.fp8 = "e5m2xe4m3"} : (tensor<16x16xbf16>, tensor<16x16xbf16>) -> tensor<16x16xbf16>
    %2 = tg.matmul %1, %w {tg.fp8 = "e4m3xe5m2"} : (tensor<16x16xbf16>, tensor<16x16xbf16>) -> tensor<16x16xbf16>
    %3 = tg.matmul %2, %w : (tensor<16x16xbf16>, tensor<16x16xbf16>) -> tensor<16x16xbf16>
    return %3 : tensor<16x16xbf16>
  }
  func.func @train_bf16(%x: tensor<16x16xbf16> {tg.input = "x"},
                        %w: tensor<16x16xbf16> {tg.param = {name = "w", init = "ones", scale = 0.0 : f64, seed = 1 : i64, trainable = true}})
      -> (tensor<16x16xbf16> {tg.updates_param = 0 : i64}) {
    %0 = tg.matmul %x, %w : (tensor<16x16xbf16>, tensor<16x16xbf16>) -> tensor<16x16xbf16>
    return %0 : tensor<16x16xbf16>
  }
}

// -----

module {
  // expected-error @+1 {{tg-fp8-scaling: @train_step already has the state "fp8_scaling"}}
  func.func @train_step(%x: tensor<16x16xbf16> {tg.input = "x"},
                        %w: tensor<16x16xbf16> {tg.param = {name = "w", init = "ones", scale = 0.0 : f64, seed = 1 : i64, trainable = true}},
                        %s: tensor<2x32xf32> {tg.opt_state = {name = "fp8_scaling", init_value = 0.0 : f64}})
      -> (tensor<16x16xbf16> {tg.updates_param = 0 : i64}) {
    %0 = tg.matmul %x, %w {tg.fp8 = "e4m3xe4m3"} : (tensor<16x16xbf16>, tensor<16x16xbf16>) -> tensor<16x16xbf16>
    return %0 : tensor<16x16xbf16>
  }
}
