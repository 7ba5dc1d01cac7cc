// Verifiers and gradients of the structural ops (TgStructuralOps.td).
// Gradient comments use the op's own operand names.
#include "dialects/tg/TgDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;
using namespace tcc::tg;

static RankedTensorType rtt(Value v) {
  return cast<RankedTensorType>(v.getType());
}

//===----------------------------------------------------------------------===//
// Verifiers
//===----------------------------------------------------------------------===//

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

//===----------------------------------------------------------------------===//
// Gradients (GradientOpInterface)
//===----------------------------------------------------------------------===//

// result (M,N) = op(lhs) x op(rhs). Each case is the matrix identity
// dA = dC op(B)^T, dB = op(A)^T dC, rewritten so no explicit transpose op is
// needed; the transpose flags absorb it.
LogicalResult MatmulOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                       SmallVectorImpl<Value> &operandGrads) {
  Value dc = resultGrads[0];
  Value lhs = getLhs(), rhs = getRhs();
  Location loc = getLoc();
  auto mm = [&](Type type, Value x, Value y, bool tx, bool ty) -> Value {
    return MatmulOp::create(b, loc, type, x, y, b.getBoolAttr(tx),
                            b.getBoolAttr(ty));
  };
  bool ta = getTransposeLhs(), tb = getTransposeRhs();
  Type lt = lhs.getType(), rt = rhs.getType();
  if (!ta && !tb) {        // C = A B
    operandGrads.push_back(mm(lt, dc, rhs, false, true));  // dC B^T
    operandGrads.push_back(mm(rt, lhs, dc, true, false));  // A^T dC
  } else if (ta && !tb) {  // C = A^T B, A is (K,M)
    operandGrads.push_back(mm(lt, rhs, dc, false, true));  // B dC^T
    operandGrads.push_back(mm(rt, lhs, dc, false, false)); // A dC
  } else if (!ta && tb) {  // C = A B^T, B is (N,K)
    operandGrads.push_back(mm(lt, dc, rhs, false, false)); // dC B
    operandGrads.push_back(mm(rt, dc, lhs, true, false));  // dC^T A
  } else {                 // C = A^T B^T
    operandGrads.push_back(mm(lt, rhs, dc, true, true));   // B^T dC^T
    operandGrads.push_back(mm(rt, dc, lhs, true, true));   // dC^T A^T
  }
  return success();
}

LogicalResult
SoftmaxCrossEntropyOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                      SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(SoftmaxCrossEntropyGradOp::create(
      b, getLoc(), getLogits().getType(), getLogits(), getLabels(),
      resultGrads[0]));
  operandGrads.push_back(Value()); // integer labels: no gradient
  return success();
}

// d(input) = broadcast of d(result) back over the reduced axes.
static Value broadcastReduced(OpBuilder &b, Location loc, Value dc,
                              RankedTensorType inType, ArrayRef<int64_t> axes) {
  auto keptType = RankedTensorType::get(
      reducedShape(inType.getShape(), axes, true), inType.getElementType());
  if (dc.getType() != keptType)
    dc = ReshapeOp::create(b, loc, keptType, dc);
  return BroadcastToOp::create(b, loc, inType, dc);
}

LogicalResult ReduceSumOp::buildGradients(OpBuilder &b,
                                          ArrayRef<Value> resultGrads,
                                          SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(broadcastReduced(b, getLoc(), resultGrads[0],
                                          rtt(getInput()), getAxes()));
  return success();
}

LogicalResult
ReduceMeanOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                             SmallVectorImpl<Value> &operandGrads) {
  auto inType = rtt(getInput());
  int64_t count = 1;
  for (int64_t a : getAxes())
    count *= inType.getDimSize(a);
  Value spread =
      broadcastReduced(b, getLoc(), resultGrads[0], inType, getAxes());
  auto scalarType = RankedTensorType::get({}, inType.getElementType());
  Value scale = ConstantOp::create(
      b, getLoc(), scalarType,
      DenseElementsAttr::get(scalarType,
                             b.getFloatAttr(inType.getElementType(),
                                            1.0 / static_cast<double>(count))));
  operandGrads.push_back(MulOp::create(b, getLoc(), inType, spread, scale));
  return success();
}

LogicalResult
BroadcastToOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(
      sumToShape(b, getLoc(), resultGrads[0], rtt(getInput())));
  return success();
}

LogicalResult ReshapeOp::buildGradients(OpBuilder &b,
                                        ArrayRef<Value> resultGrads,
                                        SmallVectorImpl<Value> &operandGrads) {
  if (!isa<FloatType>(rtt(getInput()).getElementType())) {
    operandGrads.push_back(Value());
    return success();
  }
  operandGrads.push_back(ReshapeOp::create(b, getLoc(), getInput().getType(),
                                           resultGrads[0]));
  return success();
}
