// RUN: tcc-opt %s -tg-amp="precision=bf16 target=cuda" -tg-conv-layout="target=cuda channels-last=true" | FileCheck %s
// RUN: tcc-opt %s -tg-amp="precision=bf16 target=cuda" -tg-conv-layout="target=cuda channels-last=true" | FileCheck %s --check-prefix=REPORT
// RUN: tcc-opt %s -tg-amp="precision=bf16 target=cuda" -tg-conv-layout="target=cuda" | FileCheck %s --check-prefix=OFF
// tg-conv-layout's channels-last rewrite of a bf16 chain (conv, batch norm
// with running statistics, ReLU, max pool, conv + residual add, 1x1 conv +
// bias, global average pool): the ops take layout "NHWC", the weights
// (O, KH, KW, C/g) (a 1x1 one by a free reshape), batch norm the
// (N*H*W, C) view; the transposes back to NCHW move past the elementwise
// ops (the eval branch's per-channel (1, C, 1, 1) operands become
// (1, 1, 1, C) reshapes), the train_select, the residual add and the
// reduction, so only the images keep a transpose. Without the option the
// chain stays NCHW, saying why.

// CHECK-LABEL: func.func @forward
// CHECK: %[[X:.*]] = tg.transpose %{{.*}} {perm = array<i64: 0, 2, 3, 1>} : (tensor<4x3x8x8xbf16>) -> tensor<4x8x8x3xbf16>
// CHECK: %[[W1:.*]] = tg.transpose %{{.*}} {perm = array<i64: 0, 2, 3, 1>} : (tensor<16x3x3x3xbf16>) -> tensor<16x3x3x3xbf16>
// CHECK: %[[C1:.*]] = tg.conv2d %[[X]], %[[W1]] {{.*}}layout = "NHWC"{{.*}} -> tensor<4x8x8x16xbf16>
// CHECK: %[[ROWS:.*]] = tg.reshape %[[C1]] : (tensor<4x8x8x16xbf16>) -> tensor<256x16xbf16>
// CHECK: tg.batch_norm %[[ROWS]] {{.*}} -> (tensor<256x16xbf16>, tensor<16xf32>, tensor<16xf32>)
// CHECK: tg.reshape %{{.*}} : (tensor<1x16x1x1xbf16>) -> tensor<1x1x1x16xbf16>
// CHECK: tg.train_select %{{.*}} : tensor<4x8x8x16xbf16>
// CHECK: tg.relu %{{.*}} : tensor<4x8x8x16xbf16>
// CHECK: %[[P:.*]] = tg.max_pool2d %{{.*}}layout = "NHWC"{{.*}} -> tensor<4x4x4x16xbf16>
// CHECK: tg.transpose %{{.*}} : (tensor<16x16x3x3xbf16>) -> tensor<16x3x3x16xbf16>
// CHECK: %[[C2:.*]] = tg.conv2d %[[P]], {{.*}}layout = "NHWC"
// CHECK: tg.add %[[C2]], %[[P]] {{.*}}: (tensor<4x4x4x16xbf16>, tensor<4x4x4x16xbf16>) -> tensor<4x4x4x16xbf16>
// CHECK: tg.reshape %{{.*}} : (tensor<8x16x1x1xbf16>) -> tensor<8x1x1x16xbf16>
// CHECK: tg.conv2d {{.*}}layout = "NHWC"{{.*}} -> tensor<4x4x4x8xbf16>
// CHECK: tg.reduce_mean %{{.*}} {axes = array<i64: 1, 2>{{.*}} : (tensor<4x4x4x8xf32>) -> tensor<4x8xf32>
// CHECK-NOT: tg.transpose
// CHECK: return
// REPORT: tg.layout_decisions = ["chain 1 (conv2d 'c1', batch_norm 'bn1', max_pool2d 'p1', conv2d 'c2', conv2d 'c3'): NHWC: 2 of 3 convolutions are 16-bit with channels per group multiples of 8{{.*}}", "transposes at the channels-last chains' edges: 1 of activations, 2 of weights (to (O, KH, KW, C/g))", "  transpose at 'c1' to NHWC of tensor<4x3x8x8xbf16>"]

// OFF-NOT: layout = "NHWC"
// OFF: tg.layout_decisions = ["chain 1 ({{.*}}): NCHW: channels-last would pay here (16-bit, channels multiples of 8), but this compile does not use cuDNN

#loc = loc("cnnbn")
module attributes {tg.model_name = "cnnbn", tg.optimizer = {kind = "sgd", learning_rate = 1.000000e-01 : f64}} {
  func.func @forward(%arg0: tensor<16x3x3x3xf32> {tg.param = {init = "normal", name = "w1", scale = 3.000000e-01 : f64, seed = 1 : i64, trainable = true}} loc("cnnbn"), %arg1: tensor<16xf32> {tg.param = {init = "ones", name = "g1", scale = 0.000000e+00 : f64, seed = 0 : i64, trainable = true}} loc("cnnbn"), %arg2: tensor<16xf32> {tg.param = {init = "zeros", name = "h1", scale = 0.000000e+00 : f64, seed = 0 : i64, trainable = true}} loc("cnnbn"), %arg3: tensor<16x16x3x3xf32> {tg.param = {init = "normal", name = "w2", scale = 1.000000e-01 : f64, seed = 2 : i64, trainable = true}} loc("cnnbn"), %arg4: tensor<8x16x1x1xf32> {tg.param = {init = "normal", name = "w3", scale = 1.000000e-01 : f64, seed = 3 : i64, trainable = true}} loc("cnnbn"), %arg5: tensor<8x1x1xf32> {tg.param = {init = "normal", name = "b3", scale = 1.000000e-01 : f64, seed = 4 : i64, trainable = true}} loc("cnnbn"), %arg6: tensor<4x3x8x8xf32> {tg.input = "x"} loc("cnnbn"), %arg7: tensor<16xf32> {tg.buffer = {init = "zeros", name = "rm1", scale = 0.000000e+00 : f64, seed = 0 : i64, trainable = false}} loc("cnnbn"), %arg8: tensor<16xf32> {tg.buffer = {init = "ones", name = "rv1", scale = 0.000000e+00 : f64, seed = 0 : i64, trainable = false}} loc("cnnbn")) -> (tensor<f32> {tg.loss = "loss"}, tensor<16xf32> {tg.updates_buffer = 0 : i64}, tensor<16xf32> {tg.updates_buffer = 1 : i64}) {
    %0 = tg.conv2d %arg6, %arg0 {dilation = array<i64: 1, 1>, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>} : (tensor<4x3x8x8xf32>, tensor<16x3x3x3xf32>) -> tensor<4x16x8x8xf32> loc(#loc1)
    %1 = tg.constant dense<9.99999974E-6> : tensor<f32> loc(#loc2)
    %result, %mean, %var = tg.batch_norm %0 weight %arg1 bias %arg2 : (tensor<4x16x8x8xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<4x16x8x8xf32>, tensor<16xf32>, tensor<16xf32>) loc(#loc2)
    %2 = tg.reshape %arg2 : (tensor<16xf32>) -> tensor<1x16x1x1xf32> loc(#loc2)
    %3 = tg.reshape %arg1 : (tensor<16xf32>) -> tensor<1x16x1x1xf32> loc(#loc2)
    %4 = tg.reshape %arg8 : (tensor<16xf32>) -> tensor<1x16x1x1xf32> loc(#loc2)
    %5 = tg.reshape %arg7 : (tensor<16xf32>) -> tensor<1x16x1x1xf32> loc(#loc2)
    %6 = tg.add %4, %1 : (tensor<1x16x1x1xf32>, tensor<f32>) -> tensor<1x16x1x1xf32> loc(#loc2)
    %7 = tg.rsqrt %6 : tensor<1x16x1x1xf32> loc(#loc2)
    %8 = tg.sub %0, %5 : (tensor<4x16x8x8xf32>, tensor<1x16x1x1xf32>) -> tensor<4x16x8x8xf32> loc(#loc2)
    %9 = tg.mul %8, %7 : (tensor<4x16x8x8xf32>, tensor<1x16x1x1xf32>) -> tensor<4x16x8x8xf32> loc(#loc2)
    %10 = tg.mul %9, %3 : (tensor<4x16x8x8xf32>, tensor<1x16x1x1xf32>) -> tensor<4x16x8x8xf32> loc(#loc2)
    %11 = tg.add %10, %2 : (tensor<4x16x8x8xf32>, tensor<1x16x1x1xf32>) -> tensor<4x16x8x8xf32> loc(#loc2)
    %12 = tg.train_select %result, %11 : tensor<4x16x8x8xf32> loc(#loc2)
    %13 = tg.constant dense<0.899999976> : tensor<f32> loc(#loc2)
    %14 = tg.constant dense<1.000000e-01> : tensor<f32> loc(#loc2)
    %15 = tg.constant dense<1.00392163> : tensor<f32> loc(#loc2)
    %16 = tg.mul %var, %15 : (tensor<16xf32>, tensor<f32>) -> tensor<16xf32> loc(#loc2)
    %17 = tg.mul %mean, %14 : (tensor<16xf32>, tensor<f32>) -> tensor<16xf32> loc(#loc2)
    %18 = tg.mul %arg7, %13 : (tensor<16xf32>, tensor<f32>) -> tensor<16xf32> loc(#loc2)
    %19 = tg.add %18, %17 : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32> loc(#loc2)
    %20 = tg.mul %16, %14 : (tensor<16xf32>, tensor<f32>) -> tensor<16xf32> loc(#loc2)
    %21 = tg.mul %arg8, %13 : (tensor<16xf32>, tensor<f32>) -> tensor<16xf32> loc(#loc2)
    %22 = tg.add %21, %20 : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32> loc(#loc2)
    %23 = tg.relu %12 : tensor<4x16x8x8xf32> loc(#loc3)
    %24 = tg.max_pool2d %23 {kernel = array<i64: 2, 2>, padding = array<i64: 0, 0>, stride = array<i64: 2, 2>} : (tensor<4x16x8x8xf32>) -> tensor<4x16x4x4xf32> loc(#loc4)
    %25 = tg.conv2d %24, %arg3 {dilation = array<i64: 1, 1>, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>} : (tensor<4x16x4x4xf32>, tensor<16x16x3x3xf32>) -> tensor<4x16x4x4xf32> loc(#loc5)
    %26 = tg.add %25, %24 : (tensor<4x16x4x4xf32>, tensor<4x16x4x4xf32>) -> tensor<4x16x4x4xf32> loc(#loc6)
    %27 = tg.relu %26 : tensor<4x16x4x4xf32> loc(#loc7)
    %28 = tg.conv2d %27, %arg4 {dilation = array<i64: 1, 1>, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>} : (tensor<4x16x4x4xf32>, tensor<8x16x1x1xf32>) -> tensor<4x8x4x4xf32> loc(#loc8)
    %29 = tg.add %28, %arg5 : (tensor<4x8x4x4xf32>, tensor<8x1x1xf32>) -> tensor<4x8x4x4xf32> loc(#loc9)
    %30 = tg.reduce_mean %29 {axes = array<i64: 2, 3>} : (tensor<4x8x4x4xf32>) -> tensor<4x8xf32> loc(#loc10)
    %31 = tg.reduce_mean %30 {axes = array<i64: 0, 1>} : (tensor<4x8xf32>) -> tensor<f32> loc(#loc11)
    return %31, %19, %22 : tensor<f32>, tensor<16xf32>, tensor<16xf32> loc(#loc)
  } loc(#loc)
} loc(#loc)
#loc1 = loc("c1")
#loc2 = loc("bn1")
#loc3 = loc("r1")
#loc4 = loc("p1")
#loc5 = loc("c2")
#loc6 = loc("res")
#loc7 = loc("r2")
#loc8 = loc("c3")
#loc9 = loc("c3b")
#loc10 = loc("gap")
#loc11 = loc("loss")
