// RUN: tcc-opt %s -split-input-file -verify-diagnostics
// ZeRO-1's ops: the shard is 1-D with n / ranks elements of the whole
// tensor's element type, and ranks divides n.

func.func @ranks_do_not_divide(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{ranks 4 must divide the 6 elements of 'tensor<2x3xf32>'}}
  %0 = tg.reduce_scatter %x {reduction = "mean", ranks = 4 : i64} : (tensor<2x3xf32>) -> tensor<1xf32>
  return
}

// -----

func.func @wrong_shard(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{shard 'tensor<2xf32>' must be 1-D with 3 elements (6 / 2)}}
  %0 = tg.rank_shard %x {ranks = 2 : i64} : (tensor<2x3xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @gather_types(%x: tensor<3xf32>) {
  // expected-error @+1 {{element types differ}}
  %0 = tg.all_gather %x {ranks = 2 : i64} : (tensor<3xf32>) -> tensor<2x3xbf16>
  return
}

// -----

func.func @bad_reduction(%x: tensor<4xf32>) {
  // expected-error @+1 {{reduction must be sum or mean, got 'max'}}
  %0 = tg.reduce_scatter %x {reduction = "max", ranks = 2 : i64} : (tensor<4xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @kern_shard(%x: memref<6xf32>, %y: memref<2xf32>) {
  // expected-error @+1 {{shard 'memref<2xf32>' must have 3 elements of 'f32'}}
  kern.all_gather %y, %x {ranks = 2 : i64} : memref<2xf32>, memref<6xf32>
  return
}
