//===- EmitGradients.cpp - gradients as train outputs ---------------------===//
//
// For comparing gradients with another framework (tcc compile
// --emit-gradients): instead of clipping and an optimizer update, each
// gradient result of @train_step (tg.grad_of = i) becomes a train output
// tg.train_output = "grad:<param name>". The step then leaves every
// parameter unchanged and reports the loss and the gradients of one
// (accumulated) batch.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "dialects/common/ModelAttrs.h"
#include "mlir/IR/Builders.h"
#include "passes/training/TrainingUtils.h"

namespace tcc {
#define GEN_PASS_DEF_TGEMITGRADIENTS
#include "passes/Passes.h.inc"
} // namespace tcc

using namespace mlir;
using namespace tcc;

namespace {

struct TgEmitGradientsPass
    : tcc::impl::TgEmitGradientsBase<TgEmitGradientsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<func::FuncOp> maybeStep =
        training::getTrainStep(module, getArgument());
    if (failed(maybeStep))
      return signalPassFailure();
    func::FuncOp step = *maybeStep;
    SmallVector<BlockArgument> params = training::paramArguments(step);
    Builder b(module.getContext());
    for (unsigned i = 0; i < step.getNumResults(); ++i) {
      auto gradOf = step.getResultAttrOfType<IntegerAttr>(i, model::kGradOfAttr);
      if (!gradOf)
        continue;
      // The output is named after the parameter, so its spec must be there.
      FailureOr<training::GradientParameter> target =
          training::gradientParameter(step, params, gradOf.getInt(),
                                      getArgument(),
                                      training::ParamSpec::Required);
      if (failed(target))
        return signalPassFailure();
      step.setResultAttrs(
          i, b.getDictionaryAttr(
                 b.getNamedAttr(model::kTrainOutputAttr,
                                b.getStringAttr(model::kGradOutputPrefix.str() +
                                                target->info->name))));
    }
  }
};

} // namespace
