#include "compiler/driver/MemoryBudget.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "passes/Passes.h"
#include "passes/common/NodeNames.h"
#include "llvm/Support/FormatVariadic.h"

namespace tcc {

std::optional<int64_t> parseByteSize(const std::string &text, std::string &error) {
  const std::string units = "B, KB, MB, GB, TB, KiB, MiB, GiB or TiB";
  if (text.find('%') != std::string::npos) {
    error = "'" + text + "': a share of a GPU's memory is not supported; give a size (e.g. 6GiB)";
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

absl::Status checkMemoryBudget(mlir::ModuleOp module, int64_t budget) {
  mlir::func::FuncOp step;
  for (auto f : module.getOps<mlir::func::FuncOp>())
    if (f.getName() == "train_step" || (!step && f.getName() == "forward"))
      step = f;
  if (!step)
    return absl::InternalError("--memory-budget: the module has no @train_step or @forward");
  MemorySummary m = summarizeMemory(step);
  if (m.total() <= budget)
    return absl::OkStatus();
  std::string why = llvm::formatv("the memory plan of @{0} ({1}) is {2} over --memory-budget "
                                  "{3}",
                                  step.getName(), formatMemorySummary(m),
                                  formatBytes(m.total() - budget), formatBytes(budget))
                        .str();
  const int64_t fixed = m.params + m.optimizerState + m.inputs + m.outputs;
  if (fixed > budget)
    return absl::InvalidArgumentError(
        why + llvm::formatv(": the parameters, optimizer state, inputs and outputs alone take "
                            "{0}, so no plan fits this budget",
                            formatBytes(fixed))
                  .str());
  // The temporaries live at the peak, largest first (what recomputation
  // would have to drop).
  llvm::SmallVector<PlannedBuffer> buffers = plannedBuffers(step);
  const int64_t at = m.peakAt;
  llvm::SmallVector<PlannedBuffer> atPeak;
  for (const PlannedBuffer &o : buffers)
    if (o.start <= at && at <= o.lastUse)
      atPeak.push_back(o);
  llvm::stable_sort(atPeak, [](const PlannedBuffer &a, const PlannedBuffer &b) {
    return a.bytes > b.bytes;
  });
  std::string largest;
  for (size_t i = 0; i < atPeak.size() && i < 5; ++i)
    largest += llvm::formatv("{0}{1} ({2})", i ? ", " : "", nodeName(atPeak[i].view.getLoc()),
                             formatBytes(atPeak[i].bytes))
                   .str();
  return absl::ResourceExhaustedError(
      why + llvm::formatv("; at the peak (op {0}) {1} buffers are live, the largest: {2}. "
                          "tcc cannot yet recompute activations to fit a budget (tg-remat)",
                          at, atPeak.size(), largest)
                .str());
}

} // namespace tcc
