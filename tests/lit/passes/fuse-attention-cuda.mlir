// RUN: tcc-opt %s '-tg-fuse-attention=target=cuda cuda-arch=sm_90' | FileCheck %s --check-prefix=CUDA
// RUN: tcc-opt %s '-tg-fuse-attention=target=cuda cuda-arch=sm_75' | FileCheck %s --check-prefix=TURING
// RUN: tcc-opt %s -tg-fuse-attention | FileCheck %s --check-prefix=CPU
// RUN: not tcc-opt %s -tg-fuse-attention=target=tpu 2>&1 | FileCheck %s --check-prefix=BAD
// On the cuda target (tcc compile --target cuda passes target and arch)
// only what the flash kernels take fuses: head size 64 or 128,
// bf16/fp16/f32, sm_80 or newer. The rest stays written out (it compiles
// and runs as before) with the reason in the report. The cpu kernels take
// every head size and f64.

// CUDA-LABEL: func.func @head_64
// CUDA: tg.attention {{.*}}"fused: B=1 H=2 Hkv=2 T=4 S=4 D=64 causal scale=0.125"
// TURING-LABEL: func.func @head_64
// TURING: tg.softmax {{.*}}tg.fuse_attention = "not fused at tg.matmul (scores): sm_75: the CUDA flash kernels need sm_80 or newer"
// CPU-LABEL: func.func @head_64
// CPU: tg.attention
func.func @head_64(%q: tensor<1x2x4x64xbf16>, %k: tensor<1x2x4x64xbf16>, %v: tensor<1x2x4x64xbf16>) -> tensor<1x2x4x64xbf16> {
  %s = tg.matmul %q, %k {transpose_rhs = true} : (tensor<1x2x4x64xbf16>, tensor<1x2x4x64xbf16>) -> tensor<1x2x4x4xbf16> loc("scores")
  %c = tg.constant dense<0.125> : tensor<bf16>
  %sc = tg.mul %s, %c : (tensor<1x2x4x4xbf16>, tensor<bf16>) -> tensor<1x2x4x4xbf16>
  %m = tg.causal_mask %sc : tensor<1x2x4x4xbf16>
  %p = tg.softmax %m {axis = 3 : i64} : tensor<1x2x4x4xbf16> loc("probs")
  %o = tg.matmul %p, %v : (tensor<1x2x4x4xbf16>, tensor<1x2x4x64xbf16>) -> tensor<1x2x4x64xbf16>
  return %o : tensor<1x2x4x64xbf16>
}

// CUDA-LABEL: func.func @head_128_fp16
// CUDA: tg.attention {{.*}}"fused: B=1 H=2 Hkv=1 T=4 S=4 D=128 not-causal scale=1"
func.func @head_128_fp16(%q: tensor<1x2x4x128xf16>, %k: tensor<1x1x4x128xf16>, %v: tensor<1x1x4x128xf16>) -> tensor<1x2x4x128xf16> {
  %s = tg.matmul %q, %k {transpose_rhs = true} : (tensor<1x2x4x128xf16>, tensor<1x1x4x128xf16>) -> tensor<1x2x4x4xf16> loc("scores")
  %p = tg.softmax %s {axis = 3 : i64} : tensor<1x2x4x4xf16> loc("probs")
  %o = tg.matmul %p, %v : (tensor<1x2x4x4xf16>, tensor<1x1x4x128xf16>) -> tensor<1x2x4x128xf16>
  return %o : tensor<1x2x4x128xf16>
}

// CUDA-LABEL: func.func @head_96
// CUDA-NOT: tg.attention
// CUDA: tg.softmax {{.*}}tg.fuse_attention = "not fused at tg.matmul (scores): head size 96: the CUDA flash kernels support 64 and 128"
// CPU-LABEL: func.func @head_96
// CPU: tg.attention {{.*}}"fused: B=1 H=2 Hkv=2 T=4 S=4 D=96 causal scale=1"
func.func @head_96(%q: tensor<1x2x4x96xf32>, %k: tensor<1x2x4x96xf32>, %v: tensor<1x2x4x96xf32>) -> tensor<1x2x4x96xf32> {
  %s = tg.matmul %q, %k {transpose_rhs = true} : (tensor<1x2x4x96xf32>, tensor<1x2x4x96xf32>) -> tensor<1x2x4x4xf32> loc("scores")
  %m = tg.causal_mask %s : tensor<1x2x4x4xf32>
  %p = tg.softmax %m {axis = 3 : i64} : tensor<1x2x4x4xf32> loc("probs")
  %o = tg.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x96xf32>) -> tensor<1x2x4x96xf32>
  return %o : tensor<1x2x4x96xf32>
}

// CUDA-LABEL: func.func @f64
// CUDA: tg.softmax {{.*}}tg.fuse_attention = "not fused at tg.matmul (scores): f64 attention: the CUDA flash kernels take bf16, fp16 and f32"
// CPU-LABEL: func.func @f64
// CPU: tg.attention {{.*}}"fused: B=1 H=2 Hkv=2 T=4 S=4 D=64 not-causal scale=1"
func.func @f64(%q: tensor<1x2x4x64xf64>, %k: tensor<1x2x4x64xf64>, %v: tensor<1x2x4x64xf64>) -> tensor<1x2x4x64xf64> {
  %s = tg.matmul %q, %k {transpose_rhs = true} : (tensor<1x2x4x64xf64>, tensor<1x2x4x64xf64>) -> tensor<1x2x4x4xf64> loc("scores")
  %p = tg.softmax %s {axis = 3 : i64} : tensor<1x2x4x4xf64> loc("probs")
  %o = tg.matmul %p, %v : (tensor<1x2x4x4xf64>, tensor<1x2x4x64xf64>) -> tensor<1x2x4x64xf64>
  return %o : tensor<1x2x4x64xf64>
}

// BAD: tg-fuse-attention: unknown target 'tpu' (expected cpu or cuda)
