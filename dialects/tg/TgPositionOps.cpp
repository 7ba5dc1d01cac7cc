// The position ops of TgStructuralOps.td's "Positions" section (tg.rope):
// verifier and gradient. tg-cache-rope (passes/fusion/CacheRope.cpp) creates
// them from the rotation written out in primitives.
#include "dialects/tg/TgStructuralBuilders.h"

#include "dialects/common/ShapeHelpers.h"
#include "dialects/tg/TgTypeHelpers.h"
#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace tcc::tg;

namespace {

// rotate_half(x) = concat(-x[..., h:], x[..., :h]) on the last axis.
Value rotateHalf(OpBuilder &b, Location loc, Value x) {
  int64_t last = rtt(x).getRank() - 1, h = rtt(x).getShape().back() / 2;
  Value x1 = build::sliceAxis(b, loc, x, last, 0, h);
  Value x2 = build::sliceAxis(b, loc, x, last, h, h);
  return build::concat(b, loc, {build::neg(b, loc, x2), x1}, last);
}

} // namespace

LogicalResult RopeOp::verify() {
  RankedTensorType x = rtt(getInput()), cos = rtt(getCos()), sin = rtt(getSin());
  if (x.getRank() < 2)
    return emitOpError("input must be (..., T, D), got ") << tcc::formatShape(x.getShape());
  int64_t d = x.getShape().back();
  if (d % 2 != 0)
    return emitOpError("the rotated (last) dimension must be even, got ") << d;
  ArrayRef<int64_t> table = x.getShape().take_back(2);
  if (cos.getShape() != table || sin.getShape() != table)
    return emitOpError("cos and sin must be ")
           << tcc::formatShape(table) << " (the input's last two dimensions), got "
           << tcc::formatShape(cos.getShape()) << " and " << tcc::formatShape(sin.getShape());
  Type et = x.getElementType();
  if (cos.getElementType() != sin.getElementType())
    return emitOpError("cos and sin must have one element type, got ")
           << cos.getElementType() << " and " << sin.getElementType();
  Type tableType = cos.getElementType();
  if (tableType != et && !(build::isHalfFloat(et) && tableType.isF32()))
    return emitOpError("cos and sin must be ")
           << et << (build::isHalfFloat(et) ? " or f32" : "") << " like the input, got "
           << tableType;
  if (getResult().getType() != x)
    return emitOpError("result type must equal the input type ") << x;
  return success();
}

// The transposed rope is the VJP of the plain one with respect to input, and
// the other way round: d input = rope(g, cos, sin, !transposed). The tables
// get their gradients too (summed over the leading dimensions), so a table
// that depends on a parameter is differentiated correctly; for cached
// (constant) tables autodiff's dead-code removal drops them.
//   plain:      d cos = sum(g * x), d sin = sum(g * rotate_half(x))
//   transposed: d cos = sum(g * x), d sin = sum(rotate_half(g) * x)
LogicalResult RopeOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  Location loc = getLoc();
  Value g = resultGrads[0], x = getInput();
  operandGrads.push_back(RopeOp::create(b, loc, x.getType(), g, getCos(), getSin(),
                                        b.getBoolAttr(!getTransposed())));
  RankedTensorType tableType = rtt(getCos());
  Type te = tableType.getElementType();
  Value gt = build::castTo(b, loc, g, te), xt = build::castTo(b, loc, x, te);
  operandGrads.push_back(sumToShape(b, loc, build::mul(b, loc, gt, xt), tableType));
  Value dsin = getTransposed() ? build::mul(b, loc, rotateHalf(b, loc, gt), xt)
                               : build::mul(b, loc, gt, rotateHalf(b, loc, xt));
  operandGrads.push_back(sumToShape(b, loc, dsin, tableType));
  return success();
}
