// The pipeline from an imported model to a module ready for code generation.
// Read top to bottom: this is the order the passes run in, and the order of
// the numbered files in a --dump-dir.
#include "compiler/pipeline/Pipeline.h"

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

void buildPipeline(mlir::OpPassManager &pm, Phase stopAfter) {
  if (stopAfter == Phase::Import)
    return;
  // 1. Training transforms: the forward graph becomes a whole train step.
  //    Autodiff first (loss and gradients), then the optimizer update, each a
  //    separate pass so the dumps show them apart.
  pm.addPass(createTgAutodiff());
  pm.addPass(createTgSgdUpdate());
  // 2. Clean up what autodiff produced (repeated constants, shared
  //    subexpressions of the backward graph).
  pm.addPass(mlir::createCSEPass());
  if (stopAfter == Phase::Training)
    return;
  // 3. Tensors -> buffers: one kern op per kernel or library call.
  pm.addPass(createTgLowerToKern());
  if (stopAfter == Phase::Kern)
    return;
  // 4. Memory plan: every temporary gets an offset in one workspace arena.
  pm.addPass(createKernPlanMemory());
}

void registerAllTccPasses() { registerTccPasses(); }

} // namespace tcc
