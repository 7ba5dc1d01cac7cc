// The kern dialect: one op per kernel launch or library call, on buffers.
#ifndef TCC_DIALECTS_KERN_KERNDIALECT_H
#define TCC_DIALECTS_KERN_KERNDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/kern/KernOpsDialect.h.inc"
#include "dialects/kern/KernOpsEnums.h.inc"

#define GET_OP_CLASSES
#include "dialects/kern/KernOps.h.inc"

namespace tcc::kern {

// The buffer `v` is a view of (kern.reshape, transitively), or `v` itself.
mlir::Value rootBuffer(mlir::Value v);

// Whether `op` writes `buffer` (as declared by its operands' memory effects).
bool writesBuffer(mlir::Operation *op, mlir::Value buffer);

// Bytes of one element of a buffer (i1 and other sub-byte types take one).
int64_t elementBytes(mlir::Type elementType);

} // namespace tcc::kern

#endif
