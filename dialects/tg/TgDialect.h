// The tg (tensor graph) dialect: ops, interfaces, and shape helpers shared by
// verifiers, gradients and lowering.
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

// "[64, 784]": how every message in tcc prints a shape.
std::string formatShape(llvm::ArrayRef<int64_t> shape);
// "0.001", "1e+06" (printf %g): how messages print a number.
std::string formatNumber(double x);

// numpy broadcasting of two shapes; nullopt when incompatible.
std::optional<llvm::SmallVector<int64_t>>
broadcastShapes(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b);

// The shape left after reducing `axes` of `shape`.
llvm::SmallVector<int64_t> reducedShape(llvm::ArrayRef<int64_t> shape,
                                        llvm::ArrayRef<int64_t> axes,
                                        bool keepDims);

// Sums `grad` (of shape `grad`'s type) down to `targetType`, undoing a numpy
// broadcast: the gradient of an operand that was broadcast in the forward op.
mlir::Value sumToShape(mlir::OpBuilder &b, mlir::Location loc, mlir::Value grad,
                       mlir::RankedTensorType targetType);

} // namespace tcc::tg

#endif
