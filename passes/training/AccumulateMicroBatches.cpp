//===- AccumulateMicroBatches.cpp - gradient accumulation -----------------===//
//
// With tg.micro_batches = K on the module, one optimizer step covers K
// micro-batches of the batch the model is written for:
//
// @train_step(params..., x (B, ...), ...) -> (loss, grads...)
//   becomes
// @train_step(params..., x (K*B, ...), ...) -> (loss, grads...)
//
// whose body runs the old body (forward and backward) once per micro-batch
// k on x[k*B : (k+1)*B] and returns the mean of the K losses and of the K
// gradients: for a loss that is a mean over the batch, the loss and the
// gradients of one K*B batch. Running sums right after each micro-batch keep
// only one micro-batch's activations alive at a time.
//
// @forward (the eval entry point) gets the same K*B inputs, so train and
// eval share one input layout: the loss is the mean over the micro-batches,
// eval outputs of rank >= 1 are concatenated along their first dimension
// (rank 0 ones averaged).
//
// Dropout differs per micro-batch: in micro-batch k each tg.dropout's (and
// tg.attention / tg.attention_grad's) op_id becomes op_id ^ mix64(k) (mix64
// of runtime/include/tcc/counter_rng.h; mix64(0) = 0, so micro-batch 0 keeps
// the model's masks).
//
// Without tg.micro_batches (or with K = 1) the module is left unchanged.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "dialects/common/ModelAttrs.h"
#include "dialects/tg/TgStructuralBuilders.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "passes/training/TrainingUtils.h"
#include "tcc/counter_rng.h"

namespace tcc {
#define GEN_PASS_DEF_TGACCUMULATEMICROBATCHES
#include "passes/Passes.h.inc"
} // namespace tcc

using namespace mlir;
using namespace tcc;

namespace {

RankedTensorType rtt(Value v) { return cast<RankedTensorType>(v.getType()); }

// How a result of the K micro-batch copies becomes the function's result.
enum class Combine { Mean, Concat };

struct TgAccumulateMicroBatchesPass
    : tcc::impl::TgAccumulateMicroBatchesBase<TgAccumulateMicroBatchesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto attr = module->getAttrOfType<IntegerAttr>(model::kMicroBatchesAttr);
    if (!attr || attr.getInt() == 1)
      return;
    int64_t k = attr.getInt();
    if (k < 1) {
      module.emitError(getArgument())
          << ": " << model::kMicroBatchesAttr << " must be >= 1, got " << k;
      return signalPassFailure();
    }
    FailureOr<func::FuncOp> step =
        training::getTrainStep(module, getArgument());
    if (failed(step))
      return signalPassFailure();
    for (StringRef name : {model::kTrainStepFunc, model::kForwardFunc})
      if (auto f = module.lookupSymbol<func::FuncOp>(name))
        if (failed(accumulate(f, k)))
          return signalPassFailure();
  }

  LogicalResult accumulate(func::FuncOp f, int64_t k) {
    Block &old = f.getBody().front();
    auto oldReturn = cast<func::ReturnOp>(old.getTerminator());

    // The new entry block: data inputs K times larger along dimension 0.
    auto *entry = new Block();
    f.getBody().getBlocks().insert(f.getBody().begin(), entry);
    SmallVector<bool> isInput;
    for (BlockArgument arg : old.getArguments()) {
      auto type = rtt(arg);
      bool input = static_cast<bool>(
          f.getArgAttr(arg.getArgNumber(), model::kInputAttr));
      isInput.push_back(input);
      if (input && type.getRank() == 0)
        return f.emitError(getArgument())
               << ": input #" << arg.getArgNumber()
               << " is a scalar; micro-batches split inputs along their "
                  "first dimension";
      SmallVector<int64_t> shape(type.getShape());
      if (input)
        shape[0] *= k;
      entry->addArgument(RankedTensorType::get(shape, type.getElementType()),
                         arg.getLoc());
    }

    SmallVector<Combine> combine;
    for (unsigned r = 0; r < f.getNumResults(); ++r) {
      bool mean = f.getResultAttr(r, model::kLossAttr) ||
                  f.getResultAttr(r, model::kGradOfAttr) ||
                  rtt(oldReturn.getOperand(r)).getRank() == 0;
      combine.push_back(mean ? Combine::Mean : Combine::Concat);
    }

    OpBuilder b = OpBuilder::atBlockEnd(entry);
    SmallVector<Value> sums(f.getNumResults());
    SmallVector<SmallVector<Value>> pieces(f.getNumResults());
    for (int64_t micro = 0; micro < k; ++micro) {
      IRMapping mapping;
      for (auto [oldArg, newArg, input] :
           llvm::zip(old.getArguments(), entry->getArguments(), isInput)) {
        Value v = newArg;
        if (input) { // x[micro*B : (micro+1)*B], x is (K*B, ...)
          int64_t rows = rtt(oldArg).getDimSize(0);
          v = tg::build::sliceAxis(b, oldArg.getLoc(), newArg, 0,
                                   micro * rows, rows);
        }
        mapping.map(oldArg, v);
      }
      uint64_t opIdMix = tcc_rng_mix64(static_cast<uint64_t>(micro));
      for (Operation &op : old.without_terminator()) {
        Operation *copy = b.clone(op, mapping);
        if (auto dropout = dyn_cast<tg::DropoutOp>(copy))
          dropout.setOpId(static_cast<int64_t>(
              static_cast<uint64_t>(dropout.getOpId()) ^ opIdMix));
        // Fused attention dropout: forward and gradient share one op_id,
        // so both get the same micro-batch mask.
        if (isa<tg::AttentionOp, tg::AttentionGradOp>(copy))
          if (auto id = copy->getAttrOfType<IntegerAttr>("op_id"))
            copy->setAttr("op_id",
                          IntegerAttr::get(id.getType(),
                                           static_cast<int64_t>(
                                               static_cast<uint64_t>(id.getInt()) ^
                                               opIdMix)));
      }
      for (unsigned r = 0; r < f.getNumResults(); ++r) {
        Value v = mapping.lookup(oldReturn.getOperand(r));
        if (combine[r] == Combine::Concat) {
          pieces[r].push_back(v);
          continue;
        }
        // Sum now, so this micro-batch's values can die.
        sums[r] = sums[r] ? tg::AddOp::create(b, v.getLoc(), v.getType(),
                                              sums[r], v)
                                .getResult()
                          : v;
      }
    }

    SmallVector<Value> results;
    for (unsigned r = 0; r < f.getNumResults(); ++r) {
      Location loc = oldReturn.getOperand(r).getLoc();
      if (combine[r] == Combine::Concat) {
        results.push_back(tg::build::concat(b, loc, pieces[r], 0));
        continue;
      }
      auto type = rtt(sums[r]);
      Value scale = tg::build::splat(
          b, loc, RankedTensorType::get({}, type.getElementType()),
          1.0 / static_cast<double>(k));
      results.push_back(tg::MulOp::create(b, loc, type, sums[r], scale));
    }
    func::ReturnOp::create(b, oldReturn.getLoc(), results);

    old.dropAllDefinedValueUses();
    old.erase();
    f.setType(FunctionType::get(f.getContext(), entry->getArgumentTypes(),
                                ValueRange(results).getTypes()));
    return success();
  }
};

} // namespace
