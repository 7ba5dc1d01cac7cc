//===- UnscaleGradients.cpp - loss scaling: unscale, check the gradients --===//
//
// With tg.loss_scaling on the module, tg-autodiff seeded the backward pass
// with the loss scale S (the f32 optimizer-state argument "loss_scale"), so
// every gradient result of @train_step is S times too large. Before clipping
// and the optimizer see them, as torch.cuda.amp.GradScaler.unscale_:
//
//   g        <- g * (1 / S)                    (every gradient result)
//   found_inf = sum over gradients of sum(g * g) is not finite
//
// found_inf holds when some element is inf or NaN, as GradScaler checks;
// it also holds (where GradScaler's check would not) when an unscaled
// gradient reaches about 1e19 in f32, far beyond any trainable magnitude.
// The sums of squares are exactly those tg-clip-grad-norm computes for the
// global norm, so with clipping the CSE after the recipe passes merges them
// and the check costs no pass over the gradients of its own.
//
// @train_step reports two f32 train outputs: "loss_scale" = S, and
// "skipped" = 1 if found_inf else 0. tg-update-loss-scale, after the
// optimizer, keeps the old parameters and state when "skipped" is 1 and
// updates S. Built from tg primitives. No-op without tg.loss_scaling.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "dialects/common/ModelAttrs.h"
#include "dialects/tg/TgStructuralBuilders.h"
#include "mlir/IR/Builders.h"
#include "passes/training/LossScaling.h"
#include "passes/training/TrainingUtils.h"

namespace tcc {
#define GEN_PASS_DEF_TGUNSCALEGRADIENTS
#include "passes/Passes.h.inc"
} // namespace tcc

using namespace mlir;
using namespace tcc;

namespace {

Type elementTypeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getElementType();
}

struct TgUnscaleGradientsPass
    : tcc::impl::TgUnscaleGradientsBase<TgUnscaleGradientsPass> {
  void runOnOperation() override {
    FailureOr<std::optional<training::ScaledTrainStep>> scaled =
        training::findScaledTrainStep(getOperation(), getArgument());
    if (failed(scaled))
      return signalPassFailure();
    if (!*scaled)
      return; // no loss scaling
    func::FuncOp step = (*scaled)->step;
    BlockArgument scale =
        training::findStepStateArgument(step, model::kLossScaleState);
    if (!scale) {
      step.emitError(getArgument())
          << ": @train_step has no \"" << model::kLossScaleState
          << "\" state; tg-autodiff adds it when the module has "
          << model::kLossScalingAttr;
      return signalPassFailure();
    }
    for (unsigned i = 0; i < step.getNumResults(); ++i)
      if (auto out =
              step.getResultAttrOfType<StringAttr>(i, model::kTrainOutputAttr);
          out && (out.getValue() == model::kLossScaleOutput ||
                  out.getValue() == model::kSkippedOutput)) {
        step.emitError(getArgument())
            << ": @train_step already reports " << out;
        return signalPassFailure();
      }

    auto ret = cast<func::ReturnOp>(step.getBody().front().getTerminator());
    OpBuilder b(ret);
    Location loc = NameLoc::get(b.getStringAttr("loss_scale unscale"));
    auto f32Scalar = RankedTensorType::get({}, b.getF32Type());
    // 1 / S once, as GradScaler does (exact for a power-of-two S), then in
    // each gradient element type that occurs.
    Value inverse = tg::build::div(
        b, loc, tg::build::scalar(b, loc, b.getF32Type(), 1.0), scale);
    llvm::DenseMap<Type, Value> inverseAs;
    auto inverseIn = [&](Type elementType) {
      Value &v = inverseAs[elementType];
      if (!v)
        v = elementType == b.getF32Type()
                ? inverse
                : tg::CastOp::create(b, loc,
                                     RankedTensorType::get({}, elementType),
                                     inverse)
                      .getResult();
      return v;
    };

    // inf or NaN when some unscaled gradient has an inf or NaN element (or
    // squares beyond f32); x - x is NaN exactly for those.
    Value sumOfSquares;
    SmallVector<Value> results;
    SmallVector<Attribute> attrs;
    for (unsigned i = 0; i < step.getNumResults(); ++i) {
      Value v = ret.getOperand(i);
      if (step.getResultAttr(i, model::kGradOfAttr)) {
        Type et = elementTypeOf(v);
        v = tg::build::mul(b, loc, v, inverseIn(et));
        // As tg-clip-grad-norm builds it (tg.mul v, v; reduce over all
        // axes), so that CSE merges the two.
        Value squares = tg::MulOp::create(b, loc, v.getType(), v, v);
        Value sum = tg::build::reduceAll(b, loc, squares);
        if (et != b.getF32Type())
          sum = tg::CastOp::create(b, loc, f32Scalar, sum);
        sumOfSquares =
            sumOfSquares ? tg::build::add(b, loc, sumOfSquares, sum) : sum;
      }
      results.push_back(v);
      attrs.push_back(step.getResultAttrDict(i));
    }
    Value skipped;
    if (sumOfSquares) {
      Value difference = tg::build::sub(b, loc, sumOfSquares, sumOfSquares);
      skipped = tg::build::indicator(
          b, loc, tg::build::notEqual(b, loc, difference, difference),
          b.getF32Type());
    } else { // nothing trainable
      skipped = tg::build::scalar(b, loc, b.getF32Type(), 0.0);
    }
    auto output = [&](Value v, StringRef name) {
      results.push_back(v);
      attrs.push_back(b.getDictionaryAttr(
          b.getNamedAttr(model::kTrainOutputAttr, b.getStringAttr(name))));
    };
    // S * 1, not the argument itself: lowering would copy an argument out
    // at the end of the step, after tg-update-loss-scale's in-place update.
    output(tg::build::mul(b, loc, scale,
                          tg::build::scalar(b, loc, b.getF32Type(), 1.0)),
           model::kLossScaleOutput);
    output(skipped, model::kSkippedOutput);
    training::setResults(step, results, attrs);
  }
};

} // namespace
