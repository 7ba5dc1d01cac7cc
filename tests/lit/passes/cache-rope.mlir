// RUN: tcc-opt %s -split-input-file -tg-cache-rope | FileCheck %s
// RUN: tcc-opt %s -split-input-file -tg-cache-rope="max-table-bytes=16" | FileCheck %s --check-prefix=CAP
// tg-cache-rope: position-only tables (iota -> exp -> sin/cos) become dense
// constants computed at compile time, rotations become tg.rope, and an
// almost-rotation is left alone with the failing op and condition recorded.

// The model's form (tcc-models gpt --positions rope), products and sum in
// another order: cos[1] = cos(1 * 10000^(-2i/4)) for i = 0, 1.
// CHECK-LABEL: func.func @form_a
// CHECK: %[[COS:.*]] = tg.constant {tg.cache_rope = "cached: [2, 4] f32 (32 bytes) from 8 position-only ops (iota, constant, mul, exp, cos, concat), evaluated at compile time"} dense<{{\[\[}}1.000000e+00, 1.000000e+00, 1.000000e+00, 1.000000e+00], [0.540302277, 0.999949991, 0.540302277, 0.999949991]]> : tensor<2x4xf32>
// CHECK: %[[SIN:.*]] = tg.constant {tg.cache_rope = "cached: {{.*}} sin, concat){{.*}}"} dense<{{\[\[}}0.000000e+00, {{.*}}], [0.841470957, 0.00999983306, 0.841470957, 0.00999983306]]>
// CHECK: %[[Y:.*]] = tg.rope %arg0, %[[COS]], %[[SIN]] {tg.cache_rope = "fused: x*cos + rotate_half(x)*sin of a function argument [3, 2, 4], constant tables -> tg.rope"}
// CHECK-NOT: tg.sin
// CHECK-NOT: tg.concat
// CHECK: return %[[Y]]
// Over the cap (16 bytes here) the tables stay computed; the rotation still fuses.
// CAP-LABEL: func.func @form_a
// CAP: tg.exp
// CAP: tg.concat {{.*}} {axis = 1 : i64, tg.cache_rope = "not cached: the table is 32 bytes, over the 16 bytes cap per table (max-table-bytes); computed every step"}
// CAP: tg.rope {{.*}} {tg.cache_rope = "fused: {{.*}}, computed (not constant) tables -> tg.rope"}
func.func @form_a(%x: tensor<3x2x4xf32>) -> tensor<3x2x4xf32> {  %pos = tg.iota {axis = 0 : i64} : tensor<2x2xf32>
  %idx = tg.iota {axis = 1 : i64} : tensor<2x2xf32>
  %k = tg.constant dense<-4.60517025> : tensor<f32>
  %lf = tg.mul %idx, %k : (tensor<2x2xf32>, tensor<f32>) -> tensor<2x2xf32>
  %inv = tg.exp %lf : tensor<2x2xf32>
  %ang = tg.mul %pos, %inv : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  %ch = tg.cos %ang : tensor<2x2xf32>
  %sh = tg.sin %ang : tensor<2x2xf32>
  %cos = tg.concat %ch, %ch {axis = 1 : i64} : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x4xf32>
  %sin = tg.concat %sh, %sh {axis = 1 : i64} : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x4xf32>
  %x1 = tg.slice %x {starts = array<i64: 0, 0, 0>, ends = array<i64: 3, 2, 2>} : (tensor<3x2x4xf32>) -> tensor<3x2x2xf32>
  %x2 = tg.slice %x {starts = array<i64: 0, 0, 2>, ends = array<i64: 3, 2, 4>} : (tensor<3x2x4xf32>) -> tensor<3x2x2xf32>
  %n2 = tg.neg %x2 : tensor<3x2x2xf32>
  %rot = tg.concat %n2, %x1 {axis = 2 : i64} : (tensor<3x2x2xf32>, tensor<3x2x2xf32>) -> tensor<3x2x4xf32>
  %a = tg.mul %x, %cos : (tensor<3x2x4xf32>, tensor<2x4xf32>) -> tensor<3x2x4xf32>
  %b = tg.mul %sin, %rot : (tensor<2x4xf32>, tensor<3x2x4xf32>) -> tensor<3x2x4xf32>
  %y = tg.add %b, %a : (tensor<3x2x4xf32>, tensor<3x2x4xf32>) -> tensor<3x2x4xf32>
    return %y : tensor<3x2x4xf32>
}

// -----

// Half tables (T, D/2): concat(x1*c - x2*s, x2*c + x1*s), halves from a
// split; the tables are doubled into (T, D) constants.
// CHECK-LABEL: func.func @form_b
// CHECK-DAG: %[[C:.*]] = tg.constant {tg.cache_rope = "cached: [2, 1] f32 (8 bytes) from 2 position-only ops (iota, cos), evaluated at compile time; doubled along D for tg.rope"} dense<{{\[\[}}1.000000e+00, 1.000000e+00], [0.540302277, 0.540302277]]> : tensor<2x2xf32>
// CHECK-DAG: %[[S:.*]] = tg.constant {tg.cache_rope = "cached: {{.*}}sin{{.*}}"} dense<{{\[\[}}0.000000e+00, 0.000000e+00], [0.841470957, 0.841470957]]> : tensor<2x2xf32>
// CHECK: tg.rope %arg0, %[[C]], %[[S]] {tg.cache_rope = "fused: concat(x1*c - x2*s, x2*c + x1*s) of a function argument [5, 2, 2], constant tables -> tg.rope"}
// CHECK-NOT: tg.sub
func.func @form_b(%x: tensor<5x2x2xf32>) -> tensor<5x2x2xf32> {
  %ang = tg.iota {axis = 0 : i64} : tensor<2x1xf32>
  %c = tg.cos %ang : tensor<2x1xf32>
  %s = tg.sin %ang : tensor<2x1xf32>
  %h:2 = tg.split %x {axis = 2 : i64} : (tensor<5x2x2xf32>) -> (tensor<5x2x1xf32>, tensor<5x2x1xf32>)
  %a = tg.mul %h#0, %c : (tensor<5x2x1xf32>, tensor<2x1xf32>) -> tensor<5x2x1xf32>
  %b = tg.mul %s, %h#1 : (tensor<2x1xf32>, tensor<5x2x1xf32>) -> tensor<5x2x1xf32>
  %lo = tg.sub %a, %b : (tensor<5x2x1xf32>, tensor<5x2x1xf32>) -> tensor<5x2x1xf32>
  %d = tg.mul %h#1, %c : (tensor<5x2x1xf32>, tensor<2x1xf32>) -> tensor<5x2x1xf32>
  %e = tg.mul %h#0, %s : (tensor<5x2x1xf32>, tensor<2x1xf32>) -> tensor<5x2x1xf32>
  %hi = tg.add %e, %d : (tensor<5x2x1xf32>, tensor<5x2x1xf32>) -> tensor<5x2x1xf32>
  %y = tg.concat %lo, %hi {axis = 2 : i64} : (tensor<5x2x1xf32>, tensor<5x2x1xf32>) -> tensor<5x2x2xf32>
  return %y : tensor<5x2x2xf32>
}

// -----

// Almost rotate_half: the first half is negated instead of the second.
// CHECK-LABEL: func.func @wrong_half
// CHECK-NOT: tg.rope
// CHECK: tg.add {{.*}} {tg.cache_rope = "not fused: 'loc(\22{{.*}}\22:{{[0-9]+}}:{{[0-9]+}})' (tg.neg) does not negate the second half x[..., h:] of a tensor"}
func.func @wrong_half(%x: tensor<2x4xf32>, %cos: tensor<2x4xf32>, %sin: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %x1 = tg.slice %x {starts = array<i64: 0, 0>, ends = array<i64: 2, 2>} : (tensor<2x4xf32>) -> tensor<2x2xf32>
  %x2 = tg.slice %x {starts = array<i64: 0, 2>, ends = array<i64: 2, 4>} : (tensor<2x4xf32>) -> tensor<2x2xf32>
  %n1 = tg.neg %x1 : tensor<2x2xf32>
  %rot = tg.concat %n1, %x2 {axis = 1 : i64} : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x4xf32>
  %a = tg.mul %x, %cos : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %b = tg.mul %rot, %sin : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %y = tg.add %a, %b : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

// A rotation whose tables differ per batch row is not tg.rope's (tables are
// shared by the leading dimensions).
// CHECK-LABEL: func.func @batched_tables
// CHECK-NOT: tg.rope
// CHECK: tg.cache_rope = "not fused: the cos table (a function argument) is [3, 2, 4]; tg.rope needs [2, 4] (one row per position, shared by the leading dimensions of x [3, 2, 4])"
func.func @batched_tables(%x: tensor<3x2x4xf32>, %cos: tensor<3x2x4xf32>, %sin: tensor<2x4xf32>) -> tensor<3x2x4xf32> {
  %x1 = tg.slice %x {starts = array<i64: 0, 0, 0>, ends = array<i64: 3, 2, 2>} : (tensor<3x2x4xf32>) -> tensor<3x2x2xf32>
  %x2 = tg.slice %x {starts = array<i64: 0, 0, 2>, ends = array<i64: 3, 2, 4>} : (tensor<3x2x4xf32>) -> tensor<3x2x2xf32>
  %n2 = tg.neg %x2 : tensor<3x2x2xf32>
  %rot = tg.concat %n2, %x1 {axis = 2 : i64} : (tensor<3x2x2xf32>, tensor<3x2x2xf32>) -> tensor<3x2x4xf32>
  %a = tg.mul %x, %cos : (tensor<3x2x4xf32>, tensor<3x2x4xf32>) -> tensor<3x2x4xf32>
  %b = tg.mul %rot, %sin : (tensor<3x2x4xf32>, tensor<2x4xf32>) -> tensor<3x2x4xf32>
  %y = tg.add %a, %b : (tensor<3x2x4xf32>, tensor<3x2x4xf32>) -> tensor<3x2x4xf32>
  return %y : tensor<3x2x4xf32>
}

// -----

// A causal mask from iotas is position-only but cheap (no transcendental
// op): left to the kernels that compute it for free.
// CHECK-LABEL: func.func @mask
// CHECK: tg.iota
// CHECK: tg.select
// CHECK-NOT: tg.cache_rope
func.func @mask(%s: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %i = tg.iota {axis = 0 : i64} : tensor<4x4xi64>
  %j = tg.iota {axis = 1 : i64} : tensor<4x4xi64>
  %m = tg.greater %j, %i : (tensor<4x4xi64>, tensor<4x4xi64>) -> tensor<4x4xi1>
  %n = tg.constant dense<0xFF800000> : tensor<f32>
  %y = tg.select %m, %n, %s : (tensor<4x4xi1>, tensor<f32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}
