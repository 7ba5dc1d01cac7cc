// Scalar bodies (ScalarOpInterface) of the elementwise ops
// (TgElementwiseOps.td): the arith/math ops one element of each op computes,
// which tg-lower-to-kern puts in kern.elementwise bodies.
#include "dialects/tg/TgDialect.h"

#include <cmath>

#include "dialects/tg/TgTypeHelpers.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "tcc/counter_rng.h"

using namespace mlir;
using namespace tcc::tg;

//===----------------------------------------------------------------------===//
// Scalar bodies (ScalarOpInterface)
//===----------------------------------------------------------------------===//

namespace {

Value floatConst(OpBuilder &b, Location loc, Type type, double value) {
  return arith::ConstantOp::create(b, loc, b.getFloatAttr(type, value));
}

Value intConst(OpBuilder &b, Location loc, Type type, uint64_t value) {
  return arith::ConstantOp::create(
      b, loc, b.getIntegerAttr(type, APInt(type.getIntOrFloatBitWidth(), value)));
}

Type resultElementType(Operation *op, unsigned i = 0) {
  return cast<RankedTensorType>(op->getResult(i).getType()).getElementType();
}

// 1 / (1 + e^-x)
Value scalarSigmoid(OpBuilder &b, Location loc, Value x) {
  Type t = x.getType();
  Value e = math::ExpOp::create(b, loc, arith::NegFOp::create(b, loc, x));
  Value one = floatConst(b, loc, t, 1.0);
  return arith::DivFOp::create(b, loc, one, arith::AddFOp::create(b, loc, one, e));
}

// The constants of gelu's two forms.
constexpr double kSqrtHalf = 0.70710678118654752440;   // 1 / sqrt(2)
constexpr double kInvSqrt2Pi = 0.39894228040143267794; // 1 / sqrt(2 pi)
constexpr double kSqrt2OverPi = 0.79788456080286535588; // sqrt(2 / pi)
constexpr double kGeluCubic = 0.044715;

// sqrt(2/pi) (x + 0.044715 x^3), the argument of tanh in gelu's tanh form.
Value geluTanhArgument(OpBuilder &b, Location loc, Value x) {
  Type t = x.getType();
  Value x3 = arith::MulFOp::create(b, loc, arith::MulFOp::create(b, loc, x, x), x);
  Value inner = arith::AddFOp::create(
      b, loc, x, arith::MulFOp::create(b, loc, floatConst(b, loc, t, kGeluCubic), x3));
  return arith::MulFOp::create(b, loc, floatConst(b, loc, t, kSqrt2OverPi), inner);
}

Value scalarGelu(OpBuilder &b, Location loc, Value x, StringRef approximate) {
  Type t = x.getType();
  Value one = floatConst(b, loc, t, 1.0);
  Value shape; // 1 + erf(x / sqrt 2) or 1 + tanh(...)
  if (approximate == "tanh")
    shape = arith::AddFOp::create(
        b, loc, one, math::TanhOp::create(b, loc, geluTanhArgument(b, loc, x)));
  else
    shape = arith::AddFOp::create(
        b, loc, one,
        math::ErfOp::create(
            b, loc,
            arith::MulFOp::create(b, loc, x, floatConst(b, loc, t, kSqrtHalf))));
  Value halfX = arith::MulFOp::create(b, loc, floatConst(b, loc, t, 0.5), x);
  return arith::MulFOp::create(b, loc, halfX, shape);
}

// gelu'(x).
Value scalarGeluDerivative(OpBuilder &b, Location loc, Value x,
                           StringRef approximate) {
  Type t = x.getType();
  Value one = floatConst(b, loc, t, 1.0);
  Value half = floatConst(b, loc, t, 0.5);
  if (approximate == "tanh") {
    // 0.5 (1 + th) + 0.5 x (1 - th^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
    Value th = math::TanhOp::create(b, loc, geluTanhArgument(b, loc, x));
    Value left = arith::MulFOp::create(b, loc, half,
                                       arith::AddFOp::create(b, loc, one, th));
    Value sech2 = arith::SubFOp::create(b, loc, one,
                                        arith::MulFOp::create(b, loc, th, th));
    Value x2 = arith::MulFOp::create(b, loc, x, x);
    Value dArg = arith::MulFOp::create(
        b, loc, floatConst(b, loc, t, kSqrt2OverPi),
        arith::AddFOp::create(
            b, loc, one,
            arith::MulFOp::create(b, loc, floatConst(b, loc, t, 3 * kGeluCubic),
                                  x2)));
    Value right = arith::MulFOp::create(
        b, loc, arith::MulFOp::create(b, loc, half, x),
        arith::MulFOp::create(b, loc, sech2, dArg));
    return arith::AddFOp::create(b, loc, left, right);
  }
  // Phi(x) + x phi(x)
  Value cdf = arith::MulFOp::create(
      b, loc, half,
      arith::AddFOp::create(
          b, loc, one,
          math::ErfOp::create(
              b, loc,
              arith::MulFOp::create(b, loc, x, floatConst(b, loc, t, kSqrtHalf)))));
  Value x2 = arith::MulFOp::create(b, loc, x, x);
  Value pdf = arith::MulFOp::create(
      b, loc, floatConst(b, loc, t, kInvSqrt2Pi),
      math::ExpOp::create(
          b, loc, arith::MulFOp::create(b, loc, floatConst(b, loc, t, -0.5), x2)));
  return arith::AddFOp::create(b, loc, cdf, arith::MulFOp::create(b, loc, x, pdf));
}

// x > 0 ? v : 0 (NaN x gives 0, like the reference interpreter).
Value whereXPositive(OpBuilder &b, Location loc, Value x, Value v) {
  Type t = x.getType();
  Value positive = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, x,
                                         floatConst(b, loc, t, 0.0));
  return arith::SelectOp::create(b, loc, positive, v, floatConst(b, loc, t, 0.0));
}

// Comparisons: the predicate for floats (ordered, except not-equal), for
// signed integers, and for i1 (unsigned, so false < true).
struct Predicates {
  arith::CmpFPredicate f;
  arith::CmpIPredicate i, b;
};

LogicalResult scalarCompare(OpBuilder &b, Location loc, ValueRange operands,
                            Predicates p, SmallVectorImpl<Value> &results) {
  Value l = operands[0], r = operands[1];
  Type t = l.getType();
  if (isa<FloatType>(t))
    results.push_back(arith::CmpFOp::create(b, loc, p.f, l, r));
  else
    results.push_back(
        arith::CmpIOp::create(b, loc, t.isInteger(1) ? p.b : p.i, l, r));
  return success();
}

// splitmix64's finalizer, tcc_rng_mix64 of counter_rng.h, on i64.
Value scalarMix64(OpBuilder &b, Location loc, Value z) {
  Type i64 = z.getType();
  auto xorShift = [&](Value v, uint64_t shift) -> Value {
    return arith::XOrIOp::create(
        b, loc, v, arith::ShRUIOp::create(b, loc, v, intConst(b, loc, i64, shift)));
  };
  z = arith::MulIOp::create(b, loc, xorShift(z, 30),
                            intConst(b, loc, i64, 0xBF58476D1CE4E5B9ull));
  z = arith::MulIOp::create(b, loc, xorShift(z, 27),
                            intConst(b, loc, i64, 0x94D049BB133111EBull));
  return xorShift(z, 31);
}

// Converts scalar `v` to `to` (the semantics documented on tg.cast).
Value scalarConvert(OpBuilder &b, Location loc, Value v, Type to) {
  Type from = v.getType();
  if (from == to)
    return v;
  auto fromFloat = dyn_cast<FloatType>(from), toFloat = dyn_cast<FloatType>(to);
  if (fromFloat && toFloat) {
    if (fromFloat.getWidth() < toFloat.getWidth())
      return arith::ExtFOp::create(b, loc, to, v);
    if (fromFloat.getWidth() > toFloat.getWidth())
      return arith::TruncFOp::create(b, loc, to, v);
    // bf16 <-> f16: exactly to f32, then one rounding.
    Value wide = arith::ExtFOp::create(b, loc, b.getF32Type(), v);
    return arith::TruncFOp::create(b, loc, to, wide);
  }
  if (to.isInteger(1)) {
    if (fromFloat)
      return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNE, v,
                                   floatConst(b, loc, from, 0.0));
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, v,
                                 intConst(b, loc, from, 0));
  }
  if (toFloat)
    return from.isInteger(1) ? arith::UIToFPOp::create(b, loc, to, v).getResult()
                             : arith::SIToFPOp::create(b, loc, to, v).getResult();
  if (fromFloat)
    return arith::FPToSIOp::create(b, loc, to, v);
  unsigned fromWidth = from.getIntOrFloatBitWidth();
  unsigned toWidth = to.getIntOrFloatBitWidth();
  if (fromWidth > toWidth)
    return arith::TruncIOp::create(b, loc, to, v);
  return from.isInteger(1) ? arith::ExtUIOp::create(b, loc, to, v).getResult()
                           : arith::ExtSIOp::create(b, loc, to, v).getResult();
}

} // namespace

#define TG_UNARY_SCALAR(OP, BUILD)                                             \
  LogicalResult OP::buildScalar(OpBuilder &b, Location loc,                    \
                                ValueRange operands, Value,                    \
                                SmallVectorImpl<Value> &results) {             \
    Value x = operands[0];                                                     \
    (void)x;                                                                   \
    results.push_back(BUILD);                                                  \
    return success();                                                          \
  }

TG_UNARY_SCALAR(NegOp, arith::NegFOp::create(b, loc, x))
TG_UNARY_SCALAR(ExpOp, math::ExpOp::create(b, loc, x))
TG_UNARY_SCALAR(LogOp, math::LogOp::create(b, loc, x))
TG_UNARY_SCALAR(SqrtOp, math::SqrtOp::create(b, loc, x))
TG_UNARY_SCALAR(RsqrtOp, math::RsqrtOp::create(b, loc, x))
TG_UNARY_SCALAR(TanhOp, math::TanhOp::create(b, loc, x))
TG_UNARY_SCALAR(SinOp, math::SinOp::create(b, loc, x))
TG_UNARY_SCALAR(CosOp, math::CosOp::create(b, loc, x))
TG_UNARY_SCALAR(SigmoidOp, scalarSigmoid(b, loc, x))
TG_UNARY_SCALAR(ReluOp, whereXPositive(b, loc, x, x))
// x / (1 + e^-x)
TG_UNARY_SCALAR(SiluOp, arith::DivFOp::create(
                            b, loc, x,
                            arith::AddFOp::create(
                                b, loc, floatConst(b, loc, x.getType(), 1.0),
                                math::ExpOp::create(
                                    b, loc, arith::NegFOp::create(b, loc, x)))))
TG_UNARY_SCALAR(GeluOp, scalarGelu(b, loc, x, getApproximate()))

#undef TG_UNARY_SCALAR

LogicalResult PowOp::buildScalar(OpBuilder &b, Location loc,
                                 ValueRange operands, Value,
                                 SmallVectorImpl<Value> &results) {
  Value x = operands[0];
  double c = getExponent().convertToDouble();
  // x^1 and x^2 are exact as x and x*x (what pow returns too).
  if (c == 1.0)
    results.push_back(x);
  else if (c == 2.0)
    results.push_back(arith::MulFOp::create(b, loc, x, x));
  else
    results.push_back(
        math::PowFOp::create(b, loc, x, floatConst(b, loc, x.getType(), c)));
  return success();
}

#define TG_BINARY_SCALAR(OP, ARITH_OP)                                         \
  LogicalResult OP::buildScalar(OpBuilder &b, Location loc,                    \
                                ValueRange operands, Value,                    \
                                SmallVectorImpl<Value> &results) {             \
    results.push_back(ARITH_OP::create(b, loc, operands[0], operands[1]));     \
    return success();                                                          \
  }

TG_BINARY_SCALAR(AddOp, arith::AddFOp)
TG_BINARY_SCALAR(SubOp, arith::SubFOp)
TG_BINARY_SCALAR(MulOp, arith::MulFOp)
TG_BINARY_SCALAR(DivOp, arith::DivFOp)
TG_BINARY_SCALAR(MaxOp, arith::MaximumFOp)
TG_BINARY_SCALAR(MinOp, arith::MinimumFOp)

#undef TG_BINARY_SCALAR

#define TG_COMPARE_SCALAR(OP, F, I, B)                                         \
  LogicalResult OP::buildScalar(OpBuilder &b, Location loc,                    \
                                ValueRange operands, Value,                    \
                                SmallVectorImpl<Value> &results) {             \
    return scalarCompare(b, loc, operands,                                     \
                         {arith::CmpFPredicate::F, arith::CmpIPredicate::I,    \
                          arith::CmpIPredicate::B},                            \
                         results);                                             \
  }

TG_COMPARE_SCALAR(EqualOp, OEQ, eq, eq)
TG_COMPARE_SCALAR(NotEqualOp, UNE, ne, ne)
TG_COMPARE_SCALAR(LessOp, OLT, slt, ult)
TG_COMPARE_SCALAR(LessEqualOp, OLE, sle, ule)
TG_COMPARE_SCALAR(GreaterOp, OGT, sgt, ugt)
TG_COMPARE_SCALAR(GreaterEqualOp, OGE, sge, uge)

#undef TG_COMPARE_SCALAR

LogicalResult SelectOp::buildScalar(OpBuilder &b, Location loc,
                                    ValueRange operands, Value,
                                    SmallVectorImpl<Value> &results) {
  results.push_back(
      arith::SelectOp::create(b, loc, operands[0], operands[1], operands[2]));
  return success();
}

LogicalResult CastOp::buildScalar(OpBuilder &b, Location loc,
                                  ValueRange operands, Value,
                                  SmallVectorImpl<Value> &results) {
  results.push_back(
      scalarConvert(b, loc, operands[0], resultElementType(*this)));
  return success();
}

LogicalResult IotaOp::buildScalar(OpBuilder &b, Location loc, ValueRange,
                                  Value flatIndex,
                                  SmallVectorImpl<Value> &results) {
  // index[axis] = (flat / stride(axis)) % size(axis), row-major.
  ArrayRef<int64_t> shape = rtt(getResult()).getShape();
  int64_t axis = getAxisAttr().getInt();
  int64_t stride = 1;
  for (int64_t d = axis + 1; d < static_cast<int64_t>(shape.size()); ++d)
    stride *= shape[d];
  Type i64 = flatIndex.getType();
  Value index = flatIndex;
  if (stride != 1)
    index = arith::DivUIOp::create(b, loc, index, intConst(b, loc, i64, stride));
  if (axis != 0)
    index = arith::RemUIOp::create(b, loc, index,
                                   intConst(b, loc, i64, shape[axis]));
  results.push_back(scalarConvert(b, loc, index, resultElementType(*this)));
  return success();
}

LogicalResult DropoutOp::buildScalar(OpBuilder &b, Location loc,
                                     ValueRange operands, Value flatIndex,
                                     SmallVectorImpl<Value> &results) {
  // tcc_dropout_keep of runtime/include/tcc/counter_rng.h, on i64:
  //   key  = mix64(mix64(rng_seed ^ mix64(op_id)) ^ step)
  //   bits = mix64(key + (i + 1) * G)
  //   keep = (bits >> 40) >= ceil(rate * 2^24)   (== uniform01 >= rate)
  Value x = operands[0], seed = operands[1], step = operands[2];
  Type i64 = seed.getType();
  uint64_t opKey = tcc_rng_mix64(static_cast<uint64_t>(getOpId()));
  Value key = arith::XOrIOp::create(b, loc, seed, intConst(b, loc, i64, opKey));
  key = scalarMix64(b, loc, arith::XOrIOp::create(b, loc, scalarMix64(b, loc, key),
                                                  step));
  Value one = intConst(b, loc, i64, 1);
  Value counter = arith::MulIOp::create(
      b, loc, arith::AddIOp::create(b, loc, flatIndex, one),
      intConst(b, loc, i64, TCC_RNG_GAMMA));
  Value bits = scalarMix64(b, loc, arith::AddIOp::create(b, loc, key, counter));
  Value top24 = arith::ShRUIOp::create(b, loc, bits, intConst(b, loc, i64, 40));
  double rate = getRate().convertToDouble();
  auto threshold = static_cast<uint64_t>(std::ceil(rate * 16777216.0));
  Value keep = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge, top24,
                                     intConst(b, loc, i64, threshold));
  Type t = x.getType();
  Value scaled =
      arith::MulFOp::create(b, loc, x, floatConst(b, loc, t, 1.0 / (1.0 - rate)));
  results.push_back(
      arith::SelectOp::create(b, loc, keep, scaled, floatConst(b, loc, t, 0.0)));
  return success();
}

LogicalResult ReluGradOp::buildScalar(OpBuilder &b, Location loc,
                                      ValueRange operands, Value,
                                      SmallVectorImpl<Value> &results) {
  results.push_back(whereXPositive(b, loc, operands[0], operands[1]));
  return success();
}

LogicalResult GeluGradOp::buildScalar(OpBuilder &b, Location loc,
                                      ValueRange operands, Value,
                                      SmallVectorImpl<Value> &results) {
  Value derivative =
      scalarGeluDerivative(b, loc, operands[0], getApproximate());
  results.push_back(arith::MulFOp::create(b, loc, operands[1], derivative));
  return success();
}
