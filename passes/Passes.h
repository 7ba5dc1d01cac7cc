// tcc's passes. Declarations are generated from Passes.td.
#ifndef TCC_PASSES_PASSES_H
#define TCC_PASSES_PASSES_H

#include "dialects/kern/KernDialect.h"
#include "dialects/tg/TgDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>

namespace tcc {

// The precisions of `tcc compile --precision` (tg-amp's policy).
enum class Precision { Bf16, Fp16, Tf32, Fp32, Fp8 };
std::optional<Precision> parsePrecision(llvm::StringRef name);
// The table of tg-amp's decisions (every op of @forward with the type it
// computes in and why), from the module right after tg-amp; --dump-dir
// writes it next to that pass's dump.
void writeAmpReport(mlir::ModuleOp module, llvm::raw_ostream &os);
// tg-conv-layout's decisions (each chain of convolutions and pooling ops:
// its layout and why), from the module right after that pass.
void writeConvLayoutReport(mlir::ModuleOp module, llvm::raw_ostream &os);

// The table of tg-fuse-attention's decisions (every softmax candidate:
// fused with its shape, or not and why), from the module right after that
// pass; --dump-dir writes it next to the pass's dump.
void writeAttentionFusionReport(mlir::ModuleOp module, llvm::raw_ostream &os);
// The table of tg-fuse-rms-norm's decisions (each mean of a square over
// the last axis: fused into tg.rms_norm, or not and why).
void writeRmsNormFusionReport(mlir::ModuleOp module, llvm::raw_ostream &os);
// The table of tg-cache-rope's decisions (tables cached, rotations fused,
// what was left and why), from the module right after tg-cache-rope.
void writeCacheRopeReport(mlir::ModuleOp module, llvm::raw_ostream &os);
// tg-cache-frozen's decision (the cut of the frozen encoder, or why
// nothing was cut), from the module right after that pass.
void writeCacheFrozenReport(mlir::ModuleOp module, llvm::raw_ostream &os);
// tg-derive-generate's decisions (@prefill / @decode derived from
// @forward, or why not), from the module right after that pass.
void writeDeriveGenerateReport(mlir::ModuleOp module, llvm::raw_ostream &os);
// kern-fold-attention-layout's decisions (each attention tensor: copies
// folded into strides, or kept and why), from the module after that pass.
void writeAttentionLayoutReport(mlir::ModuleOp module, llvm::raw_ostream &os);

// The table of tg-fuse-matmul-epilogue's decisions (every matmul: fused
// with which epilogue, or not and why), from the module right after it.
void writeMatmulEpilogueReport(mlir::ModuleOp module, llvm::raw_ostream &os);
// The table of kern-fuse-horizontal's decisions (each group and its
// members, each kernel a group refused and why, and a count).
void writeFuseHorizontalReport(mlir::ModuleOp module, llvm::raw_ostream &os);
// kern-fuse-elementwise's clusters of kernels linked through reshapes and
// the one shape each computes in.
void writeFuseElementwiseReport(mlir::ModuleOp module, llvm::raw_ostream &os);

// tg-remat's decisions (each value recomputed: bytes freed, FLOPs added;
// the largest values left at the last peak and why), from the module right
// after it; --dump-dir writes it next to the pass's dump.
void writeRematReport(mlir::ModuleOp module, llvm::raw_ostream &os);
// What the memory passes leave on @train_step for tcc compile
// --memory-budget to weigh: the time each estimates it added, f64 seconds
// at nominal rates (tg-chunk-loss-head's only when it chunked a head).
inline constexpr llvm::StringLiteral kRematSecondsAttr = "tg.remat_seconds";
inline constexpr llvm::StringLiteral kLossChunkSecondsAttr = "tg.loss_chunk_seconds";

// kern-schedule-collectives' decisions (each all-reduce moved: after which
// op, ahead of how many kernels).
// tg-all-reduce-gradients' decisions (gradients reduced narrow, late casts
// moved up, ZeRO-1's sharding); writes nothing for a module without them.
void writeAllReduceGradientsReport(mlir::ModuleOp module, llvm::raw_ostream &os);
void writeScheduleCollectivesReport(mlir::ModuleOp module, llvm::raw_ostream &os);
// tg-shard-parameters' decisions (each parameter sharded and where it is
// gathered, or kept whole and why); nothing for a module without them.
void writeShardParametersReport(mlir::ModuleOp module, llvm::raw_ostream &os);

// tg-chunk-loss-head's decisions (each loss head chunked: pieces, logits
// bytes before and after, time added; or why not).
void writeChunkLossHeadReport(mlir::ModuleOp module, llvm::raw_ostream &os);

// kern-plan-memory's placement of one temporary (a kern.workspace_view of
// the arena): its bytes (64-byte rounded) and its live range in walk order.
struct PlannedBuffer {
  kern::WorkspaceViewOp view;
  int64_t offset, bytes, start, lastUse;
};
// The temporaries of a planned function.
llvm::SmallVector<PlannedBuffer> plannedBuffers(mlir::func::FuncOp f);
// The largest sum of temporaries live at once (their planned bytes) and
// the op index where it is first reached (-1 without temporaries).
std::pair<int64_t, int64_t> livePeak(llvm::ArrayRef<PlannedBuffer> buffers);
// Pairs of buffers live at the same time that share a byte (empty for a
// right plan).
llvm::SmallVector<std::pair<PlannedBuffer, PlannedBuffer>>
planOverlaps(llvm::ArrayRef<PlannedBuffer> buffers);
// A planned function's bytes by category: arguments by kind (parameters,
// optimizer state, inputs, outputs) and the arena of temporaries, with the
// largest sum of temporaries live at once.
struct MemorySummary {
  int64_t params = 0, optimizerState = 0, inputs = 0, outputs = 0;
  int64_t arena = 0, peakLive = 0, peakAt = -1; // peakAt: the op index of peakLive
  int64_t total() const { return params + optimizerState + inputs + outputs + arena; }
};
MemorySummary summarizeMemory(mlir::func::FuncOp f);
// One line: "parameters 0.46 GiB, optimizer state 0.93 GiB, ...".
std::string formatMemorySummary(const MemorySummary &m);
// 512 B, 3.0 KiB, 12.5 MiB, 6.93 GiB.
std::string formatBytes(int64_t bytes);

// kern-plan-memory's plan of every function: the arena, the arguments
// outside it by kind, each temporary's offset, bytes, live range, type and
// model node, and the overlap check; --dump-dir writes it after the pass.
void writeMemoryPlanReport(mlir::ModuleOp module, llvm::raw_ostream &os);

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

} // namespace tcc

#endif
