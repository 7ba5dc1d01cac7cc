// RUN: tcc-opt %s -tg-remat | FileCheck %s
// RUN: tcc-opt %s -tg-remat="copies=false" | FileCheck %s --check-prefix=OFF
// tg-remat without a budget: a value made only by copies (here a broadcast,
// a UNet's nearest upsampling) of a value live after the peak anyway is
// made again before its late reader, as it frees >= 1 MiB; a bf16 cast
// (2 MiB too) is not a copy there: casts stay. copies=false (tcc compile
// --no-remat-copies) keeps every copy.

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: tg.remat_decisions = ["budget none; live temporaries peak
// CHECK-SAME: 1 values recomputed, 0.00 MFLOP added (~{{.*}} ms at nominal rates); no budget: only copies recomputed; 1 of them copies"
// CHECK-SAME: "recompute up (1 ops: broadcast_to; a copy): peak {{.*}}; frees 2.0 MiB, adds 0.00 MFLOP
// CHECK-SAME: "kept w16 (2.0 MiB): no budget"
// CHECK: %[[S:.*]] = tg.exp %arg1
// CHECK: tg.exp %{{.*}} : tensor<8x16x64x64xf32>
// CHECK-NEXT: tg.exp %{{.*}} : tensor<8x16x64x64xf32>
// CHECK-NEXT: %[[U:.*]] = tg.broadcast_to %[[S]] {tg.remat = "recomputed for late (dropped across op 4, tg.exp; a copy): frees 2.0 MiB
// CHECK-NEXT: tg.add %{{.*}}, %[[U]]
// CHECK-NOT: tg.remat =
// OFF-LABEL: func.func @train_step
// OFF-SAME: 0 values recomputed, 0.00 MFLOP added (~0.00 ms at nominal rates); no budget: nothing recomputed; copies kept (copies=false)"
// OFF-NOT: tg.remat =
func.func @train_step(%w: tensor<1024x1024xf32> {tg.param = {name = "w"}}, %x: tensor<8x1x64x64xf32>, %y: tensor<8x16x64x64xf32>) -> (tensor<8x16x64x64xf32>, tensor<1024x1024xf32>) {
  %s = tg.exp %x : tensor<8x1x64x64xf32> loc("small")
  %u = tg.broadcast_to %s : (tensor<8x1x64x64xf32>) -> tensor<8x16x64x64xf32> loc("up")
  %wc = tg.cast %w : tensor<1024x1024xf32> to tensor<1024x1024xbf16> loc("w16")
  %b = tg.exp %y : tensor<8x16x64x64xf32> loc("e")
  %c = tg.exp %b : tensor<8x16x64x64xf32> loc("peak")
  %d = tg.add %c, %u : (tensor<8x16x64x64xf32>, tensor<8x16x64x64xf32>) -> tensor<8x16x64x64xf32> loc("late")
  %f = tg.add %d, %s : (tensor<8x16x64x64xf32>, tensor<8x1x64x64xf32>) -> tensor<8x16x64x64xf32> loc("late2")
  %g = tg.cast %wc : tensor<1024x1024xbf16> to tensor<1024x1024xf32> loc("w32")
  return %f, %g : tensor<8x16x64x64xf32>, tensor<1024x1024xf32>
}
