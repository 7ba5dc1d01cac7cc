//===- StripTrainOnlyOps.cpp - eval semantics for @forward ----------------===//
//
// @forward is the eval function, but tg-autodiff clones it into @train_step,
// so ops that only act while training (dropout) are written into it. After
// autodiff this pass makes @forward an eval function: every tg.dropout is
// replaced by its input, and every tg.attention's dropout is turned off
// (rate 0, no rng operands). @train_step keeps them.
//
// Batch norm: tg.train_select becomes its eval operand in @forward and its
// train operand in @train_step, and @forward no longer returns the buffer
// updates (tg.updates_buffer: eval leaves the running statistics alone).
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "dialects/common/ModelAttrs.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/RegionUtils.h"

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
    // Buffer updates first: their computation is then dead in @forward.
    dropBufferUpdates(forward);
    resolveTrainSelects(forward, /*train=*/false);
    if (auto step = getOperation().lookupSymbol<func::FuncOp>(model::kTrainStepFunc))
      resolveTrainSelects(step, /*train=*/true);
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

  static void resolveTrainSelects(func::FuncOp f, bool train) {
    SmallVector<tg::TrainSelectOp> selects;
    f.walk([&](tg::TrainSelectOp op) { selects.push_back(op); });
    for (tg::TrainSelectOp op : selects) {
      op.getResult().replaceAllUsesWith(train ? op.getTrain() : op.getEval());
      op.erase();
    }
    if (!selects.empty()) {
      IRRewriter rewriter(f.getContext());
      (void)runRegionDCE(rewriter, f.getBody());
    }
  }

  // The eval function returns the loss and outputs only.
  static void dropBufferUpdates(func::FuncOp f) {
    auto ret = cast<func::ReturnOp>(f.getBody().front().getTerminator());
    SmallVector<Value> results;
    SmallVector<Attribute> attrs;
    bool dropped = false;
    for (unsigned i = 0; i < f.getNumResults(); ++i) {
      if (f.getResultAttr(i, model::kUpdatesBufferAttr)) {
        dropped = true;
        continue;
      }
      results.push_back(ret.getOperand(i));
      attrs.push_back(f.getResultAttrDict(i));
    }
    if (!dropped)
      return;
    OpBuilder b(ret);
    func::ReturnOp::create(b, ret.getLoc(), results);
    ret.erase();
    f.setType(FunctionType::get(f.getContext(), f.getArgumentTypes(),
                                ValueRange(results).getTypes()));
    f.setAllResultAttrs(attrs);
    IRRewriter rewriter(f.getContext());
    (void)runRegionDCE(rewriter, f.getBody());
  }
};

} // namespace
