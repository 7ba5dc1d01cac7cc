// Verifiers and gradients of the elementwise ops (TgElementwiseOps.td).
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

LogicalResult ConstantOp::verify() {
  if (getValue().getType() != getResult().getType())
    return emitOpError("value type ")
           << getValue().getType() << " differs from result type "
           << getResult().getType();
  return success();
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

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

//===----------------------------------------------------------------------===//
// Gradients (GradientOpInterface)
//===----------------------------------------------------------------------===//

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
