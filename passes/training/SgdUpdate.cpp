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

#include "dialects/common/ModelAttrs.h"
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
    FailureOr<training::OptimizerTarget> target =
        training::optimizerTarget(getOperation(), getArgument(), "sgd");
    if (failed(target))
      return signalPassFailure();
    if (!target->step)
      return; // another optimizer's pass updates this module
    DictionaryAttr optimizer = target->optimizer;
    double momentum = training::optimizerField(optimizer, "momentum", 0.0);
    double weightDecay =
        training::optimizerField(optimizer, "weight_decay", 0.0);

    func::FuncOp step = target->step;
    Block &body = step.getBody().front();
    OpBuilder b(body.getTerminator());
    Value lr = model::getOrAddHyperArgument(step, model::kLearningRateHyper,
                                            b.getF32Type());
    auto applySgd = [&](const training::GradientToApply &g) {
      double wd = g.info && g.info->noWeightDecay ? 0.0 : weightDecay;
      Location loc = training::updateLoc(b, "sgd", g.info);
      if (momentum == 0)
        return training::ParamUpdate{
            tg::SgdUpdateOp::create(b, loc, g.grad.getType(), g.param, g.grad,
                                    lr, b.getF64FloatAttr(wd)),
            {}};
      Value buffer = training::appendOptStateArgument(step, g, model::kMomentumState);
      auto update = tg::MomentumUpdateOp::create(
          b, loc, g.param.getType(), g.param.getType(), g.param, g.grad,
          buffer, lr, b.getF64FloatAttr(momentum), b.getF64FloatAttr(wd));
      return training::ParamUpdate{update.getNewParam(),
                                   {update.getNewMomentumBuffer()}};
    };
    if (failed(training::replaceGradientsWithUpdates(step, b, getArgument(),
                                                     applySgd)))
      return signalPassFailure();
  }
};

} // namespace
