// tcc's own Hopper (sm_90a) attention forward and backward (issue 37): wgmma products
// with P kept in registers (FlashAttention-3's dataflow), beside cuDNN's
// and the prelude's mma.sync flash kernels. Plain C++ here: the kernels
// are in attention_sm90.cu (forward) and attention_backward_sm90.cu,
// compiled for sm_90a only.
//
// Semantics are the prelude's (attention_launchers.cuh): q (B, H, T, D),
// k and v (B, Hkv, S, D), out (B, H, T, D), each row of D contiguous
// elements at b * s.b + h * s.h + i * s.r; lse (B, H, T) contiguous f32,
// natural log; s = scale * q k^T, causal masks key j for query i when
// j > i + (S - T); a fully masked row gives out = 0 and lse = -inf. Query
// head h reads kv head h / (H / Hkv). No dropout (the caller falls back).
#ifndef TCC_CUDA_SM90_ATTENTION_SM90_H
#define TCC_CUDA_SM90_ATTENTION_SM90_H

#include <cuda_runtime.h>
#include <cstdint>

namespace tcc_sm90 {

struct AttnSm90Strides {
  int64_t b = 0, h = 0, r = 0;
};

struct AttnSm90Forward {
  int64_t B = 0, H = 0, Hkv = 0, T = 0, S = 0, D = 0;
  const void *q = nullptr, *k = nullptr, *v = nullptr;
  void *out = nullptr;
  float *lse = nullptr;
  AttnSm90Strides qs, ks, vs, os;
  float scale = 0.f;
  bool causal = false;
  bool f16 = false; // else bf16
  // Heads whose query tiles are handed out together, longest first (the
  // kernel's item order); 0: the launcher's choice, 64. For tuning (the
  // test's --bench sweeps it).
  int64_t group_heads = 0;
  // Two ints of device memory, zero before the first launch; every launch
  // leaves them zero (its CTAs take work items from them). Launches that
  // may run at the same time need their own.
  int *scheduler = nullptr;
  cudaStream_t stream = nullptr;
};

// Why `a` cannot run here (a static string), or nullptr when it can: D 64
// or 128, positive finite scale, H a multiple of Hkv, 16-byte aligned
// pointers, strides multiples of 8 elements, a scheduler.
const char *attention_forward_sm90_unsupported(const AttnSm90Forward &a);

// Enqueues the forward on a.stream: 0, or 1 with the reason in *why
// (nothing launched). Launch errors are left to cudaGetLastError.
int attention_forward_sm90(const AttnSm90Forward &a, const char **why);

// The backward (attention_backward_sm90.cu): dq, dk, dv from q, k, v, out,
// dout and the forward's lse, all bf16 or f16 but lse. Nondeterministic in
// dq's last bits (f32 reductions by atomics in any order); dk and dv are
// deterministic.
struct AttnSm90Backward {
  int64_t B = 0, H = 0, Hkv = 0, T = 0, S = 0, D = 0;
  const void *q = nullptr, *k = nullptr, *v = nullptr, *out = nullptr, *dout = nullptr;
  const float *lse = nullptr;
  void *dq = nullptr, *dk = nullptr, *dv = nullptr;
  AttnSm90Strides qs, ks, vs, os, dos, dqs, dks, dvs;
  float scale = 0.f;
  bool causal = false;
  bool f16 = false; // else bf16
  // attention_backward_sm90_workspace(*this) bytes of device memory,
  // 16-byte aligned, not shared with a launch that may run at the same time
  // (no zeroing needed: the launch initializes it).
  void *workspace = nullptr;
  cudaStream_t stream = nullptr;
};

const char *attention_backward_sm90_unsupported(const AttnSm90Backward &a);
int64_t attention_backward_sm90_workspace(const AttnSm90Backward &a);
// Enqueues the backward's three kernels on a.stream: 0, or 1 with the
// reason in *why (nothing launched).
int attention_backward_sm90(const AttnSm90Backward &a, const char **why);

} // namespace tcc_sm90

#endif
