// Bytes of a tensor as the passes' reports and estimates count them:
// elements x bytes per element (i1 counts one byte); 0 for anything that is
// not a statically shaped tensor of integers or floats.
#ifndef TCC_PASSES_COMMON_TENSORBYTES_H
#define TCC_PASSES_COMMON_TENSORBYTES_H

#include <cstdint>

#include "mlir/IR/BuiltinTypes.h"

namespace tcc {

inline int64_t tensorBytes(mlir::Type t) {
  auto ranked = mlir::dyn_cast<mlir::RankedTensorType>(t);
  if (!ranked || !ranked.hasStaticShape() || !ranked.getElementType().isIntOrFloat())
    return 0;
  return ranked.getNumElements() * ((ranked.getElementType().getIntOrFloatBitWidth() + 7) / 8);
}

} // namespace tcc

#endif // TCC_PASSES_COMMON_TENSORBYTES_H
