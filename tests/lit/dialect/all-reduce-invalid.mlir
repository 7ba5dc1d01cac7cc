// RUN: tcc-opt %s -split-input-file -verify-diagnostics
// tg.all_reduce takes "sum" or "mean".

func.func @bad_reduction(%x: tensor<4xf32>) {
  // expected-error @+1 {{reduction must be sum or mean, got 'max'}}
  %0 = tg.all_reduce %x {reduction = "max"} : tensor<4xf32>
  return
}
