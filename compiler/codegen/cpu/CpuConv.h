// CPU code for kern.conv2d / kern.pool2d (CpuConv.cpp), called by the CPU
// generator's op dispatch (CpuCodegen.cpp).
#ifndef TCC_COMPILER_CODEGEN_CPU_CPUCONV_H
#define TCC_COMPILER_CODEGEN_CPU_CPUCONV_H

#include "compiler/codegen/common/StepArguments.h"
#include "dialects/kern/KernDialect.h"
#include "llvm/Support/raw_ostream.h"

namespace tcc::codegen {

// One call of tcc_cpu::conv2d_forward / conv2d_input_grad /
// conv2d_weight_grad, or pool2d_forward / pool2d_backward (cpu/cpu_conv.h);
// adds the op's FLOPs to `flops`.
mlir::LogicalResult emitCpuConv2d(kern::Conv2dOp op, const ValueNames &names,
                                  llvm::raw_ostream &os, double &flops);
mlir::LogicalResult emitCpuPool2d(kern::Pool2dOp op, const ValueNames &names,
                                  llvm::raw_ostream &os, double &flops);

} // namespace tcc::codegen

#endif
