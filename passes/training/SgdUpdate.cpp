//===- SgdUpdate.cpp - plain SGD in @train_step ---------------------------===//
//
// @train_step(params..., inputs...) -> (loss, grads...)
//   becomes
// @train_step(params..., inputs..., lr) -> (loss, updated params...)
//
// The learning rate is an argument, not a constant: the runtime passes the
// schedule's value every step, so a resumed run continues the schedule.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "dialects/tg/TgModelAttrs.h"
#include "mlir/IR/Builders.h"

namespace tcc {
#define GEN_PASS_DEF_TGSGDUPDATE
#include "passes/Passes.h.inc"
} // namespace tcc

using namespace mlir;
using namespace tcc;

namespace {

struct TgSgdUpdatePass : tcc::impl::TgSgdUpdateBase<TgSgdUpdatePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto optimizer = module->getAttrOfType<DictionaryAttr>(tg::kOptimizerAttr);
    auto kind = optimizer ? optimizer.getAs<StringAttr>("kind") : StringAttr();
    if (!kind || kind.getValue() != "sgd") {
      module.emitError("tg-sgd-update: module optimizer is not sgd");
      return signalPassFailure();
    }
    auto step = module.lookupSymbol<func::FuncOp>(tg::kTrainStepFunc);
    if (!step) {
      module.emitError("tg-sgd-update: no @train_step (run tg-autodiff first)");
      return signalPassFailure();
    }
    Block &body = step.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    OpBuilder b(ret);

    auto lrType = RankedTensorType::get({}, b.getF32Type());
    unsigned lrIndex = step.getNumArguments();
    if (failed(step.insertArgument(
            lrIndex, lrType,
            b.getDictionaryAttr(b.getNamedAttr(
                tg::kHyperAttr, b.getStringAttr("learning_rate"))),
            step.getLoc())))
      return signalPassFailure();
    Value lr = body.getArgument(lrIndex);

    // Parameter index -> argument.
    SmallVector<BlockArgument> params;
    for (BlockArgument arg : body.getArguments())
      if (step.getArgAttr(arg.getArgNumber(), tg::kParamAttr))
        params.push_back(arg);

    SmallVector<Value> results;
    SmallVector<Attribute> resultAttrs;
    for (unsigned i = 0; i < step.getNumResults(); ++i) {
      Value v = ret.getOperand(i);
      auto gradOf = step.getResultAttrOfType<IntegerAttr>(i, tg::kGradOfAttr);
      if (!gradOf) { // the loss
        results.push_back(v);
        resultAttrs.push_back(step.getResultAttrDict(i));
        continue;
      }
      int64_t p = gradOf.getInt();
      if (p < 0 || p >= static_cast<int64_t>(params.size())) {
        step.emitError("tg-sgd-update: gradient of unknown parameter ") << p;
        return signalPassFailure();
      }
      results.push_back(tg::SgdUpdateOp::create(b, v.getLoc(), v.getType(),
                                                params[p], v, lr));
      resultAttrs.push_back(b.getDictionaryAttr(
          b.getNamedAttr(tg::kUpdatesParamAttr, b.getI64IntegerAttr(p))));
    }
    func::ReturnOp::create(b, ret.getLoc(), results);
    ret.erase();
    step.setType(FunctionType::get(step.getContext(), step.getArgumentTypes(),
                                   ValueRange(results).getTypes()));
    step.setAllResultAttrs(resultAttrs);
  }
};

} // namespace
