// The tg (tensor graph) dialect: ops, interfaces, and sumToShape, which
// gradients and lowering share. Shape helpers that need no tg
// (broadcastShapes, formatShape, ...) are in dialects/common/ShapeHelpers.h.
#ifndef TCC_DIALECTS_TG_TGDIALECT_H
#define TCC_DIALECTS_TG_TGDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/tg/TgOpsDialect.h.inc"
#include "dialects/tg/TgInterfaces.h.inc"

#define GET_OP_CLASSES
#include "dialects/tg/TgOps.h.inc"

namespace tcc::tg {

// Sums `grad` (of shape `grad`'s type) down to `targetType`, undoing a numpy
// broadcast: the gradient of an operand that was broadcast in the forward op.
mlir::Value sumToShape(mlir::OpBuilder &b, mlir::Location loc, mlir::Value grad,
                       mlir::RankedTensorType targetType);

} // namespace tcc::tg

#endif
