// The bytes a buffer of the generated step occupies (the cuda target's
// memory facts about ops, used where code generation moves or fuses work
// across ops): a step argument's buffer, or a range of the shared
// workspace that the memory plan gave a kern.workspace_view (through any
// kern.reshape), and whether an op may read or write such bytes, by its
// memory effects.
#ifndef TCC_COMPILER_CODEGEN_CUDA_BUFFERFOOTPRINT_H
#define TCC_COMPILER_CODEGEN_CUDA_BUFFERFOOTPRINT_H

#include <cstdint>

#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"

namespace tcc::codegen::cuda {

struct Footprint {
  mlir::Value argument;       // a step argument's buffer, or
  int64_t begin = 0, end = 0; // bytes of the workspace
};

Footprint footprint(mlir::Value buffer);
bool overlaps(const Footprint &a, const Footprint &b);
// Overlapping from the same start (a cast's source read again).
bool sameStart(const Footprint &a, const Footprint &b);
// The same bytes of the workspace (neither a step argument): a buffer as
// a whole, not part of it.
bool sameWorkspaceBytes(const Footprint &a, const Footprint &b);
// Whether `op` may write / read `source` (an op without memory effects may).
bool mayWrite(mlir::Operation *op, const Footprint &source);
bool mayRead(mlir::Operation *op, const Footprint &source);

} // namespace tcc::codegen::cuda

#endif
