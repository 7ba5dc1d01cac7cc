//===- SgdUpdate.cpp - SGD (with momentum, weight decay) in @train_step ---===//
//
// @train_step(params..., inputs...) -> (loss, ..., grads...)
//   becomes
// @train_step(params..., inputs..., lr [, momentum buffers...])
//     -> (loss, ..., updated params... [, updated buffers...])
//
// Exactly torch.optim.SGD (dampening 0, nesterov off): weight decay is L2,
// added to the gradient (not for parameters marked no_weight_decay); with
// momentum, each trainable parameter gets a buffer (tg.opt_state, zeros at
// the start) that the step updates in place (tg.updates_opt_state).
//
// The learning rate is an argument, not a constant: the runtime passes the
// schedule's value every step, so a resumed run continues the schedule.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "dialects/tg/TgModelAttrs.h"
#include "mlir/IR/Builders.h"
#include "passes/training/TrainingUtils.h"

namespace tcc {
#define GEN_PASS_DEF_TGSGDUPDATE
#include "passes/Passes.h.inc"
} // namespace tcc

using namespace mlir;
using namespace tcc;

namespace {

struct TgSgdUpdatePass : tcc::impl::TgSgdUpdateBase<TgSgdUpdatePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<func::FuncOp> maybeStep =
        training::getTrainStep(module, getArgument());
    if (failed(maybeStep))
      return signalPassFailure();
    FailureOr<StringRef> kind = training::optimizerKind(module, getArgument());
    if (failed(kind))
      return signalPassFailure();
    if (*kind != "sgd")
      return; // another optimizer's pass updates this module
    auto optimizer = module->getAttrOfType<DictionaryAttr>(tg::kOptimizerAttr);
    double momentum = training::optimizerField(optimizer, "momentum", 0.0);
    double weightDecay =
        training::optimizerField(optimizer, "weight_decay", 0.0);

    func::FuncOp step = *maybeStep;
    Block &body = step.getBody().front();
    OpBuilder b(body.getTerminator());
    Value lr = training::getOrAddHyperArgument(step, tg::kLearningRateHyper,
                                               b.getF32Type());
    SmallVector<BlockArgument> params = training::paramArguments(step);

    auto ret = cast<func::ReturnOp>(body.getTerminator());
    SmallVector<Value> results, stateResults;
    SmallVector<Attribute> resultAttrs, stateAttrs;
    for (unsigned i = 0; i < step.getNumResults(); ++i) {
      Value grad = ret.getOperand(i);
      auto gradOf = step.getResultAttrOfType<IntegerAttr>(i, tg::kGradOfAttr);
      if (!gradOf) { // the loss and train outputs stay as they are
        results.push_back(grad);
        resultAttrs.push_back(step.getResultAttrDict(i));
        continue;
      }
      int64_t p = gradOf.getInt();
      if (p < 0 || p >= static_cast<int64_t>(params.size())) {
        step.emitError(getArgument()) << ": gradient of unknown parameter " << p;
        return signalPassFailure();
      }
      BlockArgument param = params[p];
      auto info = tg::ParamInfo::fromAttr(
          step.getArgAttr(param.getArgNumber(), tg::kParamAttr));
      double wd = info && info->noWeightDecay ? 0.0 : weightDecay;
      Location loc = training::updateLoc(b, "sgd", info);
      Value updated;
      if (momentum == 0) {
        updated = tg::SgdUpdateOp::create(b, loc, grad.getType(), param, grad,
                                          lr, b.getF64FloatAttr(wd));
      } else {
        int64_t stateIndex = training::countOptStateArguments(step);
        Value buffer = training::appendOptStateArgument(step, param, p,
                                                        tg::kMomentumState);
        auto update = tg::MomentumUpdateOp::create(
            b, loc, param.getType(), param.getType(), param, grad, buffer, lr,
            b.getF64FloatAttr(momentum), b.getF64FloatAttr(wd));
        updated = update.getNewParam();
        stateResults.push_back(update.getNewMomentumBuffer());
        stateAttrs.push_back(b.getDictionaryAttr(b.getNamedAttr(
            tg::kUpdatesOptStateAttr, b.getI64IntegerAttr(stateIndex))));
      }
      results.push_back(updated);
      resultAttrs.push_back(b.getDictionaryAttr(
          b.getNamedAttr(tg::kUpdatesParamAttr, b.getI64IntegerAttr(p))));
    }
    results.append(stateResults);
    resultAttrs.append(stateAttrs);
    training::setResults(step, results, resultAttrs);
  }
};

} // namespace
