// Verifiers of the multi-tensor kernels kern-fuse-horizontal builds:
// kern.multi_elementwise (one body over several members) and
// kern.multi_sum (several whole-tensor sums).
#include "dialects/kern/KernDialect.h"

using namespace mlir;
using namespace tcc::kern;

namespace {

MemRefType mrt(Value v) { return cast<MemRefType>(v.getType()); }

} // namespace

LogicalResult MultiElementwiseOp::verify() {
  int64_t members = this->members();
  if (members < 1)
    return emitOpError("needs at least one member");
  if (getOutputs().empty() || getOutputs().size() % members != 0 ||
      getInputs().size() % members != 0)
    return emitOpError("operand counts must be multiples of num_members = ") << members;
  int64_t k = inputsPerMember(), j = outputsPerMember();
  Block &body = getBodyBlock();
  if (static_cast<int64_t>(body.getNumArguments()) != k + 1)
    return emitOpError("body takes one scalar per member input and the position");
  if (!body.getArguments().back().getType().isInteger(64))
    return emitOpError("the last body argument (position) must be i64");
  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  if (!yield || static_cast<int64_t>(yield.getValues().size()) != j)
    return emitOpError("body must end in kern.yield of one value per member output");
  for (int64_t m = 0; m < members; ++m) {
    ValueRange ins = memberInputs(m), outs = memberOutputs(m);
    ArrayRef<int64_t> shape = mrt(outs[0]).getShape();
    int64_t n = mrt(outs[0]).getNumElements();
    for (auto [out, v] : llvm::zip(outs, yield.getValues())) {
      if (mrt(out).getShape() != shape)
        return emitOpError("member ") << m << ": outputs must have one shape";
      if (mrt(out).getElementType() != v.getType())
        return emitOpError("member ") << m << ": output element type "
                                      << mrt(out).getElementType()
                                      << " differs from the yielded " << v.getType();
    }
    for (auto [in, arg] : llvm::zip(ins, body.getArguments())) {
      int64_t count = mrt(in).getNumElements();
      if (count != n && count != 1)
        return emitOpError("member ") << m << ": input " << in.getType()
                                      << " has neither the member's " << n
                                      << " elements nor one";
      if (mrt(in).getElementType() != arg.getType())
        return emitOpError("member ") << m << ": input element type "
                                      << mrt(in).getElementType()
                                      << " differs from the body argument " << arg.getType();
    }
  }
  for (Operation &op : body.without_terminator())
    if (!isa<arith::ArithDialect, math::MathDialect>(op.getDialect()) ||
        op.getNumRegions() != 0)
      return op.emitOpError("is not allowed in a kern.multi_elementwise body "
                            "(arith and math ops only)");
  return success();
}

int64_t MultiSumOp::partialsFor(ArrayRef<int64_t> counts, int64_t chunk) {
  int64_t total = 0;
  for (int64_t n : counts)
    total += std::max<int64_t>(1, (n + chunk - 1) / chunk);
  return total;
}

LogicalResult MultiSumOp::verify() {
  if (getInputs().empty() || getInputs().size() != getOutputs().size())
    return emitOpError("needs one output per input, at least one");
  if (getChunkAttr().getInt() < 1)
    return emitOpError("chunk must be positive");
  SmallVector<int64_t> counts;
  for (auto [in, out] : llvm::zip(getInputs(), getOutputs())) {
    Type it = mrt(in).getElementType(), ot = mrt(out).getElementType();
    if (getSquares()) {
      if (!ot.isF32() || !(it.isF32() || it.isBF16() || it.isF16()))
        return emitOpError("with squares sums f32, bf16 or f16 inputs into f32 outputs, not ")
               << in.getType() << " into " << out.getType();
    } else if (it != ot) {
      return emitOpError("input ") << in.getType() << " and output " << out.getType()
                                   << " element types differ";
    }
    if (mrt(out).getNumElements() != 1)
      return emitOpError("output ") << out.getType() << " must hold one element";
    counts.push_back(mrt(in).getNumElements());
  }
  int64_t need = partialsFor(counts, getChunkAttr().getInt());
  if (mrt(getPartials()).getNumElements() < need)
    return emitOpError("partials hold ") << mrt(getPartials()).getNumElements()
                                         << " values, the chunks need " << need;
  return success();
}
