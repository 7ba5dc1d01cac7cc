// Verifiers of tg ops. Messages say what was expected and what was found;
// the op's location (the model's node name) is attached by MLIR.
#include "dialects/tg/TgDialect.h"

#include "llvm/ADT/STLExtras.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;
using namespace tcc::tg;

#define GET_OP_CLASSES
#include "dialects/tg/TgOps.cpp.inc"

namespace tcc::tg {

std::string formatShape(llvm::ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (auto [i, d] : llvm::enumerate(shape))
    s += (i ? ", " : "") + std::to_string(d);
  return s + "]";
}

std::optional<llvm::SmallVector<int64_t>>
broadcastShapes(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  llvm::SmallVector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return std::nullopt;
    out[i] = da == 1 ? db : da;
  }
  return out;
}

llvm::SmallVector<int64_t> reducedShape(llvm::ArrayRef<int64_t> shape,
                                        llvm::ArrayRef<int64_t> axes,
                                        bool keepDims) {
  llvm::SmallVector<int64_t> out;
  for (auto [i, d] : llvm::enumerate(shape)) {
    bool reduced = llvm::is_contained(axes, static_cast<int64_t>(i));
    if (!reduced)
      out.push_back(d);
    else if (keepDims)
      out.push_back(1);
  }
  return out;
}

} // namespace tcc::tg


static RankedTensorType rtt(Value v) {
  return cast<RankedTensorType>(v.getType());
}

//===----------------------------------------------------------------------===//

LogicalResult ConstantOp::verify() {
  if (getValue().getType() != getResult().getType())
    return emitOpError("value type ")
           << getValue().getType() << " differs from result type "
           << getResult().getType();
  return success();
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

LogicalResult MatmulOp::verify() {
  auto l = rtt(getLhs()), r = rtt(getRhs()), out = rtt(getResult());
  if (l.getRank() != 2 || r.getRank() != 2 || out.getRank() != 2)
    return emitOpError("expects rank-2 operands and result, got lhs ")
           << formatShape(l.getShape()) << ", rhs " << formatShape(r.getShape());
  if (l.getElementType() != r.getElementType() ||
      l.getElementType() != out.getElementType())
    return emitOpError("operands and result must have one element type");
  int64_t m = l.getDimSize(getTransposeLhs() ? 1 : 0);
  int64_t kl = l.getDimSize(getTransposeLhs() ? 0 : 1);
  int64_t kr = r.getDimSize(getTransposeRhs() ? 1 : 0);
  int64_t n = r.getDimSize(getTransposeRhs() ? 0 : 1);
  if (kl != kr)
    return emitOpError("contraction sizes differ: lhs ")
           << formatShape(l.getShape()) << " and rhs " << formatShape(r.getShape())
           << " give K = " << kl << " vs " << kr;
  if (out.getDimSize(0) != m || out.getDimSize(1) != n)
    return emitOpError("result shape ")
           << formatShape(out.getShape()) << " should be " << formatShape({m, n});
  return success();
}

template <typename BinaryOp>
static LogicalResult verifyBroadcastBinary(BinaryOp op) {
  auto l = rtt(op.getLhs()), r = rtt(op.getRhs()), out = rtt(op.getResult());
  if (l.getElementType() != r.getElementType() ||
      l.getElementType() != out.getElementType())
    return op.emitOpError("operands and result must have one element type");
  auto shape = broadcastShapes(l.getShape(), r.getShape());
  if (!shape)
    return op.emitOpError("shapes ")
           << formatShape(l.getShape()) << " and " << formatShape(r.getShape())
           << " do not broadcast";
  if (ArrayRef<int64_t>(*shape) != out.getShape())
    return op.emitOpError("result shape ")
           << formatShape(out.getShape()) << " should be the broadcast shape "
           << formatShape(*shape);
  return success();
}

LogicalResult AddOp::verify() { return verifyBroadcastBinary(*this); }
LogicalResult MulOp::verify() { return verifyBroadcastBinary(*this); }

static LogicalResult verifyLabels(Operation *op, RankedTensorType logits,
                                  RankedTensorType labels) {
  if (logits.getRank() != 2)
    return op->emitOpError("logits must be (N, C), got ")
           << formatShape(logits.getShape());
  if (labels.getRank() != 1 || labels.getDimSize(0) != logits.getDimSize(0))
    return op->emitOpError("labels must be (")
           << logits.getDimSize(0) << ") to match logits "
           << formatShape(logits.getShape()) << ", got "
           << formatShape(labels.getShape());
  return success();
}

LogicalResult SoftmaxCrossEntropyOp::verify() {
  auto logits = rtt(getLogits()), out = rtt(getResult());
  if (failed(verifyLabels(*this, logits, rtt(getLabels()))))
    return failure();
  if (out.getShape() != ArrayRef<int64_t>{logits.getDimSize(0)} ||
      out.getElementType() != logits.getElementType())
    return emitOpError("result must be one loss per row: ")
           << formatShape({logits.getDimSize(0)}) << " of "
           << logits.getElementType();
  return success();
}

LogicalResult SoftmaxCrossEntropyGradOp::verify() {
  auto logits = rtt(getLogits());
  if (failed(verifyLabels(*this, logits, rtt(getLabels()))))
    return failure();
  if (rtt(getGrad()).getShape() != ArrayRef<int64_t>{logits.getDimSize(0)} ||
      rtt(getGrad()).getElementType() != logits.getElementType())
    return emitOpError("grad must have one entry per row, of the logits' type");
  if (getResult().getType() != logits)
    return emitOpError("result type must equal the logits type");
  return success();
}

template <typename ReduceOp>
static LogicalResult verifyReduce(ReduceOp op) {
  auto in = rtt(op.getInput()), out = rtt(op.getResult());
  ArrayRef<int64_t> axes = op.getAxes();
  if (axes.empty())
    return op.emitOpError("needs at least one axis");
  for (auto [i, a] : llvm::enumerate(axes)) {
    if (a < 0 || a >= in.getRank())
      return op.emitOpError("axis ") << a << " out of range for rank "
                                     << in.getRank();
    if (i > 0 && axes[i - 1] >= a)
      return op.emitOpError("axes must be sorted and unique");
  }
  auto expected = reducedShape(in.getShape(), axes, op.getKeepDims());
  if (ArrayRef<int64_t>(expected) != out.getShape() ||
      in.getElementType() != out.getElementType())
    return op.emitOpError("result shape ")
           << formatShape(out.getShape()) << " should be " << formatShape(expected);
  return success();
}

LogicalResult ReduceSumOp::verify() { return verifyReduce(*this); }
LogicalResult ReduceMeanOp::verify() { return verifyReduce(*this); }

LogicalResult BroadcastToOp::verify() {
  auto in = rtt(getInput()), out = rtt(getResult());
  auto shape = broadcastShapes(in.getShape(), out.getShape());
  if (in.getElementType() != out.getElementType() || !shape ||
      ArrayRef<int64_t>(*shape) != out.getShape())
    return emitOpError("cannot broadcast ")
           << formatShape(in.getShape()) << " to " << formatShape(out.getShape());
  return success();
}

LogicalResult ReshapeOp::verify() {
  auto in = rtt(getInput()), out = rtt(getResult());
  if (in.getElementType() != out.getElementType())
    return emitOpError("element type must not change");
  if (in.getNumElements() != out.getNumElements())
    return emitOpError("cannot reshape ")
           << formatShape(in.getShape()) << " (" << in.getNumElements()
           << " elements) to " << formatShape(out.getShape()) << " ("
           << out.getNumElements() << " elements)";
  return success();
}
