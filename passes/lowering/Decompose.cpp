//===- Decompose.cpp - composite tg ops -> primitive tg ops ---------------===//
//
// Rewrites the composite NN ops into the primitives lowering has kernels
// for, so each new composite needs no kernel of its own:
//   softmax, log_softmax  -> reduce_max, sub, exp, reduce_sum, div / log
//   cross_entropy         -> log_softmax + one-hot (iota, equal, select),
//                            ignore_index mask, mean over counted positions
//   causal_mask           -> iota, slice, greater, select
//   split                 -> one slice per piece
//   batch_norm            -> batch_norm_stats (one pass), rsqrt, and the
//                            normalize-and-scale chain (one kernel once fused)
// layer_norm, rms_norm and their gradient ops are left whole: tg-lower-to-kern
// gives each one fused kernel (kern.layer_norm / kern.layer_norm_grad).
// The expansions live in dialects/tg/TgStructuralBuilders.h, shared with the
// gradient rules, so CSE afterwards merges forward and backward copies.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "dialects/tg/BatchNormSync.h"

#include "dialects/tg/TgStructuralBuilders.h"
#include "mlir/IR/PatternMatch.h"

namespace tcc {
#define GEN_PASS_DEF_TGDECOMPOSE
#include "passes/Passes.h.inc"
} // namespace tcc

using namespace mlir;
using namespace tcc;
namespace build = tcc::tg::build;

namespace {

// The primitives computing `op`'s results, built at the builder's insertion
// point; empty when `op` is not a composite.
SmallVector<Value> expand(Operation *op, OpBuilder &b) {
  Location loc = op->getLoc();
  if (auto softmax = dyn_cast<tg::SoftmaxOp>(op))
    return {build::softmax(b, loc, softmax.getInput(), softmax.getAxis())};
  if (auto logSoftmax = dyn_cast<tg::LogSoftmaxOp>(op))
    return {
        build::logSoftmax(b, loc, logSoftmax.getInput(), logSoftmax.getAxis())};
  if (auto xent = dyn_cast<tg::CrossEntropyOp>(op))
    return {build::crossEntropy(b, loc, xent.getLogits(), xent.getTargets(),
                                xent.ignoreIndex())};
  if (auto mask = dyn_cast<tg::CausalMaskOp>(op))
    return {build::causalMask(b, loc, mask.getInput(),
                              mask.getValue().convertToDouble())};
  if (auto bn = dyn_cast<tg::BatchNormOp>(op)) {
    auto stats = tg::BatchNormStatsOp::create(b, loc, bn.getMean().getType(),
                                              bn.getVar().getType(), bn.getInput());
    // Synchronized: the global batch's statistics (BatchNormSync.h).
    auto [mean, var] = tg::syncsOverRanks(bn)
                           ? tg::globalBatchNormStats(b, loc, stats.getMean(), stats.getVar())
                           : std::pair<Value, Value>{stats.getMean(), stats.getVar()};
    Value rstd = build::batchNormRstd(b, loc, var, bn.getEps().convertToDouble());
    return {build::batchNormNormalize(b, loc, bn.getInput(), mean, rstd, bn.getWeight(),
                                      bn.getBias()),
            mean, var};
  }
  if (auto split = dyn_cast<tg::SplitOp>(op))
    return build::splitIntoSlices(b, loc, split.getInput(), split.getAxis(),
                                  split.getResultTypes());
  return {};
}

struct TgDecomposePass : tcc::impl::TgDecomposeBase<TgDecomposePass> {
  void runOnOperation() override {
    // Expansions contain only primitives, so one walk suffices; nothing
    // else in the module changes.
    SmallVector<Operation *> composites;
    getOperation().walk([&](Operation *op) {
      if (isa<tg::SoftmaxOp, tg::LogSoftmaxOp, tg::CrossEntropyOp,
              tg::CausalMaskOp, tg::SplitOp, tg::BatchNormOp>(op))
        composites.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    for (Operation *op : composites) {
      rewriter.setInsertionPoint(op);
      SmallVector<Value> replacements = expand(op, rewriter);
      rewriter.replaceOp(op, replacements);
    }
  }
};

} // namespace
