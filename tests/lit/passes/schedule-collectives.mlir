// RUN: tcc-opt %s -kern-schedule-collectives=bucket-bytes=0 | FileCheck %s
// kern-schedule-collectives moves each kern.all_reduce up to right after
// the last op that touches its buffer (through kern.reshape), so that on a
// GPU it overlaps what follows, and records where it went (buckets off
// here: bucket-all-reduces.mlir tests them).

// Three gradients reduced after the whole "backward" (where
// tg-all-reduce-gradients leaves them): g1 moves to right after its product
// (ahead of the 5 kernels after it); g2, written last by copy2, moves after
// copy2 and takes its own view of the buffer along (a kern.reshape made
// after copy2); g3, with no kernel between its writer and it, stays.
// CHECK-LABEL: func.func @backward
// CHECK-SAME: kern.schedule_collectives = ["g1: after dw1, ahead of 5 kernels", "g2: after copy2, ahead of 2 kernels", "g3: stays (no kernel between its buffer's last writer and it)"]
// CHECK: kern.gemm %arg0, %arg0, %arg1 {{.*}}
// CHECK-NEXT: kern.all_reduce %arg1 {kern.schedule_collectives = "g1: after dw1, ahead of 5 kernels", reduction = "mean"}
// CHECK-NEXT: kern.gemm %arg0, %arg0, %arg2
// CHECK-NEXT: kern.fill %arg3
// CHECK-NEXT: kern.reshape %arg2
// CHECK-NEXT: kern.elementwise ins(%arg0 : memref<2x2xf32>) outs(%arg2 : memref<2x2xf32>)
// CHECK: kern.yield
// CHECK-NEXT: }
// CHECK-NEXT: %[[VIEW:.*]] = kern.reshape %arg2 : memref<2x2xf32> to memref<4xf32>
// CHECK-NEXT: kern.all_reduce %[[VIEW]] {kern.schedule_collectives = "g2: after copy2, ahead of 2 kernels", reduction = "mean"}
// CHECK-NEXT: kern.fill %arg3
// CHECK-NEXT: kern.fill %arg4
// CHECK-NEXT: kern.all_reduce %arg4 {reduction = "sum"} : memref<3xf32>
// CHECK-NEXT: return
func.func @backward(%x: memref<2x2xf32>, %g1: memref<2x2xf32>, %g2: memref<2x2xf32>,
                    %other: memref<2x2xf32>, %g3: memref<3xf32>) {
  kern.gemm %x, %x, %g1 {alpha = 1.0 : f64, beta = 0.0 : f64, transpose_a = false, transpose_b = false} : memref<2x2xf32>, memref<2x2xf32>, memref<2x2xf32> loc("dw1")
  kern.gemm %x, %x, %g2 {alpha = 1.0 : f64, beta = 0.0 : f64, transpose_a = true, transpose_b = false} : memref<2x2xf32>, memref<2x2xf32>, memref<2x2xf32> loc("dw2")
  kern.fill %other {value = 0.0 : f64} : memref<2x2xf32> loc("zero")
  %flat = kern.reshape %g2 : memref<2x2xf32> to memref<4xf32>
  kern.elementwise ins(%x : memref<2x2xf32>) outs(%g2 : memref<2x2xf32>) {
  ^bb0(%a: f32, %i: i64):
    kern.yield %a : f32
  } loc("copy2")
  kern.fill %other {value = 1.0 : f64} : memref<2x2xf32> loc("unrelated")
  kern.fill %g3 {value = 2.0 : f64} : memref<3xf32> loc("g3w")
  kern.all_reduce %g1 {reduction = "mean"} : memref<2x2xf32> loc("g1")
  %view = kern.reshape %g2 : memref<2x2xf32> to memref<4xf32>
  kern.all_reduce %view {reduction = "mean"} : memref<4xf32> loc("g2")
  kern.all_reduce %g3 {reduction = "sum"} : memref<3xf32> loc("g3")
  return
}

// A function without all-reduces is left alone (no attribute).
// CHECK-LABEL: func.func @plain
// CHECK-NOT: kern.schedule_collectives
func.func @plain(%x: memref<2xf32>) {
  kern.fill %x {value = 0.0 : f64} : memref<2xf32>
  return
}

// ZeRO-1: the reduce-scatter of g moves to right after g's writer, with the
// fresh alloc of its shard; the all-gather of the updated shard into w moves
// to right after the update, ahead of the next parameter's.
// CHECK-LABEL: func.func @zero
// CHECK: kern.fill %arg1 {value = 3.000000e+00 : f64} : memref<4xf32>
// CHECK-NEXT: %[[SHARD:.*]] = kern.alloc : memref<2xf32>
// CHECK-NEXT: kern.reduce_scatter %arg1, %[[SHARD]] {kern.schedule_collectives = "rs (kern.reduce_scatter): after gw, ahead of 2 kernels", ranks = 2 : i64, reduction = "mean"}
// CHECK-NEXT: kern.fill %arg2 {value = 4.000000e+00 : f64}
// CHECK: kern.fill %[[NEW:.*]] {value = 5.000000e+00 : f64} : memref<2xf32>
// CHECK-NEXT: kern.all_gather %[[NEW]], %arg0 {kern.schedule_collectives = "ag (kern.all_gather): after update, ahead of 1 kernels", ranks = 2 : i64}
// CHECK-NEXT: kern.fill %arg3 {value = 6.000000e+00 : f64} : memref<2xf32>
// CHECK-NEXT: return
func.func @zero(%w: memref<4xf32>, %g: memref<4xf32>, %other: memref<2x2xf32>, %state: memref<2xf32>) {
  kern.fill %g {value = 3.0 : f64} : memref<4xf32> loc("gw")
  kern.fill %other {value = 4.0 : f64} : memref<2x2xf32> loc("more backward")
  kern.fill %other {value = 4.5 : f64} : memref<2x2xf32> loc("even more")
  %shard = kern.alloc : memref<2xf32>
  kern.reduce_scatter %g, %shard {reduction = "mean", ranks = 2 : i64} : memref<4xf32>, memref<2xf32> loc("rs")
  %new = kern.alloc : memref<2xf32>
  kern.fill %new {value = 5.0 : f64} : memref<2xf32> loc("update")
  kern.fill %state {value = 6.0 : f64} : memref<2xf32> loc("other update")
  kern.all_gather %new, %w {ranks = 2 : i64} : memref<2xf32>, memref<4xf32> loc("ag")
  return
}
