// Vector-Jacobian products of tg ops (GradientOpInterface). Each function
// receives d(loss)/d(result) and builds d(loss)/d(operand) for every operand.
// Shapes: comments use the op's own operand names.
#include "dialects/tg/TgDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;
using namespace tcc::tg;

namespace tcc::tg {

Value sumToShape(OpBuilder &b, Location loc, Value grad,
                 RankedTensorType targetType) {
  auto gradType = cast<RankedTensorType>(grad.getType());
  if (gradType == targetType)
    return grad;
  ArrayRef<int64_t> g = gradType.getShape(), t = targetType.getShape();
  int64_t lead = g.size() - t.size();
  // Broadcast added the leading dims and stretched size-1 dims: sum them.
  SmallVector<int64_t> axes;
  for (int64_t i = 0; i < static_cast<int64_t>(g.size()); ++i)
    if (i < lead || (t[i - lead] == 1 && g[i] != 1))
      axes.push_back(i);
  Value summed = grad;
  if (!axes.empty()) {
    auto keptType = RankedTensorType::get(reducedShape(g, axes, true),
                                          gradType.getElementType());
    summed = ReduceSumOp::create(b, loc, keptType, grad,
                                 b.getDenseI64ArrayAttr(axes),
                                 b.getBoolAttr(true));
  }
  if (summed.getType() != targetType)
    summed = ReshapeOp::create(b, loc, targetType, summed);
  return summed;
}

} // namespace tcc::tg

static RankedTensorType rtt(Value v) {
  return cast<RankedTensorType>(v.getType());
}

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

LogicalResult AddOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  Value dc = resultGrads[0];
  operandGrads.push_back(sumToShape(b, getLoc(), dc, rtt(getLhs())));
  operandGrads.push_back(sumToShape(b, getLoc(), dc, rtt(getRhs())));
  return success();
}

LogicalResult MulOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  Value dc = resultGrads[0];
  Type ct = getResult().getType();
  Value dl = MulOp::create(b, getLoc(), ct, dc, getRhs());
  Value dr = MulOp::create(b, getLoc(), ct, dc, getLhs());
  operandGrads.push_back(sumToShape(b, getLoc(), dl, rtt(getLhs())));
  operandGrads.push_back(sumToShape(b, getLoc(), dr, rtt(getRhs())));
  return success();
}

LogicalResult ReluOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(ReluGradOp::create(b, getLoc(), getType(), getInput(),
                                            resultGrads[0]));
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
