// A reference evaluator for tg functions: runs a func.func of tg ops on
// concrete tensors, in float64, with plain loops.
//
// It is the yardstick the rest of the compiler is measured against (gradient
// checks, and comparisons with the generated CPU code), so it favours being
// obviously correct over being fast, and shares no code with the codegen
// kernels (compiler/codegen/cpu/cpu_prelude.h).
#ifndef TCC_INTERPRETER_TGINTERPRETER_H
#define TCC_INTERPRETER_TGINTERPRETER_H

#include <cstdint>
#include <optional>
#include <vector>

#include "interpreter/Tensor.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/ArrayRef.h"

namespace tcc::interp {

// Evaluates `f` (one block of tg ops ending in func.return) on `args` and
// returns its results in order. Fails, with a diagnostic, when an argument
// does not match the function type, when the body holds an op the
// interpreter does not know, or when an op cannot be evaluated (e.g. a label
// outside [0, C) in softmax_cross_entropy).
//
// bf16/f16 results round to nearest even, as a kernel stores them. With
// `randomRoundingSeed`, each op's bf16/f16 results round instead to either
// neighbour at random (the seed picks the pattern; arguments still round to
// nearest): comparing such runs with the nearest-rounded one measures how far
// a result moves when its 16-bit roundings move, which is what a compiled step
// that rounds at other points (after fusing ops) may differ by. With
// `randomlyRoundF32` as well, f32 results (otherwise kept as unrounded
// float64) go to a random f32 neighbour too: the same measure for an f32
// step, whose kernels round every result, where a value computed with
// cancellation turns an ulp of rounding into far more than f32's precision.
//
// `productErrorSide` +1 or -1 moves every element of every product
// (tg.matmul and its fused forms, the convolutions and their gradients) by
// that sign times the bound on f32 accumulation's error, K * 2^-24 * sum
// over its K terms of |a_ik * b_kj|, which no
// summation order of a kernel exceeds (to first order). Rounding probes move
// a value by an ulp; this moves it as far as a compiled product may land
// from the exact product of its operands, so a value within that distance
// of a kink (relu's zero, a max) crosses it in one of the two runs, as it
// may in the kernel.
mlir::FailureOr<std::vector<Tensor>>
interpret(mlir::func::FuncOp f, llvm::ArrayRef<Tensor> args,
          std::optional<uint64_t> randomRoundingSeed = std::nullopt,
          bool randomlyRoundF32 = false, int productErrorSide = 0);

} // namespace tcc::interp

#endif
