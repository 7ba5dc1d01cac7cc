// A kern.gemm that tg-amp's fp8 precision marked (kern.fp8 = "<a>x<b>"):
// whether the cuda target runs it as a cuBLASLt FP8 product, and the
// scratch that takes in the step's shared workspace.
//
// The product: out (M, N) = op(a) (M, K) x op(b) (K, N), a folded batch
// counting in M. Each operand is cast to FP8 with a per-tensor scale from
// its own amax (current scaling: launch_fp8_quantize_current) into
// scratch, K-contiguous (cuBLASLt's FP8 products read only that layout:
// a transposed operand is cast through the transposing form), then
// tcc_cuda_host::gemm_fp8 multiplies them with fp32 accumulation and
// dequantizes with the two scales.
//
// Scratch, after the first kGemmWorkspaceBytes of the shared workspace
// (cuBLASLt's own): [a as FP8, M*K][b as FP8, N*K][2 x Fp8TensorScale],
// each part 256-byte aligned.
#ifndef TCC_COMPILER_CODEGEN_CUDA_FP8GEMM_H
#define TCC_COMPILER_CODEGEN_CUDA_FP8GEMM_H

#include <cstdint>
#include <string>

#include "dialects/kern/KernDialect.h"

namespace tcc::codegen::cuda {

struct Fp8Gemm {
  bool marked = false;  // the op carries kern.fp8
  std::string declined; // marked, but runs as before (16-bit or f32): why
  bool aE5M2 = false, bE5M2 = false; // each operand's format (else E4M3)
  int64_t m = 0, n = 0, k = 0;       // the product, a folded batch in m
  bool ta = false, tb = false;

  bool runs() const { return marked && declined.empty(); }
  static int64_t align(int64_t bytes) { return (bytes + 255) / 256 * 256; }
  // Offsets into the scratch (bytes).
  int64_t bOffset() const { return align(m * k); }
  int64_t scalesOffset() const { return bOffset() + align(n * k); }
  int64_t scratchBytes() const { return scalesOffset() + 256; }

  static Fp8Gemm of(kern::GemmOp g);
};

// The most scratch the FP8 products under `root` take (0 without any).
int64_t fp8GemmScratchBytes(mlir::Operation *root);

} // namespace tcc::codegen::cuda

#endif // TCC_COMPILER_CODEGEN_CUDA_FP8GEMM_H
