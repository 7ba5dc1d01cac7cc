// CPU code for the flash-attention ops (CpuAttention.cpp), called by the
// CPU generator's op dispatch (CpuCodegen.cpp).
#ifndef TCC_COMPILER_CODEGEN_CPU_CPUATTENTION_H
#define TCC_COMPILER_CODEGEN_CPU_CPUATTENTION_H

#include "compiler/codegen/common/StepArguments.h"
#include "dialects/kern/KernDialect.h"
#include "llvm/Support/raw_ostream.h"

namespace tcc::codegen {

// One call of tcc_cpu::attention_forward / attention_backward; adds the
// op's FLOPs to `flops`.
mlir::LogicalResult emitCpuAttention(kern::AttentionOp op, const ValueNames &names,
                                     llvm::raw_ostream &os, double &flops);
mlir::LogicalResult emitCpuAttentionGrad(kern::AttentionGradOp op, const ValueNames &names,
                                         llvm::raw_ostream &os, double &flops);

} // namespace tcc::codegen

#endif
