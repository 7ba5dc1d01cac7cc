// Verifiers and gradients of the elementwise ops (TgElementwiseOps.td);
// their scalar bodies are in TgElementwiseScalarBodies.cpp. Gradient comments
// write y for the op's result and g for the gradient flowing into it.
#include "dialects/tg/TgDialect.h"

#include "dialects/common/ShapeHelpers.h"
#include "dialects/tg/TgStructuralBuilders.h"
#include "dialects/tg/TgTypeHelpers.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;
using namespace tcc::tg;

//===----------------------------------------------------------------------===//
// Verifiers
//===----------------------------------------------------------------------===//

// "0.5", "-1", "1e-08": numbers in messages as a model author wrote them.
LogicalResult ConstantOp::verify() {
  if (getValue().getType() != getResult().getType())
    return emitOpError("value type ")
           << getValue().getType() << " differs from result type "
           << getResult().getType();
  return success();
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

LogicalResult IotaOp::verify() {
  auto type = rtt(getResult());
  if (type.getRank() == 0)
    return emitOpError("needs a result of rank >= 1 to count along an axis");
  int64_t axis = getAxisAttr().getInt();
  if (axis < 0 || axis >= type.getRank())
    return emitOpError("axis ") << axis << " out of range for rank "
                                << type.getRank();
  if (type.getElementType().isInteger(1))
    return emitOpError("result must be integer or float, not i1");
  return success();
}

static LogicalResult verifyApproximate(Operation *op, StringRef approximate) {
  if (approximate != "none" && approximate != "tanh")
    return op->emitOpError("approximate must be \"none\" or \"tanh\", got \"")
           << approximate << "\"";
  return success();
}

LogicalResult GeluOp::verify() {
  return verifyApproximate(*this, getApproximate());
}

LogicalResult GeluGradOp::verify() {
  return verifyApproximate(*this, getApproximate());
}

// `shapes` broadcast (numpy) to exactly `result`.
static LogicalResult verifyBroadcastResult(Operation *op,
                                           ArrayRef<Value> operands,
                                           RankedTensorType result) {
  SmallVector<int64_t> shape;
  std::string listed;
  for (auto [i, v] : llvm::enumerate(operands)) {
    ArrayRef<int64_t> s = rtt(v).getShape();
    listed += (i ? " and " : "") + tcc::formatShape(s);
    auto merged = tcc::broadcastShapes(shape, s);
    if (!merged)
      return op->emitOpError("shapes ") << listed << " do not broadcast";
    shape = *merged;
  }
  if (ArrayRef<int64_t>(shape) != result.getShape())
    return op->emitOpError("result shape ")
           << tcc::formatShape(result.getShape())
           << " should be the broadcast shape " << tcc::formatShape(shape);
  return success();
}

template <typename BinaryOp>
static LogicalResult verifyBroadcastBinary(BinaryOp op) {
  auto l = rtt(op.getLhs()), r = rtt(op.getRhs()), out = rtt(op.getResult());
  if (l.getElementType() != r.getElementType() ||
      l.getElementType() != out.getElementType())
    return op.emitOpError("operands and result must have one element type");
  return verifyBroadcastResult(op, {op.getLhs(), op.getRhs()}, out);
}

LogicalResult AddOp::verify() { return verifyBroadcastBinary(*this); }
LogicalResult SubOp::verify() { return verifyBroadcastBinary(*this); }
LogicalResult MulOp::verify() { return verifyBroadcastBinary(*this); }
LogicalResult DivOp::verify() { return verifyBroadcastBinary(*this); }
LogicalResult MaxOp::verify() { return verifyBroadcastBinary(*this); }
LogicalResult MinOp::verify() { return verifyBroadcastBinary(*this); }

template <typename CompareOp>
static LogicalResult verifyCompare(CompareOp op) {
  auto l = rtt(op.getLhs()), r = rtt(op.getRhs());
  if (l.getElementType() != r.getElementType())
    return op.emitOpError("compares one element type, got ")
           << l.getElementType() << " and " << r.getElementType();
  return verifyBroadcastResult(op, {op.getLhs(), op.getRhs()},
                               rtt(op.getResult()));
}

LogicalResult EqualOp::verify() { return verifyCompare(*this); }
LogicalResult NotEqualOp::verify() { return verifyCompare(*this); }
LogicalResult LessOp::verify() { return verifyCompare(*this); }
LogicalResult LessEqualOp::verify() { return verifyCompare(*this); }
LogicalResult GreaterOp::verify() { return verifyCompare(*this); }
LogicalResult GreaterEqualOp::verify() { return verifyCompare(*this); }

LogicalResult SelectOp::verify() {
  Type t = rtt(getTrueValue()).getElementType();
  Type f = rtt(getFalseValue()).getElementType();
  Type out = rtt(getResult()).getElementType();
  if (t != f || t != out)
    return emitOpError("true_value, false_value and result must have one "
                       "element type, got ")
           << t << ", " << f << " and " << out;
  return verifyBroadcastResult(
      *this, {getCondition(), getTrueValue(), getFalseValue()},
      rtt(getResult()));
}

LogicalResult CastOp::verify() {
  auto in = rtt(getInput()), out = rtt(getResult());
  if (in.getShape() != out.getShape())
    return emitOpError("changes the element type only: input shape ")
           << tcc::formatShape(in.getShape()) << " differs from result shape "
           << tcc::formatShape(out.getShape());
  return success();
}

LogicalResult DropoutOp::verify() {
  double rate = getRate().convertToDouble();
  if (!(rate >= 0.0 && rate < 1.0))
    return emitOpError("rate must be in [0, 1), got ") << tcc::formatNumber(rate);
  return success();
}

//===----------------------------------------------------------------------===//
// Gradients (GradientOpInterface)
//===----------------------------------------------------------------------===//

namespace {

// A rank-0 constant of `like`'s element type; broadcasting spreads it.
Value scalarLike(OpBuilder &b, Location loc, Value like, double value) {
  return build::scalar(b, loc, rtt(like).getElementType(), value);
}

Value scale(OpBuilder &b, Location loc, Value x, double factor) {
  return build::mul(b, loc, x, scalarLike(b, loc, x, factor));
}

// 1 - x, the same shape as x.
Value oneMinus(OpBuilder &b, Location loc, Value x) {
  return build::sub(b, loc, scalarLike(b, loc, x, 1.0), x);
}

// Unary ops: d input = g * f'(input), with f' built by `derivative`.
template <typename Derivative>
LogicalResult unaryGradient(Operation *op, OpBuilder &b,
                            ArrayRef<Value> resultGrads,
                            SmallVectorImpl<Value> &operandGrads,
                            Derivative derivative) {
  Location loc = op->getLoc();
  operandGrads.push_back(build::mul(
      b, loc, resultGrads[0], derivative(op->getOperand(0), op->getResult(0))));
  return success();
}

} // namespace

LogicalResult ConstantOp::buildGradients(OpBuilder &, ArrayRef<Value>,
                                         SmallVectorImpl<Value> &) {
  return success(); // no operands
}

LogicalResult IotaOp::buildGradients(OpBuilder &, ArrayRef<Value>,
                                     SmallVectorImpl<Value> &) {
  return success(); // no operands
}

LogicalResult NegOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(
      NegOp::create(b, getLoc(), getType(), resultGrads[0]));
  return success();
}

LogicalResult ExpOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  // dx = g * y
  return unaryGradient(*this, b, resultGrads, operandGrads,
                       [](Value, Value y) { return y; });
}

LogicalResult LogOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  // dx = g / x
  operandGrads.push_back(build::div(b, getLoc(), resultGrads[0], getInput()));
  return success();
}

LogicalResult SqrtOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  // dx = g / (2 y)
  operandGrads.push_back(build::div(b, getLoc(), resultGrads[0],
                                    scale(b, getLoc(), getResult(), 2.0)));
  return success();
}

LogicalResult RsqrtOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                      SmallVectorImpl<Value> &operandGrads) {
  // y = x^(-1/2): dx = g * (-1/2) x^(-3/2) = g * (-1/2) y^3
  Location loc = getLoc();
  return unaryGradient(
      *this, b, resultGrads, operandGrads, [&](Value, Value y) {
        Value cube = build::mul(b, loc, build::mul(b, loc, y, y), y);
        return scale(b, loc, cube, -0.5);
      });
}

LogicalResult TanhOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  // dx = g * (1 - y^2)
  Location loc = getLoc();
  return unaryGradient(*this, b, resultGrads, operandGrads,
                       [&](Value, Value y) {
                         return oneMinus(b, loc, build::mul(b, loc, y, y));
                       });
}

LogicalResult SigmoidOp::buildGradients(OpBuilder &b,
                                        ArrayRef<Value> resultGrads,
                                        SmallVectorImpl<Value> &operandGrads) {
  // dx = g * y (1 - y)
  Location loc = getLoc();
  return unaryGradient(*this, b, resultGrads, operandGrads,
                       [&](Value, Value y) {
                         return build::mul(b, loc, y, oneMinus(b, loc, y));
                       });
}

LogicalResult ReluOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  // relu(x) > 0 exactly where x > 0 (NaN and -0 included: both give 0),
  // so the mask reads the result: it is kept anyway when the next layer
  // reads it (a convolution's weight gradient), where the input (batch
  // norm's output) would be one more activation kept for the backward.
  operandGrads.push_back(ReluGradOp::create(b, getLoc(), getType(), getResult(),
                                            resultGrads[0]));
  return success();
}

LogicalResult SiluOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  // y = x s with s = sigmoid(x): dx = g * s (1 + x (1 - s))
  Location loc = getLoc();
  return unaryGradient(
      *this, b, resultGrads, operandGrads, [&](Value x, Value) {
        Value s = SigmoidOp::create(b, loc, x.getType(), x);
        Value inner = build::add(b, loc, scalarLike(b, loc, x, 1.0),
                                 build::mul(b, loc, x, oneMinus(b, loc, s)));
        return build::mul(b, loc, s, inner);
      });
}

LogicalResult GeluOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(GeluGradOp::create(b, getLoc(), getType(), getInput(),
                                            resultGrads[0],
                                            getApproximateAttr()));
  return success();
}

LogicalResult SinOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  // dx = g cos(x)
  Location loc = getLoc();
  return unaryGradient(*this, b, resultGrads, operandGrads,
                       [&](Value x, Value) -> Value {
                         return CosOp::create(b, loc, x.getType(), x);
                       });
}

LogicalResult CosOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  // dx = -g sin(x)
  Location loc = getLoc();
  return unaryGradient(*this, b, resultGrads, operandGrads,
                       [&](Value x, Value) -> Value {
                         Value sin = SinOp::create(b, loc, x.getType(), x);
                         return NegOp::create(b, loc, x.getType(), sin);
                       });
}

LogicalResult PowOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  // dx = g c x^(c-1); for c = 0 the gradient is 0 (not 0 * x^-1, which is
  // NaN at x = 0).
  double c = getExponent().convertToDouble();
  Location loc = getLoc();
  return unaryGradient(
      *this, b, resultGrads, operandGrads, [&](Value x, Value) -> Value {
        if (c == 0.0)
          return scalarLike(b, loc, x, 0.0);
        Value power = PowOp::create(b, loc, x.getType(), x,
                                    b.getF64FloatAttr(c - 1.0));
        return scale(b, loc, power, c);
      });
}

LogicalResult AddOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  Value g = resultGrads[0];
  operandGrads.push_back(sumToShape(b, getLoc(), g, rtt(getLhs())));
  operandGrads.push_back(sumToShape(b, getLoc(), g, rtt(getRhs())));
  return success();
}

LogicalResult SubOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  Value g = resultGrads[0];
  Value negated = NegOp::create(b, getLoc(), g.getType(), g);
  operandGrads.push_back(sumToShape(b, getLoc(), g, rtt(getLhs())));
  operandGrads.push_back(sumToShape(b, getLoc(), negated, rtt(getRhs())));
  return success();
}

LogicalResult MulOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  Value g = resultGrads[0];
  Type ct = getResult().getType();
  Value dl = MulOp::create(b, getLoc(), ct, g, getRhs());
  Value dr = MulOp::create(b, getLoc(), ct, g, getLhs());
  operandGrads.push_back(sumToShape(b, getLoc(), dl, rtt(getLhs())));
  operandGrads.push_back(sumToShape(b, getLoc(), dr, rtt(getRhs())));
  return success();
}

LogicalResult DivOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  // y = l / r: dl = g / r, dr = -g l / r^2 = -dl * y
  Location loc = getLoc();
  Type ct = getResult().getType();
  Value dl = DivOp::create(b, loc, ct, resultGrads[0], getRhs());
  Value dr = NegOp::create(b, loc, ct, MulOp::create(b, loc, ct, dl, getResult()));
  operandGrads.push_back(sumToShape(b, loc, dl, rtt(getLhs())));
  operandGrads.push_back(sumToShape(b, loc, dr, rtt(getRhs())));
  return success();
}

// max/min: the gradient goes to the selected operand; a tie splits it in
// halves (PyTorch's torch.maximum / torch.minimum). `lhsWins` is where the
// lhs alone was selected.
static void minMaxGradients(Operation *op, OpBuilder &b, Value g, Value lhsWins,
                            SmallVectorImpl<Value> &operandGrads) {
  Location loc = op->getLoc();
  Value lhs = op->getOperand(0), rhs = op->getOperand(1);
  Value tie = build::equal(b, loc, lhs, rhs);
  Value half = scale(b, loc, g, 0.5);
  Value zero = scalarLike(b, loc, g, 0.0);
  Value dl =
      build::select(b, loc, lhsWins, g, build::select(b, loc, tie, half, zero));
  Value dr =
      build::select(b, loc, lhsWins, zero, build::select(b, loc, tie, half, g));
  operandGrads.push_back(sumToShape(b, loc, dl, rtt(lhs)));
  operandGrads.push_back(sumToShape(b, loc, dr, rtt(rhs)));
}

LogicalResult MaxOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  minMaxGradients(*this, b, resultGrads[0],
                  build::greater(b, getLoc(), getLhs(), getRhs()),
                  operandGrads);
  return success();
}

LogicalResult MinOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  minMaxGradients(*this, b, resultGrads[0],
                  build::less(b, getLoc(), getLhs(), getRhs()), operandGrads);
  return success();
}

LogicalResult SelectOp::buildGradients(OpBuilder &b,
                                       ArrayRef<Value> resultGrads,
                                       SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(Value()); // the condition is boolean
  if (!isFloatTensor(getResult())) {
    operandGrads.append({Value(), Value()});
    return success();
  }
  // d true_value = g where the condition holds, d false_value elsewhere.
  Location loc = getLoc();
  Value g = resultGrads[0];
  Value zero = scalarLike(b, loc, g, 0.0);
  Value dt = build::select(b, loc, getCondition(), g, zero);
  Value df = build::select(b, loc, getCondition(), zero, g);
  operandGrads.push_back(sumToShape(b, loc, dt, rtt(getTrueValue())));
  operandGrads.push_back(sumToShape(b, loc, df, rtt(getFalseValue())));
  return success();
}

LogicalResult CastOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  // Only float -> float casts are differentiable: cast the gradient back.
  if (!isFloatTensor(getInput()) || !isFloatTensor(getResult())) {
    operandGrads.push_back(Value());
    return success();
  }
  operandGrads.push_back(
      CastOp::create(b, getLoc(), getInput().getType(), resultGrads[0]));
  return success();
}

LogicalResult DropoutOp::buildGradients(OpBuilder &b,
                                        ArrayRef<Value> resultGrads,
                                        SmallVectorImpl<Value> &operandGrads) {
  // The same mask and scale: a dropout of g with the same key.
  operandGrads.push_back(DropoutOp::create(
      b, getLoc(), getType(), resultGrads[0], getRngSeed(), getStep(),
      getRateAttr(), getOpIdAttr()));
  operandGrads.append({Value(), Value()}); // rng_seed, step
  return success();
}
