// tcc compile --memory-budget: the size given (parsed here, with the error a
// user sees for a bad one) and the check of the memory plan against it.
#ifndef TCC_COMPILER_DRIVER_MEMORYBUDGET_H
#define TCC_COMPILER_DRIVER_MEMORYBUDGET_H

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "mlir/IR/BuiltinOps.h"

namespace tcc {

// "6GiB", "5.5 GiB", "800MB", "1073741824" (bytes), "512MiB": a positive
// size in bytes; units B, KB/MB/GB/TB (powers of 1000), KiB/MiB/GiB/TiB
// (powers of 1024). Anything else (a percentage, a negative or zero size,
// an unknown unit, trailing text) is nullopt with `error` saying why.
std::optional<int64_t> parseByteSize(const std::string &text, std::string &error);

// The plan of @train_step (else @forward) against `budget` bytes: OK when
// its planned bytes (MemorySummary::total) fit; else an error saying by
// how much, what the parameters and optimizer state alone take (a budget
// below those can never be met), and the largest temporaries live at the
// plan's peak. tcc does not yet recompute activations to fit a budget
// (tg-remat), so a plan above the budget is an error.
absl::Status checkMemoryBudget(mlir::ModuleOp module, int64_t budget);

} // namespace tcc

#endif // TCC_COMPILER_DRIVER_MEMORYBUDGET_H
