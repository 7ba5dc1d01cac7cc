//===- Autodiff.cpp - reverse-mode autodiff over tg -----------------------===//
//
// @forward(params..., inputs...) -> (loss, outputs...)
//   becomes, in addition,
// @train_step(params..., inputs...) -> (loss, d loss/d param for each
//                                       trainable param, buffer updates)
//
// The pass knows no op: each op builds its own vector-Jacobian product
// through GradientOpInterface (dialects/tg/TgGradients.cpp).
//
// With tg.loss_scaling on the module (dynamic loss scaling), the backward
// pass starts from d loss = S instead of 1, where S is a new f32 scalar
// optimizer-state argument "loss_scale" (tg.opt_state = {name, init_value =
// init_scale}): every gradient comes out multiplied by S, which keeps small
// fp16 gradients from flushing to zero. The returned loss stays unscaled;
// tg-unscale-gradients divides S out again.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "dialects/common/ModelAttrs.h"
#include "dialects/tg/TgStructuralBuilders.h"
#include "mlir/IR/Builders.h"
#include "mlir/Transforms/RegionUtils.h"
#include "passes/training/LossScaling.h"
#include "passes/training/TrainingUtils.h"

namespace tcc {
#define GEN_PASS_DEF_TGAUTODIFF
#include "passes/Passes.h.inc"
} // namespace tcc

using namespace mlir;
using namespace tcc;

namespace {

struct TgAutodiffPass : tcc::impl::TgAutodiffBase<TgAutodiffPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>(model::kForwardFunc);
    if (!forward) {
      module.emitError("tg-autodiff: no @forward function to differentiate");
      return signalPassFailure();
    }
    if (module.lookupSymbol(model::kTrainStepFunc)) {
      module.emitError("tg-autodiff: @train_step exists already");
      return signalPassFailure();
    }
    func::FuncOp step = forward.clone();
    step.setName(model::kTrainStepFunc);
    module.push_back(step);
    FailureOr<std::optional<training::LossScalingConfig>> scaling =
        training::readLossScaling(module, getArgument());
    if (failed(scaling) || failed(differentiate(step, *scaling)))
      return signalPassFailure();
  }

  LogicalResult
  differentiate(func::FuncOp step,
                const std::optional<training::LossScalingConfig> &scaling) {
    Block &body = step.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());

    // The loss is the result marked tg.loss.
    std::optional<unsigned> lossIndex;
    for (unsigned i = 0; i < step.getNumResults(); ++i)
      if (step.getResultAttr(i, model::kLossAttr))
        lossIndex = i;
    if (!lossIndex)
      return step.emitError("tg-autodiff: no result is marked ")
             << model::kLossAttr;
    Value loss = ret.getOperand(*lossIndex);
    auto lossType = cast<RankedTensorType>(loss.getType());
    if (lossType.getRank() != 0)
      return step.emitError("tg-autodiff: the loss must be a scalar");

    SmallVector<Operation *> forwardOps;
    for (Operation &op : body.without_terminator())
      forwardOps.push_back(&op);

    OpBuilder b(ret);
    llvm::DenseMap<Value, Value> grads;
    if (scaling) {
      // The seed is the scale (f32 state), in the loss's element type.
      auto scaleType = RankedTensorType::get({}, b.getF32Type());
      Value scale = training::appendStepStateArgument(
          step, scaleType, model::kLossScaleState, scaling->initScale);
      Location loc = NameLoc::get(b.getStringAttr("loss_scale"));
      grads[loss] = scaleType == lossType
                        ? scale
                        : tg::CastOp::create(b, loc, lossType, scale).getResult();
    } else {
      grads[loss] = tg::build::splat(b, loss.getLoc(), lossType, 1.0);
    }

    for (Operation *op : llvm::reverse(forwardOps)) {
      SmallVector<Value> resultGrads;
      bool any = false;
      for (Value r : op->getResults()) {
        resultGrads.push_back(grads.lookup(r));
        any |= static_cast<bool>(resultGrads.back());
      }
      if (!any)
        continue; // does not reach the loss
      auto diff = dyn_cast<tg::GradientOpInterface>(op);
      if (isa<tg::MatmulEpilogueOp, tg::MatmulDgeluOp, tg::MatmulBiasGradOp>(
              op)) // made after autodiff
        return op->emitError("tg-autodiff: ")
               << op->getName()
               << " has no gradient: tg-fuse-matmul-epilogue creates it after "
                  "the training recipe; differentiate the unfused matmul, add, "
                  "gelu and reduce_sum instead";
      if (!diff)
        return op->emitError("tg-autodiff: op ")
               << op->getName() << " has no gradient (no GradientOpInterface)";
      // Results without an incoming gradient get zeros, so each op's
      // gradient rule can assume all of them are present.
      for (auto [r, g] : llvm::zip(op->getResults(), resultGrads))
        if (!g)
          g = tg::build::splat(b, op->getLoc(), cast<RankedTensorType>(r.getType()), 0.0);
      SmallVector<Value> operandGrads;
      if (failed(diff.buildGradients(b, resultGrads, operandGrads)))
        return op->emitError("tg-autodiff: building the gradient failed");
      if (operandGrads.size() != op->getNumOperands())
        return op->emitError("tg-autodiff: gradient rule returned ")
               << operandGrads.size() << " gradients for "
               << op->getNumOperands() << " operands";
      for (auto [operand, g] : llvm::zip(op->getOperands(), operandGrads)) {
        if (!g)
          continue;
        Value &acc = grads[operand];
        // Fan-out: a value used by several ops receives the sum.
        acc = acc ? tg::AddOp::create(b, op->getLoc(), operand.getType(), acc, g)
                        .getResult()
                  : g;
      }
    }

    // Results: the loss, then one gradient per trainable parameter.
    SmallVector<Value> results{loss};
    SmallVector<Attribute> resultAttrs{step.getResultAttrDict(*lossIndex)};
    for (BlockArgument arg : body.getArguments()) {
      auto info = model::ParamInfo::fromAttr(
          step.getArgAttr(arg.getArgNumber(), model::kParamAttr));
      if (!info || !info->trainable)
        continue;
      Value g = grads.lookup(arg);
      if (!g) // the loss does not depend on this parameter
        g = tg::build::splat(b, step.getLoc(), cast<RankedTensorType>(arg.getType()), 0.0);
      results.push_back(g);
      resultAttrs.push_back(b.getDictionaryAttr(b.getNamedAttr(
          model::kGradOfAttr, b.getI64IntegerAttr(paramIndex(step, arg)))));
    }
    size_t gradientsEnd = results.size();
    // Buffer updates (batch norm's running statistics) stay results of the
    // step: written in place like the updated parameters.
    for (unsigned i = 0; i < step.getNumResults(); ++i)
      if (step.getResultAttr(i, model::kUpdatesBufferAttr)) {
        auto k = step->getParentOfType<ModuleOp>()->getAttrOfType<IntegerAttr>(
            model::kMicroBatchesAttr);
        if (k && k.getInt() > 1)
          return step.emitError("tg-autodiff: batch norm's running statistics "
                                "(model buffers) with micro_batches > 1 are not "
                                "supported");
        results.push_back(ret.getOperand(i));
        resultAttrs.push_back(step.getResultAttrDict(i));
      }
    func::ReturnOp::create(b, ret.getLoc(), results);
    ret.erase();
    step.setType(FunctionType::get(step.getContext(), step.getArgumentTypes(),
                                   ValueRange(results).getTypes()));
    step.setAllResultAttrs(resultAttrs);
    recordGradientBytes(b, step, ValueRange(results).slice(1, gradientsEnd - 1));

    // Drop what the step does not need: eval-only outputs and gradients of
    // data inputs.
    IRRewriter rewriter(step.getContext());
    (void)runRegionDCE(rewriter, step.getBody());
    return success();
  }

  // The trainable parameters' gradients by element type, for the
  // descriptor's train_gradient_bytes (trun --info's "gradients" row): a
  // frozen base (LoRA) shows as the adapters' bytes alone.
  static void recordGradientBytes(OpBuilder &b, func::FuncOp step, ValueRange grads) {
    SmallVector<std::pair<Type, int64_t>> byType;
    for (Value g : grads) {
      auto t = cast<RankedTensorType>(g.getType());
      int64_t bytes = t.getNumElements() * ((t.getElementTypeBitWidth() + 7) / 8);
      auto same = llvm::find_if(byType, [&](auto &e) { return e.first == t.getElementType(); });
      if (same != byType.end())
        same->second += bytes;
      else
        byType.push_back({t.getElementType(), bytes});
    }
    SmallVector<Attribute> list;
    for (auto [type, bytes] : byType)
      list.push_back(b.getArrayAttr({TypeAttr::get(type), b.getI64IntegerAttr(bytes)}));
    step->setAttr(model::kGradientBytesAttr, b.getArrayAttr(list));
  }

  // Position of `arg` among the parameters (arguments carrying tg.param).
  static int64_t paramIndex(func::FuncOp f, BlockArgument arg) {
    int64_t index = 0;
    for (unsigned i = 0; i < arg.getArgNumber(); ++i)
      if (f.getArgAttr(i, model::kParamAttr))
        ++index;
    return index;
  }
};

} // namespace
