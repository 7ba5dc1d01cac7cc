#include "compiler/driver/BatchSize.h"

#include <algorithm>
#include <vector>

#include "compiler/driver/MemoryBudget.h"
#include "compiler/pipeline/Pipeline.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FormatVariadic.h"

namespace tcc {

absl::StatusOr<int64_t> modelBatch(const model::Model &m) {
  int64_t batch = 0;
  for (const model::Input &in : m.inputs()) {
    if (in.shape().dims_size() == 0)
      return absl::InvalidArgumentError("--batch: input '" + in.name() +
                                        "' is a scalar; the model has no batch dimension");
    int64_t b = in.shape().dims(0);
    if (batch && b != batch)
      return absl::InvalidArgumentError(
          llvm::formatv("--batch: the inputs disagree on the batch (their first dimensions: "
                        "{0} and {1})",
                        batch, b)
              .str());
    batch = b;
  }
  if (!batch)
    return absl::InvalidArgumentError("--batch: the model has no inputs");
  return batch;
}

model::Model rebatch(const model::Model &m, int64_t from, int64_t to, int32_t microBatches) {
  model::Model r = m;
  for (model::Input &in : *r.mutable_inputs())
    in.mutable_shape()->set_dims(0, to);
  for (model::Node &node : *r.mutable_nodes()) {
    if (node.op() != "reshape")
      continue;
    auto it = node.mutable_attrs()->find("shape");
    if (it == node.mutable_attrs()->end() || !it->second.has_ints())
      continue;
    model::IntList *shape = it->second.mutable_ints();
    if (shape->values_size() > 0 && shape->values(0) == from)
      shape->set_values(0, to);
  }
  if (microBatches > 0)
    r.mutable_training()->set_micro_batches(microBatches);
  return r;
}

namespace {

// The step's bytes at batch `b` (micro-batches `k`, 0: the model's), from
// its plan without recomputation.
absl::StatusOr<int64_t> stepBytesAt(const model::Model &m, const ModelImporter &import,
                                    const PipelineOptions &options, int64_t from, int64_t b,
                                    int32_t k) {
  model::Model r = rebatch(m, from, b, k);
  mlir::MLIRContext ctx;
  mlir::OwningOpRef<mlir::ModuleOp> module = import(r, ctx);
  if (!module)
    return absl::InvalidArgumentError(
        llvm::formatv("--batch: the model does not import at batch {0} (its batch appears "
                      "in shapes other than the inputs' first dimension and reshapes; see the "
                      "error above)",
                      b)
            .str());
  annotateModule(*module, options);
  mlir::PassManager pm(&ctx);
  buildPipeline(pm, Phase::Plan, options);
  if (mlir::failed(pm.run(*module)))
    return absl::InternalError(""); // diagnostics printed
  return stepMemory(*module, options).total();
}

} // namespace

absl::StatusOr<BatchChoice> chooseBatch(const model::Model &m, const ModelImporter &import,
                                        const PipelineOptions &given, int64_t budget,
                                        bool keepGlobal, std::FILE *log) {
  absl::StatusOr<int64_t> from = modelBatch(m);
  if (!from.ok())
    return from.status();
  PipelineOptions options = given;
  options.rematBudget = -1; // the batch that fits without recomputing
  auto bytesAt = [&](int64_t b, int32_t k) -> absl::StatusOr<int64_t> {
    absl::StatusOr<int64_t> bytes = stepBytesAt(m, import, options, *from, b, k);
    if (bytes.ok() && log)
      std::fprintf(log, "tcc: --batch auto: batch %lld%s needs %s (%lld bytes)\n",
                   static_cast<long long>(b),
                   k ? llvm::formatv(" x {0} micro-batches", k).str().c_str() : "",
                   formatBytes(*bytes).c_str(), static_cast<long long>(*bytes));
    return bytes;
  };
  BatchChoice choice;
  if (keepGlobal) {
    const int64_t micro = m.training().has_micro_batches() ? m.training().micro_batches() : 1;
    const int64_t global = *from * micro;
    std::vector<int64_t> divisors;
    for (int64_t d = global; d >= 1; --d)
      if (global % d == 0)
        divisors.push_back(d);
    std::optional<std::pair<int64_t, int64_t>> over; // the divisor above, its bytes
    for (int64_t b : divisors) {
      int32_t k = static_cast<int32_t>(global / b);
      absl::StatusOr<int64_t> bytes = bytesAt(b, k);
      if (!bytes.ok())
        return bytes.status();
      if (*bytes <= budget) {
        choice.batch = b;
        choice.microBatches = k;
        choice.why = llvm::formatv("batch {0} x {1} micro-batches (global batch {2}) needs {3} "
                                   "of the {4} budget{5}",
                                   b, k, global, formatBytes(*bytes), formatBytes(budget),
                                   over ? llvm::formatv("; batch {0} would need {1}",
                                                        over->first, formatBytes(over->second))
                                              .str()
                                        : std::string())
                         .str();
        return choice;
      }
      over = {b, *bytes};
    }
    return absl::ResourceExhaustedError(
        llvm::formatv("--batch auto: not even batch 1 x {0} micro-batches fits --memory-budget "
                      "{1}: it needs {2}",
                      global, formatBytes(budget), formatBytes(over->second))
            .str());
  }
  // Doubling, then bisection between the last batch that fits and the first
  // that does not (the plan grows with the batch).
  absl::StatusOr<int64_t> one = bytesAt(1, 0);
  if (!one.ok())
    return one.status();
  if (*one > budget)
    return absl::ResourceExhaustedError(
        llvm::formatv("--batch auto: not even batch 1 fits --memory-budget {0}: it needs {1}",
                      formatBytes(budget), formatBytes(*one))
            .str());
  int64_t fits = 1, fitsBytes = *one, over = 0, overBytes = 0;
  auto tryBatch = [&](int64_t b) -> absl::Status {
    absl::StatusOr<int64_t> bytes = bytesAt(b, 0);
    if (!bytes.ok())
      return bytes.status();
    if (*bytes <= budget)
      fits = b, fitsBytes = *bytes;
    else
      over = b, overBytes = *bytes;
    return absl::OkStatus();
  };
  constexpr int64_t kLargest = int64_t(1) << 20;
  while (!over && fits < kLargest)
    if (absl::Status s = tryBatch(std::min(fits * 2, kLargest)); !s.ok())
      return s;
  while (over && over - fits > 1)
    if (absl::Status s = tryBatch(fits + (over - fits) / 2); !s.ok())
      return s;
  choice.batch = fits;
  choice.why = llvm::formatv("batch {0} needs {1} ({2} bytes) of the {3} budget ({4} bytes){5}",
                             fits, formatBytes(fitsBytes), fitsBytes, formatBytes(budget), budget,
                             over ? llvm::formatv("; batch {0} would need {1} ({2} bytes)", over,
                                                  formatBytes(overBytes), overBytes)
                                        .str()
                                  : std::string(" (the largest tried)"))
                   .str();
  return choice;
}

} // namespace tcc
