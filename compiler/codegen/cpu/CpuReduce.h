// CPU code for kern.reduce (CpuReduce.cpp), called by the CPU generator's
// op dispatch and its multi-tensor sums (CpuCodegen.cpp).
#ifndef TCC_COMPILER_CODEGEN_CPU_CPUREDUCE_H
#define TCC_COMPILER_CODEGEN_CPU_CPUREDUCE_H

#include "compiler/codegen/common/StepArguments.h"
#include "dialects/kern/KernDialect.h"
#include "llvm/Support/raw_ostream.h"

namespace tcc::codegen {

// output = sum / mean / max of input over `axes`; adds the op's FLOPs.
mlir::LogicalResult emitCpuReduce(mlir::Value input, mlir::Value output, kern::ReduceKind kind,
                                  llvm::ArrayRef<int64_t> axes, const ValueNames &names,
                                  llvm::raw_ostream &os, double &flops);

} // namespace tcc::codegen

#endif
