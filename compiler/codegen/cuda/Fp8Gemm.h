// A kern.gemm that tg-amp's fp8 precision marked (kern.fp8 = "<a>x<b>"),
// or a kern.gemm_epilogue made of one with its residual add (no bias, no
// activation: out = op(a) x op(b) + residual, cuBLASLt's C with beta = 1):
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
#include <utility>

#include "dialects/kern/KernDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

namespace tcc::codegen::cuda {

struct Fp8Gemm {
  bool marked = false;  // the op carries kern.fp8
  std::string declined; // marked, but runs as before (16-bit or f32): why
  bool aE5M2 = false, bE5M2 = false; // each operand's format (else E4M3)
  int64_t m = 0, n = 0, k = 0;       // the product, a folded batch in m
  bool ta = false, tb = false;
  mlir::Value a, b, out;
  mlir::Value residual; // kern.gemm_epilogue's (C, out's type), else null

  bool runs() const { return marked && declined.empty(); }
  // Unmarked for any op but kern.gemm and kern.gemm_epilogue.
  static Fp8Gemm of(mlir::Operation *op);
};

// One operand of an FP8 product as its cast sees it: `rows` x `cols` as it
// lies in memory, K along cols unless `transposed`.
struct OperandCast {
  mlir::Value value;
  bool e5m2 = false;
  int64_t rows = 0, cols = 0;
  bool transposed = false;
};
inline OperandCast operandOf(const Fp8Gemm &f, int which) {
  if (which == 0) // op(a) (M, K): a is (M, K), or (K, M) transposed
    return {f.a, f.aE5M2, f.ta ? f.k : f.m, f.ta ? f.m : f.k, f.ta};
  // op(b)^T (N, K): b is (N, K) when transposed, else (K, N)
  return {f.b, f.bE5M2, f.tb ? f.n : f.k, f.tb ? f.k : f.n, !f.tb};
}

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

// Casts kept for later products. An FP8 operand that a later FP8 product
// of the same function reads again (the same bytes, shape, element type
// and format, in either layout) with nothing writing it in between — a
// weight's forward cast read by its dX product, an activation's by its dW
// product, a dY by its dX and dW products, SwiGLU's input by gate and up —
// is cast once, by its first product, and the layouts its later readers
// want go to the kept region (after the shared workspace, which cuDNN and
// the reductions reuse), where they stay until the last reader; a layout
// only the first product reads goes to a slot. Regions of casts whose
// lives do not overlap share bytes (first fit in the order the casts
// start). Only products in the function's top-level block take part.
//
// Batched casts: in a function with delayed scaling, a kept cast whose
// source nothing writes between the function's first FP8 product and the
// cast's first reader (the step's weights) is made at that first product,
// with the other such casts, by one launch_fp8_quantize_delayed_batch;
// its life starts there. Its first reader's own layout, when no later
// reader wants it, gets an entry of its own (`ownOf`: no scale record),
// alive only until that first reader.
struct Fp8KeptCast {
  int64_t elements = 0;            // rows x cols of the operand
  bool plain = false, transposed = false; // the layouts kept
  bool scale = true;               // false: a batched cast's own-layout entry
  bool batched = false;            // made by the batch at the first product
  int ownEntry = -1;               // batched: the entry holding the own layout (or -1: here)
  int64_t offset = 0;              // in the kept region: [plain][transposed][scale record]
  int64_t bytes() const;
  int64_t plainOffset() const { return offset; }
  int64_t transposedOffset() const;
  int64_t scaleOffset() const;
};
struct Fp8KeptPlan {
  llvm::SmallVector<Fp8KeptCast> casts;
  // (product, operand 0 = a / 1 = b) -> (cast, whether this is its first
  // reader, which casts it).
  llvm::DenseMap<std::pair<mlir::Operation *, int>, std::pair<int, bool>> uses;
  int64_t bytes = 0; // the region the function needs
  // The first FP8 product, where the batched casts (batchedCasts, in
  // order) are made; null when none is.
  mlir::Operation *batchAt = nullptr;
  llvm::SmallVector<int> batchedCasts;
  // Each cast's first reader and its operand (which views the source).
  llvm::DenseMap<int, std::pair<mlir::Operation *, int>> firstReader;
  // Casts made together (Fp8CastProducers.cpp): the kept casts of the
  // results of one elementwise op with several (SwiGLU's backward: dG and
  // dU), in one format and shape. The code generator may leave the op to
  // one cast of all of them at the first of their first readers (`maker`),
  // so each lives from there and keeps its own first reader's layout too.
  struct Group {
    mlir::Operation *op = nullptr; // the kern.elementwise
    llvm::SmallVector<int> casts;  // per result
    int maker = -1;
  };
  llvm::SmallVector<Group> groups;
  llvm::DenseMap<int, int> groupOf; // cast -> its group
  static Fp8KeptPlan of(mlir::func::FuncOp f);
};
// The kept region the functions under `root` need (the largest; 0: none).
int64_t fp8KeptCastBytes(mlir::Operation *root);
// tg-fp8-scaling's records of `f` (delayed scaling): the state argument,
// f32 [records, 32], and how many records it holds; (null, 0) without.
std::pair<mlir::Value, int64_t> fp8ScalingRecords(mlir::func::FuncOp f);

} // namespace tcc::codegen::cuda

#endif // TCC_COMPILER_CODEGEN_CUDA_FP8GEMM_H
