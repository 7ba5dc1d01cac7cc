// RUN: tcc-opt %s -split-input-file -tg-decompose | FileCheck %s
// tg-decompose rewrites the composite NN ops into primitives (elementwise
// ops, reductions, slices, iota, constants) and leaves everything else as it
// was.

// CHECK-LABEL: func.func @softmax
func.func @softmax(%x: tensor<2x5xf32>) -> (tensor<2x5xf32>, tensor<2x5xf32>) {
  // Max-subtracted: exp never overflows.
  // CHECK: %[[MAX:.*]] = tg.reduce_max %arg0 {axes = array<i64: 1>, keep_dims = true} : (tensor<2x5xf32>) -> tensor<2x1xf32>
  // CHECK: %[[Z:.*]] = tg.sub %arg0, %[[MAX]] : (tensor<2x5xf32>, tensor<2x1xf32>) -> tensor<2x5xf32>
  // CHECK: %[[E:.*]] = tg.exp %[[Z]]
  // CHECK: %[[S:.*]] = tg.reduce_sum %[[E]] {axes = array<i64: 1>, keep_dims = true}
  // CHECK: %[[Y:.*]] = tg.div %[[E]], %[[S]] : (tensor<2x5xf32>, tensor<2x1xf32>) -> tensor<2x5xf32>
  %0 = tg.softmax %x {axis = 1 : i64} : tensor<2x5xf32>
  // log_softmax: (x - max) - log(sum(exp(x - max))).
  // CHECK: %[[MAX0:.*]] = tg.reduce_max %arg0 {axes = array<i64: 0>, keep_dims = true}
  // CHECK: %[[Z0:.*]] = tg.sub %arg0, %[[MAX0]]
  // CHECK: %[[E0:.*]] = tg.exp %[[Z0]]
  // CHECK: %[[S0:.*]] = tg.reduce_sum %[[E0]] {axes = array<i64: 0>, keep_dims = true}
  // CHECK: %[[L0:.*]] = tg.log %[[S0]] : tensor<1x5xf32>
  // CHECK: %[[LY:.*]] = tg.sub %[[Z0]], %[[L0]]
  %1 = tg.log_softmax %x {axis = 0 : i64} : tensor<2x5xf32>
  // CHECK-NOT: tg.softmax
  // CHECK-NOT: tg.log_softmax
  // CHECK: return %[[Y]], %[[LY]]
  return %0, %1 : tensor<2x5xf32>, tensor<2x5xf32>
}

// -----

// CHECK-LABEL: func.func @cross_entropy
func.func @cross_entropy(%l: tensor<2x3x4xf32>, %t: tensor<2x3xi32>) -> tensor<f32> {
  // One-hot of the targets: (2, 3, 1) == iota (4).
  // CHECK: %[[COL:.*]] = tg.reshape %arg1 : (tensor<2x3xi32>) -> tensor<2x3x1xi32>
  // CHECK: %[[CLS:.*]] = tg.iota {axis = 0 : i64} : tensor<4xi32>
  // CHECK: %[[EQ:.*]] = tg.equal %[[COL]], %[[CLS]] : (tensor<2x3x1xi32>, tensor<4xi32>) -> tensor<2x3x4xi1>
  // CHECK: %[[ONEHOT:.*]] = tg.select %[[EQ]], %{{.*}}, %{{.*}} : (tensor<2x3x4xi1>, tensor<f32>, tensor<f32>) -> tensor<2x3x4xf32>
  // ignore_index: counted positions weigh 1, the mean divides by max(count, 1).
  // CHECK: %[[IGN:.*]] = tg.constant dense<-100> : tensor<i32>
  // CHECK: %[[NE:.*]] = tg.not_equal %[[COL]], %[[IGN]]
  // CHECK: %[[W:.*]] = tg.select %[[NE]], %{{.*}}, %{{.*}} : (tensor<2x3x1xi1>, tensor<f32>, tensor<f32>) -> tensor<2x3x1xf32>
  // CHECK: %[[COUNT:.*]] = tg.reduce_sum %[[W]] {axes = array<i64: 0, 1, 2>}
  // CHECK: %[[DEN:.*]] = tg.max %[[COUNT]], %{{.*}} : (tensor<f32>, tensor<f32>) -> tensor<f32>
  // CHECK: tg.reduce_max %arg0 {axes = array<i64: 2>, keep_dims = true}
  // CHECK: tg.log
  // CHECK: %[[LSM:.*]] = tg.sub
  // CHECK: %[[PICK:.*]] = tg.mul %[[LSM]], %[[ONEHOT]]
  // CHECK: %[[WPICK:.*]] = tg.mul %[[PICK]], %[[W]]
  // CHECK: %[[SUM:.*]] = tg.reduce_sum %[[WPICK]] {axes = array<i64: 0, 1, 2>}
  // CHECK: %[[NEG:.*]] = tg.neg %[[SUM]]
  // CHECK: %[[LOSS:.*]] = tg.div %[[NEG]], %[[DEN]]
  // A counted target outside [0, 4) makes the loss NaN.
  // CHECK: tg.less %{{.*}}, %{{.*}} : (tensor<2x3x1xi32>, tensor<i32>)
  // CHECK: tg.constant dense<4> : tensor<i32>
  // CHECK: tg.greater_equal
  // CHECK: %[[BAD:.*]] = tg.greater %{{.*}}, %{{.*}} : (tensor<f32>, tensor<f32>) -> tensor<i1>
  // CHECK: %[[NAN:.*]] = tg.constant dense<0x7FC00000> : tensor<f32>
  // CHECK: %[[R:.*]] = tg.select %[[BAD]], %[[NAN]], %[[LOSS]]
  // CHECK-NOT: tg.cross_entropy
  // CHECK: return %[[R]]
  %0 = tg.cross_entropy %l, %t {ignore_index = -100 : i64} : (tensor<2x3x4xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Without ignore_index the mean divides by the number of positions.
// CHECK-LABEL: func.func @cross_entropy_mean
// CHECK: tg.constant dense<6.000000e+00> : tensor<f64>
// CHECK-NOT: tg.not_equal
// CHECK: tg.div
func.func @cross_entropy_mean(%l: tensor<6x4xf64>, %t: tensor<6xi64>) -> tensor<f64> {
  %0 = tg.cross_entropy %l, %t : (tensor<6x4xf64>, tensor<6xi64>) -> tensor<f64>
  return %0 : tensor<f64>
}

// -----

// layer_norm and rms_norm stay whole (one fused kernel each, lowered by
// tg-lower-to-kern), and so do their gradient ops.
// CHECK-LABEL: func.func @norms
// CHECK-NEXT: tg.layer_norm %arg0 weight %arg1 bias %arg2
// CHECK-NEXT: tg.rms_norm %arg0 {eps = 1.000000e-02 : f64}
// CHECK-NEXT: tg.layer_norm_grad %arg0, %arg0 weight %arg1
// CHECK-NEXT: return
func.func @norms(%x: tensor<3x4xf32>, %w: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) {
  %0 = tg.layer_norm %x weight %w bias %b : (tensor<3x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
  %1 = tg.rms_norm %x {eps = 1.0e-2 : f64} : (tensor<3x4xf32>) -> tensor<3x4xf32>
  %2:2 = tg.layer_norm_grad %x, %x weight %w {eps = 1.0e-5 : f64} : tensor<3x4xf32>, tensor<3x4xf32> weight tensor<4xf32> -> tensor<3x4xf32> weight_grad tensor<4xf32>
  return %0, %1, %2#0 : tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>
}

// -----

// causal_mask on (2, 3, 5): key j is masked where j > i + 2. The shifted
// query positions i + 2 are the last 3 of an iota over 5.
// CHECK-LABEL: func.func @causal_mask
// CHECK: %[[KEYS:.*]] = tg.iota {axis = 1 : i64} : tensor<1x5xi64>
// CHECK: %[[ALL:.*]] = tg.iota {axis = 0 : i64} : tensor<5x1xi64>
// CHECK: %[[QUERIES:.*]] = tg.slice %[[ALL]] {ends = array<i64: 5, 1>, starts = array<i64: 2, 0>} : (tensor<5x1xi64>) -> tensor<3x1xi64>
// CHECK: %[[FUTURE:.*]] = tg.greater %[[KEYS]], %[[QUERIES]] : (tensor<1x5xi64>, tensor<3x1xi64>) -> tensor<3x5xi1>
// CHECK: %[[NEGINF:.*]] = tg.constant dense<0xFF800000> : tensor<f32>
// CHECK: %[[Y:.*]] = tg.select %[[FUTURE]], %[[NEGINF]], %arg0 : (tensor<3x5xi1>, tensor<f32>, tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
// CHECK-NOT: tg.causal_mask
// CHECK: return %[[Y]]
func.func @causal_mask(%x: tensor<2x3x5xf32>) -> tensor<2x3x5xf32> {
  %0 = tg.causal_mask %x : tensor<2x3x5xf32>
  return %0 : tensor<2x3x5xf32>
}

// -----

// split becomes one slice per piece; other ops are left alone.
// CHECK-LABEL: func.func @split
// CHECK: %[[A:.*]] = tg.slice %arg0 {ends = array<i64: 2, 4>, starts = array<i64: 0, 0>} : (tensor<5x4xf32>) -> tensor<2x4xf32>
// CHECK: %[[B:.*]] = tg.slice %arg0 {ends = array<i64: 5, 4>, starts = array<i64: 2, 0>} : (tensor<5x4xf32>) -> tensor<3x4xf32>
// CHECK: %[[T:.*]] = tg.transpose %[[B]]
// CHECK: %[[M:.*]] = tg.matmul %[[A]], %[[T]]
// CHECK-NOT: tg.split
// CHECK: return %[[M]]
func.func @split(%x: tensor<5x4xf32>) -> tensor<2x3xf32> {
  %0:2 = tg.split %x {axis = 0 : i64} : (tensor<5x4xf32>) -> (tensor<2x4xf32>, tensor<3x4xf32>)
  %1 = tg.transpose %0#1 {perm = array<i64: 1, 0>} : (tensor<3x4xf32>) -> tensor<4x3xf32>
  %2 = tg.matmul %0#0, %1 : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  return %2 : tensor<2x3xf32>
}

// -----

// tg.batch_norm: one statistics op, rsqrt(var + eps), and the normalize
// chain in the statistics' type (f32) on the bf16 input, stored as bf16.
// CHECK-LABEL: func.func @batch_norm
// CHECK: %[[M:.*]], %[[V:.*]] = tg.batch_norm_stats %arg0 : tensor<4x3x5x5xbf16> -> tensor<3xf32>, tensor<3xf32>
// CHECK: %[[R:.*]] = tg.rsqrt
// CHECK: %[[XF:.*]] = tg.cast %arg0 : tensor<4x3x5x5xbf16> to tensor<4x3x5x5xf32>
// CHECK: tg.sub %[[XF]]
// CHECK: tg.cast %{{.*}} : tensor<4x3x5x5xf32> to tensor<4x3x5x5xbf16>
// CHECK-NOT: tg.batch_norm %
// CHECK: return %{{.*}}, %[[M]], %[[V]]
func.func @batch_norm(%x: tensor<4x3x5x5xbf16>, %w: tensor<3xf32>, %b: tensor<3xf32>) -> (tensor<4x3x5x5xbf16>, tensor<3xf32>, tensor<3xf32>) {
  %y, %m, %v = tg.batch_norm %x weight %w bias %b : (tensor<4x3x5x5xbf16>, tensor<3xf32>, tensor<3xf32>) -> (tensor<4x3x5x5xbf16>, tensor<3xf32>, tensor<3xf32>)
  return %y, %m, %v : tensor<4x3x5x5xbf16>, tensor<3xf32>, tensor<3xf32>
}

// -----

// A synchronized tg.batch_norm (dialects/tg/BatchNormSync.h) in
// @train_step of a data-parallel module: the global batch's statistics,
// mean_g = all-reduce mean of this rank's mean, var_g = all-reduce mean of
// var + (mean - mean_g)^2; rstd and the normalization use them, and so do
// the results that stand for the op's mean and var.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[M:.*]], %[[V:.*]] = tg.batch_norm_stats %arg0
// CHECK: %[[GM:.*]] = tg.all_reduce %[[M]] {reduction = "mean"} : tensor<3xf32>
// CHECK: %[[D:.*]] = tg.sub %[[M]], %[[GM]]
// CHECK: %[[DD:.*]] = tg.mul %[[D]], %[[D]]
// CHECK: %[[S:.*]] = tg.add %[[V]], %[[DD]]
// CHECK: %[[GV:.*]] = tg.all_reduce %[[S]] {reduction = "mean"} : tensor<3xf32>
// CHECK: tg.add %[[GV]]
// CHECK-NOT: tg.all_reduce
// CHECK: return %{{.*}}, %[[GM]], %[[GV]]
module attributes {tg.data_parallel} {
func.func @train_step(%x: tensor<4x3x5x5xf32>) -> (tensor<4x3x5x5xf32>, tensor<3xf32>, tensor<3xf32>) {
  %y, %m, %v = tg.batch_norm %x {tg.sync_ranks} : (tensor<4x3x5x5xf32>) -> (tensor<4x3x5x5xf32>, tensor<3xf32>, tensor<3xf32>)
  return %y, %m, %v : tensor<4x3x5x5xf32>, tensor<3xf32>, tensor<3xf32>
}
}

// -----

// Marked, but not in @train_step (eval, as PyTorch's SyncBatchNorm): this
// rank's statistics.
// CHECK-LABEL: func.func @eval
// CHECK-NOT: tg.all_reduce
// CHECK: return
module attributes {tg.data_parallel} {
func.func @eval(%x: tensor<4x3x5x5xf32>) -> tensor<4x3x5x5xf32> {
  %y, %m, %v = tg.batch_norm %x {tg.sync_ranks} : (tensor<4x3x5x5xf32>) -> (tensor<4x3x5x5xf32>, tensor<3xf32>, tensor<3xf32>)
  return %y : tensor<4x3x5x5xf32>
}
}
