// Gradient checking on the reference interpreter: @train_step (made by the
// real tg-autodiff pass) against central finite differences of @forward.
//
// Every check draws fresh random arguments. The seed is printed on failure;
// TCC_GRADCHECK_SEED=<seed> replays it (docs/interpreter.md).
#ifndef TCC_TESTS_GRADCHECK_GRADCHECK_H
#define TCC_TESTS_GRADCHECK_GRADCHECK_H

#include <cstdint>
#include <functional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "interpreter/TgInterpreter.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Support/LogicalResult.h"

namespace tcc::gradcheck {

using interp::Tensor;

// A context with the tg and func dialects loaded.
std::unique_ptr<mlir::MLIRContext> makeContext();

// The seed of one test: TCC_GRADCHECK_SEED when set, else std::random_device.
uint64_t testSeed();
// "seed N (rerun with TCC_GRADCHECK_SEED=N)", for SCOPED_TRACE.
std::string seedMessage(uint64_t seed);

//===----------------------------------------------------------------------===//
// Small @forward functions around one op
//===----------------------------------------------------------------------===//

// One argument of a test @forward: a parameter (trainable or frozen) or a
// data input. Float arguments are f64; `labels` inputs are i32.
struct ArgSpec {
  enum class Kind { Param, FrozenParam, Input, Labels };
  Kind kind;
  std::vector<int64_t> shape;

  static ArgSpec param(std::vector<int64_t> shape) {
    return {Kind::Param, std::move(shape)};
  }
  static ArgSpec frozen(std::vector<int64_t> shape) {
    return {Kind::FrozenParam, std::move(shape)};
  }
  static ArgSpec input(std::vector<int64_t> shape) {
    return {Kind::Input, std::move(shape)};
  }
  static ArgSpec labels(int64_t rows) { return {Kind::Labels, {rows}}; }
};

// Builds the ops under test from the @forward arguments; returns their value.
using BodyBuilder = std::function<mlir::Value(
    mlir::OpBuilder &, mlir::Location, llvm::ArrayRef<mlir::Value> args)>;

// @forward(args..., cotangent) -> loss with
//   loss = reduce_sum(body(args) * cotangent)
// `cotangent` is an f64 input shaped like body's value, so the gradient that
// flows into the op is random rather than all ones.
mlir::OwningOpRef<mlir::ModuleOp>
buildForwardModule(mlir::MLIRContext &ctx, llvm::ArrayRef<ArgSpec> args,
                   const BodyBuilder &body);

// Type-inferring builders for test bodies.
mlir::RankedTensorType f64Tensor(mlir::MLIRContext *ctx,
                                 llvm::ArrayRef<int64_t> shape);
mlir::Value matmul(mlir::OpBuilder &b, mlir::Location loc, mlir::Value lhs,
                   mlir::Value rhs, bool transposeLhs, bool transposeRhs);
mlir::Value add(mlir::OpBuilder &b, mlir::Location loc, mlir::Value lhs,
                mlir::Value rhs);
mlir::Value mul(mlir::OpBuilder &b, mlir::Location loc, mlir::Value lhs,
                mlir::Value rhs);
mlir::Value reduceSum(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                      llvm::ArrayRef<int64_t> axes, bool keepDims);
mlir::Value reduceMean(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                       llvm::ArrayRef<int64_t> axes, bool keepDims);

//===----------------------------------------------------------------------===//
// Running passes and checking
//===----------------------------------------------------------------------===//

// Runs tg-autodiff (and tg-sgd-update with `withSgd`) on `module`.
mlir::LogicalResult runTrainingPasses(mlir::ModuleOp module,
                                      bool withSgd = false);

// Runs tg-decompose (then CSE with `withCse`, as the pipeline does).
mlir::LogicalResult runDecompose(mlir::ModuleOp module, bool withCse);

// How many ops named `opName` ("tg.rope") the module holds, nested ones
// included: what a pass test expects a rewrite to have made or removed.
int64_t countOps(mlir::ModuleOp module, llvm::StringRef opName);

// Appends to `module` the function @scalar(operand elements..., i64 flat
// index) -> result elements whose body is `target`'s buildScalar (what
// lowering emits per element). Failure (with a test failure) when
// buildScalar fails or @scalar does not verify.
mlir::FailureOr<mlir::func::FuncOp>
buildScalarFunction(mlir::ModuleOp module, mlir::Operation *target);

// Random arguments for `f`: floats with magnitude in [0.1, 1.5) and random
// sign (never near relu's kink at 0), integers uniform in [0, numClasses).
std::vector<Tensor> randomArguments(mlir::func::FuncOp f, std::mt19937_64 &rng,
                                    int64_t numClasses);

struct GradCheckOptions {
  int64_t numClasses = 3; // range of integer (label) arguments
  double epsilon = 1e-6;  // finite-difference step
  double relativeTolerance = 1e-6;
  double absoluteTolerance = 1e-8;
  // Parameters (by parameter index) whose gradient must be exactly zero;
  // every other trainable parameter must have a nonzero gradient (norm >
  // 1e-6), so a rule that wrongly returns zeros cannot pass.
  std::set<int64_t> zeroGradientParams;
  // Redraws the arguments while this returns false (e.g. a relu input lies
  // within a finite-difference step of its kink).
  std::function<bool(llvm::ArrayRef<Tensor>)> acceptArguments;
};

// The checks on one parameter, kept for the caller's own expectations.
struct ParamGradient {
  int64_t paramIndex;
  std::string name;
  Tensor analytic; // from @train_step
  Tensor numeric;  // central finite differences of @forward
};

// Interprets @train_step of `module` (after tg-autodiff) on random arguments
// and compares each gradient with finite differences of @forward, through
// gtest expectations. Also checks that the gradients returned are exactly
// those of the trainable parameters, in order, and that both functions
// compute the same loss.
std::vector<ParamGradient> checkGradients(mlir::ModuleOp module, uint64_t seed,
                                          const GradCheckOptions &options = {});

// max over elements of |a - b| / max(1, |a|) (equal values, infinities
// included, differ by 0).
double maxRelativeDifference(const Tensor &a, const Tensor &b);

// A pass keeps the meaning of a module: interprets @forward and @train_step
// of `before` and of `after` (same signatures) on the same random arguments
// (integers in [0, numClasses); redrawn while `acceptArguments` says no, at
// most 100 times) and expects the same results within 1e-12
// (maxRelativeDifference), through gtest expectations.
void expectSameFunctions(mlir::ModuleOp before, mlir::ModuleOp after, uint64_t seed,
                         int64_t numClasses,
                         const std::function<bool(llvm::ArrayRef<Tensor>)> &acceptArguments = {});

// The function arguments that carry tg.param, in parameter-index order.
std::vector<unsigned> paramArgumentNumbers(mlir::func::FuncOp f);

} // namespace tcc::gradcheck

#endif
