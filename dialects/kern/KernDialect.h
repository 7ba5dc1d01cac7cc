// The kern dialect: one op per kernel launch or library call, on buffers.
#ifndef TCC_DIALECTS_KERN_KERNDIALECT_H
#define TCC_DIALECTS_KERN_KERNDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/kern/KernOpsDialect.h.inc"
#include "dialects/kern/KernOpsEnums.h.inc"

#define GET_OP_CLASSES
#include "dialects/kern/KernOps.h.inc"

#endif
