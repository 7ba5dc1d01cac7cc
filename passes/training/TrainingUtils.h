// Helpers shared by the training-recipe passes (accumulation, clipping,
// optimizers, gradient outputs): finding @train_step and its parameters,
// optimizer-state arguments, and replacing its results. Appending arguments
// (tg.hyper ones included) is in dialects/common/FuncArguments.h, which the
// importer shares.
#ifndef TCC_PASSES_TRAINING_TRAININGUTILS_H
#define TCC_PASSES_TRAINING_TRAININGUTILS_H

#include <optional>

#include "dialects/common/FuncArguments.h"
#include "dialects/common/ModelAttrs.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace tcc::training {

// @train_step of `module`, or an error "<pass>: no @train_step (run
// tg-autodiff first)".
mlir::FailureOr<mlir::func::FuncOp> getTrainStep(mlir::ModuleOp module,
                                                 llvm::StringRef pass);

// The arguments carrying tg.param, in parameter-index order.
llvm::SmallVector<mlir::BlockArgument> paramArguments(mlir::func::FuncOp f);

// The number of tg.opt_state arguments of `f` (the index the next gets).
int64_t countOptStateArguments(mlir::func::FuncOp f);


// Appends optimizer state of the whole step (no parameter), a tensor of
// `type` called `name` that starts at `initValue` (the loss scale and its
// counters).
mlir::BlockArgument appendStepStateArgument(mlir::func::FuncOp f,
                                            mlir::Type type,
                                            llvm::StringRef name,
                                            double initValue);

// The optimizer-state argument of the whole step called `name`; null when
// `f` has none.
mlir::BlockArgument findStepStateArgument(mlir::func::FuncOp f,
                                          llvm::StringRef name);

// The index among the tg.opt_state arguments of `f` of the argument `arg`.
int64_t optStateIndex(mlir::func::FuncOp f, mlir::BlockArgument arg);

// "adamw fc1.weight": the location of a parameter's update (dumps, generated
// code comments and messages name the parameter).
mlir::Location updateLoc(mlir::OpBuilder &b, llvm::StringRef optimizer,
                         const std::optional<model::ParamInfo> &info);

// The parameter a gradient result with tg.grad_of = `paramIndex` belongs
// to: its argument among `params` (paramArguments) and its tg.param spec.
// An index outside `params`, or a missing spec when `spec` is Required, is an
// error "<passName>: gradient of unknown parameter <paramIndex>" on `step`.
struct GradientParameter {
  mlir::BlockArgument param;
  std::optional<model::ParamInfo> info;
};
enum class ParamSpec { Optional, Required };
mlir::FailureOr<GradientParameter>
gradientParameter(mlir::func::FuncOp step,
                  llvm::ArrayRef<mlir::BlockArgument> params,
                  int64_t paramIndex, llvm::StringRef passName, ParamSpec spec);

// A gradient result of @train_step, with the parameter it belongs to.
// ZeRO-1 (shardRanks = N > 0, the gradient's tg.grad_shard): `grad` is this
// rank's 1/N of the gradient and `param` the same shard of the parameter
// (tg.rank_shard), both 1-D; the optimizer updates them as any parameter.
struct GradientToApply {
  mlir::Value param; // the parameter's argument, or this rank's shard of it
  int64_t paramIndex;
  mlir::Value grad;
  std::optional<model::ParamInfo> info; // the parameter's tg.param spec
  int64_t shardRanks = 0;
};

// Appends the optimizer-state argument `name` ("adam_m", "momentum", ...) of
// the parameter `g` updates, shaped like g.param (a shard with ZeRO-1: its
// tg.opt_state records shard_ranks = N).
mlir::BlockArgument appendOptStateArgument(mlir::func::FuncOp f,
                                           const GradientToApply &g,
                                           llvm::StringRef name);

// What an optimizer makes of one gradient: the updated parameter, and the
// updated values of the optimizer-state arguments it appended for it (in
// the order it appended them).
struct ParamUpdate {
  mlir::Value newParam;
  llvm::SmallVector<mlir::Value, 2> newState;
};

// The skeleton every optimizer pass shares: replaces each gradient result
// of `step` (tg.grad_of) by `update`'s new parameter (tg.updates_param;
// with ZeRO-1, the all-gather of the updated shards),
// keeps the loss and train outputs, and appends the new optimizer state
// (tg.updates_opt_state = the state argument's index). A gradient of an
// unknown parameter is an error "<passName>: ..." on `step`.
mlir::LogicalResult replaceGradientsWithUpdates(
    mlir::func::FuncOp step, mlir::OpBuilder &b, llvm::StringRef passName,
    llvm::function_ref<ParamUpdate(const GradientToApply &)> update);

// Makes `f` return `results` with result attributes `attrs` (one per
// result), updating the function type.
void setResults(mlir::func::FuncOp f, llvm::ArrayRef<mlir::Value> results,
                llvm::ArrayRef<mlir::Attribute> attrs);

// A field of the module's tg.optimizer dictionary: its f64 value, `dflt`
// when absent.
double optimizerField(mlir::DictionaryAttr optimizer, llvm::StringRef name,
                      double dflt);

// The kind of the module's tg.optimizer ("sgd", "adamw"), or an error
// naming `pass` when the module has none.
mlir::FailureOr<llvm::StringRef> optimizerKind(mlir::ModuleOp module,
                                               llvm::StringRef pass);

// For an optimizer pass: the train step of `module` and its tg.optimizer
// dictionary when the module's optimizer is `kind`; a null step (success)
// when another optimizer's pass owns the module; failure (with an error
// naming `pass`) when the module has no train step or no optimizer.
struct OptimizerTarget {
  mlir::func::FuncOp step;
  mlir::DictionaryAttr optimizer;
};
mlir::FailureOr<OptimizerTarget> optimizerTarget(mlir::ModuleOp module,
                                                 llvm::StringRef pass,
                                                 llvm::StringRef kind);


} // namespace tcc::training

#endif
