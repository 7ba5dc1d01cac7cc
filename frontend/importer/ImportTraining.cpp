// The training recipe of a model file (optimizer, learning-rate schedule,
// clipping, micro-batches) -> module attributes. Every value is checked here,
// with a message naming the field, so passes and the runtime can trust them.
#include "frontend/importer/ImportTraining.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "dialects/common/HyperParameterRanges.h"
#include "dialects/common/ModelAttrs.h"
#include "dialects/common/ShapeHelpers.h"
#include "dialects/tg/TgDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "tcc_model.pb.h" // generated from frontend/proto/tcc_model.proto

using namespace mlir;

namespace tcc {
namespace {

// Micro-batches beyond this replicate the step body absurdly often; a model
// that wants more should raise its batch instead.
constexpr int64_t kMaxMicroBatches = 1024;

// "0.001", "-1": numbers in messages as a model file writes them.
class TrainingImporter {
public:
  TrainingImporter(const model::Model &model, ModuleOp module)
      : training_(model.training()), model_(model), module_(module),
        b_(module.getContext()) {}

  LogicalResult run() {
    if (failed(importOptimizer()) || failed(importSchedule()) ||
        failed(importGradClip()) || failed(importMicroBatches()))
      return failure();
    return success();
  }

private:
  InFlightDiagnostic error() {
    InFlightDiagnostic d = emitError(UnknownLoc::get(b_.getContext()));
    d << "training: ";
    return d;
  }

  // `value` must lie in `range` (HyperParameterRanges.h, shared with the
  // optimizer ops' verifiers), else an error naming `field`.
  LogicalResult checkRange(StringRef field, double value,
                           const model::HyperParameterRange &range) {
    if (!range.contains(value))
      return error() << field << " must be " << range.spelling << ", got "
                     << tcc::formatNumber(value);
    return success();
  }
  LogicalResult checkPositive(StringRef field, double value) {
    return checkRange(field, value, model::kPositive);
  }
  LogicalResult checkNonNegative(StringRef field, double value) {
    return checkRange(field, value, model::kNonNegative);
  }
  LogicalResult checkUnitInterval(StringRef field, double value) {
    return checkRange(field, value, model::kUnitInterval);
  }

  NamedAttribute f64(StringRef name, double value) {
    return b_.getNamedAttr(name, b_.getF64FloatAttr(value));
  }

  LogicalResult importOptimizer();
  LogicalResult importSchedule();
  LogicalResult importGradClip();
  LogicalResult importMicroBatches();

  const model::Training &training_;
  const model::Model &model_;
  ModuleOp module_;
  Builder b_;
  double learningRate_ = 0;
};

LogicalResult TrainingImporter::importOptimizer() {
  const model::Optimizer &opt = training_.optimizer();
  SmallVector<NamedAttribute> fields;
  switch (opt.kind_case()) {
  case model::Optimizer::kSgd: {
    const model::Optimizer::Sgd &sgd = opt.sgd();
    if (failed(checkPositive("sgd learning_rate", sgd.learning_rate())) ||
        failed(checkUnitInterval("sgd momentum", sgd.momentum())) ||
        failed(checkNonNegative("sgd weight_decay", sgd.weight_decay())))
      return failure();
    learningRate_ = sgd.learning_rate();
    fields = {b_.getNamedAttr("kind", b_.getStringAttr("sgd")),
              f64("learning_rate", sgd.learning_rate())};
    // Only what differs from plain SGD, so plain-SGD modules read as before.
    if (sgd.momentum() != 0)
      fields.push_back(f64("momentum", sgd.momentum()));
    if (sgd.weight_decay() != 0)
      fields.push_back(f64("weight_decay", sgd.weight_decay()));
    break;
  }
  case model::Optimizer::kAdamw: {
    const model::Optimizer::AdamW &adam = opt.adamw();
    // PyTorch's defaults for the fields left out.
    double beta1 = adam.has_beta1() ? adam.beta1() : 0.9;
    double beta2 = adam.has_beta2() ? adam.beta2() : 0.999;
    double eps = adam.has_eps() ? adam.eps() : 1e-8;
    if (failed(checkPositive("adamw learning_rate", adam.learning_rate())) ||
        failed(checkUnitInterval("adamw beta1", beta1)) ||
        failed(checkUnitInterval("adamw beta2", beta2)) ||
        failed(checkPositive("adamw eps", eps)) ||
        failed(checkNonNegative("adamw weight_decay", adam.weight_decay())))
      return failure();
    learningRate_ = adam.learning_rate();
    fields = {b_.getNamedAttr("kind", b_.getStringAttr("adamw")),
              f64("learning_rate", adam.learning_rate()),
              f64("beta1", beta1),
              f64("beta2", beta2),
              f64("eps", eps),
              f64("weight_decay", adam.weight_decay())};
    break;
  }
  default:
    return error() << "training.optimizer is not set (supported: sgd, adamw)";
  }
  module_->setAttr(model::kOptimizerAttr, b_.getDictionaryAttr(fields));
  return success();
}

LogicalResult TrainingImporter::importSchedule() {
  const model::LrSchedule &schedule = training_.lr_schedule();
  switch (schedule.kind_case()) {
  case model::LrSchedule::KIND_NOT_SET:
  case model::LrSchedule::kConstant:
    return success(); // no attribute: constant
  case model::LrSchedule::kWarmupCosine: {
    const model::LrSchedule::WarmupCosine &wc = schedule.warmup_cosine();
    if (wc.warmup_steps() < 0)
      return error() << "lr_schedule warmup_steps must be >= 0, got "
                     << wc.warmup_steps();
    if (wc.decay_steps() <= 0 || wc.decay_steps() < wc.warmup_steps())
      return error() << "lr_schedule decay_steps must be > 0 and >= "
                        "warmup_steps ("
                     << wc.warmup_steps() << "), got " << wc.decay_steps();
    if (!std::isfinite(wc.min_lr()) || wc.min_lr() < 0 ||
        wc.min_lr() > learningRate_)
      return error() << "lr_schedule min_lr must be in [0, learning_rate = "
                     << tcc::formatNumber(learningRate_) << "], got "
                     << tcc::formatNumber(wc.min_lr());
    module_->setAttr(
        model::kLrScheduleAttr,
        b_.getDictionaryAttr(
            {b_.getNamedAttr("kind", b_.getStringAttr("warmup_cosine")),
             b_.getNamedAttr("warmup_steps",
                             b_.getI64IntegerAttr(wc.warmup_steps())),
             b_.getNamedAttr("decay_steps",
                             b_.getI64IntegerAttr(wc.decay_steps())),
             f64("min_lr", wc.min_lr())}));
    return success();
  }
  }
  return error() << "lr_schedule has an unknown kind";
}

LogicalResult TrainingImporter::importGradClip() {
  double clip = training_.grad_clip();
  if (failed(checkNonNegative("grad_clip", clip)))
    return failure();
  if (clip > 0)
    module_->setAttr(model::kGradClipAttr, b_.getF64FloatAttr(clip));
  return success();
}

LogicalResult TrainingImporter::importMicroBatches() {
  if (!training_.has_micro_batches())
    return success();
  int64_t k = training_.micro_batches();
  if (k < 1 || k > kMaxMicroBatches)
    return error() << "micro_batches must be in [1, " << kMaxMicroBatches
                   << "], got " << k;
  if (k == 1)
    return success();
  // Each input is split along its leading (batch) dimension.
  for (const model::Input &in : model_.inputs())
    if (in.shape().dims_size() == 0)
      return error() << "micro_batches = " << k << " splits every input along "
                     << "its first (batch) dimension, but input '"
                     << in.name() << "' is a scalar";
  module_->setAttr(model::kMicroBatchesAttr, b_.getI64IntegerAttr(k));
  return success();
}

} // namespace

LogicalResult importTrainingRecipe(const model::Model &model, ModuleOp module) {
  return TrainingImporter(model, module).run();
}

} // namespace tcc
