//===- AdamWUpdate.cpp - AdamW in @train_step -----------------------------===//
//
// @train_step(params..., inputs...) -> (loss, ..., grads...)
//   becomes
// @train_step(params..., inputs..., lr, step, m0, v0, m1, v1, ...)
//     -> (loss, ..., updated params..., m0', v0', m1', v1', ...)
//
// Exactly torch.optim.AdamW (tg.adamw_update): decoupled weight decay (not
// for parameters marked no_weight_decay), bias corrections with t = step + 1.
// Each trainable parameter gets two state tensors, tg.opt_state = {param = i,
// name = "adam_m" / "adam_v"}, zeros at the start, updated in place
// (tg.updates_opt_state = index among the state arguments). The learning
// rate and the 0-based step are per-step arguments (tg.hyper) the runtime
// passes, so schedules and resumption stay outside compiled code.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "dialects/tg/TgModelAttrs.h"
#include "mlir/IR/Builders.h"
#include "passes/training/TrainingUtils.h"

namespace tcc {
#define GEN_PASS_DEF_TGADAMWUPDATE
#include "passes/Passes.h.inc"
} // namespace tcc

using namespace mlir;
using namespace tcc;

namespace {

struct TgAdamWUpdatePass : tcc::impl::TgAdamWUpdateBase<TgAdamWUpdatePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<func::FuncOp> maybeStep =
        training::getTrainStep(module, getArgument());
    if (failed(maybeStep))
      return signalPassFailure();
    FailureOr<StringRef> kind = training::optimizerKind(module, getArgument());
    if (failed(kind))
      return signalPassFailure();
    if (*kind != "adamw")
      return; // another optimizer's pass updates this module
    auto optimizer = module->getAttrOfType<DictionaryAttr>(tg::kOptimizerAttr);
    double beta1 = training::optimizerField(optimizer, "beta1", 0.9);
    double beta2 = training::optimizerField(optimizer, "beta2", 0.999);
    double eps = training::optimizerField(optimizer, "eps", 1e-8);
    double weightDecay =
        training::optimizerField(optimizer, "weight_decay", 0.0);

    func::FuncOp step = *maybeStep;
    Block &body = step.getBody().front();
    OpBuilder b(body.getTerminator());
    Value lr = training::getOrAddHyperArgument(step, tg::kLearningRateHyper,
                                               b.getF32Type());
    Value stepCounter = training::getOrAddHyperArgument(
        step, tg::kStepHyper, b.getIntegerType(64));
    SmallVector<BlockArgument> params = training::paramArguments(step);
    int64_t stateCount = training::countOptStateArguments(step);

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

      // The moments: new state arguments, and their updated values.
      Value moments[2];
      StringRef names[2] = {tg::kAdamMState, tg::kAdamVState};
      for (int k = 0; k < 2; ++k)
        moments[k] = training::appendOptStateArgument(step, param, p, names[k]);
      Type t = param.getType();
      auto update = tg::AdamWUpdateOp::create(
          b, training::updateLoc(b, "adamw", info), t, t, t, param, grad,
          moments[0], moments[1], lr,
          stepCounter, b.getF64FloatAttr(beta1), b.getF64FloatAttr(beta2),
          b.getF64FloatAttr(eps), b.getF64FloatAttr(wd));
      results.push_back(update.getNewParam());
      resultAttrs.push_back(b.getDictionaryAttr(
          b.getNamedAttr(tg::kUpdatesParamAttr, b.getI64IntegerAttr(p))));
      for (Value next : {update.getNewM(), update.getNewV()}) {
        stateResults.push_back(next);
        stateAttrs.push_back(b.getDictionaryAttr(b.getNamedAttr(
            tg::kUpdatesOptStateAttr, b.getI64IntegerAttr(stateCount++))));
      }
    }
    results.append(stateResults);
    resultAttrs.append(stateAttrs);
    training::setResults(step, results, resultAttrs);
  }
};

} // namespace
