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
#include "passes/Passes.h"
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
};

} // namespace
