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
// stays whole (all-reduced, its state replicated). Loss scaling is refused:
// each rank would see overflow in its shard only.
//
// Mixed precision: a weight is cast to bf16 once at the top of the step,
// so autodiff emits the adjoint of that cast (the bf16 gradient back to
// f32) at the very end of the backward. Reduced as it is, every weight
// gradient would become final at once, and no collective could overlap the
// backward (kern-schedule-collectives moves each one only up to its
// buffer's last writer). So a gradient g = cast(x) of an x computed in
// bf16 or f16 is
//
//   g <- cast(all_reduce(x, mean))      (default: half the bytes of f32;
//                                        the cast stays after the backward)
//
// as Megatron-LM and DeepSpeed reduce bf16 gradients by default; with
// tg.reduce_gradients_in_f32 (tcc compile --reduce-gradients-in f32) the
// gradient stays f32 and its tail of casts and reshapes moves up instead,
// to right after the op that computes its operand (the same values, only
// the order changes).
//
// Each decision (reduced narrow, tail moved, sharded or whole) is on
// @train_step (tg.gradient_collective_decisions) for the report in the
// dumps.
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

// Moves the casts and reshapes that end gradient `v` up to right after the
// op that computes their operand (block start for an argument), deepest
// first. Returns how many ops the last one moved over (0: it stayed).
int64_t moveGradientTailUp(Value v) {
  Operation *op = v.getDefiningOp();
  if (!op || !isa<tg::CastOp, tg::ReshapeOp>(op) || op->getNumOperands() != 1)
    return 0;
  Value source = op->getOperand(0);
  moveGradientTailUp(source);
  Operation *producer = source.getDefiningOp();
  Block *block = op->getBlock();
  if (producer && producer->getBlock() != block)
    return 0;
  Operation *first = producer ? producer->getNextNode() : &block->front();
  int64_t skipped = 0;
  for (Operation *o = first; o && o != op; o = o->getNextNode())
    ++skipped;
  if (skipped == 0)
    return 0;
  if (producer)
    op->moveAfter(producer);
  else
    op->moveBefore(first);
  return skipped;
}

// x when `v` is cast(x) from bf16 or f16 to f32 (a gradient computed in the
// narrower type), else null.
Value narrowSource(Value v) {
  auto cast = v.getDefiningOp<tg::CastOp>();
  if (!cast)
    return Value();
  Value x = cast->getOperand(0);
  Type from = getElementTypeOrSelf(x.getType()), to = getElementTypeOrSelf(v.getType());
  return isa<BFloat16Type, Float16Type>(from) && to.isF32() ? x : Value();
}

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
    SmallVector<Operation *> deadCasts; // the late casts a narrow reduction replaced
    const bool inF32 = module->hasAttr(model::kReduceGradientsInF32Attr);
    int64_t reduced = 0;
    for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
      Value v = ret.getOperand(i);
      DictionaryAttr resultAttrs = step->getResultAttrDict(i);
      auto gradOf = step->getResultAttrOfType<IntegerAttr>(i, model::kGradOfAttr);
      bool loss = static_cast<bool>(step->getResultAttr(i, model::kLossAttr));
      if (gradOf) {
        // The parameter's name for the decisions. ZeRO-1 needs the
        // parameter (an unknown one is an error); plain data parallelism
        // only names it when it can.
        std::string name = llvm::formatv("parameter {0}", gradOf.getInt()).str();
        const bool known =
            gradOf.getInt() >= 0 && gradOf.getInt() < static_cast<int64_t>(params.size());
        if (known || *ranks > 0) {
          FailureOr<training::GradientParameter> param = training::gradientParameter(
              *step, params, gradOf.getInt(), getArgument(), training::ParamSpec::Optional);
          if (failed(param))
            return signalPassFailure();
          if (param->info)
            name = param->info->name;
        }
        // Reduced in the type it was computed in (then cast), or in f32.
        Value narrow = inF32 ? Value() : narrowSource(v);
        if (narrow) {
          decisions.push_back(b.getStringAttr(llvm::formatv(
              "{0}: reduced in {1}, the type it was computed in (half the bytes of f32), then "
              "cast to f32",
              name, getElementTypeOrSelf(narrow.getType()))));
          Operation *lateCast = v.getDefiningOp();
          v = narrow;
          if (lateCast->hasOneUse())
            deadCasts.push_back(lateCast);
        } else if (int64_t moved = moveGradientTailUp(v); moved > 0) {
          decisions.push_back(b.getStringAttr(llvm::formatv(
              "{0}: its last {1} moved up over {2} ops, to right after the op computing its "
              "operand (the gradient is final there, and its collective can start there)",
              name, v.getDefiningOp()->getName().stripDialect(), moved)));
        }
        // The cast back to f32 after the reduction, when reduced narrow.
        auto toF32 = [&](Value reduced) -> Value {
          if (!narrow)
            return reduced;
          auto type = cast<RankedTensorType>(reduced.getType());
          return tg::CastOp::create(b, reduced.getLoc(),
                                    RankedTensorType::get(type.getShape(), b.getF32Type()),
                                    reduced);
        };
        auto type = cast<RankedTensorType>(v.getType());
        int64_t n = type.getNumElements();
        if (*ranks > 0 && n % *ranks == 0) {
          auto shardType = RankedTensorType::get({n / *ranks}, type.getElementType());
          v = tg::ReduceScatterOp::create(b, v.getLoc(), shardType, v, b.getStringAttr("mean"),
                                          b.getI64IntegerAttr(*ranks));
          v = toF32(v);
          NamedAttrList list(resultAttrs);
          list.set(model::kGradShardAttr, b.getI64IntegerAttr(*ranks));
          resultAttrs = list.getDictionary(b.getContext());
          decisions.push_back(b.getStringAttr(llvm::formatv(
              "{0}: sharded: {1} elements, {2} per rank (reduce-scatter, optimizer state and "
              "update of the shard, all-gather)",
              name, n, n / *ranks)));
        } else {
          v = toF32(
              tg::AllReduceOp::create(b, v.getLoc(), v.getType(), v, b.getStringAttr("mean")));
          if (*ranks > 0)
            decisions.push_back(b.getStringAttr(llvm::formatv(
                "{0}: kept whole: {1} ranks do not divide its {2} elements (all-reduce, "
                "optimizer state on every rank)",
                name, *ranks, n)));
        }
        ++reduced;
      } else if (loss) {
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
    for (Operation *op : deadCasts)
      if (op->use_empty())
        op->erase();
    if (!decisions.empty())
      (*step)->setAttr(model::kGradientCollectiveDecisionsAttr, b.getArrayAttr(decisions));
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

void tcc::writeAllReduceGradientsReport(ModuleOp module, llvm::raw_ostream &os) {
  bool any = llvm::any_of(module.getOps<func::FuncOp>(), [](func::FuncOp f) {
    return f->hasAttr(model::kGradientCollectiveDecisionsAttr);
  });
  if (!any)
    return;
  writeFunctionDecisions(
      module, model::kGradientCollectiveDecisionsAttr,
      "# tg-all-reduce-gradients: each gradient reduced in the bf16 / f16 it was computed in\n"
      "# (then cast to f32), or whose last casts or reshapes moved up to where its value is\n"
      "# computed (--reduce-gradients-in f32), so its collective can start there; with\n"
      "# --shard-optimizer (ZeRO-1) each gradient reduce-scattered (this rank updates and keeps\n"
      "# optimizer state for 1/N of the parameter, then all-gathers it) or kept whole\n"
      "# (all-reduced, state on every rank) and why.\n",
      os);
}
