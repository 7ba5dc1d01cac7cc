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
// ZeRO-1 (tg.shard_optimizer = N, tcc compile --shard-optimizer N): a
// gradient of n elements, N dividing n, is reduce-scattered instead,
//
//   g_shard <- reduce_scatter(g, mean)   (1-D, n / N: this rank's part)
//
// and its result gets tg.grad_shard = N, so tg-clip-grad-norm sums its
// squares over the ranks and the optimizer pass updates only this shard of
// the parameter, with optimizer state of n / N elements, then all-gathers
// it (training::replaceGradientsWithUpdates). A gradient N does not divide
// stays whole (all-reduced, its state replicated). Each decision is on
// @train_step (tg.shard_decisions) for the report in the dumps. Loss
// scaling is refused: each rank would see overflow in its shard only.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "dialects/common/ModelAttrs.h"
#include "mlir/IR/Builders.h"
#include "passes/common/DecisionReport.h"
#include "passes/training/TrainingUtils.h"
#include "llvm/Support/FormatVariadic.h"

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
    FailureOr<int64_t> ranks = shardRanks(module);
    if (failed(ranks))
      return signalPassFailure();
    SmallVector<BlockArgument> params = training::paramArguments(*step);
    auto ret = cast<func::ReturnOp>(step->getBody().front().getTerminator());
    OpBuilder b(ret);
    SmallVector<Value> results;
    SmallVector<Attribute> attrs, decisions;
    int64_t reduced = 0;
    for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
      Value v = ret.getOperand(i);
      DictionaryAttr resultAttrs = step->getResultAttrDict(i);
      auto gradOf = step->getResultAttrOfType<IntegerAttr>(i, model::kGradOfAttr);
      bool loss = static_cast<bool>(step->getResultAttr(i, model::kLossAttr));
      if (gradOf && *ranks > 0) {
        FailureOr<training::GradientParameter> param = training::gradientParameter(
            *step, params, gradOf.getInt(), getArgument(), training::ParamSpec::Optional);
        if (failed(param))
          return signalPassFailure();
        std::string name = param->info ? param->info->name
                                       : llvm::formatv("parameter {0}", gradOf.getInt()).str();
        auto type = cast<RankedTensorType>(v.getType());
        int64_t n = type.getNumElements();
        if (n % *ranks == 0) {
          auto shardType = RankedTensorType::get({n / *ranks}, type.getElementType());
          v = tg::ReduceScatterOp::create(b, v.getLoc(), shardType, v, b.getStringAttr("mean"),
                                          b.getI64IntegerAttr(*ranks));
          NamedAttrList list(resultAttrs);
          list.set(model::kGradShardAttr, b.getI64IntegerAttr(*ranks));
          resultAttrs = list.getDictionary(b.getContext());
          decisions.push_back(b.getStringAttr(llvm::formatv(
              "{0}: sharded: {1} elements, {2} per rank (reduce-scatter, optimizer state and "
              "update of the shard, all-gather)",
              name, n, n / *ranks)));
        } else {
          v = tg::AllReduceOp::create(b, v.getLoc(), v.getType(), v, b.getStringAttr("mean"));
          decisions.push_back(b.getStringAttr(llvm::formatv(
              "{0}: kept whole: {1} ranks do not divide its {2} elements (all-reduce, "
              "optimizer state on every rank)",
              name, *ranks, n)));
        }
        ++reduced;
      } else if (gradOf || loss) {
        v = tg::AllReduceOp::create(b, v.getLoc(), v.getType(), v, b.getStringAttr("mean"));
        ++reduced;
      }
      results.push_back(v);
      attrs.push_back(resultAttrs);
    }
    if (reduced == 0) {
      step->emitError(getArgument()) << ": @train_step returns no gradient or loss to reduce";
      return signalPassFailure();
    }
    training::setResults(*step, results, attrs);
    if (*ranks > 0)
      (*step)->setAttr(model::kShardDecisionsAttr, b.getArrayAttr(decisions));
  }

  // N of tg.shard_optimizer, 0 without it.
  FailureOr<int64_t> shardRanks(ModuleOp module) {
    Attribute attr = module->getAttr(model::kShardOptimizerAttr);
    if (!attr)
      return 0;
    auto ranks = dyn_cast<IntegerAttr>(attr);
    if (!ranks || ranks.getInt() < 1) {
      module.emitError(getArgument())
          << ": " << model::kShardOptimizerAttr << " must be a number of ranks >= 1, got " << attr;
      return failure();
    }
    if (module->hasAttr(model::kLossScalingAttr)) {
      module.emitError(getArgument())
          << ": the optimizer cannot be sharded (--shard-optimizer) with loss scaling: each rank "
             "would see an overflow in its own shard only (use --precision bf16, which needs no "
             "loss scaling)";
      return failure();
    }
    return ranks.getInt();
  }
};

} // namespace

void tcc::writeShardOptimizerReport(ModuleOp module, llvm::raw_ostream &os) {
  bool any = llvm::any_of(module.getOps<func::FuncOp>(), [](func::FuncOp f) {
    return f->hasAttr(model::kShardDecisionsAttr);
  });
  if (!any)
    return;
  writeFunctionDecisions(
      module, model::kShardDecisionsAttr,
      "# tg-all-reduce-gradients with --shard-optimizer (ZeRO-1): each gradient reduce-scattered\n"
      "# (this rank updates and keeps optimizer state for 1/N of the parameter, then all-gathers\n"
      "# it) or kept whole (all-reduced, state on every rank) and why.\n",
      os);
}
