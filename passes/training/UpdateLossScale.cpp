//===- UpdateLossScale.cpp - loss scaling: skip on overflow, adapt S ------===//
//
// Runs after the optimizer passes on a module with tg.loss_scaling, whose
// @train_step reports "skipped" (tg-unscale-gradients). As
// torch.cuda.amp.GradScaler.step and .update:
//
//   p'    <- skipped ? p : p'        every updated parameter (tg.updates_param)
//   s'    <- skipped ? s : s'        every updated optimizer state
//   S'    = skipped ? S * backoff_factor
//         : good + 1 == growth_interval ? S * growth_factor (if finite, else S)
//         : S
//   good' = skipped or good + 1 == growth_interval ? 0 : good + 1
//   n'    = n + skipped
//
// S is the "loss_scale" state tg-autodiff added; good
// ("loss_scale_good_steps") and n ("loss_scale_skipped_steps", updates
// skipped so far) are new f32 state arguments starting at 0, and n' is the
// train output "skipped_steps". PyTorch's AdamW counts only the steps it
// applied: every tg.adamw_update gets step - n as its step. No-op without
// tg.loss_scaling.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "dialects/common/ModelAttrs.h"
#include "dialects/tg/TgStructuralBuilders.h"
#include "mlir/IR/Builders.h"
#include "passes/training/LossScaling.h"
#include "passes/training/TrainingUtils.h"

namespace tcc {
#define GEN_PASS_DEF_TGUPDATELOSSSCALE
#include "passes/Passes.h.inc"
} // namespace tcc

using namespace mlir;
using namespace tcc;

namespace {

namespace build = tg::build;

struct TgUpdateLossScalePass
    : tcc::impl::TgUpdateLossScaleBase<TgUpdateLossScalePass> {
  void runOnOperation() override {
    FailureOr<std::optional<training::ScaledTrainStep>> scaled =
        training::findScaledTrainStep(getOperation(), getArgument());
    if (failed(scaled))
      return signalPassFailure();
    if (!*scaled)
      return; // no loss scaling
    func::FuncOp step = (*scaled)->step;
    if (failed(update(step, (*scaled)->config)))
      return signalPassFailure();
  }

  LogicalResult update(func::FuncOp step,
                       const training::LossScalingConfig &config) {
    auto ret = cast<func::ReturnOp>(step.getBody().front().getTerminator());
    BlockArgument scale =
        training::findStepStateArgument(step, model::kLossScaleState);
    std::optional<unsigned> skippedResult;
    for (unsigned i = 0; i < step.getNumResults(); ++i) {
      auto out = step.getResultAttrOfType<StringAttr>(i, model::kTrainOutputAttr);
      if (out && out.getValue() == model::kSkippedOutput)
        skippedResult = i;
      if (out && out.getValue() == model::kSkippedStepsOutput)
        return step.emitError(getArgument())
               << ": @train_step already reports " << out;
    }
    if (!scale || !skippedResult)
      return step.emitError(getArgument())
             << ": @train_step has no \"" << model::kLossScaleState
             << "\" state or no \"" << model::kSkippedOutput
             << "\" output; run tg-autodiff and tg-unscale-gradients first";
    for (StringRef name :
         {model::kLossScaleGoodStepsState, model::kLossScaleSkippedStepsState})
      if (training::findStepStateArgument(step, name))
        return step.emitError(getArgument())
               << ": @train_step already has the state \"" << name << "\"";

    OpBuilder b(ret);
    Location loc = NameLoc::get(b.getStringAttr("loss_scale update"));
    Type f32 = b.getF32Type();
    auto f32Scalar = RankedTensorType::get({}, f32);
    auto constant = [&](double v) { return build::scalar(b, loc, f32, v); };
    Value skipped = ret.getOperand(*skippedResult); // 0 or 1
    Value found = build::notEqual(b, loc, skipped, constant(0.0));

    // Arguments an update writes back into, by their index among their kind.
    SmallVector<BlockArgument> params = training::paramArguments(step);
    SmallVector<BlockArgument> states;
    for (BlockArgument arg : step.getArguments())
      if (step.getArgAttr(arg.getArgNumber(), model::kOptStateAttr))
        states.push_back(arg);
    auto oldValue = [&](unsigned r) -> Value {
      if (auto p = step.getResultAttrOfType<IntegerAttr>(r, model::kUpdatesParamAttr))
        return p.getInt() < static_cast<int64_t>(params.size())
                   ? params[p.getInt()]
                   : Value();
      if (auto s = step.getResultAttrOfType<IntegerAttr>(r, model::kUpdatesOptStateAttr))
        return s.getInt() < static_cast<int64_t>(states.size())
                   ? states[s.getInt()]
                   : Value();
      return Value();
    };

    SmallVector<Value> results;
    SmallVector<Attribute> attrs;
    for (unsigned r = 0; r < step.getNumResults(); ++r) {
      Value v = ret.getOperand(r);
      bool isUpdate = step.getResultAttr(r, model::kUpdatesParamAttr) ||
                      step.getResultAttr(r, model::kUpdatesOptStateAttr);
      if (isUpdate) {
        Value old = oldValue(r);
        if (!old)
          return step.emitError(getArgument())
                 << ": result " << r << " updates an argument that does not exist";
        v = build::select(b, loc, found, old, v);
      }
      results.push_back(v);
      attrs.push_back(step.getResultAttrDict(r));
    }

    // The scale and its counters.
    BlockArgument good = training::appendStepStateArgument(
        step, f32Scalar, model::kLossScaleGoodStepsState, 0.0);
    BlockArgument skippedSoFar = training::appendStepStateArgument(
        step, f32Scalar, model::kLossScaleSkippedStepsState, 0.0);
    Value zero = constant(0.0);
    Value nextGood = build::add(b, loc, good, constant(1.0));
    Value grow = build::equal(b, loc, nextGood,
                              constant(static_cast<double>(config.growthInterval)));
    Value grown = build::mul(b, loc, scale, constant(config.growthFactor));
    // inf * 0 is NaN: GradScaler keeps the old scale when growing overflows.
    Value grownFinite =
        build::equal(b, loc, build::mul(b, loc, grown, zero), zero);
    Value scaleIfGood = build::select(
        b, loc, grow, build::select(b, loc, grownFinite, grown, scale), scale);
    Value newScale = build::select(
        b, loc, found, build::mul(b, loc, scale, constant(config.backoffFactor)),
        scaleIfGood);
    Value newGood = build::select(b, loc, found, zero,
                                  build::select(b, loc, grow, zero, nextGood));
    Value newSkippedSoFar = build::add(b, loc, skippedSoFar, skipped);
    auto updatesState = [&](Value v, BlockArgument arg) {
      results.push_back(v);
      attrs.push_back(b.getDictionaryAttr(b.getNamedAttr(
          model::kUpdatesOptStateAttr,
          b.getI64IntegerAttr(training::optStateIndex(step, arg)))));
    };
    updatesState(newScale, scale);
    updatesState(newGood, good);
    updatesState(newSkippedSoFar, skippedSoFar);
    results.push_back(newSkippedSoFar);
    attrs.push_back(b.getDictionaryAttr(b.getNamedAttr(
        model::kTrainOutputAttr, b.getStringAttr(model::kSkippedStepsOutput))));

    countOnlyAppliedAdamSteps(step, skippedSoFar);
    training::setResults(step, results, attrs);
    return success();
  }

  // Every tg.adamw_update reads step - (updates skipped so far) as its
  // step, so its bias corrections count the updates it applied. Computed in
  // f64, exact for any step count an i64 step ever reaches in practice.
  void countOnlyAppliedAdamSteps(func::FuncOp step, Value skippedSoFar) {
    SmallVector<tg::AdamWUpdateOp> updates;
    step.walk([&](tg::AdamWUpdateOp op) { updates.push_back(op); });
    if (updates.empty())
      return;
    OpBuilder b(updates.front());
    Location loc = NameLoc::get(b.getStringAttr("loss_scale update"));
    llvm::DenseMap<Value, Value> applied; // the step argument -> adjusted
    for (tg::AdamWUpdateOp op : updates) {
      Value counter = op.getStep();
      Value &adjusted = applied[counter];
      if (!adjusted) {
        auto f64Scalar = RankedTensorType::get({}, b.getF64Type());
        Value steps = tg::CastOp::create(b, loc, f64Scalar, counter);
        Value skips = tg::CastOp::create(b, loc, f64Scalar, skippedSoFar);
        adjusted = tg::CastOp::create(b, loc, counter.getType(),
                                      build::sub(b, loc, steps, skips));
      }
      op.getStepMutable().assign(adjusted);
    }
  }
};

} // namespace
