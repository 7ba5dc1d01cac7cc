//===- ShardParameters.cpp - ZeRO-3 / FSDP: parameters sharded over ranks -===//
//
// With tg.shard_parameters = N on the module (tcc compile --shard-parameters
// N, which implies --shard-optimizer N), each rank holds 1/N of every
// parameter whose element count n N divides: elements [rank * n / N,
// (rank + 1) * n / N) of the flattened parameter, as a 1-D argument. In
// every function that takes parameters (@train_step, @forward, the
// entries), each op that reads such a parameter gets the whole tensor from
// its own gather right before it:
//
//   w = all_gather(p_shard)           (p read as it is)
//   w = all_gather(cast(p_shard))     (p read through tg-amp's weight cast:
//                                      the bf16 / f16 shard is gathered,
//                                      half the bytes of f32)
//
// so a whole parameter lives only from its gather to its reader: the
// forward's matmul and the backward's dX matmul gather separately, and
// the memory plan frees each copy after its reader. kern-schedule-
// collectives then issues each gather some bytes ahead of its reader, so it
// overlaps the kernels before it.
//
// @train_step already updates shards (ZeRO-1, tg-all-reduce-gradients and
// the optimizer passes): its tg.rank_shard of the parameter becomes the
// argument itself, and the all-gather of the updated shard is dropped: the
// result is the new shard, written in place. Gradients stay as ZeRO-1 makes
// them (reduce-scattered as soon as they are final).
//
// A parameter N does not divide stays whole (its gradient all-reduced, its
// state on every rank, as ZeRO-1 leaves it). Each decision is on its
// function (tg.shard_parameter_decisions) for the report in the dumps.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "dialects/common/ModelAttrs.h"
#include "mlir/IR/Builders.h"
#include "passes/common/DecisionReport.h"
#include "passes/common/NodeNames.h"
#include "passes/training/TrainingUtils.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/FormatVariadic.h"

namespace tcc {
#define GEN_PASS_DEF_TGSHARDPARAMETERS
#include "passes/Passes.h.inc"
} // namespace tcc

using namespace mlir;
using namespace tcc;

namespace {

// A cast of a parameter to bf16 / f16 (tg-amp's weight cast), whose shard
// can be cast before the gather.
bool isNarrowingCast(Operation *op, Value param) {
  auto c = dyn_cast<tg::CastOp>(op);
  if (!c || c->getOperand(0) != param)
    return false;
  Type to = getElementTypeOrSelf(c.getType());
  return isa<BFloat16Type, Float16Type>(to) &&
         getElementTypeOrSelf(param.getType()).getIntOrFloatBitWidth() > to.getIntOrFloatBitWidth();
}

// The distinct ops that read `v`, in the order they appear (nested ops by
// their own position).
SmallVector<Operation *> readersInOrder(Value v) {
  SetVector<Operation *> readers;
  for (OpOperand &use : v.getUses())
    readers.insert(use.getOwner());
  SmallVector<Operation *> ordered(readers.begin(), readers.end());
  llvm::stable_sort(ordered, [](Operation *x, Operation *y) {
    if (x->getBlock() == y->getBlock())
      return x->isBeforeInBlock(y);
    return false; // different blocks: keep use order
  });
  return ordered;
}

std::string readerName(Operation *op) {
  std::string node = nodeName(op->getLoc());
  std::string kind = op->getName().stripDialect().str();
  return node.empty() ? kind : kind + " " + node;
}

struct TgShardParametersPass : tcc::impl::TgShardParametersBase<TgShardParametersPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    Attribute attr = module->getAttr(model::kShardParametersAttr);
    if (!attr)
      return;
    auto ranks = dyn_cast<IntegerAttr>(attr);
    if (!ranks || ranks.getInt() < 1) {
      module.emitError(getArgument()) << ": " << model::kShardParametersAttr
                                      << " must be a number of ranks >= 1, got " << attr;
      return signalPassFailure();
    }
    auto optimizer = module->getAttrOfType<IntegerAttr>(model::kShardOptimizerAttr);
    if (!optimizer || optimizer.getInt() != ranks.getInt()) {
      module.emitError(getArgument())
          << ": parameters sharded over " << ranks.getInt()
          << " ranks need the optimizer state sharded over the same ranks ("
          << model::kShardOptimizerAttr << " = " << ranks.getInt() << ", tcc compile "
          << "--shard-parameters sets it)";
      return signalPassFailure();
    }
    for (func::FuncOp f : module.getOps<func::FuncOp>())
      if (!f.getBody().empty() && failed(shard(f, ranks.getInt())))
        return signalPassFailure();
  }

  LogicalResult shard(func::FuncOp f, int64_t ranks) {
    SmallVector<BlockArgument> params = training::paramArguments(f);
    if (params.empty())
      return success();
    OpBuilder b(f.getContext());
    auto ret = cast<func::ReturnOp>(f.getBody().front().getTerminator());

    // The train step's updated parameters: ZeRO-1 gathered each updated
    // shard into the whole parameter; the shard is now the result.
    DenseMap<int64_t, unsigned> updateResult; // parameter index -> result
    for (unsigned i = 0; i < f.getNumResults(); ++i)
      if (auto p = f.getResultAttrOfType<IntegerAttr>(i, model::kUpdatesParamAttr))
        updateResult[p.getInt()] = i;

    SmallVector<Attribute> decisions;
    for (auto [index, param] : llvm::enumerate(params)) {
      auto info = model::ParamInfo::fromAttr(f.getArgAttr(param.getArgNumber(), model::kParamAttr));
      std::string name = info ? info->name : llvm::formatv("parameter {0}", index).str();
      auto type = cast<RankedTensorType>(param.getType());
      int64_t n = type.getNumElements();
      if (n % ranks != 0) {
        decisions.push_back(b.getStringAttr(llvm::formatv(
            "{0}: kept whole: {1} ranks do not divide its {2} elements (every rank holds it)",
            name, ranks, n)));
        continue;
      }
      auto shardType = RankedTensorType::get({n / ranks}, type.getElementType());

      // The update: all_gather(new shard) -> the new shard.
      if (auto it = updateResult.find(index); it != updateResult.end()) {
        Value updated = ret.getOperand(it->second);
        auto gather = updated.getDefiningOp<tg::AllGatherOp>();
        if (!gather || gather.getInput().getType() != shardType)
          return f.emitError(getArgument())
                 << ": the update of " << name
                 << " is not the all-gather of its updated shard (run the ZeRO-1 optimizer "
                    "passes first, with tg.shard_optimizer = "
                 << ranks << ")";
        ret->setOperand(it->second, gather.getInput());
        if (gather->use_empty())
          gather->erase();
      }

      SmallVector<Operation *> readers = readersInOrder(param);
      param.setType(shardType);
      int64_t gathered = 0, narrowGathers = 0;
      SmallVector<std::string> names;
      // `whole`: the value the reader reads, of type `wholeType`.
      auto gatherBefore = [&](Operation *reader, Value shard, Value whole, Type wholeType) {
        b.setInsertionPoint(reader);
        Value all = tg::AllGatherOp::create(
            b, NameLoc::get(b.getStringAttr("gather " + name)), wholeType, shard,
            b.getI64IntegerAttr(ranks));
        reader->replaceUsesOfWith(whole, all);
        ++gathered;
        if (names.size() < 4)
          names.push_back(readerName(reader));
      };
      for (Operation *reader : readers) {
        if (auto rankShard = dyn_cast<tg::RankShardOp>(reader)) {
          // ZeRO-1's copy of this rank's shard: the argument is that shard.
          if (rankShard.getType() != shardType)
            return rankShard.emitError(getArgument())
                   << ": the shard of " << name << " has type " << rankShard.getType()
                   << ", expected " << shardType;
          rankShard.getResult().replaceAllUsesWith(param);
          rankShard->erase();
          continue;
        }
        if (isNarrowingCast(reader, param)) {
          // Gather the cast shard: each reader of the cast gets its own.
          auto whole = cast<tg::CastOp>(reader);
          auto wholeType = cast<RankedTensorType>(whole.getType());
          b.setInsertionPoint(whole);
          auto castShard = cast<tg::CastOp>(b.clone(*whole));
          castShard->setOperand(0, param);
          castShard.getResult().setType(
              RankedTensorType::get({n / ranks}, wholeType.getElementType()));
          for (Operation *castReader : readersInOrder(whole.getResult())) {
            gatherBefore(castReader, castShard.getResult(), whole.getResult(), wholeType);
            ++narrowGathers;
          }
          whole->erase();
          continue;
        }
        // Temporarily the reader sees the whole type on a shard value;
        // gatherBefore gives it the whole tensor back.
        gatherBefore(reader, param, param, type);
      }
      auto shape = b.getDenseI64ArrayAttr(type.getShape());
      f.setArgAttr(param.getArgNumber(), model::kParamShardAttr,
                   b.getDictionaryAttr({b.getNamedAttr("ranks", b.getI64IntegerAttr(ranks)),
                                        b.getNamedAttr("shape", shape)}));
      std::string where = llvm::join(names, ", ");
      if (gathered > static_cast<int64_t>(names.size()))
        where += ", ...";
      std::string narrow =
          narrowGathers == 0 ? ""
          : narrowGathers == gathered
              ? " of its shard cast to the reader's type"
              : llvm::formatv(" ({0} of its shard cast to the reader's type)", narrowGathers).str();
      decisions.push_back(b.getStringAttr(llvm::formatv(
          "{0}: sharded: {1} elements, {2} per rank; {3} all-gather{4}{5}, before: {6}", name, n,
          n / ranks, gathered, gathered == 1 ? "" : "s", narrow, gathered ? where : "none")));
    }
    f.setType(FunctionType::get(f.getContext(), f.getBody().front().getArgumentTypes(),
                                ret.getOperandTypes()));
    if (!decisions.empty())
      f->setAttr(model::kShardParameterDecisionsAttr, b.getArrayAttr(decisions));
    return success();
  }
};

} // namespace

void tcc::writeShardParametersReport(ModuleOp module, llvm::raw_ostream &os) {
  writeFunctionDecisions(
      module, model::kShardParameterDecisionsAttr,
      "# tg-shard-parameters (--shard-parameters N, ZeRO-3): each parameter this rank holds\n"
      "# 1/N of, and the ops whose own all-gather gives them the whole tensor (freed after\n"
      "# them), or kept whole and why.\n",
      os);
}
