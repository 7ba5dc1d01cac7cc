// tg-fuse-cross-entropy: tg.cross_entropy(logits (..., C), targets (...))
// without ignore_index becomes
//
//   reduce_mean(softmax_cross_entropy(reshape(logits, (N, C)),
//                                     reshape(targets, (N))))
//
// before autodiff, so the loss and its gradient each become one fused
// kernel (kern.softmax_cross_entropy reads the logits once;
// softmax_cross_entropy_grad reads them and writes the gradient) instead of
// the log-softmax and one-hot primitives tg-decompose would expand, which
// pass over (and keep) several logits-sized tensors. A target outside
// [0, C) then fails the step naming the kernel (the decomposed form gives a
// NaN loss). With ignore_index the op is left to tg-decompose.
//
// It also marks the data input a cross-entropy reads as its targets
// (through reshapes and casts) with tg.labels: the step descriptor's
// label_input, from which trun takes the labels of its accuracy (an integer
// input [batch] feeding an embedding is a feature, not labels).
#include "passes/Passes.h"
#include "dialects/common/ModelAttrs.h"
#include "dialects/tg/TgStructuralBuilders.h"
#include "mlir/IR/Builders.h"

namespace tcc {
#define GEN_PASS_DEF_TGFUSECROSSENTROPY
#include "passes/Passes.h.inc"
} // namespace tcc

using namespace mlir;
using namespace tcc;
namespace build = tcc::tg::build;

namespace {

struct TgFuseCrossEntropyPass
    : tcc::impl::TgFuseCrossEntropyBase<TgFuseCrossEntropyPass> {
  void runOnOperation() override {
    getOperation().walk([&](tg::CrossEntropyOp op) { markLabels(op.getTargets()); });
    getOperation().walk([&](tg::SoftmaxCrossEntropyOp op) { markLabels(op.getLabels()); });
    SmallVector<tg::CrossEntropyOp> ops;
    getOperation().walk([&](tg::CrossEntropyOp op) {
      if (!op.ignoreIndex())
        ops.push_back(op);
    });
    for (tg::CrossEntropyOp op : ops) {
      OpBuilder b(op);
      Location loc = op.getLoc();
      auto logits = cast<RankedTensorType>(op.getLogits().getType());
      int64_t classes = logits.getShape().back();
      int64_t rows = 1;
      for (int64_t d : logits.getShape().drop_back())
        rows *= d;
      Value rowsOfLogits = build::reshape(b, loc, op.getLogits(), {rows, classes});
      Value labels = build::reshape(b, loc, op.getTargets(), {rows});
      auto perRowType = RankedTensorType::get({rows}, logits.getElementType());
      Value perRow = tg::SoftmaxCrossEntropyOp::create(b, loc, perRowType, rowsOfLogits, labels);
      Value mean = build::reduceMean(b, loc, perRow, {0}, /*keepDims=*/false);
      op.getResult().replaceAllUsesWith(mean);
      op.erase();
    }
  }

  // The labels of a cross-entropy, followed back through reshapes and
  // casts: when they are a data input of the function, it gets tg.labels.
  static void markLabels(Value labels) {
    while (Operation *def = labels.getDefiningOp()) {
      if (!isa<tg::ReshapeOp, tg::CastOp>(def))
        return; // computed labels: no input to name
      labels = def->getOperand(0);
    }
    auto arg = cast<BlockArgument>(labels);
    auto f = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
    if (f && f.getArgAttr(arg.getArgNumber(), model::kInputAttr))
      f.setArgAttr(arg.getArgNumber(), model::kLabelsAttr, UnitAttr::get(f.getContext()));
  }
};

} // namespace
