// RUN: tcc-opt %s -split-input-file -tg-remat="budget=200000" | FileCheck %s
// RUN: tcc-opt %s -split-input-file -tg-remat | FileCheck %s --check-prefix=NONE
// tg-remat: a value live across the step's peak and read after it is
// dropped there and recomputed (its ops cloned) before its first later
// reader, until the live tensors fit the budget; what stays says why.

// %a (64 KiB) is live across the peak (the mul) and read after it: the
// matmul is cloned before the add. 256 KiB live at the mul before, 192 KiB
// after (<= 195.3 KiB).
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: tg.remat_decisions = ["budget 195.3 KiB; live temporaries peak 256.0 KiB at op 3 before, 192.0 KiB at op 3 after; 1 values recomputed, 4.19 MFLOP added
// CHECK-SAME: "recompute fc (1 ops: matmul): peak 256.0 KiB at op 3; frees 64.0 KiB, adds 4.19 MFLOP
// CHECK-SAME: "kept e (64.0 KiB): read by the peak op"
// CHECK: tg.matmul %arg0, %arg1 : {{.*}}
// CHECK: tg.mul
// CHECK-NEXT: %[[R:.*]] = tg.matmul %arg0, %arg1 {tg.remat = "recomputed for late (dropped across op 3, tg.mul): frees 64.0 KiB, adds 4.19 MFLOP, 192.0 KiB moved"}
// CHECK-NEXT: tg.add %{{.*}}, %[[R]]
// NONE-LABEL: func.func @train_step
// NONE-SAME: tg.remat_decisions = ["budget none; live temporaries peak 256.0 KiB at op 3 before, 256.0 KiB at op 3 after; 0 values recomputed, 0.00 MFLOP added (~0.00 ms at nominal rates); no budget: nothing recomputed"
// NONE-SAME: "kept fc (64.0 KiB): no budget"
// NONE-NOT: tg.remat =
func.func @train_step(%x: tensor<128x128xf32>, %w: tensor<128x128xf32>) -> tensor<128x128xf32> {
  %a = tg.matmul %x, %w : (tensor<128x128xf32>, tensor<128x128xf32>) -> tensor<128x128xf32> loc("fc")
  %b = tg.exp %x : tensor<128x128xf32> loc("e")
  %c = tg.exp %b : tensor<128x128xf32> loc("e2")
  %d = tg.mul %b, %c : (tensor<128x128xf32>, tensor<128x128xf32>) -> tensor<128x128xf32> loc("peak")
  %e = tg.add %d, %a : (tensor<128x128xf32>, tensor<128x128xf32>) -> tensor<128x128xf32> loc("late")
  return %e : tensor<128x128xf32>
}

// -----

// A recipe of two ops: the f32 value the cast reads died at the cast, so
// the exp is recomputed too (one cast frees 32 KiB and the exp's result is
// dead at the peak); the late reader reads through a view made before the
// peak, which is cloned as well.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: "recompute n16 (3 ops: exp, cast): peak
// CHECK: tg.mul
// CHECK: tg.reshape
// CHECK-NEXT: %[[E:.*]] = tg.exp %arg0 {tg.remat = "recomputed for late (dropped across op 5, tg.mul): frees 32.0 KiB
// CHECK-NEXT: %[[C:.*]] = tg.cast %[[E]] {tg.remat =
// CHECK-NEXT: %[[V:.*]] = tg.reshape %[[C]] {tg.remat =
// CHECK-NEXT: tg.add %{{.*}}, %[[V]]
func.func @train_step(%x: tensor<128x128xf32>) -> tensor<16384xbf16> {
  %n = tg.exp %x : tensor<128x128xf32> loc("n")
  %h = tg.cast %n : tensor<128x128xf32> to tensor<128x128xbf16> loc("n16")
  %v = tg.reshape %h : (tensor<128x128xbf16>) -> tensor<16384xbf16> loc("n16.flat")
  %b = tg.exp %x : tensor<128x128xf32> loc("e")
  %c = tg.exp %b : tensor<128x128xf32> loc("e2")
  %d = tg.mul %b, %c : (tensor<128x128xf32>, tensor<128x128xf32>) -> tensor<128x128xf32> loc("peak")
  %d16 = tg.cast %d : tensor<128x128xf32> to tensor<128x128xbf16> loc("peak16")
  %f = tg.reshape %d16 : (tensor<128x128xbf16>) -> tensor<16384xbf16> loc("flat")
  %e = tg.add %f, %v : (tensor<16384xbf16>, tensor<16384xbf16>) -> tensor<16384xbf16> loc("late")
  return %e : tensor<16384xbf16>
}

// -----

// A scatter_add's bits depend on the order of its atomic adds on the GPU:
// never recomputed, and the report says why; the budget is then missed
// (the driver turns that into tcc compile's error).
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: budget not reached: 256.0 KiB live at op 3 (tg.mul) and nothing left to recompute there"
// CHECK-SAME: "kept emb (64.0 KiB): its op tg.scatter_add cannot be recomputed: its GPU kernel accumulates with atomics (the bits could differ)"
// CHECK-NOT: tg.remat =
func.func @train_step(%i: tensor<4x8xi32>, %u: tensor<4x8x128xf32>, %x: tensor<128x128xf32>) -> tensor<128x128xf32> {
  %s = tg.scatter_add %i, %u : (tensor<4x8xi32>, tensor<4x8x128xf32>) -> tensor<128x128xf32> loc("emb")
  %b = tg.exp %x : tensor<128x128xf32> loc("e")
  %c = tg.exp %b : tensor<128x128xf32> loc("e2")
  %d = tg.mul %b, %c : (tensor<128x128xf32>, tensor<128x128xf32>) -> tensor<128x128xf32> loc("peak")
  %e = tg.add %d, %s : (tensor<128x128xf32>, tensor<128x128xf32>) -> tensor<128x128xf32> loc("late")
  return %e : tensor<128x128xf32>
}
