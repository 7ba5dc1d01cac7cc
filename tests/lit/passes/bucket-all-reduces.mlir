// RUN: tcc-opt %s -kern-schedule-collectives=bucket-bytes=40 | FileCheck %s
// kern-schedule-collectives groups consecutive all-reduces of one element
// type and reduction into buckets (kern.all_reduce_bucket at the last
// member's place) until a bucket holds bucket-bytes (here 40): g1 and g2 (16
// bytes each) and g3 (16 more: 48 >= 40) form bucket 1; g4 starts bucket 2,
// which g5 (a sum: another reduction) closes with g4 alone; g5's closes
// before `reader` touches g4's buffer, g5 alone: single all-reduces stay
// as they are. The loss (one element) is never bucketed.
// CHECK-LABEL: func.func @grads
// CHECK: kern.all_reduce %arg5 {kern.schedule_collectives = "loss: {{.*}}", reduction = "mean"} : memref<f32>
// CHECK: kern.fill %arg2 {value = 3.000000e+00 : f64}
// CHECK-NEXT: kern.all_reduce_bucket %arg0, %arg1, %arg2 {kern.schedule_collectives = "bucket 1 (kern.all_reduce_bucket): 3 all-reduces, 48 bytes, g1 .. g3, issued where g3's was; closed: 48 bytes reached (bucket-bytes 40)", reduction = "mean"} : memref<4xf32>, memref<4xf32>, memref<4xf32>
// CHECK-NEXT: kern.fill %arg3 {value = 4.000000e+00 : f64}
// CHECK-NEXT: kern.all_reduce %arg3 {{.*}}reduction = "mean"
// CHECK-NEXT: kern.fill %arg4 {value = 5.000000e+00 : f64}
// CHECK-NEXT: kern.all_reduce %arg4 {{.*}}reduction = "sum"
// CHECK-NEXT: kern.fill %arg3 {value = 9.000000e+00 : f64}
// CHECK-NEXT: return
func.func @grads(%g1: memref<4xf32>, %g2: memref<4xf32>, %g3: memref<4xf32>, %g4: memref<4xf32>,
                 %g5: memref<4xf32>, %loss: memref<f32>) {
  kern.fill %loss {value = 0.5 : f64} : memref<f32> loc("lossw")
  kern.fill %g1 {value = 1.0 : f64} : memref<4xf32> loc("w1")
  kern.fill %g2 {value = 2.0 : f64} : memref<4xf32> loc("w2")
  kern.fill %g3 {value = 3.0 : f64} : memref<4xf32> loc("w3")
  kern.fill %g4 {value = 4.0 : f64} : memref<4xf32> loc("w4")
  kern.fill %g5 {value = 5.0 : f64} : memref<4xf32> loc("w5")
  kern.all_reduce %loss {reduction = "mean"} : memref<f32> loc("loss")
  kern.all_reduce %g1 {reduction = "mean"} : memref<4xf32> loc("g1")
  kern.all_reduce %g2 {reduction = "mean"} : memref<4xf32> loc("g2")
  kern.all_reduce %g3 {reduction = "mean"} : memref<4xf32> loc("g3")
  kern.all_reduce %g4 {reduction = "mean"} : memref<4xf32> loc("g4")
  kern.fill %g4 {value = 9.0 : f64} : memref<4xf32> loc("reader")
  kern.all_reduce %g5 {reduction = "sum"} : memref<4xf32> loc("g5")
  return
}
