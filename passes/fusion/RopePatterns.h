// The rotations tg-cache-rope fuses into tg.rope (passes/fusion/CacheRope.cpp),
// recognized from the primitives models write them in.
#ifndef TCC_PASSES_FUSION_ROPEPATTERNS_H
#define TCC_PASSES_FUSION_ROPEPATTERNS_H

#include <string>

#include "mlir/IR/Builders.h"
#include "mlir/IR/Operation.h"

namespace tcc::rope {

// Tries to rewrite the rotation rooted at `root` into one tg.rope:
//   form A (LLaMA / GPT-NeoX, tcc-models gpt --positions rope), `root` the add:
//     x * cos + concat(-x[..., h:], x[..., :h]) * sin
//   form B (half tables), `root` the concat on the last axis:
//     concat(x1 * c - x2 * s, x2 * c + x1 * s),  x1 / x2 = x[..., :h] / x[..., h:]
//     (cos = concat(c, c), sin = concat(s, s))
// with products and sums in either order, halves taken by tg.slice or a
// two-piece tg.split, and tables (T, D) (or (T, h) for form B), possibly with
// leading size-1 dimensions, broadcast over x's leading dimensions.
//
// Returns "" when `root` does not look like a rotation at all; otherwise the
// decision: "fused: ..." (root replaced by the new tg.rope, whose result is
// `fused`) or "not fused: <which op, which condition>" (IR unchanged).
std::string fuseRotation(mlir::OpBuilder &b, mlir::Operation *root,
                         mlir::Value &fused);

} // namespace tcc::rope

#endif
