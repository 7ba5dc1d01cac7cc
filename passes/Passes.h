// tcc's passes. Declarations are generated from Passes.td.
#ifndef TCC_PASSES_PASSES_H
#define TCC_PASSES_PASSES_H

#include "dialects/kern/KernDialect.h"
#include "dialects/tg/TgDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

namespace tcc {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

} // namespace tcc

#endif
