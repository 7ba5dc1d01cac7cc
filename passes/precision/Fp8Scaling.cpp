//===- Fp8Scaling.cpp - delayed scaling's step state for FP8 casts ------===//
//
// tcc compile --precision fp8 (--fp8-scaling delayed, the default): each
// train function with FP8 products (tg.matmul marked tg.fp8 by tg-amp and
// tg-autodiff, and the tg.matmul_epilogue a residual add was fused into)
// gets one whole-step state argument, "fp8_scaling", f32
// [2 * products, 32], zeros at the start: a record per operand cast (the
// step ABI's tcc_fp8_scaling_record). The graph does not read it: the
// cuda code generator gives each FP8 cast it emits the next record, whose
// amax history sets the cast's scale (one read of the operand, not two)
// and which the cast updates in place. trun allocates, checkpoints and
// restores it like any optimizer state, so a resumed run keeps its scales.
// After tg-remat (whose clones of forward products are further casts:
// two records per product counted then). Functions without FP8 products,
// and @forward and the generation entries (current scaling: no state),
// are left alone.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "dialects/common/ModelAttrs.h"
#include "dialects/tg/TgDialect.h"
#include "mlir/IR/BuiltinTypes.h"
#include "passes/training/TrainingUtils.h"

namespace tcc {
#define GEN_PASS_DEF_TGFP8SCALING
#include "passes/Passes.h.inc"
} // namespace tcc

using namespace mlir;
using namespace tcc;

namespace {

struct TgFp8ScalingPass : tcc::impl::TgFp8ScalingBase<TgFp8ScalingPass> {
  void runOnOperation() override {
    for (auto fn : getOperation().getOps<func::FuncOp>()) {
      if (fn.isExternal() || !isTrainFunction(fn))
        continue;
      if (training::findStepStateArgument(fn, model::kFp8ScalingState)) {
        fn.emitError(getArgument()) << ": @" << fn.getName() << " already has the state \""
                                    << model::kFp8ScalingState << "\"";
        return signalPassFailure();
      }
      int64_t products = 0;
      fn.walk([&](Operation *op) {
        products += isa<tg::MatmulOp, tg::MatmulEpilogueOp>(op) && op->hasAttr(model::kFp8Attr);
      });
      if (products == 0)
        continue;
      auto type = RankedTensorType::get({2 * products, model::kFp8ScalingRecordFloats},
                                        Float32Type::get(&getContext()));
      training::appendStepStateArgument(fn, type, model::kFp8ScalingState, 0.0);
    }
  }

  // A function trun trains: it updates parameters (its results write back
  // into them).
  static bool isTrainFunction(func::FuncOp fn) {
    for (unsigned r = 0; r < fn.getNumResults(); ++r)
      if (fn.getResultAttr(r, model::kUpdatesParamAttr))
        return true;
    return false;
  }
};

} // namespace
