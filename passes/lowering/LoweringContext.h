// How a lowering of one op family (LowerNorms.cpp, LowerMatmuls.cpp)
// reaches tg-lower-to-kern's function lowering (LowerTgToKern.cpp), which
// owns the buffers: the builder at the op, the buffer of an already lowered
// tensor (constants materialized on demand), a new kern.alloc, and the map
// the lowered op records its results' buffers in; and the buffer type of a
// tensor, which all of them use.
#ifndef TCC_PASSES_LOWERING_LOWERINGCONTEXT_H
#define TCC_PASSES_LOWERING_LOWERINGCONTEXT_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLFunctionalExtras.h"

namespace tcc {

// The buffer type of a ranked tensor type: a memref of its shape and
// element type.
inline mlir::MemRefType bufferTypeOf(mlir::Type tensorType) {
  auto t = mlir::cast<mlir::RankedTensorType>(tensorType);
  return mlir::MemRefType::get(t.getShape(), t.getElementType());
}

struct BufferLoweringContext {
  mlir::OpBuilder &builder;
  llvm::function_ref<mlir::Value(mlir::Value tensor)> bufferOf;
  llvm::function_ref<mlir::Value(mlir::Location, mlir::MemRefType)> allocate;
  llvm::DenseMap<mlir::Value, mlir::Value> &buffers;
};

} // namespace tcc

#endif
