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

// The element type of batch norm's per-channel statistics, sums and
// partials for an input of `inputElement`: f32 for 16-bit floats, else the
// input's (kern.batch_norm_stats / _grad_sums; tg's rule is
// tg::build::batchNormStatsType).
mlir::Type batchNormStatsType(mlir::Type inputElement);

// Fills the body of a kern.elementwise: `scalars` are the block arguments
// (one per input), `flatIndex` the row-major position; appends the scalars
// to yield, one per output.
using ElementwiseBodyBuilder = llvm::function_ref<mlir::LogicalResult(
    mlir::OpBuilder &, mlir::ValueRange scalars, mlir::Value flatIndex,
    llvm::SmallVectorImpl<mlir::Value> &yielded)>;

// Builds a kern.elementwise reading `inputs` and writing `outputs`, its
// body by `body`; erases it again and fails when `body` fails. The input
// block arguments are located at `inputLocs` (one per input) when given,
// else at `loc`. The one builder of the op, for tg-lower-to-kern and
// kern-fuse-elementwise.
mlir::FailureOr<ElementwiseOp>
buildElementwise(mlir::OpBuilder &b, mlir::Location loc,
                 mlir::ValueRange inputs, mlir::ValueRange outputs,
                 ElementwiseBodyBuilder body,
                 llvm::ArrayRef<mlir::Location> inputLocs = {});

} // namespace tcc::kern

#endif
