// The pipeline from an imported model to a module ready for code generation.
// Read top to bottom: this is the order the passes run in, and the order of
// the numbered files in a --dump-dir.
#include "compiler/pipeline/Pipeline.h"

#include "dialects/common/ModelAttrs.h"
#include "dialects/tg/BatchNormSync.h"
#include "mlir/Transforms/Passes.h"
#include "passes/Passes.h"

namespace tcc {

std::optional<Phase> parsePhase(llvm::StringRef name) {
  return llvm::StringSwitch<std::optional<Phase>>(name)
      .Case("import", Phase::Import)
      .Case("training", Phase::Training)
      .Case("kern", Phase::Kern)
      .Case("plan", Phase::Plan)
      .Case("source", Phase::Source)
      .Case("library", Phase::Library)
      .Default(std::nullopt);
}

llvm::StringRef phaseName(Phase p) {
  switch (p) {
  case Phase::Import: return "import";
  case Phase::Training: return "training";
  case Phase::Kern: return "kern";
  case Phase::Plan: return "plan";
  case Phase::Source: return "source";
  case Phase::Library: return "library";
  }
  return "";
}

void annotateModule(mlir::ModuleOp module, const PipelineOptions &options) {
  mlir::Builder b(module.getContext());
  if (options.lossScaling)
    module->setAttr(model::kLossScalingAttr, options.lossScaling->toAttr(b));
  if (options.deterministic)
    module->setAttr(model::kDeterministicAttr, b.getUnitAttr());
  if (options.dataParallel)
    module->setAttr(model::kDataParallelAttr, b.getUnitAttr());
  else // one rank: a synchronized batch norm is an ordinary one
    module.walk([](mlir::Operation *op) { op->removeAttr(tg::kBatchNormSyncAttr); });
  if (options.dataParallel && options.shardOptimizer > 0)
    module->setAttr(model::kShardOptimizerAttr, b.getI64IntegerAttr(options.shardOptimizer));
  if (options.dataParallel && options.shardParameters > 0)
    module->setAttr(model::kShardParametersAttr, b.getI64IntegerAttr(options.shardParameters));
  if (options.dataParallel && options.reduceGradientsInF32)
    module->setAttr(model::kReduceGradientsInF32Attr, b.getUnitAttr());
}

void buildPipeline(mlir::OpPassManager &pm, Phase stopAfter,
                   const PipelineOptions &options) {
  if (stopAfter == Phase::Import)
    return;
  // 0. Graph fusions that must see the forward ops whole, before autodiff
  //    differentiates them: cross-entropy becomes the fused
  //    softmax_cross_entropy, whose gradient is one kernel too.
  pm.addPass(createTgFuseCrossEntropy());
  //    RMSNorm written out (mean of a square, eps, rsqrt, weight) becomes
  //    one tg.rms_norm: the fused norm kernels forward and backward.
  pm.addPass(createTgFuseRmsNorm());
  //    Attention written out (q.k^T, scale, causal mask, softmax, dropout,
  //    .v) becomes one tg.attention: flash kernels, nothing T x S saved.
  //    On cuda only the shapes the flash kernels take fuse.
  pm.addPass(createTgFuseAttention(
      TgFuseAttentionOptions{options.target, options.cudaArch,
                             options.fuseAttention}));
  //    Rotary embeddings: position-only tables (iota -> sin/cos) become
  //    constants computed here, and each rotation one tg.rope.
  pm.addPass(createTgCacheRope());
  // 0b. Precision: the forward graph gets the --precision policy's casts
  //     (bf16/fp16 products, f32 losses, reductions and norms) before
  //     autodiff, so the backward inherits them.
  pm.addPass(createTgAmp(TgAmpOptions{options.precision, options.target, options.fp8Keep}));
  // 0c. Layout: NCHW or channels-last per chain of convolutions, pooling
  //     and batch norm, decided on the precision tg-amp chose, before
  //     autodiff so the backward inherits it (only for models with vision
  //     ops: the other models' dumps keep their numbers).
  if (options.visionOps)
    pm.addPass(createTgConvLayout(TgConvLayoutOptions{options.target, options.channelsLast}));
  // 0d. Generation (tcc compile --generate): @prefill / @decode with a KV
  //     cache, derived from @forward as tg-amp left it (its casts included),
  //     before autodiff and tg-strip-train-only-ops (the entries have no
  //     dropout of their own).
  if (options.generate)
    pm.addPass(createTgDeriveGenerate());
  // 1. Training transforms: the forward graph becomes a whole train step,
  //    one pass per stage of the recipe so the dumps show them apart:
  //    autodiff (loss and gradients), accumulation over micro-batches,
  //    clipping, the optimizer update. Recipe passes the module does not ask
  //    for (no tg.micro_batches, no tg.grad_clip, no tg.loss_scaling,
  //    another optimizer) leave it unchanged. With loss scaling, autodiff
  //    seeds the backward pass with the scale, tg-unscale-gradients divides
  //    it out before clipping sees the gradients, and tg-update-loss-scale
  //    (after the optimizer) skips the update on overflow and adapts the
  //    scale.
  pm.addPass(createTgAutodiff());
  pm.addPass(createTgStripTrainOnlyOps()); // @forward: eval (no dropout)
  pm.addPass(createTgAccumulateMicroBatches());
  if (options.dataParallel) // (its dump only when asked: numbering unchanged)
    pm.addPass(createTgAllReduceGradients());
  pm.addPass(createTgUnscaleGradients());
  if (options.emitGradients) {
    pm.addPass(createTgEmitGradients());
  } else {
    pm.addPass(createTgClipGradNorm());
    pm.addPass(createTgSgdUpdate());
    pm.addPass(createTgAdamWUpdate());
  }
  pm.addPass(createTgUpdateLossScale());
  // 2. Clean up what autodiff produced (repeated constants, shared
  //    subexpressions of the backward graph).
  pm.addPass(mlir::createCSEPass());
  // 2a. Frozen encoder (--cache-frozen): @encode and @train_cached split
  //     off the finished train step, so the cached step is that step.
  if (options.cacheFrozen)
    pm.addPass(createTgCacheFrozen());
  if (stopAfter == Phase::Training)
    return;
  // 2b. GEMM epilogues: a product's bias add, gelu and residual add become
  //     one tg.matmul_epilogue (one GEMM), the backward's gelu_grad reading
  //     its saved pre-activation. After the recipe: the op has no gradient.
  pm.addPass(createTgFuseMatmulEpilogue(
      TgFuseMatmulEpilogueOptions{options.target, options.fuseEpilogue,
                                  options.fuseBiasGradient, options.normBiasGradient}));
  // 3. Composite NN ops -> primitives (softmax, norms, cross_entropy, ...);
  //    CSE merges the forward and backward copies of their statistics.
  pm.addPass(createTgDecompose());
  pm.addPass(mlir::createCSEPass());
  // 3b. Memory: under a budget, forward values live across the step's peak
  //     are dropped and recomputed before their backward readers (after
  //     the last CSE, which would merge the clones back).
  //     First, when asked (--loss-chunks, or chosen by --memory-budget), the
  //     loss head's logits in row chunks: the step's largest tensor, live
  //     one chunk at a time.
  if (options.lossChunks > 1)
    pm.addPass(createTgChunkLossHead(TgChunkLossHeadOptions{options.lossChunks}));
  // 3c. ZeRO-3 (--shard-parameters N): every function takes this rank's
  //     shard of each parameter and all-gathers it right before each use,
  //     so a whole parameter lives only around its readers (after the last
  //     CSE, which would merge the gathers; before tg-remat, which then
  //     plans with them).
  if (options.dataParallel && options.shardParameters > 0)
    pm.addPass(createTgShardParameters());
  pm.addPass(createTgRemat(TgRematOptions{options.rematBudget, options.rematCopies}));
  // 3d. FP8 delayed scaling: each train step's casts get records in the
  //     step state (after tg-remat, whose clones cast again; only with fp8,
  //     so other compiles' dumps keep their numbers).
  if (options.precision == "fp8" && options.fp8DelayedScaling)
    pm.addPass(createTgFp8Scaling());
  // 4. Tensors -> buffers: one kern op per kernel or library call.
  pm.addPass(createTgLowerToKern());
  pm.addPass(createKernFuseElementwise()); // elementwise chains -> one loop
  // Slices / transposes / concats around attention -> kernel strides.
  pm.addPass(createKernFoldAttentionLayout());
  pm.addPass(createKernFuseCrossEntropyGrad()); // loss + gradient: one read of the logits
  // Independent kernels with one body (per-parameter optimizer updates,
  // weight casts, gradient-norm sums) -> one multi-tensor launch each.
  pm.addPass(createKernFuseHorizontal(
      KernFuseHorizontalOptions{options.fuseHorizontal}));
  // Data parallel: each all-reduce issued as soon as its gradient is final
  // (overlapping the rest of the backward on a GPU).
  if (options.dataParallel)
    pm.addPass(createKernScheduleCollectives());
  if (stopAfter == Phase::Kern)
    return;
  // 5. Memory plan: every temporary gets an offset in one workspace arena.
  pm.addPass(createKernPlanMemory());
}

bool hasVisionOps(mlir::ModuleOp module) {
  bool found = false;
  module.walk([&](mlir::Operation *op) {
    if (llvm::isa<tg::Conv2dOp, tg::MaxPool2dOp, tg::AvgPool2dOp>(op)) {
      found = true;
      return mlir::WalkResult::interrupt();
    }
    return mlir::WalkResult::advance();
  });
  return found;
}

void registerAllTccPasses() { registerTccPasses(); }

} // namespace tcc
