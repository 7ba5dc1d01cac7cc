#include "passes/training/LossScaling.h"

#include <cmath>
#include <cstdio>

#include "dialects/common/ModelAttrs.h"
#include "passes/training/TrainingUtils.h"

using namespace mlir;

namespace tcc::training {

DictionaryAttr LossScalingConfig::toAttr(Builder &b) const {
  return b.getDictionaryAttr(
      {b.getNamedAttr("init_scale", b.getF64FloatAttr(initScale)),
       b.getNamedAttr("growth_factor", b.getF64FloatAttr(growthFactor)),
       b.getNamedAttr("backoff_factor", b.getF64FloatAttr(backoffFactor)),
       b.getNamedAttr("growth_interval", b.getI64IntegerAttr(growthInterval))});
}

namespace {
std::string number(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", v);
  return text;
}
} // namespace

std::string lossScalingProblem(const LossScalingConfig &c) {
  // The scale is f32 state: it must be a finite f32 above zero.
  if (!(c.initScale > 0) || !std::isfinite(static_cast<float>(c.initScale)))
    return "init_scale must be a number > 0 that fits in f32 (at most "
           "3.4e38), got " + number(c.initScale);
  if (!(c.growthFactor > 1) || !std::isfinite(c.growthFactor))
    return "growth_factor must be a finite number > 1, got " +
           number(c.growthFactor);
  if (!(c.backoffFactor > 0 && c.backoffFactor < 1))
    return "backoff_factor must be in (0, 1), got " +
           number(c.backoffFactor);
  if (c.growthInterval < 1 || c.growthInterval > kMaxGrowthInterval)
    return "growth_interval must be from 1 to " +
           std::to_string(kMaxGrowthInterval) + ", got " +
           std::to_string(c.growthInterval);
  return "";
}

FailureOr<std::optional<LossScalingConfig>> readLossScaling(ModuleOp module,
                                                            StringRef pass) {
  Attribute attr = module->getAttr(model::kLossScalingAttr);
  if (!attr)
    return std::optional<LossScalingConfig>();
  auto dict = dyn_cast<DictionaryAttr>(attr);
  auto init = dict ? dict.getAs<FloatAttr>("init_scale") : FloatAttr();
  auto growth = dict ? dict.getAs<FloatAttr>("growth_factor") : FloatAttr();
  auto backoff = dict ? dict.getAs<FloatAttr>("backoff_factor") : FloatAttr();
  auto interval =
      dict ? dict.getAs<IntegerAttr>("growth_interval") : IntegerAttr();
  if (!init || !growth || !backoff || !interval)
    return module.emitError(pass)
           << ": " << model::kLossScalingAttr
           << " must be {init_scale, growth_factor, backoff_factor (f64), "
              "growth_interval (i64)}, got "
           << attr;
  LossScalingConfig c;
  c.initScale = init.getValueAsDouble();
  c.growthFactor = growth.getValueAsDouble();
  c.backoffFactor = backoff.getValueAsDouble();
  c.growthInterval = interval.getInt();
  if (std::string problem = lossScalingProblem(c); !problem.empty())
    return module.emitError(pass)
           << ": " << model::kLossScalingAttr << ": " << problem;
  return std::optional<LossScalingConfig>(c);
}

FailureOr<std::optional<ScaledTrainStep>>
findScaledTrainStep(ModuleOp module, StringRef pass) {
  FailureOr<std::optional<LossScalingConfig>> scaling = readLossScaling(module, pass);
  if (failed(scaling))
    return failure();
  if (!*scaling)
    return std::optional<ScaledTrainStep>();
  FailureOr<func::FuncOp> step = getTrainStep(module, pass);
  if (failed(step))
    return failure();
  return std::optional<ScaledTrainStep>(ScaledTrainStep{**scaling, *step});
}

} // namespace tcc::training
