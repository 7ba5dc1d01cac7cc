// Verifiers of kern.layer_norm and kern.layer_norm_grad: tg's contract
// (TgStructuralOps.cpp) on buffers, plus the gradient's partial-sum
// workspace (NormWorkspace.h); and of batch norm's two reductions
// (kern.batch_norm_stats / _grad_sums) and their (P, 2, C) workspace.
#include "dialects/common/ShapeHelpers.h"
#include "dialects/kern/KernDialect.h"
#include "dialects/kern/NormWorkspace.h"

using namespace mlir;
using namespace tcc::kern;

namespace {

MemRefType mrt(Value v) { return cast<MemRefType>(v.getType()); }

// x is (..., C); each present vector is (C) of x's element type.
LogicalResult verifyNormBuffers(Operation *op, Value input,
                                ArrayRef<std::pair<StringRef, Value>> vectors) {
  MemRefType x = mrt(input);
  if (x.getRank() < 1)
    return op->emitOpError("normalizes over the last axis; got a scalar input");
  for (auto [name, v] : vectors) {
    if (!v)
      continue;
    MemRefType t = mrt(v);
    if (t.getShape() != x.getShape().take_back() || t.getElementType() != x.getElementType())
      return op->emitOpError() << name << " must be " << tcc::formatShape(x.getShape().take_back())
                               << " of " << x.getElementType() << ", got "
                               << tcc::formatShape(t.getShape()) << " of " << t.getElementType();
  }
  return success();
}

} // namespace

LogicalResult LayerNormOp::verify() {
  if (getRms() && getBias())
    return emitOpError("an rms norm has no bias");
  if (mrt(getOut()).getShape() != mrt(getInput()).getShape())
    return emitOpError("out must have the input's shape ")
           << tcc::formatShape(mrt(getInput()).getShape());
  return verifyNormBuffers(*this, getInput(), {{"weight", getWeight()}, {"bias", getBias()}});
}

LogicalResult LayerNormGradOp::verify() {
  MemRefType x = mrt(getInput());
  if (mrt(getGrad()).getShape() != x.getShape())
    return emitOpError("grad must have the input's shape ") << tcc::formatShape(x.getShape());
  if (mrt(getInputGrad()) != x)
    return emitOpError("input_grad must have the input's type ") << x;
  if (getAddend() && mrt(getAddend()) != x)
    return emitOpError("addend must have input_grad's type ") << x;
  if (getInputGradCast() && mrt(getInputGradCast()).getShape() != x.getShape())
    return emitOpError("input_grad_cast must have the input's shape ")
           << tcc::formatShape(x.getShape());
  if (getRms() && getBiasGrad())
    return emitOpError("an rms norm has no bias_grad");
  if (!getWeight() != !getWeightGrad())
    return emitOpError("weight and weight_grad come together");
  if (failed(verifyNormBuffers(*this, getInput(),
                               {{"weight", getWeight()},
                                {"weight_grad", getWeightGrad()},
                                {"bias_grad", getBiasGrad()}})))
    return failure();
  int64_t c = x.getShape().back(), rows = c == 0 ? 0 : x.getNumElements() / c;
  if (Value sum = getInputGradSum();
      sum && (mrt(sum).getRank() < 1 || mrt(sum).getShape().back() != c ||
              mrt(sum).getNumElements() != c))
    return emitOpError("input_grad_sum must be (") << c << ") (with any leading 1s), got "
                                                    << tcc::formatShape(mrt(sum).getShape());
  if (getSumOfCast() && (!getInputGradSum() || !getInputGradCast()))
    return emitOpError("sum_of_cast needs input_grad_sum and input_grad_cast");
  bool sums = getWeightGrad() || getBiasGrad() || getInputGradSum();
  if (!sums != !getWorkspace())
    return emitOpError(
        "a workspace comes exactly with weight_grad, bias_grad or input_grad_sum");
  if (!sums)
    return success();
  Type acc = x.getElementType().isF64() ? x.getElementType() : Float32Type::get(getContext());
  SmallVector<int64_t> want{normGradParts(rows), normGradSlots(getInputGradSum() != nullptr), c};
  MemRefType w = mrt(getWorkspace());
  if (w.getShape() != ArrayRef<int64_t>(want) || w.getElementType() != acc)
    return emitOpError("workspace must be ") << tcc::formatShape(want) << " of " << acc
                                             << " (normGradParts of " << rows << " rows)";
  return success();
}

namespace {

// input (N, C, ...) rank >= 2; the (C) vectors in the statistics' type (f32
// for 16-bit input, else input's); the workspace present iff P > 1 and then
// (P, 2, C) of that type.
LogicalResult verifyBatchNormBuffers(Operation *op, Value input,
                                     ArrayRef<std::pair<StringRef, Value>> channels,
                                     Value workspace) {
  MemRefType x = mrt(input);
  if (x.getRank() < 2)
    return op->emitOpError("input must be (N, C, ...) (rank >= 2), got ")
           << tcc::formatShape(x.getShape());
  Type stats = batchNormStatsType(x.getElementType());
  BatchNormDims d = batchNormDims(x.getDimSize(0), x.getDimSize(1), x.getNumElements());
  int64_t c = d.c;
  for (auto [name, v] : channels) {
    MemRefType t = mrt(v);
    if (t.getShape() != ArrayRef<int64_t>{c} || t.getElementType() != stats)
      return op->emitOpError() << name << " must be (" << c << ") of " << stats << ", got "
                               << tcc::formatShape(t.getShape()) << " of "
                               << t.getElementType();
  }
  if ((d.parts > 1) != static_cast<bool>(workspace))
    return op->emitOpError() << "takes a workspace exactly when its " << d.perChannel()
                             << " values per channel are cut into parts (here "
                             << d.parts << ")";
  if (!workspace)
    return success();
  SmallVector<int64_t> want{d.parts, 2, c};
  MemRefType w = mrt(workspace);
  if (w.getShape() != ArrayRef<int64_t>(want) || w.getElementType() != stats)
    return op->emitOpError("workspace must be ") << tcc::formatShape(want) << " of " << stats
                                                 << " (batchNormParts)";
  return success();
}

} // namespace

Type tcc::kern::batchNormStatsType(Type inputElement) {
  return inputElement.isBF16() || inputElement.isF16()
             ? Float32Type::get(inputElement.getContext())
             : inputElement;
}

LogicalResult BatchNormStatsOp::verify() {
  return verifyBatchNormBuffers(*this, getInput(), {{"mean", getMean()}, {"var", getVar()}},
                                getWorkspace());
}

LogicalResult BatchNormGradSumsOp::verify() {
  if (mrt(getGrad()).getShape() != mrt(getInput()).getShape())
    return emitOpError("grad must have the input's shape ")
           << tcc::formatShape(mrt(getInput()).getShape());
  return verifyBatchNormBuffers(*this, getInput(),
                                {{"mean", getMean()},
                                 {"rstd", getRstd()},
                                 {"grad_sum", getGradSum()},
                                 {"grad_xhat_sum", getGradXhatSum()}},
                                getWorkspace());
}
