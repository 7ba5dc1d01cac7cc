// The report of a pass that records its decisions as a string array on each
// function it changed (tg-remat, tg-chunk-loss-head): the header, then per
// function "function @name" and one indented line per decision.
#ifndef TCC_PASSES_COMMON_DECISIONREPORT_H
#define TCC_PASSES_COMMON_DECISIONREPORT_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

namespace tcc {

void writeFunctionDecisions(mlir::ModuleOp module, llvm::StringRef attr,
                            llvm::StringRef header, llvm::raw_ostream &os);

} // namespace tcc

#endif // TCC_PASSES_COMMON_DECISIONREPORT_H
