//===- StripTrainOnlyOps.cpp - eval semantics for @forward ----------------===//
//
// @forward is the eval function, but tg-autodiff clones it into @train_step,
// so ops that only act while training (dropout) are written into it. After
// autodiff this pass makes @forward an eval function: every tg.dropout is
// replaced by its input. @train_step keeps them.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "dialects/common/ModelAttrs.h"

namespace tcc {
#define GEN_PASS_DEF_TGSTRIPTRAINONLYOPS
#include "passes/Passes.h.inc"
} // namespace tcc

using namespace mlir;
using namespace tcc;

namespace {

struct TgStripTrainOnlyOpsPass
    : tcc::impl::TgStripTrainOnlyOpsBase<TgStripTrainOnlyOpsPass> {
  void runOnOperation() override {
    auto forward = getOperation().lookupSymbol<func::FuncOp>(model::kForwardFunc);
    if (!forward) {
      getOperation().emitError("tg-strip-train-only-ops: no @forward function");
      return signalPassFailure();
    }
    SmallVector<tg::DropoutOp> dropouts;
    forward.walk([&](tg::DropoutOp op) { dropouts.push_back(op); });
    for (tg::DropoutOp op : dropouts) {
      op.getResult().replaceAllUsesWith(op.getInput());
      op.erase();
    }
  }
};

} // namespace
