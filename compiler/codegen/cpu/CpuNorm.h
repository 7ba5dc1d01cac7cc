// CPU code for the fused norm ops (CpuNorm.cpp), called by the CPU
// generator's op dispatch (CpuCodegen.cpp).
#ifndef TCC_COMPILER_CODEGEN_CPU_CPUNORM_H
#define TCC_COMPILER_CODEGEN_CPU_CPUNORM_H

#include "compiler/codegen/common/StepArguments.h"
#include "dialects/kern/KernDialect.h"
#include "llvm/Support/raw_ostream.h"

namespace tcc::codegen {

// One call of tcc_cpu::layer_norm_forward / layer_norm_backward
// (cpu/cpu_norm.h); adds the op's FLOPs to `flops`.
mlir::LogicalResult emitCpuLayerNorm(kern::LayerNormOp op, const ValueNames &names,
                                     llvm::raw_ostream &os, double &flops);
mlir::LogicalResult emitCpuLayerNormGrad(kern::LayerNormGradOp op, const ValueNames &names,
                                         llvm::raw_ostream &os, double &flops);

// One call of tcc_cpu::batch_norm_stats / batch_norm_grad_sums.
mlir::LogicalResult emitCpuBatchNormStats(kern::BatchNormStatsOp op, const ValueNames &names,
                                          llvm::raw_ostream &os, double &flops);
mlir::LogicalResult emitCpuBatchNormGradSums(kern::BatchNormGradSumsOp op,
                                             const ValueNames &names, llvm::raw_ostream &os,
                                             double &flops);

} // namespace tcc::codegen

#endif
