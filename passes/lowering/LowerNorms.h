// tg.layer_norm / tg.rms_norm and their gradient ops -> kern.layer_norm /
// kern.layer_norm_grad, and batch norm's two reductions -> kern.batch_norm_stats /
// kern.batch_norm_grad_sums, for tg-lower-to-kern (LowerTgToKern.cpp), which owns
// the buffers. Two tg.casts fold into these kernels (visible in the
// lowered IR as the kern op's element types):
//   - a cast of a norm's result that is the result's only user: the kernel
//     writes the cast's type (tg-amp's f32 norm followed by the bf16 matmul
//     operand becomes one kernel writing bf16);
//   - a widening cast read only as the `grad` of norm gradient ops: they
//     read its 16-bit source instead.
// and one tg.add:
//   - an add of a norm gradient's input_grad (its only use) and a value of
//     its type computed before the gradient (the residual stream's
//     gradient): the kernel adds it while writing (kern `plus`).
#ifndef TCC_PASSES_LOWERING_LOWERNORMS_H
#define TCC_PASSES_LOWERING_LOWERNORMS_H

#include "passes/lowering/LoweringContext.h"

namespace tcc {

// How the norm lowering reaches the function lowering's state
// (LoweringContext.h; attention's adds the determinism flag).
using NormLoweringContext = BufferLoweringContext;

// Whether lowerNormOp handles `op`: a norm, a norm gradient, or a tg.cast
// or tg.add folded into one (above).
bool isLoweredAsNorm(mlir::Operation *op);

// Lowers `op` (isLoweredAsNorm); a folded cast or add emits nothing.
mlir::LogicalResult lowerNormOp(mlir::Operation *op, NormLoweringContext &ctx);

} // namespace tcc

#endif
