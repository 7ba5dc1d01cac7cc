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
// (cuBLASLt's own): kFp8Slots slots, each [an operand as FP8][the same
// transposed][its Fp8TensorScale and amax partials, 8 KiB], sized for the step's largest FP8
// operand. A slot outlives its product: a later product that reads the
// same buffer in the same format takes the cast from the slot (the
// backward's dY, cast for dX = dY W^T in both layouts at once, is read
// again transposed by dW = X^T dY; SwiGLU's gate and up read one x), as
// long as nothing wrote the buffer and no op that may use the shared
// workspace (cuDNN, multi-phase reductions) ran in between.
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
  static Fp8Gemm of(kern::GemmOp g);
};

inline constexpr int kFp8Slots = 4;

// One slot's layout: both forms of an operand of up to `elements` bytes,
// then its scale record.
struct Fp8Slot {
  int64_t elements = 0;
  static int64_t align(int64_t bytes) { return (bytes + 255) / 256 * 256; }
  int64_t transposedOffset() const { return align(elements); }
  int64_t scaleOffset() const { return 2 * align(elements); }
  // The record and the amax kernel's per-block maxima (the prelude's
  // kFp8ScaleBytes, common.cuh).
  static constexpr int64_t kScaleBytes = 8192;
  int64_t bytes() const { return scaleOffset() + kScaleBytes; }
  // The largest operand of the FP8 products under `root` (0: none).
  static Fp8Slot of(mlir::Operation *root);
};

// The scratch the FP8 products under `root` take (0 without any).
inline int64_t fp8GemmScratchBytes(mlir::Operation *root) {
  Fp8Slot slot = Fp8Slot::of(root);
  return slot.elements ? kFp8Slots * slot.bytes() : 0;
}

} // namespace tcc::codegen::cuda

#endif // TCC_COMPILER_CODEGEN_CUDA_FP8GEMM_H
