// tg.matmul -> kern.gemm, and the fused products of tg-fuse-matmul-epilogue
// (tg.matmul_epilogue, tg.matmul_dgelu, tg.matmul_bias_grad) -> kern.gemm_
// epilogue / gemm_dgelu / gemm_bias_grad, for tg-lower-to-kern
// (LowerTgToKern.cpp), which owns the buffers. A fused product takes one
// weight matrix: a batched lhs folds into the rows ((batch * M, K) x (K, N),
// through kern.reshape views).
#ifndef TCC_PASSES_LOWERING_LOWERMATMULS_H
#define TCC_PASSES_LOWERING_LOWERMATMULS_H

#include "passes/lowering/LoweringContext.h"

namespace tcc {

// Whether lowerMatmulOp handles `op`.
bool isLoweredAsMatmul(mlir::Operation *op);

// Lowers `op` (isLoweredAsMatmul) through the function lowering's buffers.
mlir::LogicalResult lowerMatmulOp(mlir::Operation *op, BufferLoweringContext &ctx);

} // namespace tcc

#endif
