#include "passes/training/TrainingUtils.h"

#include "dialects/common/ModelAttrs.h"
#include "dialects/tg/TgDialect.h"

using namespace mlir;

namespace tcc::training {

FailureOr<func::FuncOp> getTrainStep(ModuleOp module, StringRef pass) {
  auto step = module.lookupSymbol<func::FuncOp>(model::kTrainStepFunc);
  if (!step)
    return module.emitError(pass) << ": no @train_step (run tg-autodiff first)";
  return step;
}

SmallVector<BlockArgument> paramArguments(func::FuncOp f) {
  SmallVector<BlockArgument> params;
  for (BlockArgument arg : f.getArguments())
    if (f.getArgAttr(arg.getArgNumber(), model::kParamAttr))
      params.push_back(arg);
  return params;
}

int64_t countOptStateArguments(func::FuncOp f) {
  int64_t n = 0;
  for (unsigned i = 0; i < f.getNumArguments(); ++i)
    if (f.getArgAttr(i, model::kOptStateAttr))
      ++n;
  return n;
}

BlockArgument appendOptStateArgument(func::FuncOp f, const GradientToApply &g,
                                     StringRef name) {
  Builder b(f.getContext());
  SmallVector<NamedAttribute, 3> fields = {
      b.getNamedAttr("param", b.getI64IntegerAttr(g.paramIndex)),
      b.getNamedAttr("name", b.getStringAttr(name))};
  if (g.shardRanks > 0)
    fields.push_back(b.getNamedAttr(model::kShardRanksField, b.getI64IntegerAttr(g.shardRanks)));
  return model::appendArgument(
      f, g.param.getType(),
      b.getDictionaryAttr(b.getNamedAttr(model::kOptStateAttr, b.getDictionaryAttr(fields))));
}

BlockArgument appendStepStateArgument(func::FuncOp f, Type type,
                                      StringRef name, double initValue) {
  Builder b(f.getContext());
  return model::appendArgument(
      f, type,
      b.getDictionaryAttr(b.getNamedAttr(
          model::kOptStateAttr,
          b.getDictionaryAttr(
              {b.getNamedAttr("name", b.getStringAttr(name)),
               b.getNamedAttr("init_value", b.getF64FloatAttr(initValue))}))));
}

BlockArgument findStepStateArgument(func::FuncOp f, StringRef name) {
  for (BlockArgument arg : f.getArguments()) {
    auto state =
        f.getArgAttrOfType<DictionaryAttr>(arg.getArgNumber(), model::kOptStateAttr);
    if (!state || state.get("param"))
      continue;
    if (auto n = state.getAs<StringAttr>("name"); n && n.getValue() == name)
      return arg;
  }
  return {};
}

int64_t optStateIndex(func::FuncOp f, BlockArgument arg) {
  int64_t index = 0;
  for (unsigned i = 0; i < arg.getArgNumber(); ++i)
    if (f.getArgAttr(i, model::kOptStateAttr))
      ++index;
  return index;
}

Location updateLoc(OpBuilder &b, StringRef optimizer,
                   const std::optional<model::ParamInfo> &info) {
  return NameLoc::get(b.getStringAttr(optimizer + " " +
                                      (info ? info->name : std::string("?"))));
}

FailureOr<GradientParameter>
gradientParameter(func::FuncOp step, ArrayRef<BlockArgument> params,
                  int64_t paramIndex, StringRef passName, ParamSpec spec) {
  GradientParameter found;
  if (paramIndex >= 0 && paramIndex < static_cast<int64_t>(params.size())) {
    found.param = params[paramIndex];
    found.info = model::ParamInfo::fromAttr(
        step.getArgAttr(found.param.getArgNumber(), model::kParamAttr));
  }
  if (!found.param || (spec == ParamSpec::Required && !found.info))
    return step.emitError(passName)
           << ": gradient of unknown parameter " << paramIndex;
  return found;
}

LogicalResult replaceGradientsWithUpdates(
    func::FuncOp step, OpBuilder &b, StringRef passName,
    function_ref<ParamUpdate(const GradientToApply &)> update) {
  SmallVector<BlockArgument> params = paramArguments(step);
  auto ret = cast<func::ReturnOp>(step.getBody().front().getTerminator());
  SmallVector<Value> results, stateResults;
  SmallVector<Attribute> resultAttrs, stateAttrs;
  // ZeRO-1: every rank shard is copied out before the first update and
  // every all-gather follows the last, so that the updates stay adjacent
  // (kern-fuse-horizontal makes them one launch).
  DenseMap<unsigned, Value> shards;
  for (unsigned i = 0; i < step.getNumResults(); ++i) {
    auto gradOf = step.getResultAttrOfType<IntegerAttr>(i, model::kGradOfAttr);
    auto shard = step.getResultAttrOfType<IntegerAttr>(i, model::kGradShardAttr);
    if (!gradOf || !shard)
      continue;
    FailureOr<GradientParameter> target =
        gradientParameter(step, params, gradOf.getInt(), passName, ParamSpec::Optional);
    if (failed(target))
      return failure();
    shards[i] = tg::RankShardOp::create(b, updateLoc(b, "shard", target->info),
                                        ret.getOperand(i).getType(), target->param, shard);
  }
  // The sharded updates: (position in results, the parameter, N).
  SmallVector<std::tuple<size_t, Value, int64_t>> gathers;
  for (unsigned i = 0; i < step.getNumResults(); ++i) {
    Value grad = ret.getOperand(i);
    auto gradOf = step.getResultAttrOfType<IntegerAttr>(i, model::kGradOfAttr);
    if (!gradOf) { // the loss and train outputs stay as they are
      results.push_back(grad);
      resultAttrs.push_back(step.getResultAttrDict(i));
      continue;
    }
    int64_t p = gradOf.getInt();
    FailureOr<GradientParameter> target =
        gradientParameter(step, params, p, passName, ParamSpec::Optional);
    if (failed(target))
      return failure();
    int64_t firstState = countOptStateArguments(step);
    GradientToApply g{target->param, p, grad, target->info};
    if (Value shard = shards.lookup(i)) {
      // ZeRO-1: this rank updates its shard of the parameter; every rank's
      // updated shard is then gathered into the whole parameter (below).
      g.shardRanks = step.getResultAttrOfType<IntegerAttr>(i, model::kGradShardAttr).getInt();
      g.param = shard;
      gathers.push_back({results.size(), target->param, g.shardRanks});
    }
    ParamUpdate updated = update(g);
    results.push_back(updated.newParam);
    resultAttrs.push_back(b.getDictionaryAttr(
        b.getNamedAttr(model::kUpdatesParamAttr, b.getI64IntegerAttr(p))));
    for (auto [k, next] : llvm::enumerate(updated.newState)) {
      stateResults.push_back(next);
      stateAttrs.push_back(b.getDictionaryAttr(
          b.getNamedAttr(model::kUpdatesOptStateAttr,
                         b.getI64IntegerAttr(firstState + k))));
    }
  }
  for (auto [position, param, ranks] : gathers) {
    Value shard = results[position];
    results[position] = tg::AllGatherOp::create(b, shard.getLoc(), param.getType(), shard,
                                                b.getI64IntegerAttr(ranks));
  }
  results.append(stateResults);
  resultAttrs.append(stateAttrs);
  setResults(step, results, resultAttrs);
  return success();
}

void setResults(func::FuncOp f, ArrayRef<Value> results,
                ArrayRef<Attribute> attrs) {
  auto ret = cast<func::ReturnOp>(f.getBody().front().getTerminator());
  OpBuilder b(ret);
  func::ReturnOp::create(b, ret.getLoc(), results);
  ret.erase();
  f.setType(FunctionType::get(f.getContext(), f.getArgumentTypes(),
                              ValueRange(results).getTypes()));
  f.setAllResultAttrs(attrs);
}

double optimizerField(DictionaryAttr optimizer, StringRef name, double dflt) {
  if (auto v = optimizer.getAs<FloatAttr>(name))
    return v.getValueAsDouble();
  return dflt;
}

FailureOr<StringRef> optimizerKind(ModuleOp module, StringRef pass) {
  auto optimizer = module->getAttrOfType<DictionaryAttr>(model::kOptimizerAttr);
  auto kind = optimizer ? optimizer.getAs<StringAttr>("kind") : StringAttr();
  if (!kind)
    return module.emitError(pass)
           << ": the module has no " << model::kOptimizerAttr
           << " = {kind = ...} (set by the importer from training.optimizer)";
  return kind.getValue();
}

FailureOr<OptimizerTarget> optimizerTarget(ModuleOp module, StringRef pass,
                                           StringRef kind) {
  FailureOr<func::FuncOp> step = getTrainStep(module, pass);
  if (failed(step))
    return failure();
  FailureOr<StringRef> actual = optimizerKind(module, pass);
  if (failed(actual))
    return failure();
  if (*actual != kind)
    return OptimizerTarget{};
  return OptimizerTarget{*step,
                         module->getAttrOfType<DictionaryAttr>(model::kOptimizerAttr)};
}

} // namespace tcc::training
