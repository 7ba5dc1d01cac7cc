// tcc compile --memory-budget: the size given (parsed here, with the error a
// user sees for a bad one), what a compiled step needs on the device, the
// check of the memory plan against the budget, and the search for
// tg-remat's budget that makes the plan fit.
#ifndef TCC_COMPILER_DRIVER_MEMORYBUDGET_H
#define TCC_COMPILER_DRIVER_MEMORYBUDGET_H

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "mlir/IR/BuiltinOps.h"
#include "passes/Passes.h"

namespace tcc {

struct PipelineOptions; // compiler/pipeline/Pipeline.h

// "6GiB", "5.5 GiB", "800MB", "1073741824" (bytes), "512MiB": a positive
// size in bytes; units B, KB/MB/GB/TB (powers of 1000), KiB/MiB/GiB/TiB
// (powers of 1024). Anything else (a percentage, a negative or zero size,
// an unknown unit, trailing text) is nullopt with `error` saying why.
std::optional<int64_t> parseByteSize(const std::string &text, std::string &error);

// What a compiled step needs on the device, from the memory plan: the
// parameters, optimizer state and inputs (two sets on cuda), one workspace
// that @train_step and @forward (eval) share (each call uses it alone: the
// larger of the two functions' temporaries, plus outputs on the cpu) and,
// on cuda, the workspace cuBLASLt and cuDNN's attention share. On cuda
// eval's outputs are allocated by the first eval call that leaves them
// NULL: counted apart (evalOutputs). Not included: the CUDA context.
struct StepMemory {
  MemorySummary train, eval;
  bool hasEval = false;
  bool cuda = false;
  int64_t library = 0; // cuBLASLt's workspace (cuda)
  // The FP8 products' operand slots after it (cuda, --precision fp8;
  // codegen::cuda::fp8GemmScratchBytes).
  int64_t fp8 = 0;
  // FP8 casts kept for later products, after the shared workspace
  // (codegen::cuda::fp8KeptCastBytes).
  int64_t fp8Kept = 0;
  // What cuDNN's attention backward, or tcc's sm90 one, needs beyond
  // cuBLASLt's workspace
  // (cuda; kern::attentionWorkspaceBytes): the step's shared
  // workspace grows by it.
  int64_t attention = 0;
  // What cuDNN's convolutions may use beyond those two (cuda;
  // codegen::cuda::cudnnConvWorkspaceBytes, an estimate trun keeps cuDNN
  // within where it can).
  int64_t convolutions = 0;
  // On cuda trun holds two sets of inputs (the next batch uploads while a
  // step runs).
  int64_t fixed() const {
    return train.params + train.optimizerState + train.inputs * (cuda ? 2 : 1) + library +
           fp8 + fp8Kept + attention + convolutions;
  }
  int64_t trainSide() const { return train.arena + train.outputs; }
  // On cuda eval's outputs are not in the workspace: a call that leaves
  // them NULL (trun's evaluations) allocates them then (evalOutputs()).
  int64_t evalSide() const { return hasEval ? eval.arena + (cuda ? 0 : eval.outputs) : 0; }
  int64_t evalOutputs() const { return hasEval && cuda ? eval.outputs : 0; }
  int64_t workspace() const { return std::max(trainSide(), evalSide()); }
  int64_t total() const { return fixed() + workspace(); }
};
// The target's libraries from `options` (PipelineOptions::target, cudnn:
// cuDNN's convolution and attention workspace estimates are part of it;
// sm90Attention: tcc's sm90 attention backward's).
StepMemory stepMemory(mlir::ModuleOp module, const PipelineOptions &options);
// One line: "parameters 474.8 MiB, ...: 8.34 GiB on the device".
std::string formatStepMemory(const StepMemory &s);

// The planned module against `budget` bytes: OK when StepMemory::total
// fits; else an error saying by how much and why: the parameters,
// optimizer state and inputs alone (no plan can fit), eval's outputs and
// temporaries (recomputation does not shrink them), or the largest
// temporaries live at @train_step's peak.
absl::Status checkMemoryBudget(mlir::ModuleOp module, int64_t budget,
                               const PipelineOptions &options);

// A GPU `tcc compile --gpu NAME` knows: its memory as the driver reports
// it (nvidia-smi's memory.total), the architecture to compile for.
struct NamedGpu {
  const char *name;   // lower case, e.g. "h100"
  const char *what;   // e.g. "NVIDIA H100 80GB HBM3 (SXM or PCIe)"
  int64_t totalBytes; // memory.total
  const char *arch;   // e.g. "sm_90"
};
// The GPUs --gpu takes.
llvm::ArrayRef<NamedGpu> namedGpus();
// `name` (any case) among namedGpus(), or null.
const NamedGpu *findNamedGpu(const std::string &name);
// What a process cannot have of a GPU's memory.total: the CUDA context and
// the libraries' handles (1.11 GiB on the H200 at trun's start) with room.
constexpr int64_t kGpuContextReserveBytes = int64_t(3) << 29; // 1.5 GiB

// "80%" -> 80.0: a share of a GPU's memory in (0, 100]; nullopt (and
// `error`) when `text` is not a percentage or out of range.
std::optional<double> parsePercentage(const std::string &text, std::string &error);

// How a step fits its memory budget.
struct MemoryFit {
  int64_t remat = -1;     // tg-remat's budget (PipelineOptions::rematBudget)
  int64_t lossChunks = 1; // tg-chunk-loss-head's pieces (PipelineOptions::lossChunks)
  double seconds = 0;     // the time both add, estimated at nominal rates
  bool chunked = false;   // a loss head was chunked
};

// The pipeline options under which the memory plan of `imported` (an
// imported module, not changed) fits `budget` bytes: remat -1 when it fits
// without recomputing anything. tg-remat works on its own estimate of live
// tensors, so this compiles copies of the module to the memory plan (no
// code) and lowers the estimate's budget by what the plan exceeded until
// the plan fits (a few rounds). With `chooseChunks`, a step over the budget
// is also tried with its loss head in 2, 4 and 8 row chunks
// (tg-chunk-loss-head), and the fit that adds the least estimated time
// wins; else options.lossChunks stays. The error, when even recomputing
// everything tg-remat can leaves the plan over the budget, is
// checkMemoryBudget's for the last plan. `log` (may be null) gets a line
// per round.
absl::StatusOr<MemoryFit> fitMemoryBudget(mlir::ModuleOp imported,
                                          const PipelineOptions &options, int64_t budget,
                                          bool chooseChunks, std::FILE *log);

} // namespace tcc

#endif // TCC_COMPILER_DRIVER_MEMORYBUDGET_H
