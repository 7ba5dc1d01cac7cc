// Sizes and strides of kern.rope: the rotated tensor as (B, H, T, D) rows,
// from the `sizes` / `layout` attributes when present (folded by
// kern-fold-attention-layout, so the rotation reads and writes packed
// buffers), else from the input's type: (B, H, T, D) at rank 4, otherwise
// every leading dimension in B and H = 1. One place for the verifier, the
// folding pass and both code generators.
#ifndef TCC_DIALECTS_KERN_ROPELAYOUT_H
#define TCC_DIALECTS_KERN_ROPELAYOUT_H

#include <cstdint>

#include "dialects/kern/AttentionLayout.h"
#include "dialects/kern/KernDialect.h"
#include "llvm/ADT/SmallVector.h"

namespace tcc::kern {

struct RopeSizes {
  int64_t batch = 0, heads = 0, positions = 0, dim = 0;
  int64_t elements() const { return batch * heads * positions * dim; }
};

// Sizes from `sizes`, else from the input's type.
RopeSizes ropeSizes(RopeOp op);

// The input's then the output's layout (AttentionTensorLayout: row (b, h, i)
// at offset + b * batch + h * head + i * row, D contiguous).
llvm::SmallVector<AttentionTensorLayout, 2> ropeLayouts(RopeOp op, const RopeSizes &sizes);

// Sets `sizes` and `layout` (the fold pass).
void setRopeLayouts(RopeOp op, const RopeSizes &sizes,
                    llvm::ArrayRef<AttentionTensorLayout> layouts);

} // namespace tcc::kern

#endif
