// Patch convolutions (kernel == stride) as matrix products: a step of
// tg-conv-layout (PatchConvolutions.cpp says which and why).
#ifndef TCC_PASSES_LAYOUT_PATCHCONVOLUTIONS_H
#define TCC_PASSES_LAYOUT_PATCHCONVOLUTIONS_H

#include <string>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/SmallVector.h"

namespace tcc {

// Rewrites every patch convolution of `f` into reshape / transpose /
// matmul; one report line per rewrite.
llvm::SmallVector<std::string> rewritePatchConvolutions(mlir::func::FuncOp f);

} // namespace tcc

#endif // TCC_PASSES_LAYOUT_PATCHCONVOLUTIONS_H
