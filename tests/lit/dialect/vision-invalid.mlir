// RUN: tcc-opt %s -split-input-file -verify-diagnostics
// tg.conv2d / tg.max_pool2d / tg.avg_pool2d / tg.pool2d_grad verifiers.

func.func @bad_groups(%x: tensor<1x4x5x5xf32>, %w: tensor<6x2x3x3xf32>) {
  // expected-error @+1 {{groups 3 must divide the input channels 4 and the output channels 6}}
  %0 = tg.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 3 : i64} : (tensor<1x4x5x5xf32>, tensor<6x2x3x3xf32>) -> tensor<1x6x3x3xf32>
  return
}

// -----

func.func @channels_not_divisible(%x: tensor<1x4x5x5xf32>, %w: tensor<6x4x3x3xf32>) {
  // expected-error @+1 {{weight [6, 4, 3, 3] must have 2 input channels (input channels 4 / groups 2)}}
  %0 = tg.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 2 : i64} : (tensor<1x4x5x5xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x3x3xf32>
  return
}

// -----

func.func @kernel_too_large(%x: tensor<1x1x3x3xf32>, %w: tensor<1x1x5x5xf32>) {
  // expected-error @+1 {{kernel extent (5, 5) is larger than the padded input (3, 3)}}
  %0 = tg.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>} : (tensor<1x1x3x3xf32>, tensor<1x1x5x5xf32>) -> tensor<1x1x1x1xf32>
  return
}

// -----

func.func @dilated_kernel_too_large(%x: tensor<1x1x4x4xf32>, %w: tensor<1x1x3x3xf32>) {
  // expected-error @+1 {{kernel extent (5, 5) is larger than the padded input (4, 4)}}
  %0 = tg.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 2, 2>} : (tensor<1x1x4x4xf32>, tensor<1x1x3x3xf32>) -> tensor<1x1x1x1xf32>
  return
}

// -----

func.func @negative_stride(%x: tensor<1x1x4x4xf32>, %w: tensor<1x1x3x3xf32>) {
  // expected-error @+1 {{stride must be >= 1, got (-1, 1)}}
  %0 = tg.conv2d %x, %w {stride = array<i64: -1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>} : (tensor<1x1x4x4xf32>, tensor<1x1x3x3xf32>) -> tensor<1x1x2x2xf32>
  return
}

// -----

func.func @wrong_output(%x: tensor<1x2x6x6xf32>, %w: tensor<3x2x3x3xf32>) {
  // expected-error @+1 {{output must be [1, 3, 3, 3], got [1, 3, 4, 4]}}
  %0 = tg.conv2d %x, %w {stride = array<i64: 2, 2>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : (tensor<1x2x6x6xf32>, tensor<3x2x3x3xf32>) -> tensor<1x3x4x4xf32>
  return
}

// -----

func.func @not_nchw(%x: tensor<2x6x6xf32>, %w: tensor<3x2x3x3xf32>) {
  // expected-error @+1 {{needs rank-4 NCHW input}}
  %0 = tg.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>} : (tensor<2x6x6xf32>, tensor<3x2x3x3xf32>) -> tensor<1x3x4x4xf32>
  return
}

// -----

func.func @pool_kernel_too_large(%x: tensor<1x2x3x3xf32>) {
  // expected-error @+1 {{kernel extent (4, 4) is larger than the padded input (3, 3)}}
  %0 = tg.max_pool2d %x {kernel = array<i64: 4, 4>, stride = array<i64: 1, 1>, padding = array<i64: 0, 0>} : (tensor<1x2x3x3xf32>) -> tensor<1x2x1x1xf32>
  return
}

// -----

func.func @pool_negative_stride(%x: tensor<1x2x6x6xf32>) {
  // expected-error @+1 {{stride must be >= 1, got (2, -2)}}
  %0 = tg.avg_pool2d %x {kernel = array<i64: 2, 2>, stride = array<i64: 2, -2>, padding = array<i64: 0, 0>} : (tensor<1x2x6x6xf32>) -> tensor<1x2x3x3xf32>
  return
}

// -----

func.func @pool_padding_over_half(%x: tensor<1x2x6x6xf32>) {
  // expected-error @+1 {{padding (2, 2) must be at most half the kernel (3, 3)}}
  %0 = tg.max_pool2d %x {kernel = array<i64: 3, 3>, stride = array<i64: 1, 1>, padding = array<i64: 2, 2>} : (tensor<1x2x6x6xf32>) -> tensor<1x2x8x8xf32>
  return
}

// -----

func.func @pool_grad_mode(%g: tensor<1x2x3x3xf32>, %x: tensor<1x2x6x6xf32>) {
  // expected-error @+1 {{mode must be "max" or "avg", got "sum"}}
  %0 = tg.pool2d_grad %g, %x {mode = "sum", kernel = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>} : (tensor<1x2x3x3xf32>, tensor<1x2x6x6xf32>) -> tensor<1x2x6x6xf32>
  return
}

// -----

func.func @input_grad_shape(%g: tensor<1x3x3x3xf32>, %w: tensor<3x2x3x3xf32>) {
  // expected-error @+1 {{grad must be [1, 3, 4, 4], got [1, 3, 3, 3]}}
  %0 = tg.conv2d_input_grad %g, %w {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>} : (tensor<1x3x3x3xf32>, tensor<3x2x3x3xf32>) -> tensor<1x2x6x6xf32>
  return
}
