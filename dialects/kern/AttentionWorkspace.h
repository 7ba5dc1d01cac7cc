// The f32 scratch kern.attention_grad takes (its `workspace` operand), in
// elements. One function, used by tg-lower-to-kern (which allocates it, so
// the memory plan places it like any buffer) and by the code generators.
#ifndef TCC_DIALECTS_KERN_ATTENTIONWORKSPACE_H
#define TCC_DIALECTS_KERN_ATTENTIONWORKSPACE_H

#include <cstdint>

namespace mlir {
class Operation;
} // namespace mlir

namespace tcc::kern {

// The attention libraries a cuda step may run beside tcc's flash kernels
// (whose scratch is the op's own `workspace` operand, planned like any
// buffer): cuDNN (CudaCodegenOptions::cudnnAttention) and, at cuDNN's
// sites, tcc's sm90 kernels (CudaCodegenOptions::sm90Attention). The code
// generator and the memory budget must pass the same flags.
struct AttentionLibraries {
  bool cudnn = false;
  bool sm90 = false;
};

// The device memory an attention backward takes beyond its operands on the
// cuda target (the step's shared workspace is sized by it), the largest
// over the kern.attention_grad ops nested in `root` that cuDNN may run
// (16-bit, head size 64 or 128, no dropout; 0 without any, or without
// libraries.cudnn) of
//  - cuDNN's SDPA backward workspace, estimated as an f32 dQ accumulator
//    and an f32 row statistic, B*H*T*(D+1)*4 bytes plus 1 MiB of slack, and
//    with grouped K/V heads (GQA) f32 dK and dV for every query head,
//    2*B*H*S*D*4 more. (Without the GQA term a LLaMA-style B8 T1024 H12/4
//    D64 step's cuDNN backward took ~50 MB beyond the plan: planned 4.64
//    GiB, measured 4.69, H200 2026-11-29.) cuDNN tells its size only when
//    trun builds its plans; trun measured B*H*T*(D+1)*4 and at most 492
//    bytes more for GPT-2 124M at batch 16 and 34 (cuDNN 9.14, H200,
//    2026-11-25).
//  - with libraries.sm90, tcc's sm90 backward where it is a candidate (not
//    deterministic: it sums dq with atomics): B*H*Tp*(D+2)*4 bytes, Tp = T
//    rounded up to 128 rows at D = 64, 64 at D = 128; must equal
//    tcc_sm90::attention_backward_sm90_workspace (cuda/sm90/).
// The memory budget counts it.
int64_t attentionWorkspaceBytes(mlir::Operation *root, AttentionLibraries libraries);

// Must equal tcc_cuda::attention_backward_workspace_floats of the CUDA
// prelude (cuda/prelude/attention_launchers.cuh, the launcher's contract):
// the row sums D_i = rowsum(grad * out), B*H*T, in both modes (the CUDA
// backward of i12-flash uses no atomics). The CPU kernel needs none of it
// (its accumulators are per thread).
inline int64_t attentionBackwardWorkspaceFloats(int64_t batch, int64_t heads,
                                                int64_t kvHeads, int64_t queries,
                                                int64_t keys, int64_t headDim,
                                                bool deterministic) {
  (void)kvHeads;
  (void)keys;
  (void)headDim;
  (void)deterministic;
  return batch * heads * queries;
}

} // namespace tcc::kern

#endif
