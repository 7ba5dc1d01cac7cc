// RUN: tcc-opt %s -split-input-file -tg-shard-parameters -verify-diagnostics | FileCheck %s
// ZeRO-3 (tg.shard_parameters = 2, beside tg.shard_optimizer = 2): every
// parameter argument whose element count 2 divides becomes this rank's 1-D
// shard (tg.param_shard records the whole shape), and each op that reads
// it gets its own tg.all_gather right before it; a parameter read through
// a cast to bf16 (tg-amp's weight cast) is cast as a shard and the bf16
// shard is gathered before each reader of the cast; a parameter 2 does not
// divide stays whole. Each decision is on its function.

// @forward: w (2x3) is read by two ops, and twice by the second: two
// gathers (one per reader, not per use); v (3x2) is read through its bf16
// cast by two ops: one cast of the shard, two gathers of bf16; b (3
// elements) stays whole; x (an input) is left alone.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%arg0: tensor<3xf32> {tg.param = {{.*}}name = "w"{{.*}}}, tg.param_shard = {ranks = 2 : i64, shape = array<i64: 2, 3>}},
// CHECK-SAME: %arg1: tensor<3xf32> {tg.param = {{.*}}name = "v"{{.*}}}, tg.param_shard = {ranks = 2 : i64, shape = array<i64: 3, 2>}},
// CHECK-SAME: %arg2: tensor<3xf32> {tg.param = {{.*}}name = "b"{{.*}}}},
// CHECK-SAME: %arg3: tensor<2x3xf32> {tg.input = "x"})
// CHECK-SAME: tg.shard_parameter_decisions = [
// CHECK-SAME: "w: sharded: 6 elements, 3 per rank; 2 all-gathers, before: mul first, add second",
// CHECK-SAME: "v: sharded: 6 elements, 3 per rank; 2 all-gathers of its shard cast to the reader's type, before: matmul project, mul square",
// CHECK-SAME: "b: kept whole: 2 ranks do not divide its 3 elements (every rank holds it)"]
// CHECK-NEXT: %[[W1:.*]] = tg.all_gather %arg0 {ranks = 2 : i64} : (tensor<3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %[[A:.*]] = tg.mul %[[W1]], %arg3
// CHECK-NEXT: %[[W2:.*]] = tg.all_gather %arg0 {ranks = 2 : i64} : (tensor<3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %[[B:.*]] = tg.add %[[W2]], %[[W2]]
// CHECK-NEXT: %[[VS:.*]] = tg.cast %arg1 {tg.amp = "weight"} : tensor<3xf32> to tensor<3xbf16>
// CHECK-NEXT: %[[X16:.*]] = tg.cast %[[B]] : tensor<2x3xf32> to tensor<2x3xbf16>
// CHECK-NEXT: %[[V1:.*]] = tg.all_gather %[[VS]] {ranks = 2 : i64} : (tensor<3xbf16>) -> tensor<3x2xbf16>
// CHECK-NEXT: tg.matmul %[[X16]], %[[V1]] : (tensor<2x3xbf16>, tensor<3x2xbf16>) -> tensor<2x2xbf16>
// CHECK-NEXT: %[[V2:.*]] = tg.all_gather %[[VS]] {ranks = 2 : i64} : (tensor<3xbf16>) -> tensor<3x2xbf16>
// CHECK-NEXT: tg.mul %[[V2]], %[[V2]] : (tensor<3x2xbf16>, tensor<3x2xbf16>) -> tensor<3x2xbf16>
// CHECK-NEXT: tg.add %[[A]], %arg2 : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
// CHECK-NOT: tg.all_gather
// CHECK: return

// @train_step: the ZeRO-1 update of w (its tg.rank_shard, updated, then
// all-gathered into the result that updates it) now works on the argument
// itself and returns the new shard: no rank_shard, no gather of the result.
// The forward's reader still gets its gather. b (kept whole) is updated
// whole, as before.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%arg0: tensor<3xf32> {tg.param = {{.*}}name = "w"{{.*}}}, tg.param_shard = {ranks = 2 : i64, shape = array<i64: 2, 3>}},
// CHECK-SAME: %arg1: tensor<3xf32> {tg.param = {{.*}}name = "b"{{.*}}}},
// CHECK-SAME: -> (tensor<f32> {tg.loss = "loss"}, tensor<3xf32> {tg.updates_param = 0 : i64}, tensor<3xf32> {tg.updates_param = 1 : i64})
// CHECK-SAME: tg.shard_parameter_decisions = ["w: sharded: 6 elements, 3 per rank; 1 all-gather, before: mul fwd", "b: kept whole: {{.*}}"]
// CHECK-NEXT: %[[W:.*]] = tg.all_gather %arg0 {ranks = 2 : i64} : (tensor<3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %[[Y:.*]] = tg.mul %[[W]], %arg2
// CHECK-NEXT: %[[L:.*]] = tg.reduce_sum %[[Y]]
// CHECK-NEXT: %[[G:.*]] = tg.reduce_scatter %[[Y]]
// CHECK-NEXT: %[[NEW:.*]] = tg.sub %arg0, %[[G]] : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
// CHECK-NEXT: %[[NB:.*]] = tg.sub %arg1, %arg1
// CHECK-NEXT: return %[[L]], %[[NEW]], %[[NB]] : tensor<f32>, tensor<3xf32>, tensor<3xf32>

// A function without parameters is left alone.
// CHECK-LABEL: func.func @no_params
// CHECK-NOT: tg.shard_parameter_decisions
// CHECK-NOT: tg.all_gather
// CHECK: return

module attributes {tg.data_parallel, tg.shard_optimizer = 2 : i64, tg.shard_parameters = 2 : i64} {
  func.func @forward(%w: tensor<2x3xf32> {tg.param = {name = "w", init = "ones", scale = 0.0 : f64, seed = 1 : i64, trainable = true}},
                     %v: tensor<3x2xf32> {tg.param = {name = "v", init = "ones", scale = 0.0 : f64, seed = 2 : i64, trainable = true}},
                     %b: tensor<3xf32> {tg.param = {name = "b", init = "zeros", scale = 0.0 : f64, seed = 3 : i64, trainable = true}},
                     %x: tensor<2x3xf32> {tg.input = "x"})
      -> (tensor<2x3xf32>, tensor<2x2xbf16>, tensor<3x2xbf16>) {
    %0 = tg.mul %w, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32> loc("first")
    %1 = tg.add %w, %w : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32> loc("second")
    %v16 = tg.cast %v {tg.amp = "weight"} : tensor<3x2xf32> to tensor<3x2xbf16>
    %x16 = tg.cast %1 : tensor<2x3xf32> to tensor<2x3xbf16>
    %2 = tg.matmul %x16, %v16 : (tensor<2x3xbf16>, tensor<3x2xbf16>) -> tensor<2x2xbf16> loc("project")
    %3 = tg.mul %v16, %v16 : (tensor<3x2xbf16>, tensor<3x2xbf16>) -> tensor<3x2xbf16> loc("square")
    %4 = tg.add %0, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
    return %4, %2, %3 : tensor<2x3xf32>, tensor<2x2xbf16>, tensor<3x2xbf16>
  }

  func.func @train_step(%w: tensor<2x3xf32> {tg.param = {name = "w", init = "ones", scale = 0.0 : f64, seed = 1 : i64, trainable = true}},
                        %b: tensor<3xf32> {tg.param = {name = "b", init = "zeros", scale = 0.0 : f64, seed = 3 : i64, trainable = true}},
                        %x: tensor<2x3xf32> {tg.input = "x"})
      -> (tensor<f32> {tg.loss = "loss"}, tensor<2x3xf32> {tg.updates_param = 0 : i64}, tensor<3xf32> {tg.updates_param = 1 : i64}) {
    %0 = tg.mul %w, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32> loc("fwd")
    %1 = tg.reduce_sum %0 {axes = array<i64: 0, 1>} : (tensor<2x3xf32>) -> tensor<f32>
    %g = tg.reduce_scatter %0 {ranks = 2 : i64, reduction = "mean"} : (tensor<2x3xf32>) -> tensor<3xf32>
    %shard = tg.rank_shard %w {ranks = 2 : i64} : (tensor<2x3xf32>) -> tensor<3xf32>
    %new = tg.sub %shard, %g : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    %newb = tg.sub %b, %b : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    %all = tg.all_gather %new {ranks = 2 : i64} : (tensor<3xf32>) -> tensor<2x3xf32>
    return %1, %all, %newb : tensor<f32>, tensor<2x3xf32>, tensor<3xf32>
  }

  func.func @no_params(%x: tensor<4xf32> {tg.input = "x"}) -> tensor<4xf32> {
    %0 = tg.add %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

// Without tg.shard_parameters the pass changes nothing (ZeRO-1 alone).
// CHECK-LABEL: func.func @zero1
// CHECK-SAME: %arg0: tensor<2x3xf32> {tg.param
// CHECK-NOT: tg.param_shard
// CHECK-NOT: tg.shard_parameter_decisions
// CHECK: tg.mul %arg0, %arg0
// CHECK-NOT: tg.all_gather
// CHECK: return
module attributes {tg.data_parallel, tg.shard_optimizer = 2 : i64} {
  func.func @zero1(%w: tensor<2x3xf32> {tg.param = {name = "w", init = "ones", scale = 0.0 : f64, seed = 1 : i64, trainable = true}}) -> tensor<2x3xf32> {
    %0 = tg.mul %w, %w : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    return %0 : tensor<2x3xf32>
  }
}

// -----

// Four ranks: a 2x4 parameter is 2 elements per rank; one of 6 elements,
// which 4 does not divide, stays whole.
// CHECK-LABEL: func.func @four_ranks
// CHECK-SAME: %arg0: tensor<2xf32> {tg.param = {{.*}}tg.param_shard = {ranks = 4 : i64, shape = array<i64: 2, 4>}}
// CHECK-SAME: %arg1: tensor<6xf32> {tg.param
// CHECK-SAME: tg.shard_parameter_decisions = ["a: sharded: 8 elements, 2 per rank; 1 all-gather, before: reduce_sum sum", "c: kept whole: 4 ranks do not divide its 6 elements (every rank holds it)"]
// CHECK-NEXT: tg.all_gather %arg0 {ranks = 4 : i64} : (tensor<2xf32>) -> tensor<2x4xf32>
module attributes {tg.data_parallel, tg.shard_optimizer = 4 : i64, tg.shard_parameters = 4 : i64} {
  func.func @four_ranks(%a: tensor<2x4xf32> {tg.param = {name = "a", init = "ones", scale = 0.0 : f64, seed = 1 : i64, trainable = true}},
                        %c: tensor<6xf32> {tg.param = {name = "c", init = "ones", scale = 0.0 : f64, seed = 2 : i64, trainable = true}})
      -> (tensor<f32>, tensor<6xf32>) {
    %0 = tg.reduce_sum %a {axes = array<i64: 0, 1>} : (tensor<2x4xf32>) -> tensor<f32> loc("sum")
    return %0, %c : tensor<f32>, tensor<6xf32>
  }
}

// -----

// The update reads the shard ZeRO-1 made: without tg.shard_optimizer
// there is none.
// expected-error @+1 {{tg-shard-parameters: parameters sharded over 2 ranks need the optimizer state sharded over the same ranks (tg.shard_optimizer = 2, tcc compile --shard-parameters sets it)}}
module attributes {tg.data_parallel, tg.shard_parameters = 2 : i64} {
  func.func @forward(%w: tensor<4xf32> {tg.param = {name = "w", init = "ones", scale = 0.0 : f64, seed = 1 : i64, trainable = true}}) -> tensor<4xf32> {
    return %w : tensor<4xf32>
  }
}

// -----

// expected-error @+1 {{tg-shard-parameters: parameters sharded over 2 ranks need the optimizer state sharded over the same ranks (tg.shard_optimizer = 2,}}
module attributes {tg.data_parallel, tg.shard_optimizer = 4 : i64, tg.shard_parameters = 2 : i64} {
  func.func @forward(%w: tensor<4xf32> {tg.param = {name = "w", init = "ones", scale = 0.0 : f64, seed = 1 : i64, trainable = true}}) -> tensor<4xf32> {
    return %w : tensor<4xf32>
  }
}

// -----

// expected-error @+1 {{tg-shard-parameters: tg.shard_parameters must be a number of ranks >= 1, got 0}}
module attributes {tg.data_parallel, tg.shard_optimizer = 0 : i64, tg.shard_parameters = 0 : i64} {
  func.func @forward(%w: tensor<4xf32> {tg.param = {name = "w", init = "ones", scale = 0.0 : f64, seed = 1 : i64, trainable = true}}) -> tensor<4xf32> {
    return %w : tensor<4xf32>
  }
}

// -----

// The update of a sharded parameter must be the all-gather of its updated
// shard (what the ZeRO-1 optimizer passes make): here it is updated whole.
module attributes {tg.data_parallel, tg.shard_optimizer = 2 : i64, tg.shard_parameters = 2 : i64} {
  // expected-error @+1 {{tg-shard-parameters: the update of w is not the all-gather of its updated shard (run the ZeRO-1 optimizer passes first, with tg.shard_optimizer = 2)}}
  func.func @train_step(%w: tensor<2x2xf32> {tg.param = {name = "w", init = "ones", scale = 0.0 : f64, seed = 1 : i64, trainable = true}})
      -> (tensor<2x2xf32> {tg.updates_param = 0 : i64}) {
    %0 = tg.sub %w, %w : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
    return %0 : tensor<2x2xf32>
  }
}

// -----

// Nor the all-gather of something else than a shard of it.
module attributes {tg.data_parallel, tg.shard_optimizer = 2 : i64, tg.shard_parameters = 2 : i64} {
  // expected-error @+1 {{tg-shard-parameters: the update of w is not the all-gather of its updated shard}}
  func.func @train_step(%w: tensor<2x2xf32> {tg.param = {name = "w", init = "ones", scale = 0.0 : f64, seed = 1 : i64, trainable = true}},
                        %s: tensor<1xf32> {tg.input = "s"})
      -> (tensor<2x2xf32> {tg.updates_param = 0 : i64}) {
    %0 = tg.all_gather %s {ranks = 4 : i64} : (tensor<1xf32>) -> tensor<2x2xf32>
    return %0 : tensor<2x2xf32>
  }
}

// -----

// A rank_shard over other ranks than the module's is not the shard the
// argument becomes.
module attributes {tg.data_parallel, tg.shard_optimizer = 2 : i64, tg.shard_parameters = 2 : i64} {
  func.func @train_step(%w: tensor<2x2xf32> {tg.param = {name = "w", init = "ones", scale = 0.0 : f64, seed = 1 : i64, trainable = true}})
      -> tensor<1xf32> {
    // expected-error @+1 {{tg-shard-parameters: the shard of w has type 'tensor<1xf32>', expected 'tensor<2xf32>'}}
    %0 = tg.rank_shard %w {ranks = 4 : i64} : (tensor<2x2xf32>) -> tensor<1xf32>
    return %0 : tensor<1xf32>
  }
}
