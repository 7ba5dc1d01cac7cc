// Shared by the reference interpreter's core (TgInterpreter.cpp) and its
// op-group files (Interpret*Ops.cpp): index helpers (InterpreterSupport.cpp)
// and the group hooks. It does not include TgInterpreter.h: the core
// includes this header, not the other way round.
#ifndef TCC_INTERPRETER_INTERPRETERSUPPORT_H
#define TCC_INTERPRETER_INTERPRETERSUPPORT_H

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "interpreter/Tensor.h"
#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/ArrayRef.h"

namespace tcc::interp {

// Shortest exact form of a number for messages: "2", "-1", "0.5".
std::string numberStr(double x);
llvm::ArrayRef<int64_t> staticShape(mlir::Value v);
// Row-major multi-index of `flat` in `shape`, and back.
std::vector<int64_t> unravel(int64_t flat, llvm::ArrayRef<int64_t> shape);
int64_t ravel(llvm::ArrayRef<int64_t> index, llvm::ArrayRef<int64_t> shape);
// numpy broadcast of `in` to `shape`.
Tensor broadcast(const Tensor &in, llvm::ArrayRef<int64_t> shape);

// `x` rounded to nearest even in `semantics` (overflow gives +-inf, as IEEE),
// or by another `mode`.
double roundTo(double x, const llvm::fltSemantics &semantics,
               llvm::APFloat::roundingMode mode = llvm::APFloat::rmNearestTiesToEven);
// Whether values of `elementType` are rounded after every op: the floats
// narrower than f32 (bf16, f16). f32 and f64 results stay unrounded float64.
bool isRoundedElementType(mlir::Type elementType);
// Rounds every element of `t` to `elementType` when isRoundedElementType:
// an op with a bf16/f16 result computes in float64 from its (already rounded)
// operands and rounds once, as a compiled kernel computes in fp32 and rounds
// once when it stores.
void roundToElementType(Tensor &t, mlir::Type elementType);
// The same, except that each element goes to the representable neighbour
// below or above it, picked by counter_rng.h bits of (`seed`, `counter`++)
// (exact values stay; overflow still gives +-inf). With `includeF32`, f32
// results go to an f32 neighbour too (otherwise they stay unrounded float64).
// See interpret().
void roundToElementTypeAtRandom(Tensor &t, mlir::Type elementType, uint64_t seed,
                                uint64_t &counter, bool includeF32 = false);

// How far interpret()'s productErrorSide (+1, -1 or 0) moves a product
// element of `terms` terms whose magnitudes sum to `magnitude`: that sign
// times the bound on f32 accumulation's error, terms * 2^-24 * magnitude.
inline double productErrorShift(int side, int64_t terms, double magnitude) {
  return side * std::ldexp(static_cast<double>(terms) * magnitude, -24);
}

// gelu(x): the tanh approximation or the exact (erf) form.
double gelu(double x, bool tanhForm);
// gelu'(x), same forms.
double geluDerivative(double x, bool tanhForm);

// The values of one op's results, in order.
using OpResults = mlir::FailureOr<std::vector<Tensor>>;

// Wraps one computed tensor (or its failure) as an op's only result.
inline OpResults singleResult(mlir::FailureOr<Tensor> t) {
  if (mlir::failed(t))
    return mlir::failure();
  return std::vector<Tensor>{std::move(*t)};
}

// Each evaluates the ops of its group and returns std::nullopt for others.
std::optional<OpResults> evaluateElementwiseOp(mlir::Operation *op,
                                               llvm::ArrayRef<const Tensor *> in);
// The products (tg.matmul and its fused forms; the convolutions of
// evaluateVisionOp) take interpret()'s productErrorSide.
std::optional<OpResults> evaluateStructuralOp(mlir::Operation *op,
                                              llvm::ArrayRef<const Tensor *> in,
                                              int productErrorSide);
std::optional<OpResults> evaluateOptimizerOp(mlir::Operation *op,
                                             llvm::ArrayRef<const Tensor *> in);
std::optional<OpResults> evaluateAttentionOp(mlir::Operation *op,
                                             llvm::ArrayRef<const Tensor *> in);
std::optional<OpResults> evaluateVisionOp(mlir::Operation *op,
                                          llvm::ArrayRef<const Tensor *> in,
                                          int productErrorSide);
std::optional<OpResults> evaluatePositionOp(mlir::Operation *op,
                                            llvm::ArrayRef<const Tensor *> in);

} // namespace tcc::interp

#endif
