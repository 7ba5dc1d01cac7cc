// The compilation pipeline, assembled in one place (Pipeline.cpp).
#ifndef TCC_COMPILER_PIPELINE_PIPELINE_H
#define TCC_COMPILER_PIPELINE_PIPELINE_H

#include <optional>
#include <string>

#include "llvm/ADT/StringRef.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "passes/training/LossScaling.h"

namespace tcc {

// Where `--compile-to` may stop. Each phase ends after the passes named.
enum class Phase {
  Import,   // tg from the model file, nothing else
  Training, // + autodiff, accumulation, clipping, optimizer (tg IR)
  Kern,     // + tg-lower-to-kern
  Plan,     // + kern-plan-memory: ready for code generation
  Source,   // + generated C++ (no host compiler)
  Library,  // + step.so
};

std::optional<Phase> parsePhase(llvm::StringRef name);
llvm::StringRef phaseName(Phase p);

struct PipelineOptions {
  // The train step skips clipping and the optimizer and returns each
  // gradient as the train output "grad:<param>" (tcc compile
  // --emit-gradients, for comparing gradients with PyTorch).
  bool emitGradients = false;
  // Bit-identical results run to run (tcc compile --deterministic): the
  // module's tg.deterministic, which tg-lower-to-kern passes on to
  // kern.attention_grad (its kernels may then take no atomic path).
  bool deterministic = false;
  // tg-amp's policy: "bf16", "fp16", "tf32", "fp32" or "fp8" (tcc compile
  // --precision; the driver picks the target's default).
  std::string precision = "fp32";
  std::string fp8Keep; // tcc compile --fp8-keep (tg-amp's fp8-keep)
  // fp8: true runs tg-fp8-scaling (delayed scaling in the train step);
  // false leaves every cast on current scaling (--fp8-scaling current).
  bool fp8DelayedScaling = true;
  // Dynamic loss scaling (GradScaler semantics): set, the train step scales
  // the loss by its "loss_scale" state, unscales and checks the gradients,
  // skips the update on overflow and adapts the scale (tcc compile
  // --loss-scale dynamic; the default for fp16 training). Unset: none.
  std::optional<training::LossScalingConfig> lossScaling;
  // The compile target ("cuda" or "cpu") and, for cuda, the architecture
  // "sm_XY": tg-fuse-attention fuses only what the target's kernels take.
  std::string target = "cpu";
  std::string cudaArch;
  // false: tg-fuse-attention leaves attention written out (reported).
  bool fuseAttention = true;
  // false: tg-fuse-matmul-epilogue fuses no GEMM epilogue (reported).
  bool fuseEpilogue = true;
  bool fuseBiasGradient = true; // false: tcc compile --no-fuse-bias-grad
  // false: the residual stream's bias gradients go to their weight
  // gradients' GEMMs, not the layer_norm_grad that writes dY
  // (tcc compile --no-norm-bias-grad).
  bool normBiasGradient = true;
  // false: kern-fuse-horizontal groups nothing (tests compare both).
  bool fuseHorizontal = true;
  // tg-remat's budget: bytes @train_step's live temporaries may take (its
  // tensor estimate); < 0 recomputes nothing. tcc compile --memory-budget
  // searches for the value whose memory plan fits the budget.
  int64_t rematBudget = -1;
  // tg-remat's copies option: false keeps every broadcast / concat /
  // transpose / slice copy alive across the peak (--no-remat-copies).
  bool rematCopies = true;
  // tg-chunk-loss-head's pieces (tcc compile --loss-chunks, or chosen by
  // --memory-budget): > 1 computes the loss head's logits and gradient in
  // that many row chunks; <= 1 leaves the head whole (the pass is not run).
  int64_t lossChunks = 1;
  // tcc compile --data-parallel: tg.data_parallel on the module, so
  // tg-all-reduce-gradients averages the gradients and the loss over ranks.
  bool dataParallel = false;
  // tcc compile --cache-frozen: tg-cache-frozen splits the frozen encoder
  // off as the entries encode / train_cached (off by default: its dump
  // would renumber the later ones).
  bool cacheFrozen = false;
  // tcc compile --shard-optimizer N (with dataParallel): tg.shard_optimizer
  // = N on the module (ZeRO-1); 0: not sharded.
  int64_t shardOptimizer = 0;
  // tcc compile --shard-parameters N (with shardOptimizer = N):
  // tg.shard_parameters = N on the module, and tg-shard-parameters runs
  // (ZeRO-3 / FSDP); 0: parameters whole on every rank.
  int64_t shardParameters = 0;
  // tcc compile --reduce-gradients-in f32 (with dataParallel):
  // tg.reduce_gradients_in_f32 on the module.
  bool reduceGradientsInF32 = false;
  // tcc compile --generate: tg-derive-generate adds the KV-cache entries
  // @prefill / @decode to a GPT-like model (off by default: the pass and its
  // report would renumber every later dump).
  bool generate = false;
  // The cuda step runs cuDNN (its frontend found, no --no-cudnn): the
  // memory of the step (MemoryBudget) counts cuDNN's convolution workspace.
  bool cudnn = false;
  // The cuda step may run tcc's sm90 attention at cuDNN's sites (sm_90, no
  // --no-sm90-attention): the memory of the step counts its backward's
  // workspace (kern::attentionWorkspaceBytes), and emitCuda allows it.
  bool sm90Attention = false;
  // tg-conv-layout may make chains channels-last: the cuda target with
  // cuDNN (its frontend found, no --no-cudnn) and no --no-channels-last.
  bool channelsLast = false;
  // The model has convolutions or pooling (hasVisionOps): tg-conv-layout
  // runs (the other models' dumps keep their numbers).
  bool visionOps = false;
};

// Whether `module` has tg.conv2d / max_pool2d / avg_pool2d ops.
bool hasVisionOps(mlir::ModuleOp module);

// Writes the module attributes `options` ask for (tg.loss_scaling,
// tg.deterministic), which
// the passes read: call it on the imported module before the pipeline runs,
// so every dump shows them and tcc-opt runs of the passes read them.
void annotateModule(mlir::ModuleOp module, const PipelineOptions &options);

// Adds the passes that take an imported module to `stopAfter`.
void buildPipeline(mlir::OpPassManager &pm, Phase stopAfter,
                   const PipelineOptions &options = {});

// Registers all tcc passes (for tcc-opt).
void registerAllTccPasses();

} // namespace tcc

#endif
