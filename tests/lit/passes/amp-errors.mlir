// RUN: tcc-opt %s -split-input-file -tg-amp=precision=fp16 -verify-diagnostics
// RUN: not tcc-opt %s -tg-amp=precision=int8 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// tg-amp's refusals, each naming the op.

// UNKNOWN: tg-amp: unknown precision 'int8' (expected bf16, fp16, tf32, fp32 or fp8)

// fp16 holds magnitudes up to 65504: a finite mask value beyond that is
// refused, naming the op.
module {
  func.func @forward(%w: tensor<4x4xf32> {tg.param = {name = "w", init = "normal", scale = 1.0 : f64, seed = 1 : i64, trainable = true}},
                     %x: tensor<4x4xf32> {tg.input = "x"}) -> (tensor<f32> {tg.loss = "loss"}) {
    %m = tg.matmul %x, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %c = tg.constant dense<-1.0e9> : tensor<f32>
    // expected-error-re@+1 {{{{.*}}--precision fp16: this op would compute in fp16 with the constant -1.000000e+09{{.*}}}}
    %s = tg.add %m, %c : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xf32>
    %l = tg.reduce_sum %s {axes = array<i64: 0, 1>} : (tensor<4x4xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

module {
  func.func @forward(%x: tensor<4x4xf32> {tg.input = "x"}) -> (tensor<f32> {tg.loss = "loss"}) {
    %w = tg.constant dense<1.0> : tensor<4x4xf32>
    %m = tg.matmul %x, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    // expected-error@+1 {{--precision fp16: the mask value -1.000000e+05 is outside the fp16 range (+-65504) and would become inf; use -inf, a value within the range, or --precision bf16}}
    %s = tg.causal_mask %m {value = -1.0e5 : f64} : tensor<4x4xf32>
    %l = tg.reduce_sum %s {axes = array<i64: 0, 1>} : (tensor<4x4xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// Mixed precision starts from f32 master weights: an f64 model is refused.
module {
  func.func @forward(%x: tensor<4x4xf64> {tg.input = "x"}) -> (tensor<f64> {tg.loss = "loss"}) {
    // expected-error@+1 {{--precision fp16: the model computes in f64 here; mixed precision starts from an f32 model}}
    %l = tg.reduce_sum %x {axes = array<i64: 0, 1>} : (tensor<4x4xf64>) -> tensor<f64>
    return %l : tensor<f64>
  }
}
