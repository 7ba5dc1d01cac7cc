// tg.attention / tg.attention_grad -> kern.attention / kern.attention_grad,
// for tg-lower-to-kern (LowerTgToKern.cpp), which owns the buffers.
#ifndef TCC_PASSES_LOWERING_LOWERATTENTION_H
#define TCC_PASSES_LOWERING_LOWERATTENTION_H

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLFunctionalExtras.h"

namespace tcc {

// How the attention lowering reaches the function lowering's state: the
// buffer of an already lowered tensor, a fresh kern.alloc of a buffer
// type, and the tensor -> buffer map the results go into.
struct AttentionLoweringContext {
  mlir::OpBuilder &builder;
  llvm::function_ref<mlir::Value(mlir::Value tensor)> bufferOf;
  llvm::function_ref<mlir::Value(mlir::Location, mlir::MemRefType)> allocate;
  llvm::DenseMap<mlir::Value, mlir::Value> &buffers;
  // The module's tg.deterministic (tcc compile --deterministic): sets
  // kern.attention_grad's `deterministic`.
  bool deterministic = false;
};

// Lowers `op`, a tg.attention or tg.attention_grad (an error on anything
// else).
mlir::LogicalResult lowerAttentionOp(mlir::Operation *op, AttentionLoweringContext &ctx);

} // namespace tcc

#endif
