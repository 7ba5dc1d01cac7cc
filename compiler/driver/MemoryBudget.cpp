#include "compiler/driver/MemoryBudget.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>
#include <cstdlib>

#include "compiler/codegen/cuda/CudnnConvWorkspace.h"
#include "compiler/codegen/cuda/Fp8Gemm.h"
#include "compiler/codegen/cuda/KernelRegistry.h"
#include "compiler/pipeline/Pipeline.h"
#include "dialects/kern/AttentionWorkspace.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"
#include "passes/Passes.h"
#include "passes/common/NodeNames.h"
#include "llvm/Support/FormatVariadic.h"

namespace tcc {

std::optional<int64_t> parseByteSize(const std::string &text, std::string &error) {
  const std::string units = "B, KB, MB, GB, TB, KiB, MiB, GiB or TiB";
  if (text.find('%') != std::string::npos) {
    error = "'" + text + "' is a share of a GPU's memory, not a size";
    return std::nullopt;
  }
  const char *begin = text.c_str();
  char *end = nullptr;
  double number = std::strtod(begin, &end);
  if (end == begin || !std::isfinite(number)) {
    error = "'" + text + "' is not a size (a number and a unit: " + units + ")";
    return std::nullopt;
  }
  std::string unit(end);
  unit.erase(0, std::min(unit.find_first_not_of(' '), unit.size()));
  static const std::pair<const char *, double> kUnits[] = {
      {"", 1},          {"B", 1},           {"KB", 1e3},           {"MB", 1e6},
      {"GB", 1e9},      {"TB", 1e12},       {"KiB", 1024.0},       {"MiB", 1048576.0},
      {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}};
  for (const auto &[name, scale] : kUnits) {
    if (unit != name)
      continue;
    double bytes = number * scale;
    if (!(bytes >= 1)) {
      error = "'" + text + "': a budget must be at least one byte";
      return std::nullopt;
    }
    if (bytes > 9.0e18) {
      error = "'" + text + "' is too large";
      return std::nullopt;
    }
    return static_cast<int64_t>(bytes);
  }
  error = "'" + text + "': unknown unit '" + unit + "' (" + units + ")";
  return std::nullopt;
}

std::optional<double> parsePercentage(const std::string &text, std::string &error) {
  if (text.empty() || text.back() != '%') {
    error = "'" + text + "' is not a percentage";
    return std::nullopt;
  }
  std::string number = text.substr(0, text.size() - 1);
  const char *begin = number.c_str();
  char *end = nullptr;
  double share = std::strtod(begin, &end);
  if (end == begin || *end || !std::isfinite(share) || share <= 0 || share > 100) {
    error = "'" + text + "': a share of the GPU's memory is a number in (0, 100] followed by %";
    return std::nullopt;
  }
  return share;
}

llvm::ArrayRef<NamedGpu> namedGpus() {
  // memory.total as nvidia-smi reports it (MiB); h200 checked on the
  // device machine (docs/performance.md, 2026-11-25).
  static const NamedGpu kGpus[] = {
      {"h100", "NVIDIA H100 80GB (SXM or PCIe)", int64_t(81559) << 20, "sm_90"},
      {"h100-nvl", "NVIDIA H100 NVL 94GB", int64_t(95830) << 20, "sm_90"},
      {"h200", "NVIDIA H200 141GB", int64_t(143771) << 20, "sm_90"},
      {"a100-40gb", "NVIDIA A100 40GB", int64_t(40960) << 20, "sm_80"},
      {"a100-80gb", "NVIDIA A100 80GB", int64_t(81920) << 20, "sm_80"},
      {"l4", "NVIDIA L4 24GB", int64_t(23034) << 20, "sm_89"},
      {"rtx4090", "NVIDIA GeForce RTX 4090 24GB", int64_t(24564) << 20, "sm_89"},
  };
  return kGpus;
}

const NamedGpu *findNamedGpu(const std::string &name) {
  for (const NamedGpu &g : namedGpus())
    if (llvm::StringRef(name).equals_insensitive(g.name))
      return &g;
  return nullptr;
}

namespace {

mlir::func::FuncOp lookupFunction(mlir::ModuleOp module, llvm::StringRef name) {
  return module.lookupSymbol<mlir::func::FuncOp>(name);
}

// The temporaries of `f` live at its plan's peak, largest first: "a (1 MiB), ...".
std::string largestAtPeak(mlir::func::FuncOp f, const MemorySummary &m, size_t count,
                          size_t &live) {
  llvm::SmallVector<PlannedBuffer> atPeak;
  for (const PlannedBuffer &o : plannedBuffers(f))
    if (o.start <= m.peakAt && m.peakAt <= o.lastUse)
      atPeak.push_back(o);
  llvm::stable_sort(atPeak, [](const PlannedBuffer &a, const PlannedBuffer &b) {
    return a.bytes > b.bytes;
  });
  live = atPeak.size();
  std::string text;
  for (size_t i = 0; i < atPeak.size() && i < count; ++i)
    text += llvm::formatv("{0}{1} ({2})", i ? ", " : "", nodeName(atPeak[i].view.getLoc()),
                          formatBytes(atPeak[i].bytes))
                .str();
  return text;
}

} // namespace

StepMemory stepMemory(mlir::ModuleOp module, const PipelineOptions &options) {
  const bool cuda = options.target == "cuda", cudnn = options.cudnn;
  StepMemory s;
  s.cuda = cuda;
  s.library = cuda ? codegen::cuda::kGemmWorkspaceBytes : 0;
  s.fp8 = cuda ? codegen::cuda::fp8GemmScratchBytes(module) : 0;
  s.fp8Kept = cuda ? codegen::cuda::fp8KeptCastBytes(module) : 0;
  if (auto train = lookupFunction(module, "train_step")) {
    s.train = summarizeMemory(train);
    if (cuda)
      s.attention = std::max<int64_t>(
          0, kern::attentionWorkspaceBytes(train, {cudnn, options.sm90Attention}) - s.library -
                 s.fp8);
  }
  // The shared workspace is the largest of the three (CudaCodegen); the
  // convolutions' estimate only where the step runs them through cuDNN.
  if (cuda && cudnn)
    s.convolutions = std::max<int64_t>(
        0, codegen::cuda::cudnnConvWorkspaceBytes(module) - s.library - s.fp8 - s.attention);
  if (auto eval = lookupFunction(module, "forward")) {
    s.eval = summarizeMemory(eval);
    s.hasEval = true;
  }
  return s;
}

std::string formatStepMemory(const StepMemory &s) {
  std::string text = llvm::formatv("parameters {0}, optimizer state {1}, inputs {2}; "
                                   "workspace {3} (@train_step's temporaries and outputs {4}",
                                   formatBytes(s.train.params), formatBytes(s.train.optimizerState),
                                   formatBytes(s.train.inputs), formatBytes(s.workspace()),
                                   formatBytes(s.trainSide()))
                         .str();
  if (s.hasEval)
    text += llvm::formatv(", @forward's {0}", formatBytes(s.evalSide())).str();
  text += ")";
  if (s.library)
    text += ", cuBLASLt workspace " + formatBytes(s.library);
  if (s.fp8)
    text += ", FP8 operand slots " + formatBytes(s.fp8);
  if (s.fp8Kept)
    text += ", FP8 kept casts " + formatBytes(s.fp8Kept);
  if (s.attention)
    text += ", attention backward workspace " + formatBytes(s.attention) +
            " (cuDNN's estimate, or tcc sm90's need)";
  if (s.convolutions)
    text += ", cuDNN convolution workspace " + formatBytes(s.convolutions) + " (estimate)";
  text += llvm::formatv(": {0} ({1} bytes) on the device", formatBytes(s.total()), s.total()).str();
  if (s.evalOutputs())
    text += llvm::formatv(" (+ {0} for eval's outputs when an eval call leaves them to the "
                          "step, e.g. trun --eval-every)",
                          formatBytes(s.evalOutputs()))
                .str();
  return text;
}

absl::Status checkMemoryBudget(mlir::ModuleOp module, int64_t budget,
                               const PipelineOptions &options) {
  auto step = lookupFunction(module, "train_step");
  if (!step)
    return absl::InvalidArgumentError(
        "--memory-budget applies to a training step; the module has no @train_step");
  StepMemory s = stepMemory(module, options);
  if (s.total() <= budget)
    return absl::OkStatus();
  std::string why = llvm::formatv("the step needs {0} over --memory-budget {1} ({2})",
                                  formatBytes(s.total() - budget), formatBytes(budget),
                                  formatStepMemory(s))
                        .str();
  const int64_t fixed = s.fixed();
  if (fixed > budget)
    return absl::InvalidArgumentError(
        why + llvm::formatv(": the parameters, optimizer state and inputs alone take {0}, so no "
                            "plan fits this budget",
                            formatBytes(fixed))
                  .str());
  if (s.hasEval && fixed + s.evalSide() > budget) {
    auto eval = lookupFunction(module, "forward");
    size_t live = 0;
    std::string largest = largestAtPeak(eval, s.eval, 3, live);
    return absl::ResourceExhaustedError(
        why + llvm::formatv(": @forward (eval, sharing the workspace) alone needs {0}: its "
                            "temporaries {1}{2} (the largest at its peak: {3}); "
                            "recomputation does not shrink it (eval saves nothing for a "
                            "backward)",
                            formatBytes(fixed + s.evalSide()), formatBytes(s.eval.arena),
                            s.cuda ? std::string()
                                   : " and outputs " + formatBytes(s.eval.outputs),
                            largest)
                  .str());
  }
  size_t live = 0;
  std::string largest = largestAtPeak(step, s.train, 5, live);
  return absl::ResourceExhaustedError(
      why + llvm::formatv("; at @train_step's peak (op {0}) {1} buffers are live, the largest: "
                          "{2}",
                          s.train.peakAt, live, largest)
                .str());
}

namespace {

// `imported` compiled to the memory plan with tg-remat's budget `remat`.
absl::StatusOr<mlir::OwningOpRef<mlir::ModuleOp>>
planWith(mlir::ModuleOp imported, PipelineOptions options, int64_t remat) {
  mlir::OwningOpRef<mlir::ModuleOp> copy = imported.clone();
  options.rematBudget = remat;
  mlir::PassManager pm(imported.getContext());
  buildPipeline(pm, Phase::Plan, options);
  if (mlir::failed(pm.run(*copy)))
    return absl::InternalError(""); // diagnostics printed
  return copy;
}

// tg-chunk-loss-head's and tg-remat's estimates of the time they add to
// the planned step, and whether a loss head was chunked.
void readEstimates(mlir::ModuleOp plan, MemoryFit &fit) {
  fit.seconds = 0;
  fit.chunked = false;
  mlir::Operation *step = lookupFunction(plan, "train_step");
  if (!step)
    return;
  for (llvm::StringRef attr : {kRematSecondsAttr, kLossChunkSecondsAttr})
    if (auto s = step->getAttrOfType<mlir::FloatAttr>(attr))
      fit.seconds += s.getValueAsDouble();
  fit.chunked = step->hasAttr(kLossChunkSecondsAttr);
}

// tg-remat's budget under which the plan fits, at options.lossChunks.
absl::StatusOr<MemoryFit> fitRemat(mlir::ModuleOp imported, const PipelineOptions &options,
                                   int64_t budget, std::FILE *log) {
  MemoryFit fit;
  fit.lossChunks = options.lossChunks;
  std::string chunks = options.lossChunks > 1
                           ? llvm::formatv(" (loss head in {0} chunks)", options.lossChunks).str()
                           : std::string();
  absl::StatusOr<mlir::OwningOpRef<mlir::ModuleOp>> plan = planWith(imported, options, -1);
  if (!plan.ok())
    return plan.status();
  if (!lookupFunction(**plan, "train_step"))
    return checkMemoryBudget(**plan, budget, options);
  StepMemory m = stepMemory(**plan, options);
  if (log)
    std::fprintf(log, "tcc: --memory-budget %s%s: without recomputation the step needs %s\n",
                 formatBytes(budget).c_str(), chunks.c_str(), formatBytes(m.total()).c_str());
  if (m.total() <= budget) {
    readEstimates(**plan, fit);
    return fit;
  }
  // What recomputation cannot change (the parameters, eval) over the budget.
  if (m.fixed() > budget || (m.hasEval && m.fixed() + m.evalSide() > budget))
    return checkMemoryBudget(**plan, budget, options);
  const int64_t fixed = m.fixed() + m.train.outputs;
  // tg-remat's estimate of the temporaries is not the arena (views, fused
  // kernels, alignment): search its budget. `fits` is the largest tried
  // whose plan fits, `over` the smallest whose plan does not; each round
  // moves by the plan's distance from the budget, kept between the two,
  // and stops within 1% under the budget (recomputing more than needed
  // costs time).
  std::optional<int64_t> fits, over;
  MemoryFit fitting = fit; // the plan of `fits`
  int64_t remat = budget - fixed;
  int64_t lastOver = m.total();
  constexpr int kRounds = 8;
  for (int round = 1; round <= kRounds; ++round) {
    plan = planWith(imported, options, remat);
    if (!plan.ok())
      return plan.status();
    StepMemory r = stepMemory(**plan, options);
    if (log)
      std::fprintf(log, "tcc: --memory-budget round %d%s: tg-remat budget %s -> plan %s\n",
                   round, chunks.c_str(), formatBytes(remat).c_str(),
                   formatBytes(r.total()).c_str());
    if (r.total() <= budget) {
      if (!fits || remat > *fits) {
        fits = remat;
        readEstimates(**plan, fitting);
      }
      if (budget - r.total() <= budget / 100)
        break;
    } else {
      // No better than a smaller budget's plan: nothing left to drop.
      if (!fits && r.total() >= lastOver && round > 1)
        break;
      lastOver = r.total();
      over = std::min(over.value_or(remat), remat);
    }
    // The budgets that fit and those that do not are within 1%: done.
    if (fits && over && *over - *fits <= budget / 100)
      break;
    int64_t next = remat + (budget - r.total());
    // Fitting with room to spare and no failing budget yet: the plan may sit
    // on a floor (what cannot be recomputed) that small steps never leave;
    // step at least a quarter of the budget up.
    if (fits && !over)
      next = std::max(next, remat + remat / 4);
    if (fits && over)
      next = std::clamp(next, *fits + (*over - *fits) / 4, *over - (*over - *fits) / 4);
    else if (over && next >= *over)
      next = *over - (*over - std::max<int64_t>(0, next - (*over - remat))) / 2;
    if (next < 0 || next == remat || (fits && next <= *fits) || (over && next >= *over))
      break;
    remat = next;
  }
  if (fits) {
    fitting.remat = *fits;
    return fitting;
  }
  plan = planWith(imported, options, 0); // everything tg-remat can drop
  if (!plan.ok())
    return plan.status();
  if (stepMemory(**plan, options).total() <= budget) {
    readEstimates(**plan, fit);
    fit.remat = 0;
    return fit;
  }
  absl::Status s = checkMemoryBudget(**plan, budget, options);
  return absl::Status(s.code(), std::string(s.message()) +
                                    " (after tg-remat recomputed what it could: see "
                                    "--dump-dir's tg-remat report)");
}

} // namespace

absl::StatusOr<MemoryFit> fitMemoryBudget(mlir::ModuleOp imported, const PipelineOptions &options,
                                          int64_t budget, bool chooseChunks, std::FILE *log) {
  if (!chooseChunks)
    return fitRemat(imported, options, budget, log);
  PipelineOptions whole = options;
  whole.lossChunks = 1;
  absl::StatusOr<MemoryFit> best = fitRemat(imported, whole, budget, log);
  // Fits as it is, or cannot fit whatever the workspace (the parameters).
  if ((best.ok() && best->remat < 0) || absl::IsInvalidArgument(best.status()))
    return best;
  for (int64_t chunks : {2, 4, 8}) {
    PipelineOptions chunked = options;
    chunked.lossChunks = chunks;
    absl::StatusOr<MemoryFit> fit = fitRemat(imported, chunked, budget, log);
    if (fit.ok() && !fit->chunked)
      break; // no loss head to chunk: every count plans the same
    if (log && fit.ok())
      std::fprintf(log, "tcc: --memory-budget: loss head in %lld chunks: ~%.2f ms added (the "
                        "best before: %s)\n",
                   static_cast<long long>(chunks), fit->seconds * 1e3,
                   best.ok() ? llvm::formatv("~{0:F2} ms", best->seconds * 1e3).str().c_str()
                             : "does not fit");
    if (fit.ok() && (!best.ok() || fit->seconds < best->seconds))
      best = fit;
    else if (!fit.ok() && !best.ok())
      best = fit; // the error of the plan that dropped the most
  }
  return best;
}

} // namespace tcc
