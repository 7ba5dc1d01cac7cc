// Launches of the prelude's fixed kernel families (cuda_prelude pieces):
// each op gets a small generated wrapper around the family's launcher, so
// the host unit only sees plain extern "C" functions. Gather, scatter-add
// and the softmax cross-entropy pair check ids and labels on the device
// and record a bad one in the control block's status (`code`: 1 + the
// launch's index).
#include "compiler/codegen/cuda/CudaStepEmitter.h"
#include "dialects/common/ModelAttrs.h"

#include <algorithm>

#include "llvm/Support/FormatVariadic.h"

namespace tcc::codegen::cuda {

namespace {
// Wrapper parameter p<k> (declared with the storage type) as the family's
// pointer type: bf16 / f16 buffers become tcc_cuda::bf16 / f16 pointers.
std::string familyArg(Value v, int k, bool written) {
  return familyPointer(mrt(v).getElementType(), "p" + std::to_string(k), written,
                       CodeTarget::Cuda);
}
std::string familyType(Value v) {
  return familyElementType(mrt(v).getElementType(), CodeTarget::Cuda);
}
} // namespace

// A wrapper around a prelude launcher: parameters p0..pN (the buffers,
// `written` says which are outputs), plus status/code when `checked`.
LogicalResult CudaStepEmitter::emitFamily(Operation *op, llvm::raw_ostream &os,
                                          const FamilyLaunch &l) {
  std::string params, args;
  for (auto [k, v] : llvm::enumerate(l.buffers)) {
    params += llvm::formatv("{0}{1}{2} *p{3}", k ? ", " : "", l.written[k] ? "" : "const ",
                            storageType(mrt(v).getElementType()), k)
                  .str();
    args += ", " + name(v);
  }
  if (l.checked) {
    params += ", int32_t *status, int32_t code";
    args += ", status, " + std::to_string(nextId() + 1);
  }
  std::string text = "extern \"C\" void @NAME@(cudaStream_t s, " + params + ") {\n  " +
                     l.launcherCall + "\n}\n";
  std::string kernel = kernels_.add(l.kind, text, params);
  launch(os, op, kernel, kernel + "(s" + args + ");", l.shape, l.flops, l.bytes);
  return success();
}

LogicalResult CudaStepEmitter::emitGather(kern::GatherOp g, llvm::raw_ostream &os) {
  MemRefType table = mrt(g.getTable());
  int64_t v = table.getDimSize(0), row = table.getNumElements() / std::max<int64_t>(v, 1);
  int64_t n = mrt(g.getIds()).getNumElements();
  FamilyLaunch l;
  l.kind = "gather";
  l.launcherCall = llvm::formatv("tcc_cuda::launch_gather_rows<{0}, {1}>({5}, p1, {6}, "
                                 "{2}, {3}, {4}, status, code, s);",
                                 familyType(g.getTable()), familyType(g.getIds()), n, v, row,
                                 familyArg(g.getTable(), 0, false),
                                 familyArg(g.getOut(), 2, true));
  l.buffers = {g.getTable(), g.getIds(), g.getOut()};
  l.written = {false, false, true};
  l.checked = true;
  l.flops = 0;
  l.bytes = static_cast<double>(n) * row * 2 * kern::elementBytes(table.getElementType());
  l.shape = llvm::formatv("{0} rows of {1}", n, row).str();
  return emitFamily(g, os, l);
}

LogicalResult CudaStepEmitter::emitScatterAdd(kern::ScatterAddOp sa, llvm::raw_ostream &os,
                                              double &flops) {
  MemRefType out = mrt(sa.getOut());
  int64_t v = out.getDimSize(0), row = out.getNumElements() / std::max<int64_t>(v, 1);
  int64_t n = mrt(sa.getIds()).getNumElements();
  flops += static_cast<double>(n) * row;
  // tcc compile --deterministic: the sums in the order of the ids, no
  // atomics (the same bits every run).
  auto module = sa->getParentOfType<ModuleOp>();
  const bool ordered = module && module->hasAttr(model::kDeterministicAttr);
  FamilyLaunch l;
  l.kind = ordered ? "scatter_add_ordered" : "scatter_add";
  l.launcherCall = llvm::formatv("tcc_cuda::launch_scatter_add_rows<{0}, {1}>({5}, p1, "
                                 "{6}, {2}, {3}, {4}, status, code, s{7});",
                                 familyType(sa.getOut()), familyType(sa.getIds()), n, v, row,
                                 familyArg(sa.getUpdates(), 0, false),
                                 familyArg(sa.getOut(), 2, true), ordered ? ", true" : "");
  l.buffers = {sa.getUpdates(), sa.getIds(), sa.getOut()};
  l.written = {false, false, true};
  l.checked = true;
  l.flops = static_cast<double>(n) * row;
  l.bytes = static_cast<double>(bufferBytes(out)) * 2 + bufferBytes(mrt(sa.getUpdates()));
  l.shape = llvm::formatv("{0} rows of {1}", n, row).str();
  return emitFamily(sa, os, l);
}

LogicalResult CudaStepEmitter::emitSoftmaxXent(kern::SoftmaxCrossEntropyOp x,
                                               llvm::raw_ostream &os, double &flops) {
  MemRefType logits = mrt(x.getLogits());
  flops += 4.0 * logits.getNumElements();
  FamilyLaunch l;
  l.kind = "xent";
  l.launcherCall = llvm::formatv("tcc_cuda::launch_softmax_xent_forward<{0}, {1}, {2}>({5}, "
                                 "p1, {6}, {3}, {4}, status, code, s);",
                                 familyType(x.getLogits()), familyType(x.getLabels()),
                                 familyType(x.getLoss()), logits.getDimSize(0),
                                 logits.getDimSize(1), familyArg(x.getLogits(), 0, false),
                                 familyArg(x.getLoss(), 2, true));
  l.buffers = {x.getLogits(), x.getLabels(), x.getLoss()};
  l.written = {false, false, true};
  l.checked = true;
  l.flops = 4.0 * logits.getNumElements();
  l.bytes = bufferBytes(logits);
  l.shape = llvm::formatv("{0} rows of {1}", logits.getDimSize(0), logits.getDimSize(1)).str();
  return emitFamily(x, os, l);
}

LogicalResult CudaStepEmitter::emitSoftmaxXentGrad(kern::SoftmaxCrossEntropyGradOp x,
                                                   llvm::raw_ostream &os, double &flops) {
  MemRefType logits = mrt(x.getLogits());
  flops += 5.0 * logits.getNumElements();
  FamilyLaunch l;
  l.kind = "xent_grad";
  l.launcherCall = llvm::formatv("tcc_cuda::launch_softmax_xent_backward<{0}, {1}, {2}>({5}, "
                                 "p1, {6}, {7}, {3}, {4}, status, code, s);",
                                 familyType(x.getLogits()), familyType(x.getLabels()),
                                 familyType(x.getGrad()), logits.getDimSize(0),
                                 logits.getDimSize(1), familyArg(x.getLogits(), 0, false),
                                 familyArg(x.getGrad(), 2, false), familyArg(x.getOut(), 3, true));
  l.buffers = {x.getLogits(), x.getLabels(), x.getGrad(), x.getOut()};
  l.written = {false, false, false, true};
  l.checked = true;
  l.flops = 5.0 * logits.getNumElements();
  l.bytes = 2.0 * bufferBytes(logits);
  l.shape = llvm::formatv("{0} rows of {1}", logits.getDimSize(0), logits.getDimSize(1)).str();
  return emitFamily(x, os, l);
}

LogicalResult CudaStepEmitter::emitSoftmaxXentWithGrad(kern::SoftmaxCrossEntropyWithGradOp x,
                                                       llvm::raw_ostream &os, double &flops) {
  MemRefType logits = mrt(x.getLogits());
  flops += 9.0 * logits.getNumElements(); // the two ops' FLOPs, as if apart
  FamilyLaunch l;
  l.kind = "xent_with_grad";
  l.launcherCall = llvm::formatv(
      "tcc_cuda::launch_softmax_xent_with_grad<{0}, {1}, {2}, {3}>({6}, p1, {7}, {8}, {9}, "
      "{4}, {5}, status, code, s);",
      familyType(x.getLogits()), familyType(x.getLabels()), familyType(x.getGrad()),
      familyType(x.getLoss()), logits.getDimSize(0), logits.getDimSize(1),
      familyArg(x.getLogits(), 0, false), familyArg(x.getGrad(), 2, false),
      familyArg(x.getOut(), 4, true), familyArg(x.getLoss(), 3, true));
  l.buffers = {x.getLogits(), x.getLabels(), x.getGrad(), x.getLoss(), x.getOut()};
  l.written = {false, false, false, true, true};
  l.checked = true;
  l.flops = 9.0 * logits.getNumElements();
  l.bytes = 2.0 * bufferBytes(logits);
  l.shape = llvm::formatv("{0} rows of {1}", logits.getDimSize(0), logits.getDimSize(1)).str();
  return emitFamily(x, os, l);
}

} // namespace tcc::codegen::cuda
