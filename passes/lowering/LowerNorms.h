// tg.layer_norm / tg.rms_norm and their gradient ops -> kern.layer_norm /
// kern.layer_norm_grad, and batch norm's two reductions -> kern.batch_norm_stats /
// kern.batch_norm_grad_sums, for tg-lower-to-kern (LowerTgToKern.cpp), which owns
// the buffers. Three tg.casts fold into these kernels (visible in the
// lowered IR as the kern op's element types):
//   - a cast of a norm's result that is the result's only user: the kernel
//     writes the cast's type (tg-amp's f32 norm followed by the bf16 matmul
//     operand becomes one kernel writing bf16);
//   - a widening cast read only as the `grad` of norm gradient ops: they
//     read its 16-bit source instead;
//   - the first float cast of a norm gradient's stored input gradient: the
//     kernel writes it too (kern `cast`);
// one tg.add:
//   - an add of a norm gradient's input_grad (its only use) and a value of
//     its type computed before the gradient (the residual stream's
//     gradient): the kernel adds it while writing (kern `plus`);
// and one tg.reduce_sum:
//   - the first sum over every axis but the last of the folded cast's
//     result, else of the stored input gradient (the bias gradient of the
//     products that write the residual stream): the kernel adds it up from
//     the values it writes (kern `sum`). tg-fuse-matmul-epilogue leaves
//     such a sum out of the weight gradient's GEMM (foldsIntoNormGradient).
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

// Whether tg-lower-to-kern will fold `sum` into the norm gradient kernel
// that writes its input (above), instead of lowering it as a reduction.
bool foldsIntoNormGradient(mlir::Operation *sum);

// Lowers `op` (isLoweredAsNorm); a folded cast, add or sum emits nothing.
mlir::LogicalResult lowerNormOp(mlir::Operation *op, NormLoweringContext &ctx);

} // namespace tcc

#endif
