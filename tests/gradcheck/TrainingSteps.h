// Running whole training functions on the reference interpreter by the
// roles of their arguments and results (tg.param, tg.input, tg.hyper,
// tg.opt_state; tg.loss, tg.grad_of, tg.updates_param, ...), after the
// training-recipe passes: what TrainingTest and TrainingRecipeTest share.
#ifndef TCC_TESTS_GRADCHECK_TRAININGSTEPS_H
#define TCC_TESTS_GRADCHECK_TRAININGSTEPS_H

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "models/ModelBuilder.h"
#include "tests/gradcheck/GradCheck.h"

namespace tcc::gradcheck {

// The training-recipe passes, in the order given to runRecipePasses.
enum class RecipePass {
  Autodiff, Accumulate, Clip, Sgd, AdamW, EmitGradients,
  UnscaleGradients, UpdateLossScale, // loss scaling (tg.loss_scaling)
  AllReduce, // data parallelism (tg.data_parallel, tg.shard_optimizer)
  AmpBf16    // tg-amp at bf16 (before Autodiff)
};

mlir::LogicalResult runRecipePasses(mlir::ModuleOp module,
                                    std::initializer_list<RecipePass> passes);

// @train_step and @forward of `m`.
mlir::func::FuncOp trainStep(mlir::ModuleOp m);
mlir::func::FuncOp forwardFunc(mlir::ModuleOp m);

// Optimizer state of parameter `param` called `name` ("adam_m", ...);
// state of the whole step (the loss scale) has param kStepState.
using StateKey = std::pair<int64_t, std::string>;
inline constexpr int64_t kStepState = -1;

// Everything a train step reads and writes, by role rather than position.
struct StepValues {
  std::vector<Tensor> params;           // by parameter index
  std::map<std::string, Tensor> inputs; // by input name
  double learningRate = 0;
  int64_t step = 0;
  // Missing state starts where trun starts it: zeros, or the init_value of
  // state of the whole step.
  std::map<StateKey, Tensor> state;
};

struct StepResults {
  double loss = 0;
  std::map<int64_t, Tensor> grads;            // tg.grad_of
  std::map<int64_t, Tensor> updatedParams;    // tg.updates_param
  std::map<StateKey, Tensor> updatedState;    // tg.updates_opt_state
  std::map<std::string, Tensor> trainOutputs; // tg.train_output
  std::map<std::string, Tensor> outputs;      // tg.output
};

// Binds `values` to `f`'s arguments by their attributes, interprets `f`
// and sorts its results by their attributes.
StepResults runStep(mlir::func::FuncOp f, const StepValues &values);

// Random parameters and inputs for `f` (a @forward or @train_step).
StepValues randomValues(mlir::func::FuncOp f, std::mt19937_64 &rng);

// |a - b| <= tol * max(1, |b|) elementwise, with the first mismatch shown.
void expectClose(const Tensor &actual, const Tensor &expected, double tol,
                 const std::string &what);

double sumOfSquares(const std::map<int64_t, Tensor> &grads);

// models::buildMlp(options) with its parameters and float inputs in f64,
// `recipe` applied to the model, imported into `ctx`.
mlir::OwningOpRef<mlir::ModuleOp>
importMlpF64(mlir::MLIRContext &ctx, const models::MlpOptions &options,
             const std::function<void(model::Model &)> &recipe = {});

} // namespace tcc::gradcheck

#endif // TCC_TESTS_GRADCHECK_TRAININGSTEPS_H
