// Loop layout both code generators share: strides (contiguous and through a
// broadcast), loop nests that merge what every operand walks contiguously,
// and the iteration layouts of the ops that are loops over buffers
// (kern.gemm's batch, kern.transpose / slice / concat as strided copies,
// kern.reduce's kept and reduced axes).
#ifndef TCC_COMPILER_CODEGEN_COMMON_LOOPLAYOUT_H
#define TCC_COMPILER_CODEGEN_COMMON_LOOPLAYOUT_H

#include <string>

#include "dialects/kern/KernDialect.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/raw_ostream.h"

namespace tcc::codegen {

using namespace mlir;

// Work (elements x operations) above which a loop gets an OpenMP pragma;
// below it, waking the second thread costs more than it saves.
inline constexpr double kParallelWork = 1 << 17;

// Row-major strides of `shape`.
SmallVector<int64_t> contiguousStrides(ArrayRef<int64_t> shape);

// Strides of `in` seen through a numpy broadcast to `outShape` (0 on
// broadcast dimensions).
SmallVector<int64_t> broadcastStrides(ArrayRef<int64_t> in, ArrayRef<int64_t> outShape);

// A loop nest over `sizes` and, for each operand, its strides over the
// loops. Built from an iteration shape by dropping size-1 dimensions and
// merging neighbours that every operand walks contiguously, so the common
// cases (same shapes, a bias row, a scalar) become one or two loops.
struct LoopNest {
  SmallVector<int64_t> sizes;
  SmallVector<SmallVector<int64_t>> strides; // [operand][loop]

  static LoopNest build(ArrayRef<int64_t> shape,
                        ArrayRef<SmallVector<int64_t>> operandStrides);

  int64_t numElements() const;

  // "i0 * 256 + i1" for operand k (0 when it does not move).
  std::string index(size_t k, int64_t base = 0) const;

  // The loops around `body` (lines at two spaces), with an OpenMP pragma
  // on the outer loops when `work` is large enough.
  void emit(llvm::raw_ostream &os, StringRef body, double work) const;
};

// The sizes of a kern.gemm, out (batch..., M, N) = op(a) x op(b) per batch
// with a's and b's batch dimensions broadcast, and the three ways both
// generators run it.
struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
  int64_t batchCount = 1, aBatch = 1, bBatch = 1; // product of each batch shape
  bool ta = false, tb = false;
  SmallVector<int64_t> batch, aBatchShape, bBatchShape;

  static GemmShape of(kern::GemmOp g);

  double flops() const { return 2.0 * batchCount * m * n * k; }

  // One matrix for b and a full batch of contiguous a rows: one product
  // with M' = batch * M.
  bool foldsBatchIntoM() const {
    return bBatch == 1 && aBatch == batchCount && (!ta || batchCount == 1);
  }
  // Each operand either fully batched or shared by the whole batch: one
  // strided-batched product (a shared operand's batch stride is 0).
  bool stridedBatch() const {
    return (aBatch == batchCount || aBatch == 1) && (bBatch == batchCount || bBatch == 1);
  }

  // Otherwise a loop over the batch: element offsets of a, b and out
  // (operands 0, 1, 2) through the broadcast strides.
  LoopNest batchLoop() const;
};

// kern.transpose, slice and concat as element copies: for each piece, the
// iteration shape and, per side, the buffer, its strides over that shape and
// its base offset (one piece per concat input).
struct StridedCopy {
  SmallVector<int64_t> shape;
  Value src, dst;
  SmallVector<int64_t> srcStrides, dstStrides;
  int64_t srcBase = 0, dstBase = 0;
};
SmallVector<StridedCopy> stridedCopies(Operation *op);

// A kern.reduce's input dimensions (size-1 ones dropped) split into kept
// and reduced ones, each with its contiguous input stride.
struct ReduceAxes {
  SmallVector<int64_t> keptSizes, keptStrides, reducedSizes, reducedStrides;
  int64_t count = 1; // input elements per output element
  // Every reduced dimension follows every kept one: each output element
  // reduces a contiguous run of `count` inputs.
  bool reducesContiguousTail = true;

  static ReduceAxes of(kern::ReduceOp r);
  // Of a reduction of `shape` over `axes`.
  static ReduceAxes of(ArrayRef<int64_t> shape, ArrayRef<int64_t> axes);
};

} // namespace tcc::codegen

#endif // TCC_COMPILER_CODEGEN_COMMON_LOOPLAYOUT_H
