// The f32 scratch kern.attention_grad takes (its `workspace` operand), in
// elements. One function, used by tg-lower-to-kern (which allocates it, so
// the memory plan places it like any buffer) and by the code generators.
#ifndef TCC_DIALECTS_KERN_ATTENTIONWORKSPACE_H
#define TCC_DIALECTS_KERN_ATTENTIONWORKSPACE_H

#include <cstdint>

namespace tcc::kern {

// Must equal tcc_cuda::attention_backward_workspace_floats of the CUDA
// prelude (the launcher's contract): a float dq accumulator and the row
// sums D_i = rowsum(grad * out), B*H*T*(D + 1); with grouped heads
// (H != Hkv), per-query-head dk and dv that are then summed per key/value
// head, 2*B*H*S*D. The CPU kernel uses the first part (dq in float for
// 16-bit types).
inline int64_t attentionBackwardWorkspaceFloats(int64_t batch, int64_t heads,
                                                int64_t kvHeads, int64_t queries,
                                                int64_t keys, int64_t headDim,
                                                bool deterministic) {
  (void)deterministic; // the CUDA formula may size by it; today it does not
  int64_t floats = batch * heads * queries * (headDim + 1);
  if (heads != kvHeads)
    floats += 2 * batch * heads * keys * headDim;
  return floats;
}

} // namespace tcc::kern

#endif
