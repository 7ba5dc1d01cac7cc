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

#include "dialects/common/ModelAttrs.h"
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
    FailureOr<training::OptimizerTarget> target =
        training::optimizerTarget(getOperation(), getArgument(), "adamw");
    if (failed(target))
      return signalPassFailure();
    if (!target->step)
      return; // another optimizer's pass updates this module
    DictionaryAttr optimizer = target->optimizer;
    double beta1 = training::optimizerField(optimizer, "beta1", 0.9);
    double beta2 = training::optimizerField(optimizer, "beta2", 0.999);
    double eps = training::optimizerField(optimizer, "eps", 1e-8);
    double weightDecay =
        training::optimizerField(optimizer, "weight_decay", 0.0);

    func::FuncOp step = target->step;
    Block &body = step.getBody().front();
    OpBuilder b(body.getTerminator());
    Value lr = model::getOrAddHyperArgument(step, model::kLearningRateHyper,
                                            b.getF32Type());
    Value stepCounter = model::getOrAddHyperArgument(step, model::kStepHyper,
                                                     b.getIntegerType(64));
    auto applyAdamW = [&](const training::GradientToApply &g) {
      double wd = g.info && g.info->noWeightDecay ? 0.0 : weightDecay;
      // The moments: new state arguments, and their updated values.
      Value moments[2];
      StringRef names[2] = {model::kAdamMState, model::kAdamVState};
      for (int k = 0; k < 2; ++k)
        moments[k] = training::appendOptStateArgument(step, g, names[k]);
      Type t = g.param.getType();
      auto update = tg::AdamWUpdateOp::create(
          b, training::updateLoc(b, "adamw", g.info), t, t, t, g.param, g.grad,
          moments[0], moments[1], lr, stepCounter, b.getF64FloatAttr(beta1),
          b.getF64FloatAttr(beta2), b.getF64FloatAttr(eps),
          b.getF64FloatAttr(wd));
      return training::ParamUpdate{update.getNewParam(),
                                   {update.getNewM(), update.getNewV()}};
    };
    if (failed(training::replaceGradientsWithUpdates(step, b, getArgument(),
                                                     applyAdamW)))
      return signalPassFailure();
  }
};

} // namespace
