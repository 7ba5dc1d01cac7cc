// The one argument (ABI) emitter of both code generators: every argument of
// a step function becomes a typed pointer named v0, v1, ... Parameters,
// inputs and optimizer state come straight from tcc_step_args and outputs
// from it or from scratch, the same on both targets; where hyper-parameters,
// the loss and train outputs live is the target's choice (locals and
// scratch on the CPU, the control block on the GPU), asked of an
// ArgumentPlacement. Views (workspace views, reshapes) are named and
// defined here too, being the other buffers both targets declare alike.
#ifndef TCC_COMPILER_CODEGEN_COMMON_STEPARGUMENTS_H
#define TCC_COMPILER_CODEGEN_COMMON_STEPARGUMENTS_H

#include <string>

#include "compiler/codegen/common/StepInterface.h"
#include "dialects/kern/KernDialect.h"
#include "llvm/ADT/DenseMap.h"

namespace tcc::codegen {

// Result buffers the caller may leave NULL (eval outputs, train outputs
// on the CPU): each then goes to scratch after the planned workspace,
// `alignment`-aligned; `bytes` is how much scratch the entry needs.
struct OutputScratch {
  int64_t base = 0, bytes = 0, alignment = 64;
  // The char pointer the offsets are from: the workspace, or (cuda eval)
  // the buffer the step allocates on the first call that leaves an output
  // NULL, so that training alone never holds eval's outputs.
  std::string baseExpr = "ws";

  // "args->outputs && args->outputs[i] ? ... : <scratch>" for one buffer.
  std::string buffer(StringRef array, int index, MemRefType t);
};

// C++ names of buffers in generated code: v0, v1, ... in order of
// definition.
class ValueNames {
public:
  std::string fresh(Value v) {
    std::string n = "v" + std::to_string(names_.size());
    names_[v] = n;
    return n;
  }
  std::string operator()(Value v) const { return names_.lookup(v); }

private:
  llvm::DenseMap<Value, std::string> names_;
};

// Buffers that are views rather than arguments, named like them and
// defined alike on both targets: a kern.workspace_view is a typed pointer
// into the workspace `ws`, a kern.reshape another name for its input.
std::string workspaceViewDefinition(kern::WorkspaceViewOp v, ValueNames &names);
std::string reshapeDefinition(kern::ReshapeOp r, ValueNames &names);

// The per-target hook of emitStepArguments.
class ArgumentPlacement {
public:
  virtual ~ArgumentPlacement() = default;
  // The declaration line(s) of buffer `name` (type `t`) for an argument
  // whose role is Hyper, Loss or TrainOutput; failure after a diagnostic.
  virtual FailureOr<std::string> placeArgument(const ArgumentRole &role,
                                               const std::string &name, MemRefType t) = 0;
};

// Declares f's arguments in order (names from `names`, outputs in
// `scratch`), asking `placement` for the target-specific roles. Errors are
// prefixed with `generator` ("cpu codegen"). `entryOf`: f is a further
// entry of that step (tcc.entry): its parameters, optimizer state and
// train outputs index the descriptor's tables (by name).
LogicalResult emitStepArguments(func::FuncOp f, StringRef generator, ValueNames &names,
                                OutputScratch &scratch, ArgumentPlacement &placement,
                                llvm::raw_ostream &os, const StepInterface *entryOf = nullptr);

} // namespace tcc::codegen

#endif // TCC_COMPILER_CODEGEN_COMMON_STEPARGUMENTS_H
