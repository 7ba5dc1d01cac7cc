// RUN: tcc-opt %s -split-input-file -verify-diagnostics
// The fused norm gradient ops (tg) and the norm kernels (kern) reject
// malformed ops with a message naming the problem.

func.func @grad_shape(%g: tensor<3x5xf32>, %x: tensor<3x4xf32>) {
  // expected-error @+1 {{grad must have the input's shape [3, 4], got [3, 5]}}
  %0 = tg.layer_norm_grad %g, %x {eps = 1.0e-5 : f64} : tensor<3x5xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
  return
}

// -----

func.func @input_grad_type(%g: tensor<3x4xbf16>, %x: tensor<3x4xf32>) {
  // expected-error @+1 {{input_grad type must equal the input type 'tensor<3x4xf32>'}}
  %0 = tg.layer_norm_grad %g, %x {eps = 1.0e-5 : f64} : tensor<3x4xbf16>, tensor<3x4xf32> -> tensor<3x4xbf16>
  return
}

// -----

func.func @scalar_input(%g: tensor<f32>, %x: tensor<f32>) {
  // expected-error @+1 {{normalizes over the last axis; got a scalar input}}
  %0 = tg.rms_norm_grad %g, %x {eps = 1.0e-5 : f64} : tensor<f32>, tensor<f32> -> tensor<f32>
  return
}

// -----

func.func @weight_without_grad(%g: tensor<3x4xf32>, %x: tensor<3x4xf32>, %w: tensor<4xf32>) {
  // expected-error @+1 {{has a weight but no weight_grad result}}
  %0 = tg.rms_norm_grad %g, %x weight %w {eps = 1.0e-5 : f64} : tensor<3x4xf32>, tensor<3x4xf32> weight tensor<4xf32> -> tensor<3x4xf32>
  return
}

// -----

func.func @weight_grad_without_weight(%g: tensor<3x4xf32>, %x: tensor<3x4xf32>) {
  // expected-error @+1 {{has a weight_grad result but no weight}}
  %0:2 = tg.layer_norm_grad %g, %x {eps = 1.0e-5 : f64} : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32> weight_grad tensor<4xf32>
  return
}

// -----

func.func @bias_grad_shape(%g: tensor<3x4xf32>, %x: tensor<3x4xf32>) {
  // expected-error @+1 {{bias_grad must be [4] of 'f32', got [3] of 'f32'}}
  %0:2 = tg.layer_norm_grad %g, %x {eps = 1.0e-5 : f64} : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32> bias_grad tensor<3xf32>
  return
}

// -----

func.func @weight_dtype(%g: tensor<3x4xf32>, %x: tensor<3x4xf32>, %w: tensor<4xbf16>) {
  // expected-error @+1 {{weight must be [4] of 'f32', got [4] of 'bf16'}}
  %0:2 = tg.layer_norm_grad %g, %x weight %w {eps = 1.0e-5 : f64} : tensor<3x4xf32>, tensor<3x4xf32> weight tensor<4xbf16> -> tensor<3x4xf32> weight_grad tensor<4xbf16>
  return
}

// -----

func.func @kern_rms_bias(%x: memref<3x4xf32>, %b: memref<4xf32>, %y: memref<3x4xf32>) {
  // expected-error @+1 {{an rms norm has no bias}}
  kern.layer_norm %x bias %b into %y {eps = 1.0e-5 : f64, rms} : memref<3x4xf32> bias memref<4xf32> -> memref<3x4xf32>
  return
}

// -----

func.func @kern_out_shape(%x: memref<3x4xf32>, %y: memref<4x3xbf16>) {
  // expected-error @+1 {{out must have the input's shape [3, 4]}}
  kern.layer_norm %x into %y {eps = 1.0e-5 : f64} : memref<3x4xf32> -> memref<4x3xbf16>
  return
}

// -----

func.func @kern_grad_workspace(%g: memref<3x4xbf16>, %x: memref<3x4xf32>, %w: memref<4xf32>, %dx: memref<3x4xf32>, %dw: memref<4xf32>, %ws: memref<2x2x4xf32>) {
  // expected-error @+1 {{workspace must be [1, 2, 4] of 'f32' (normGradParts of 3 rows)}}
  kern.layer_norm_grad %g, %x weight %w into %dx weight_grad %dw workspace %ws {eps = 1.0e-5 : f64} : memref<3x4xbf16>, memref<3x4xf32> weight memref<4xf32> -> memref<3x4xf32> weight_grad memref<4xf32> workspace memref<2x2x4xf32>
  return
}

// -----

func.func @kern_grad_no_workspace(%g: memref<3x4xf32>, %x: memref<3x4xf32>, %dx: memref<3x4xf32>, %db: memref<4xf32>) {
  // expected-error @+1 {{a workspace comes exactly with weight_grad, bias_grad or input_grad_sum}}
  kern.layer_norm_grad %g, %x into %dx bias_grad %db {eps = 1.0e-5 : f64} : memref<3x4xf32>, memref<3x4xf32> -> memref<3x4xf32> bias_grad memref<4xf32>
  return
}

// -----

func.func @kern_grad_weight_pair(%g: memref<3x4xf32>, %x: memref<3x4xf32>, %w: memref<4xf32>, %dx: memref<3x4xf32>) {
  // expected-error @+1 {{weight and weight_grad come together}}
  kern.layer_norm_grad %g, %x weight %w into %dx {eps = 1.0e-5 : f64} : memref<3x4xf32>, memref<3x4xf32> weight memref<4xf32> -> memref<3x4xf32>
  return
}

// -----

func.func @kern_grad_addend(%g: memref<3x4xf32>, %x: memref<3x4xf32>, %a: memref<3x4xbf16>, %dx: memref<3x4xf32>) {
  // expected-error @+1 {{addend must have input_grad's type 'memref<3x4xf32>'}}
  kern.layer_norm_grad %g, %x plus %a into %dx {eps = 1.0e-5 : f64} : memref<3x4xf32>, memref<3x4xf32> plus memref<3x4xbf16> -> memref<3x4xf32>
  return
}

// -----

func.func @kern_grad_cast_shape(%g: memref<3x4xf32>, %x: memref<3x4xf32>, %dx: memref<3x4xf32>, %c: memref<4x3xbf16>) {
  // expected-error @+1 {{input_grad_cast must have the input's shape [3, 4]}}
  kern.layer_norm_grad %g, %x into %dx cast %c {eps = 1.0e-5 : f64} : memref<3x4xf32>, memref<3x4xf32> -> memref<3x4xf32> cast memref<4x3xbf16>
  return
}
