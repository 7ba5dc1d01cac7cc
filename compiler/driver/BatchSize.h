// tcc compile --batch N | auto: the model at another batch size, and the
// largest batch whose memory plan fits --memory-budget (auto), found from
// plans alone (no trial runs).
#ifndef TCC_COMPILER_DRIVER_BATCHSIZE_H
#define TCC_COMPILER_DRIVER_BATCHSIZE_H

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "tcc_model.pb.h" // generated from frontend/proto/tcc_model.proto

namespace tcc {

struct PipelineOptions; // compiler/pipeline/Pipeline.h

// The model's batch: the first dimension every input shares
// (InvalidArgument when the inputs disagree or one is a scalar).
absl::StatusOr<int64_t> modelBatch(const model::Model &m);

// `m` at batch `to`: every input's first dimension and every reshape's
// target shape that starts with the batch become `to`. A model whose batch
// appears elsewhere (another attribute) is caught by the import that
// follows (its shapes no longer agree). `microBatches` > 0 sets
// training.micro_batches (gradient accumulation).
model::Model rebatch(const model::Model &m, int64_t from, int64_t to, int32_t microBatches);

struct BatchChoice {
  int64_t batch = 0;        // the micro-batch
  int32_t microBatches = 0; // 0: the model's own
  std::string why;          // one line for the user: the plans that decided
};

// --batch auto: the largest batch whose step (StepMemory::total, without
// recomputation) fits `budget` bytes. keepGlobal: the largest divisor b of
// the model's global batch (batch x micro-batches) that fits, with
// global / b micro-batches. Error when not even batch 1 (or the smallest
// divisor) fits. `import` imports a model into a context (null after its
// diagnostics when it cannot: importIntoContext).
using ModelImporter =
    std::function<mlir::OwningOpRef<mlir::ModuleOp>(const model::Model &, mlir::MLIRContext &)>;
absl::StatusOr<BatchChoice> chooseBatch(const model::Model &m, const ModelImporter &import,
                                        const PipelineOptions &options, int64_t budget,
                                        bool keepGlobal, std::FILE *log);

} // namespace tcc

#endif // TCC_COMPILER_DRIVER_BATCHSIZE_H
