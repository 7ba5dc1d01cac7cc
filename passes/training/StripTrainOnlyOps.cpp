//===- StripTrainOnlyOps.cpp - eval semantics for @forward ----------------===//
//
// @forward is the eval function, but tg-autodiff clones it into @train_step,
// so ops that only act while training (dropout) are written into it. After
// autodiff this pass makes @forward an eval function: every tg.dropout is
// replaced by its input, and every tg.attention's dropout is turned off
// (rate 0, no rng operands). @train_step keeps them.
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
    // tg-fuse-attention moved the probabilities' dropout into tg.attention.
    forward.walk([&](tg::AttentionOp op) {
      if (!op.hasDropout())
        return;
      op.getRngSeedMutable().clear();
      op.getStepMutable().clear();
      op.setDropoutRate(llvm::APFloat(0.0));
      op.removeOpIdAttr();
      // Keep tg-fuse-attention's decision text true for the eval copy: its
      // trailing "dropout=<rate>" no longer applies.
      if (auto text = op->getAttrOfType<StringAttr>(model::kFuseAttentionAttr)) {
        StringRef decision = text.getValue();
        size_t at = decision.find(" dropout=");
        if (at != StringRef::npos)
          op->setAttr(model::kFuseAttentionAttr,
                      StringAttr::get(op.getContext(),
                                      decision.take_front(at) +
                                          " (eval: dropout off)"));
      }
    });
  }
};

} // namespace
