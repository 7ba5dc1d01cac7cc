// tg-amp's fp8 precision: which matrix products of @forward run in FP8.
#ifndef TCC_PASSES_PRECISION_FP8PRODUCTS_H
#define TCC_PASSES_PRECISION_FP8PRODUCTS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringRef.h"

namespace tcc {

// After the bf16 policy has run on `forward`: each tg.matmul that is a
// layer's product with a weight gets model::kFp8Attr = "e4m3xe4m3" and
// "; FP8 ..." appended to its tg.amp decision; one that stays bf16 gets
// "; not FP8: <why>". It stays bf16 when
//   - neither operand is a parameter (products of activations: attention
//     written out, whose softmax inputs want bf16),
//   - its result reaches the loss through reshapes and casts only, or its
//     weight is also an embedding table (the LM head, tied or not: logits
//     and their gradient are the most range-sensitive tensors of a step),
//   - it is not one 2-D product (a batched weight, a transposed batched
//     lhs), or M, N or K is not a multiple of 16 (cuBLASLt's FP8 rows must
//     be 16-byte aligned in the forward and in both gradient products),
//   - its node name or its weight's name contains one of `keep`'s
//     comma-separated names (tcc compile --fp8-keep).
void markFp8Products(mlir::func::FuncOp forward, llvm::StringRef keep);

} // namespace tcc

#endif // TCC_PASSES_PRECISION_FP8PRODUCTS_H
