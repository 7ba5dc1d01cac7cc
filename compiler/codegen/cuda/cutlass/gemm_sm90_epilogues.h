// Hopper (sm_90a) GEMMs with fused epilogues from CUTLASS 3.x (TMA loads,
// wgmma, warp-specialized persistent kernels, epilogue visitor trees):
// candidates beside cuBLASLt's epilogues, chosen per shape by measurement
// (host_support/gemm.h). Each (epilogue, config) instance is its own
// function, compiled once per machine from gemm_sm90_epilogues.cu into a
// cached object (the driver builds the instances in parallel, one nvcc each,
// with -DTCC_CUTLASS_INSTANCE=i). Plain C++ here: no CUTLASS header reaches
// the step's host unit, which pastes this file.
//
// tcc's products are row-major; CUTLASS runs each as its transpose
// (D^T = B^T A^T, column-major), so tcc's per-column bias is CUTLASS's
// per-row one and D's bytes are the same.
#ifndef TCC_CUTLASS_GEMM_SM90_EPILOGUES_H
#define TCC_CUTLASS_GEMM_SM90_EPILOGUES_H

#include <cuda_runtime.h>
#include <cstddef>
#include <cstdint>

#ifndef TCC_CUTLASS_SM90_EPILOGUE_CHOICE_H // pasted before this file, or included
#include "compiler/codegen/cuda/cutlass/sm90_epilogue_choice.h"
#endif

namespace tcc_cutlass {

// One product, row-major, bf16 A and B, fp32 accumulation; n and k
// multiples of 8 and every pointer 16-byte aligned.
//   gelu_aux_bias (tcc NN: A (m x k), B (k x n)), bf16 bias, aux, D:
//     pre = A B + bias(n); aux = bf16(pre); D = bf16(gelu_tanh(pre))
//   dgelu (tcc NT: A (m x k), B (n x k)), bf16 aux, D:
//     D = bf16(gelu_tanh'(aux) * (A B^T)), aux (m x n) read
//   bias_residual_f32 (tcc NN), f32 bias, residual and D (GPT-2's
//   c_proj products onto the f32 residual stream; D may be the residual):
//     D = residual + (A B + bias(n))
struct Sm90GemmArgs {
  int64_t m = 0, n = 0, k = 0;
  const void *A = nullptr, *B = nullptr;
  const void *bias = nullptr;     // gelu_aux_bias, bias_residual_f32
  void *aux = nullptr;            // gelu_aux_bias writes it, dgelu reads it
  const void *residual = nullptr; // bias_residual_f32
  void *D = nullptr;
  void *workspace = nullptr;
  size_t workspace_bytes = 0;
  cudaStream_t stream = nullptr;
};

// Sm90Epilogue and kSm90Epilogues: sm90_epilogue_choice.h.
// Configurations: tile M' x N' x K (M' = tcc's n), cluster, warp schedule.
// One: on the H200 (2026-12-02, tests/cuda/cutlass_gemm_test --bench, GPT-2's
// c_fc) a cooperative 128x256x64 c2x1 tile was slower for both epilogues
// (gelu_aux_bias 0.134 ms against 0.115, dgelu 0.144 against 0.129), and
// every instance costs ~1.5 minutes of nvcc on each machine's first step.
constexpr int kSm90Configs = 1;

inline const char *sm90_config_name(int config) {
  static const char *const names[kSm90Configs] = {"pingpong 128x128x64 c2x1"};
  return config >= 0 && config < kSm90Configs ? names[config] : "?";
}
inline const char *sm90_epilogue_name(Sm90Epilogue e) {
  return e == kSm90GeluAuxBias ? "gelu_aux_bias" : e == kSm90DGelu ? "dgelu"
                                                                   : "bias_residual_f32";
}

// The instances (gemm_sm90_epilogues.cu). Each returns 0 after launching;
// else 1 with a message (static storage) in *why. With `workspace_needed`
// non-null it only stores the workspace the launch needs and returns 0.
#define TCC_CUTLASS_SM90_INSTANCE_DECL(name)                                                    \
  int name(const Sm90GemmArgs &args, size_t *workspace_needed, const char **why);
TCC_CUTLASS_SM90_INSTANCE_DECL(sm90_gelu_aux_bias_bf16_c0)
TCC_CUTLASS_SM90_INSTANCE_DECL(sm90_dgelu_bf16_c0)
TCC_CUTLASS_SM90_INSTANCE_DECL(sm90_bias_residual_f32_c0)
#undef TCC_CUTLASS_SM90_INSTANCE_DECL
constexpr int kSm90Instances = kSm90Epilogues * kSm90Configs;

// Runs (or sizes, see above) epilogue `e` with config `config`.
inline int sm90_gemm_bf16(Sm90Epilogue e, int config, const Sm90GemmArgs &args,
                          size_t *workspace_needed, const char **why) {
  using Fn = int (*)(const Sm90GemmArgs &, size_t *, const char **);
  static const Fn table[kSm90Epilogues][kSm90Configs] = {
      {sm90_gelu_aux_bias_bf16_c0}, {sm90_dgelu_bf16_c0}, {sm90_bias_residual_f32_c0}};
  if (e < 0 || e >= kSm90Epilogues || config < 0 || config >= kSm90Configs) {
    *why = "no such CUTLASS instance";
    return 1;
  }
  if (args.m <= 0 || args.n <= 0 || args.k <= 0 || args.n % 8 || args.k % 8 ||
      args.m > INT32_MAX || args.n > INT32_MAX || args.k > INT32_MAX) {
    *why = "shape: n and k must be positive multiples of 8, every extent below 2^31";
    return 1;
  }
  for (const void *p : {args.A, args.B, args.bias, static_cast<const void *>(args.aux),
                        args.residual, static_cast<const void *>(args.D)})
    if (reinterpret_cast<uintptr_t>(p) % 16) {
      *why = "an operand is not 16-byte aligned";
      return 1;
    }
  return table[e][config](args, workspace_needed, why);
}

} // namespace tcc_cutlass

#endif
