// The options of CUDA code generation, in a header of their own: both the
// step generator (CudaCodegen) and the per-entry emitter (CudaStepEmitter)
// read them, and the emitter must not include the generator it serves.
#ifndef TCC_COMPILER_CODEGEN_CUDA_CUDACODEGENOPTIONS_H
#define TCC_COMPILER_CODEGEN_CUDA_CUDACODEGENOPTIONS_H

#include <string>

namespace tcc {

struct CudaCodegenOptions {
  std::string arch = "sm_90"; // recorded in the descriptor
  bool tf32 = false;          // fp32 matrix products may use TF32 tensor cores
  int kernelUnits = 0;        // .cu files to spread kernels over; 0: automatic
  // Attention call sites cuDNN can run try it first (cuda/cudnn/; the
  // driver sets it when the cuDNN frontend's headers are there).
  bool cudnnAttention = false;
  std::string cudaLibDir; // searched for libcudnn.so.9 at run time, after the loader's path
  // bf16 GELU epilogue products may run CUTLASS's Hopper kernels where they
  // time faster than cuBLASLt's (the driver sets it for sm_90 when
  // CUTLASS's headers are there and --no-cutlass is not given).
  bool cutlassSm90 = false;
  // 16-bit attention sites cuDNN may run are also timed against tcc's own
  // Hopper kernels (cuda/sm90/) on their first call (the driver sets it
  // for sm_90 unless --no-sm90-attention is given).
  bool sm90Attention = false;
  // An elementwise op, norm, norm backward, rope or weight cast whose
  // 16-bit result only FP8 products read is computed by their cast instead
  // of launched (false: --no-fp8-cast-fusion; CudaStepEmitter::
  // fp8CastComputes, fp8NormCastComputes, fp8NormGradCastComputes,
  // fp8RopeCastComputes and fp8BatchComputes).
  bool fp8CastFusion = true;
};

} // namespace tcc

#endif
