//===- ClipGradNorm.cpp - global-norm gradient clipping in @train_step ----===//
//
// With tg.grad_clip = max_norm on the module, as
// torch.nn.utils.clip_grad_norm_(params, max_norm):
//
//   total = sqrt(sum over gradients g of sum(g * g))
//   scale = min(max_norm / (total + 1e-6), 1)
//   g    <- g * scale                      (every gradient result)
//
// and @train_step reports `total`, the norm before clipping, as the train
// output tg.train_output = "grad_norm". Built from tg primitives (mul,
// reduce_sum, add, sqrt, div, min), so lowering and fusion need nothing new.
// With ZeRO-1 a gradient result marked tg.grad_shard is this rank's shard
// only: the squares of the shards are summed over the ranks (one scalar
// tg.all_reduce, sum) and added to those of the whole gradients, so every
// rank computes the same global norm.
// Without tg.grad_clip the module is left unchanged.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include <cmath>

#include "dialects/common/ModelAttrs.h"
#include "dialects/tg/TgStructuralBuilders.h"
#include "mlir/IR/Builders.h"
#include "passes/training/TrainingUtils.h"

namespace tcc {
#define GEN_PASS_DEF_TGCLIPGRADNORM
#include "passes/Passes.h.inc"
} // namespace tcc

using namespace mlir;
using namespace tcc;

namespace {

// torch.nn.utils.clip_grad_norm_ adds this to the norm before dividing.
constexpr double kNormEpsilon = 1e-6;

struct TgClipGradNormPass : tcc::impl::TgClipGradNormBase<TgClipGradNormPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto clip = module->getAttrOfType<FloatAttr>(model::kGradClipAttr);
    if (!clip)
      return; // no clipping
    double maxNorm = clip.getValueAsDouble();
    if (!(maxNorm > 0) || !std::isfinite(maxNorm)) {
      module.emitError(getArgument())
          << ": " << model::kGradClipAttr << " must be a finite number > 0, got "
          << maxNorm;
      return signalPassFailure();
    }
    FailureOr<func::FuncOp> maybeStep =
        training::getTrainStep(module, getArgument());
    if (failed(maybeStep))
      return signalPassFailure();
    func::FuncOp step = *maybeStep;
    auto ret = cast<func::ReturnOp>(step.getBody().front().getTerminator());

    SmallVector<unsigned> gradResults;
    for (unsigned i = 0; i < step.getNumResults(); ++i) {
      if (step.getResultAttr(i, model::kGradOfAttr))
        gradResults.push_back(i);
      if (auto out = step.getResultAttrOfType<StringAttr>(i, model::kTrainOutputAttr);
          out && out.getValue() == model::kGradNormOutput) {
        step.emitError(getArgument()) << ": @train_step already reports "
                                      << model::kGradNormOutput;
        return signalPassFailure();
      }
    }
    if (gradResults.empty())
      return; // nothing trainable

    // One element type for the norm: that of the gradients.
    Type elementType = cast<RankedTensorType>(
                           ret.getOperand(gradResults.front()).getType())
                           .getElementType();
    for (unsigned i : gradResults)
      if (cast<RankedTensorType>(ret.getOperand(i).getType()).getElementType() !=
          elementType) {
        step.emitError(getArgument())
            << ": gradients of different element types ("
            << elementType << " and "
            << cast<RankedTensorType>(ret.getOperand(i).getType())
                   .getElementType()
            << ") cannot share one norm";
        return signalPassFailure();
      }

    OpBuilder b(ret);
    Location loc = NameLoc::get(b.getStringAttr("grad_clip"));
    auto scalarType = RankedTensorType::get({}, elementType);
    // [0]: whole gradients, [1]: shards (summed over the ranks below).
    Value sums[2];
    for (unsigned i : gradResults) {
      Value g = ret.getOperand(i); // g is (...)
      auto type = cast<RankedTensorType>(g.getType());
      Value squares = tg::MulOp::create(b, loc, type, g, g);
      Value sum = tg::build::reduceAll(b, loc, squares);
      Value &total = sums[step.getResultAttr(i, model::kGradShardAttr) ? 1 : 0];
      total = total ? tg::AddOp::create(b, loc, scalarType, total, sum).getResult() : sum;
    }
    if (sums[1])
      sums[1] = tg::AllReduceOp::create(b, loc, scalarType, sums[1], b.getStringAttr("sum"));
    Value sumOfSquares =
        sums[0] && sums[1]
            ? tg::AddOp::create(b, loc, scalarType, sums[0], sums[1]).getResult()
            : (sums[0] ? sums[0] : sums[1]);
    Value norm = tg::SqrtOp::create(b, loc, scalarType, sumOfSquares);
    Value coefficient = tg::DivOp::create(
        b, loc, scalarType, tg::build::splat(b, loc, scalarType, maxNorm),
        tg::AddOp::create(b, loc, scalarType, norm,
                          tg::build::splat(b, loc, scalarType, kNormEpsilon)));
    Value scale = tg::MinOp::create(b, loc, scalarType, coefficient,
                                    tg::build::splat(b, loc, scalarType, 1.0));

    // Results: the loss and other outputs, grad_norm, the clipped gradients.
    SmallVector<Value> results;
    SmallVector<Attribute> attrs;
    bool normAdded = false;
    for (unsigned i = 0; i < step.getNumResults(); ++i) {
      Value v = ret.getOperand(i);
      if (step.getResultAttr(i, model::kGradOfAttr)) {
        if (!normAdded) {
          results.push_back(norm);
          attrs.push_back(b.getDictionaryAttr(b.getNamedAttr(
              model::kTrainOutputAttr, b.getStringAttr(model::kGradNormOutput))));
          normAdded = true;
        }
        v = tg::MulOp::create(b, loc, v.getType(), v, scale);
      }
      results.push_back(v);
      attrs.push_back(step.getResultAttrDict(i));
    }
    training::setResults(step, results, attrs);
  }
};

} // namespace
