// The compilation pipeline, assembled in one place (Pipeline.cpp).
#ifndef TCC_COMPILER_PIPELINE_PIPELINE_H
#define TCC_COMPILER_PIPELINE_PIPELINE_H

#include <optional>
#include <string>

#include "llvm/ADT/StringRef.h"
#include "mlir/Pass/PassManager.h"

namespace tcc {

// Where `--compile-to` may stop. Each phase ends after the passes named.
enum class Phase {
  Import,   // tg from the model file, nothing else
  Training, // + tg-autodiff, tg-sgd-update
  Kern,     // + tg-lower-to-kern
  Plan,     // + kern-plan-memory: ready for code generation
  Source,   // + generated C++ (no host compiler)
  Library,  // + step.so
};

std::optional<Phase> parsePhase(llvm::StringRef name);
llvm::StringRef phaseName(Phase p);

// Adds the passes that take an imported module to `stopAfter`.
void buildPipeline(mlir::OpPassManager &pm, Phase stopAfter);

// Registers all tcc passes (for tcc-opt).
void registerAllTccPasses();

} // namespace tcc

#endif
