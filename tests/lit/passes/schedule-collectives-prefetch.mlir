// RUN: tcc-opt %s -kern-schedule-collectives=gather-ahead-bytes=60 | FileCheck %s
// RUN: tcc-opt %s -kern-schedule-collectives=gather-ahead-bytes=96 | FileCheck %s --check-prefix=WIDE
// RUN: tcc-opt %s -kern-schedule-collectives=gather-ahead-bytes=0 | FileCheck %s --check-prefix=NONE
// RUN: tcc-opt %s -kern-schedule-collectives=gather-ahead-bytes=64 | FileCheck %s --check-prefix=EXACT
// ZeRO-3 (tg-shard-parameters): each parameter's shard is gathered into a
// fresh kern.alloc right before the op that reads it. kern-schedule-
// collectives prefetches gather i: it moves (with its alloc) to right after
// the reader of the earliest earlier gather j such that the whole bytes of
// gathers j+1..i stay within gather-ahead-bytes, so it runs while the
// kernels before its own reader compute; gathers behind one reader stay in
// program order, adjacent (one NCCL group).
//
// Three gathers: b0 (2 f32, 8 bytes), w1 and w2 (4x2 f32, 32 bytes each).

// 60 bytes: b0, the first, has nothing to follow and stays; w1 (32 bytes)
// moves behind b0's reader r0, ahead of k1; w1 + w2 (64 bytes) are more
// than 60, so w2 moves behind w1's reader r1 only, ahead of k2.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: kern.schedule_collectives = ["gather b0 (kern.all_gather): right before its reader r0", "gather w1 (kern.all_gather): prefetched after r0, ahead of 1 kernels (its reader: r1)", "gather w2 (kern.all_gather): prefetched after r1, ahead of 1 kernels (its reader: r2)"]
// CHECK-NEXT: kern.fill %arg4 {value = 0.000000e+00 : f64}
// CHECK-NEXT: %[[B0:.*]] = kern.alloc : memref<2xf32>
// CHECK-NEXT: kern.all_gather %arg0, %[[B0]] {ranks = 2 : i64}
// CHECK-NEXT: kern.elementwise ins(%[[B0]] : memref<2xf32>)
// CHECK: kern.yield
// CHECK-NEXT: }
// CHECK-NEXT: %[[W1:.*]] = kern.alloc : memref<4x2xf32>
// CHECK-NEXT: kern.all_gather %arg1, %[[W1]] {kern.schedule_collectives = "gather w1 (kern.all_gather): prefetched after r0, ahead of 1 kernels (its reader: r1)", ranks = 2 : i64}
// CHECK-NEXT: kern.fill %arg4 {value = 1.000000e+00 : f64}
// CHECK-NEXT: kern.gemm %arg3, %[[W1]], %arg4
// CHECK-NEXT: %[[W2:.*]] = kern.alloc : memref<4x2xf32>
// CHECK-NEXT: kern.all_gather %arg2, %[[W2]] {kern.schedule_collectives = "gather w2 (kern.all_gather): prefetched after r1, ahead of 1 kernels (its reader: r2)", ranks = 2 : i64}
// CHECK-NEXT: kern.fill %arg4 {value = 2.000000e+00 : f64}
// CHECK-NEXT: kern.gemm %arg3, %[[W2]], %arg4
// CHECK-NEXT: return

// 64 bytes: the window holds gathers j+1..i only (b0's 8 bytes are not in
// it once w1 follows r0): w1 + w2 are exactly 64, so both follow r0.
// EXACT-LABEL: func.func @forward
// EXACT-SAME: "gather w1 (kern.all_gather): prefetched after r0, ahead of 1 kernels (its reader: r1)", "gather w2 (kern.all_gather): prefetched after r0, ahead of 3 kernels (its reader: r2)"]

// 96 bytes: w1 and w2 both move behind r0, in their order: w2 now runs
// ahead of 3 kernels (k1, r1, k2).
// WIDE-LABEL: func.func @forward
// WIDE-SAME: "gather w1 (kern.all_gather): prefetched after r0, ahead of 1 kernels (its reader: r1)", "gather w2 (kern.all_gather): prefetched after r0, ahead of 3 kernels (its reader: r2)"]
// WIDE: kern.yield
// WIDE-NEXT: }
// WIDE-NEXT: %[[W1:.*]] = kern.alloc : memref<4x2xf32>
// WIDE-NEXT: kern.all_gather %arg1, %[[W1]]
// WIDE-NEXT: %[[W2:.*]] = kern.alloc : memref<4x2xf32>
// WIDE-NEXT: kern.all_gather %arg2, %[[W2]]
// WIDE-NEXT: kern.fill %arg4 {value = 1.000000e+00 : f64}
// WIDE-NEXT: kern.gemm %arg3, %[[W1]], %arg4
// WIDE-NEXT: kern.fill %arg4 {value = 2.000000e+00 : f64}
// WIDE-NEXT: kern.gemm %arg3, %[[W2]], %arg4
// WIDE-NEXT: return

// 0 bytes: every gather right before its reader, as tg-shard-parameters
// placed it.
// NONE-LABEL: func.func @forward
// NONE-SAME: kern.schedule_collectives = ["gather b0 (kern.all_gather): right before its reader r0", "gather w1 (kern.all_gather): right before its reader r1", "gather w2 (kern.all_gather): right before its reader r2"]
// NONE-NOT: prefetched
// NONE: kern.fill %arg4 {value = 1.000000e+00 : f64}
// NONE-NEXT: kern.alloc : memref<4x2xf32>
// NONE-NEXT: kern.all_gather %arg1
// NONE-NEXT: kern.gemm
// NONE-NEXT: kern.fill %arg4 {value = 2.000000e+00 : f64}
// NONE-NEXT: kern.alloc : memref<4x2xf32>
// NONE-NEXT: kern.all_gather %arg2
// NONE-NEXT: kern.gemm
func.func @forward(%s0: memref<1xf32>, %s1: memref<4xf32>, %s2: memref<4xf32>,
                   %x: memref<2x4xf32>, %y: memref<2x2xf32>, %b: memref<2xf32>) {
  kern.fill %y {value = 0.0 : f64} : memref<2x2xf32> loc("k0")
  %w0 = kern.alloc : memref<2xf32> loc("gather b0")
  kern.all_gather %s0, %w0 {ranks = 2 : i64} : memref<1xf32>, memref<2xf32> loc("gather b0")
  kern.elementwise ins(%w0 : memref<2xf32>) outs(%b : memref<2xf32>) {
  ^bb0(%a: f32, %i: i64):
    kern.yield %a : f32
  } loc("r0")
  kern.fill %y {value = 1.0 : f64} : memref<2x2xf32> loc("k1")
  %w1 = kern.alloc : memref<4x2xf32> loc("gather w1")
  kern.all_gather %s1, %w1 {ranks = 2 : i64} : memref<4xf32>, memref<4x2xf32> loc("gather w1")
  kern.gemm %x, %w1, %y {alpha = 1.0 : f64, beta = 0.0 : f64, transpose_a = false, transpose_b = false} : memref<2x4xf32>, memref<4x2xf32>, memref<2x2xf32> loc("r1")
  kern.fill %y {value = 2.0 : f64} : memref<2x2xf32> loc("k2")
  %w2 = kern.alloc : memref<4x2xf32> loc("gather w2")
  kern.all_gather %s2, %w2 {ranks = 2 : i64} : memref<4xf32>, memref<4x2xf32> loc("gather w2")
  kern.gemm %x, %w2, %y {alpha = 1.0 : f64, beta = 0.0 : f64, transpose_a = false, transpose_b = false} : memref<2x4xf32>, memref<4x2xf32>, memref<2x2xf32> loc("r2")
  return
}

// A gather of a cast shard computed after the earlier reader (its input's
// alloc is too) cannot move above it: it stays right before its reader. A
// gather nothing reads stays.
// CHECK-LABEL: func.func @late_input
// CHECK-SAME: kern.schedule_collectives = ["gather unread (kern.all_gather): stays (nothing reads it)", "gather w0 (kern.all_gather): right before its reader r0", "gather w1 (kern.all_gather): right before its reader r1"]
// CHECK: kern.gemm
// CHECK-NEXT: kern.alloc : memref<4xbf16>
// CHECK-NEXT: kern.elementwise ins(%arg1 : memref<4xf32>)
// CHECK: kern.yield
// CHECK-NEXT: }
// CHECK-NEXT: kern.alloc : memref<4x2xbf16>
// CHECK-NEXT: kern.all_gather
// CHECK-NEXT: kern.fill
func.func @late_input(%s0: memref<4xf32>, %s1: memref<4xf32>, %s2: memref<4xf32>,
                      %x: memref<2x4xf32>, %y: memref<2x2xf32>) {
  %w0 = kern.alloc : memref<4x2xf32> loc("gather w0")
  kern.all_gather %s0, %w0 {ranks = 2 : i64} : memref<4xf32>, memref<4x2xf32> loc("gather w0")
  kern.gemm %x, %w0, %y {alpha = 1.0 : f64, beta = 0.0 : f64, transpose_a = false, transpose_b = false} : memref<2x4xf32>, memref<4x2xf32>, memref<2x2xf32> loc("r0")
  %c = kern.alloc : memref<4xbf16> loc("cast w1")
  kern.elementwise ins(%s1 : memref<4xf32>) outs(%c : memref<4xbf16>) {
  ^bb0(%a: f32, %i: i64):
    %t = arith.truncf %a : f32 to bf16
    kern.yield %t : bf16
  } loc("cast w1")
  %w1 = kern.alloc : memref<4x2xbf16> loc("gather w1")
  kern.all_gather %c, %w1 {ranks = 2 : i64} : memref<4xbf16>, memref<4x2xbf16> loc("gather w1")
  kern.fill %w1 {value = 0.0 : f64} : memref<4x2xbf16> loc("r1")
  %u = kern.alloc : memref<4x2xf32> loc("gather unread")
  kern.all_gather %s2, %u {ranks = 2 : i64} : memref<4xf32>, memref<4x2xf32> loc("gather unread")
  return
}
