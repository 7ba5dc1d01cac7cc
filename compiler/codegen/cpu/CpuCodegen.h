// kern (after kern-plan-memory) -> one self-contained C++ source file that
// implements the step ABI (runtime/include/tcc/step_abi.h) on the CPU.
#ifndef TCC_COMPILER_CODEGEN_CPU_CPUCODEGEN_H
#define TCC_COMPILER_CODEGEN_CPU_CPUCODEGEN_H

#include <string>

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"

namespace tcc {

struct GeneratedStep {
  std::string source;      // step.cpp
  double trainFlops = 0;   // per call of the train entry point
  double evalFlops = 0;
  int64_t workspaceBytes = 0;
};

// Fails (with diagnostics on the offending op) if the module still holds
// anything the CPU generator does not know.
mlir::FailureOr<GeneratedStep> generateCpuStep(mlir::ModuleOp module);

} // namespace tcc

#endif
