// Type queries the tg op files share (verifiers, builders, gradients, scalar
// bodies). Internal to dialects/tg.
#ifndef TCC_DIALECTS_TG_TGTYPEHELPERS_H
#define TCC_DIALECTS_TG_TGTYPEHELPERS_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Value.h"

namespace tcc::tg {

// The ranked tensor type of a tg value (tg verifies every operand is one).
inline mlir::RankedTensorType rtt(mlir::Value v) {
  return mlir::cast<mlir::RankedTensorType>(v.getType());
}

inline bool isFloatTensor(mlir::Value v) {
  return mlir::isa<mlir::FloatType>(rtt(v).getElementType());
}

} // namespace tcc::tg

#endif // TCC_DIALECTS_TG_TGTYPEHELPERS_H
