// Dynamic loss scaling (torch.cuda.amp.GradScaler) as module configuration:
// the tg.loss_scaling dictionary the driver writes and the loss-scaling
// passes (tg-autodiff's seed, tg-unscale-gradients, tg-update-loss-scale)
// read: the settings travel with the module (dumps show them; tcc-opt
// runs of the passes read them).
#ifndef TCC_PASSES_TRAINING_LOSSSCALING_H
#define TCC_PASSES_TRAINING_LOSSSCALING_H

#include <cstdint>
#include <optional>
#include <string>

#include "mlir/IR/Builders.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

namespace tcc::training {

// GradScaler's defaults. Scales stay powers of two when the start and both
// factors are, so scaling the loss and unscaling the gradients is exact.
struct LossScalingConfig {
  double initScale = 65536.0; // 2^16
  double growthFactor = 2.0;
  double backoffFactor = 0.5;
  int64_t growthInterval = 2000;

  mlir::DictionaryAttr toAttr(mlir::Builder &b) const;
};

// The counters live in f32 state, exact up to 2^24: intervals beyond that
// could never be reached exactly.
inline constexpr int64_t kMaxGrowthInterval = int64_t{1} << 24;

// What is wrong with `config` ("growth_interval must be ..."), empty if
// nothing.
std::string lossScalingProblem(const LossScalingConfig &config);

// The module's tg.loss_scaling: nullopt when absent; failure (an error
// naming `pass`) when malformed or out of range.
mlir::FailureOr<std::optional<LossScalingConfig>>
readLossScaling(mlir::ModuleOp module, llvm::StringRef pass);

// What the loss-scaling passes after autodiff start from: the module's
// configuration and its @train_step. nullopt when the module asks for no
// loss scaling; failure (an error naming `pass`) when the configuration is
// malformed or there is no train step.
struct ScaledTrainStep {
  LossScalingConfig config;
  mlir::func::FuncOp step;
};
mlir::FailureOr<std::optional<ScaledTrainStep>>
findScaledTrainStep(mlir::ModuleOp module, llvm::StringRef pass);

} // namespace tcc::training

#endif
