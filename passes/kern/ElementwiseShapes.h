// Elementwise kernels linked through reshape views, computed in one shape
// (their common refinement) so kern-fuse-elementwise can merge them.
#ifndef TCC_PASSES_KERN_ELEMENTWISESHAPES_H
#define TCC_PASSES_KERN_ELEMENTWISESHAPES_H

#include <string>

#include "dialects/kern/KernDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/SmallVector.h"

namespace tcc {

// Rewrites each cluster of kern.elementwise kernels of `f` that are linked
// by full-size buffers but have different shapes to compute in their
// common refinement (ElementwiseShapes.cpp); one line per cluster seen.
llvm::SmallVector<std::string> unifyElementwiseShapes(mlir::func::FuncOp f);

} // namespace tcc

#endif
