// kern (after kern-plan-memory) -> CUDA: one host translation unit (C++,
// calls kernels and cuBLASLt on the step's stream; implements the step ABI
// and its tcc_device_api) and kernel translation units (.cu) holding every
// distinct generated kernel once.
#ifndef TCC_COMPILER_CODEGEN_CUDA_CUDACODEGEN_H
#define TCC_COMPILER_CODEGEN_CUDA_CUDACODEGEN_H

#include <string>
#include <vector>

#include "compiler/codegen/cuda/CudaCodegenOptions.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"

namespace tcc {

struct GeneratedCudaStep {
  std::string hostSource;               // step_host.cpp
  std::vector<std::string> kernelUnits; // kernels_N.cu
  // One line per launch: entry, order, kernel, launch shape, FLOPs, bytes,
  // model node (tcc compile --dump-dir writes it as kernels.txt).
  std::string kernelList;
  double trainFlops = 0, evalFlops = 0;
  int64_t workspaceBytes = 0;
  int64_t launches = 0;        // kernel launches and library calls, both entries
  int64_t distinctKernels = 0; // generated kernels after deduplication
  // Attention call sites that try cuDNN first: the step then needs the cuDNN
  // unit (embedded::kCudnnAttentionUnit) linked in.
  int64_t cudnnAttentionSites = 0;
  // Epilogue products a CUTLASS sm90 instance can run (timed against
  // cuBLASLt at run time): with CudaCodegenOptions::cutlassSm90 the host
  // unit defines TCC_STEP_CUTLASS_SM90 and the driver links the CUTLASS
  // unit (embedded::kCutlassSm90Unit).
  int64_t cutlassSm90Sites = 0;
  // Attention sites tcc's sm90 kernels may run: with
  // CudaCodegenOptions::sm90Attention the host unit defines
  // TCC_STEP_SM90_ATTENTION and the driver links the sm90 attention units.
  int64_t sm90AttentionSites = 0;
};

mlir::FailureOr<GeneratedCudaStep>
generateCudaStep(mlir::ModuleOp module, const CudaCodegenOptions &options);

} // namespace tcc

#endif
