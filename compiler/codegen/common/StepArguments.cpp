#include "compiler/codegen/common/StepArguments.h"

#include "compiler/codegen/common/CTypes.h"
#include "llvm/Support/FormatVariadic.h"

namespace tcc::codegen {

std::string OutputScratch::buffer(StringRef array, int index, MemRefType t) {
  std::string st = storageType(t.getElementType());
  std::string s = llvm::formatv(
      "args->{0} && args->{0}[{1}] ? static_cast<{2} *>(args->{0}[{1}]) : "
      "reinterpret_cast<{2} *>({4} + {3})",
      array, index, st, base + bytes, baseExpr);
  bytes += (bufferBytes(t) + alignment - 1) / alignment * alignment;
  return s;
}

namespace {

// The declaration of a buffer argument that both generators take straight
// from StepArgs (parameters, inputs, optimizer state).
std::string stepArgsBuffer(const ArgumentRole &role, const std::string &name, MemRefType t) {
  std::string st = storageType(t.getElementType());
  switch (role.kind) {
  case ArgumentRole::Param:
    return llvm::formatv("  {0} *{1} = static_cast<{0} *>(args->params[{2}]); "
                         "// param {3} {4}\n",
                         st, name, role.index, role.label, shapeComment(t));
  case ArgumentRole::Input:
    return llvm::formatv("  {0} *{1} = static_cast<{0} *>(const_cast<void *>("
                         "args->inputs[{2}])); // input {3} {4}\n",
                         st, name, role.index, role.label, shapeComment(t));
  case ArgumentRole::OptimizerState:
    return llvm::formatv("  {0} *{1} = static_cast<{0} *>(args->optimizer_state[{2}]); "
                         "// optimizer state {3}\n",
                         st, name, role.index, shapeComment(t));
  case ArgumentRole::Buffer:
    return llvm::formatv("  {0} *{1} = static_cast<{0} *>(args->buffers[{2}]); "
                         "// buffer {3} {4}\n",
                         st, name, role.index, role.label, shapeComment(t));
  case ArgumentRole::EntryState:
    return llvm::formatv("  {0} *{1} = static_cast<{0} *>(args->entry_state[{2}]); "
                         "// entry state {3} {4}\n",
                         st, name, role.index, role.label, shapeComment(t));
  default:
    return "";
  }
}

} // namespace

std::string workspaceViewDefinition(kern::WorkspaceViewOp v, ValueNames &names) {
  std::string st = storageType(v.getType().getElementType());
  return llvm::formatv("  {0} *{1} = reinterpret_cast<{0} *>(ws + {2}); // {3}\n", st,
                       names.fresh(v.getResult()), v.getOffset(), shapeComment(v.getType()));
}

std::string reshapeDefinition(kern::ReshapeOp r, ValueNames &names) {
  return llvm::formatv("  auto *{0} = {1}; // viewed as {2}\n", names.fresh(r.getResult()),
                       names(r.getInput()), shapeComment(mrt(r.getResult())));
}

LogicalResult emitStepArguments(func::FuncOp f, StringRef generator, ValueNames &names,
                                OutputScratch &scratch, ArgumentPlacement &placement,
                                llvm::raw_ostream &os, const StepInterface *entryOf) {
  FailureOr<SmallVector<ArgumentRole>> roles = classifyArguments(f, generator);
  if (failed(roles) || (entryOf && failed(remapToDescriptor(f, *entryOf, *roles, generator))))
    return failure();
  for (auto [a, role] : llvm::zip_equal(f.getArguments(), *roles)) {
    MemRefType t = mrt(a);
    std::string n = names.fresh(a);
    switch (role.kind) {
    case ArgumentRole::Param:
    case ArgumentRole::Input:
    case ArgumentRole::OptimizerState:
    case ArgumentRole::EntryState:
    case ArgumentRole::Buffer:
      os << stepArgsBuffer(role, n, t);
      break;
    case ArgumentRole::Output:
      os << llvm::formatv("  {0} *{1} = {2}; // output {3} {4}\n",
                          storageType(t.getElementType()), n,
                          scratch.buffer("outputs", role.index, t), role.label,
                          shapeComment(t));
      break;
    case ArgumentRole::Hyper:
    case ArgumentRole::Loss:
    case ArgumentRole::TrainOutput: {
      FailureOr<std::string> lines = placement.placeArgument(role, n, t);
      if (failed(lines))
        return failure();
      os << *lines;
      break;
    }
    }
  }
  return success();
}

} // namespace tcc::codegen
