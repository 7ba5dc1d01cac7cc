//===- AllReduceGradients.cpp - data parallelism: average over the ranks --===//
//
// With tg.data_parallel on the module (tcc compile --data-parallel), each
// rank runs @train_step on its own rows of the global batch. The loss is a
// mean over rows, and the ranks' shares are equal, so the gradient of the
// global batch is the mean over the ranks of each rank's gradient, and its
// loss the mean of theirs:
//
//   g    <- all_reduce(g, mean)      (every gradient result, tg.grad_of)
//   loss <- all_reduce(loss, mean)   (the tg.loss result)
//
// right after autodiff and micro-batch accumulation, before unscaling,
// clipping and the optimizer, so the grad-norm clip, the loss-scale
// overflow check and the update see the global gradients, the same on every
// rank: the parameters stay identical across ranks without being sent. Each
// tg.all_reduce becomes a call of the runtime's collectives
// (tcc_step_abi.h); one rank (no collectives) leaves the values as they
// are. No-op without tg.data_parallel.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "dialects/common/ModelAttrs.h"
#include "mlir/IR/Builders.h"
#include "passes/training/TrainingUtils.h"

namespace tcc {
#define GEN_PASS_DEF_TGALLREDUCEGRADIENTS
#include "passes/Passes.h.inc"
} // namespace tcc

using namespace mlir;
using namespace tcc;

namespace {

struct TgAllReduceGradientsPass
    : tcc::impl::TgAllReduceGradientsBase<TgAllReduceGradientsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (!module->hasAttr(model::kDataParallelAttr))
      return;
    FailureOr<func::FuncOp> step = training::getTrainStep(module, getArgument());
    if (failed(step))
      return signalPassFailure();
    auto ret = cast<func::ReturnOp>(step->getBody().front().getTerminator());
    OpBuilder b(ret);
    int64_t reduced = 0;
    for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
      bool gradient = static_cast<bool>(step->getResultAttr(i, model::kGradOfAttr));
      bool loss = static_cast<bool>(step->getResultAttr(i, model::kLossAttr));
      if (!gradient && !loss)
        continue;
      Value v = ret.getOperand(i);
      auto mean = tg::AllReduceOp::create(b, v.getLoc(), v.getType(), v, b.getStringAttr("mean"));
      ret.setOperand(i, mean.getResult());
      ++reduced;
    }
    if (reduced == 0) {
      step->emitError(getArgument()) << ": @train_step returns no gradient or loss to reduce";
      return signalPassFailure();
    }
  }
};

} // namespace
