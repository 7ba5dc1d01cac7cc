// Names of the attributes that carry model-level facts through the pipeline:
// which function arguments are parameters (with their initializers), data
// inputs or hyper-parameters, and which results are the loss, gradients,
// updated parameters or eval outputs. One place, so importer, passes and
// codegen agree.
#ifndef TCC_DIALECTS_TG_TGMODELATTRS_H
#define TCC_DIALECTS_TG_TGMODELATTRS_H

#include "llvm/ADT/StringRef.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

namespace tcc::tg {

// Module attributes.
inline constexpr llvm::StringLiteral kModelNameAttr = "tg.model_name";
inline constexpr llvm::StringLiteral kOptimizerAttr = "tg.optimizer"; // dict

// Function names of the step.
inline constexpr llvm::StringLiteral kForwardFunc = "forward";
inline constexpr llvm::StringLiteral kTrainStepFunc = "train_step";

// Argument attributes.
inline constexpr llvm::StringLiteral kParamAttr = "tg.param"; // ParamInfo dict
inline constexpr llvm::StringLiteral kInputAttr = "tg.input"; // name
// A per-step scalar the runtime passes through tcc_step_args:
// "learning_rate" (f32), "step" (i64, 0-based optimizer step), "rng_seed"
// (i64, the run's seed for counter-based randomness such as dropout).
inline constexpr llvm::StringLiteral kHyperAttr = "tg.hyper";
// Optimizer state (explicit in the step, allocated and checkpointed by the
// runtime): {param = <param index>, name = "adam_m" | "adam_v" | "momentum"}.
inline constexpr llvm::StringLiteral kOptStateAttr = "tg.opt_state";

// Result attributes.
inline constexpr llvm::StringLiteral kLossAttr = "tg.loss";     // name of the loss
inline constexpr llvm::StringLiteral kOutputAttr = "tg.output"; // eval output name
inline constexpr llvm::StringLiteral kGradOfAttr = "tg.grad_of"; // param index
inline constexpr llvm::StringLiteral kUpdatesParamAttr = "tg.updates_param"; // param index
// Updated optimizer state, written in place: index among tg.opt_state args.
inline constexpr llvm::StringLiteral kUpdatesOptStateAttr = "tg.updates_opt_state";
// A value the train entry point reports besides the loss (e.g. "grad_norm",
// or gradients when compiled to emit them): tcc_step_args.train_outputs.
inline constexpr llvm::StringLiteral kTrainOutputAttr = "tg.train_output";

// A parameter's description, stored as a dictionary in kParamAttr.
struct ParamInfo {
  std::string name;
  std::string init = "zeros"; // zeros | ones | normal | uniform
  double scale = 0.0;
  uint64_t seed = 0;
  bool trainable = true;

  mlir::DictionaryAttr toAttr(mlir::Builder &b) const {
    return b.getDictionaryAttr({
        b.getNamedAttr("name", b.getStringAttr(name)),
        b.getNamedAttr("init", b.getStringAttr(init)),
        b.getNamedAttr("scale", b.getF64FloatAttr(scale)),
        b.getNamedAttr("seed", b.getI64IntegerAttr(static_cast<int64_t>(seed))),
        b.getNamedAttr("trainable", b.getBoolAttr(trainable)),
    });
  }

  // Returns nullopt when the dictionary misses a field or has a wrong type.
  static std::optional<ParamInfo> fromAttr(mlir::Attribute attr) {
    auto dict = llvm::dyn_cast_or_null<mlir::DictionaryAttr>(attr);
    if (!dict)
      return std::nullopt;
    auto name = dict.getAs<mlir::StringAttr>("name");
    auto init = dict.getAs<mlir::StringAttr>("init");
    auto scale = dict.getAs<mlir::FloatAttr>("scale");
    auto seed = dict.getAs<mlir::IntegerAttr>("seed");
    auto trainable = dict.getAs<mlir::BoolAttr>("trainable");
    if (!name || !init || !scale || !seed || !trainable)
      return std::nullopt;
    ParamInfo p;
    p.name = name.str();
    p.init = init.str();
    p.scale = scale.getValueAsDouble();
    p.seed = static_cast<uint64_t>(seed.getInt());
    p.trainable = trainable.getValue();
    return p;
  }
};

} // namespace tcc::tg

#endif
