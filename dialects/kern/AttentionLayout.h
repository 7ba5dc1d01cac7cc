// Sizes and per-tensor strides of kern.attention / kern.attention_grad: read
// from the `sizes` / `layout` attributes when present (folded by
// kern-fold-attention-layout), else the contiguous (B, H, T, D) /
// (B, Hkv, S, D) of the operand types. One place for the verifiers, the
// folding pass and both code generators.
#ifndef TCC_DIALECTS_KERN_ATTENTIONLAYOUT_H
#define TCC_DIALECTS_KERN_ATTENTIONLAYOUT_H

#include <cstdint>

#include "dialects/kern/KernDialect.h"
#include "llvm/ADT/SmallVector.h"

namespace tcc::kern {

struct AttentionSizes {
  int64_t batch = 0, heads = 0, kvHeads = 0, queries = 0, keys = 0, dim = 0;
};

// Row (b, h, i) of a tensor: `dim` contiguous elements at offset + b * batch
// + h * head + i * row of its buffer.
struct AttentionTensorLayout {
  int64_t offset = 0, batch = 0, head = 0, row = 0;
  bool operator==(const AttentionTensorLayout &o) const {
    return offset == o.offset && batch == o.batch && head == o.head && row == o.row;
  }
};

// The strided tensor operands in `layout` order: q, k, v, out (forward);
// q, k, v, out, grad, dq, dk, dv (backward).
llvm::SmallVector<mlir::Value> attentionTensors(mlir::Operation *op);

// Sizes from `sizes`, else from q (B, H, T, D) and k (B, Hkv, S, D) types
// (failure when neither gives them: the verifier's error).
mlir::FailureOr<AttentionSizes> attentionSizes(mlir::Operation *op);

// One layout per attentionTensors entry: from `layout`, else contiguous.
llvm::SmallVector<AttentionTensorLayout> attentionLayouts(mlir::Operation *op,
                                                          const AttentionSizes &sizes);

// Whether tensor `index` (attentionTensors order) has q's row space
// (B, H, T) rather than k's (B, Hkv, S).
bool attentionTensorIsQueryShaped(mlir::Operation *op, unsigned index);

// Sets `sizes` and `layout` on the op (the fold pass).
void setAttentionLayouts(mlir::Operation *op, const AttentionSizes &sizes,
                         llvm::ArrayRef<AttentionTensorLayout> layouts);

} // namespace tcc::kern

#endif
