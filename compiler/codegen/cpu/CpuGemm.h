// CPU code for the matrix products (CpuGemm.cpp), called by the CPU
// generator's op dispatch (CpuCodegen.cpp): BLAS through the prelude
// (tcc_cpu::gemm, gemm_serial, gemm_via_float for 16-bit types) and the
// fused epilogues of cpu/cpu_gemm_epilogue.h.
#ifndef TCC_COMPILER_CODEGEN_CPU_CPUGEMM_H
#define TCC_COMPILER_CODEGEN_CPU_CPUGEMM_H

#include "compiler/codegen/common/StepArguments.h"
#include "dialects/kern/KernDialect.h"
#include "llvm/Support/raw_ostream.h"

namespace tcc::codegen {

// Each adds the op's FLOPs to `flops`.
// kern.gemm: out (batch..., M, N) = op(a) x op(b) per batch.
mlir::LogicalResult emitCpuGemm(kern::GemmOp g, const ValueNames &names,
                                llvm::raw_ostream &os, double &flops);
// kern.gemm_epilogue: act(op(a) x op(b) + bias) [+ residual], aux.
mlir::LogicalResult emitCpuGemmEpilogue(kern::GemmEpilogueOp g, const ValueNames &names,
                                        llvm::raw_ostream &os, double &flops);
// kern.gemm_dgelu: gelu'(pre) * (op(a) x op(b)).
mlir::LogicalResult emitCpuGemmDgelu(kern::GemmDgeluOp g, const ValueNames &names,
                                     llvm::raw_ostream &os, double &flops);
// kern.gemm_bias_grad: op(a) x b and the sums of b over its rows.
mlir::LogicalResult emitCpuGemmBiasGrad(kern::GemmBiasGradOp g, const ValueNames &names,
                                        llvm::raw_ostream &os, double &flops);

} // namespace tcc::codegen

#endif
