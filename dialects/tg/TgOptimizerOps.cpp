// Verifiers and scalar bodies of the optimizer ops (TgOptimizerOps.td).
//
// The scalar bodies mirror PyTorch's arithmetic: per-step coefficients
// (bias corrections, 1 - lr * wd, ...) are computed in f64, like PyTorch's
// Python floats, then rounded to the element type; the per-element updates
// run in the element type in PyTorch's order of operations.
#include "dialects/tg/TgDialect.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "dialects/common/HyperParameterRanges.h"
#include "dialects/common/ShapeHelpers.h"
#include "dialects/tg/TgTypeHelpers.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace tcc::tg;

namespace {

// Converts a float scalar to `type` (extf / truncf; identity when equal).
Value toFloat(OpBuilder &b, Location loc, Value x, FloatType type) {
  auto from = cast<FloatType>(x.getType());
  if (from == type)
    return x;
  if (from.getWidth() < type.getWidth())
    return arith::ExtFOp::create(b, loc, type, x);
  return arith::TruncFOp::create(b, loc, type, x);
}

Value constantOf(OpBuilder &b, Location loc, FloatType type, double value) {
  return arith::ConstantOp::create(b, loc, type, b.getFloatAttr(type, value));
}

// Scalar arithmetic in one float type, so bodies read like their formulas.
struct ScalarMath {
  OpBuilder &b;
  Location loc;

  Value add(Value x, Value y) { return arith::AddFOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return arith::SubFOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return arith::MulFOp::create(b, loc, x, y); }
  Value div(Value x, Value y) { return arith::DivFOp::create(b, loc, x, y); }
  Value sqrt(Value x) { return math::SqrtOp::create(b, loc, x); }
  Value pow(Value x, Value y) { return math::PowFOp::create(b, loc, x, y); }
  Value c(FloatType type, double value) {
    return constantOf(b, loc, type, value);
  }
};

// "0.9", "1e-08": numbers in messages as they are usually written.
// `value` must lie in `range` (HyperParameterRanges.h, shared with the
// importer's checks of the training recipe).
LogicalResult
verifyHyperParameter(Operation *op, StringRef name, APFloat v,
                     const tcc::model::HyperParameterRange &range) {
  double value = v.convertToDouble();
  if (!range.contains(value))
    return op->emitOpError(name) << " must be " << range.spelling << ", got "
                                 << tcc::formatNumber(value);
  return success();
}

} // namespace

//===----------------------------------------------------------------------===//
// sgd_update
//===----------------------------------------------------------------------===//

LogicalResult SgdUpdateOp::verify() {
  return verifyHyperParameter(*this, "weight_decay", getWeightDecay(),
                              tcc::model::kNonNegative);
}

LogicalResult SgdUpdateOp::buildScalar(OpBuilder &b, Location loc,
                                       ValueRange operands, Value,
                                       SmallVectorImpl<Value> &results) {
  ScalarMath m{b, loc};
  auto type = cast<FloatType>(rtt(getParam()).getElementType());
  Value param = operands[0], grad = operands[1];
  Value lr = toFloat(b, loc, operands[2], type);
  double wd = getWeightDecay().convertToDouble();
  Value d = wd == 0 ? grad : m.add(grad, m.mul(m.c(type, wd), param));
  results.push_back(m.sub(param, m.mul(lr, d)));
  return success();
}

//===----------------------------------------------------------------------===//
// momentum_update
//===----------------------------------------------------------------------===//

LogicalResult MomentumUpdateOp::verify() {
  if (failed(verifyHyperParameter(*this, "momentum", getMomentum(),
                                  tcc::model::kUnitInterval)))
    return failure();
  return verifyHyperParameter(*this, "weight_decay", getWeightDecay(),
                              tcc::model::kNonNegative);
}

LogicalResult MomentumUpdateOp::buildScalar(OpBuilder &b, Location loc,
                                            ValueRange operands, Value,
                                            SmallVectorImpl<Value> &results) {
  ScalarMath m{b, loc};
  auto type = cast<FloatType>(rtt(getParam()).getElementType());
  Value param = operands[0], grad = operands[1], buf = operands[2];
  Value lr = toFloat(b, loc, operands[3], type);
  double wd = getWeightDecay().convertToDouble();
  // d = grad + wd * param; buf' = buf * momentum + d; p' = p - lr * buf'.
  Value d = wd == 0 ? grad : m.add(grad, m.mul(m.c(type, wd), param));
  Value newBuf =
      m.add(m.mul(buf, m.c(type, getMomentum().convertToDouble())), d);
  results.push_back(m.sub(param, m.mul(lr, newBuf)));
  results.push_back(newBuf);
  return success();
}

//===----------------------------------------------------------------------===//
// adamw_update
//===----------------------------------------------------------------------===//

LogicalResult AdamWUpdateOp::verify() {
  if (failed(verifyHyperParameter(*this, "beta1", getBeta1(),
                                  tcc::model::kUnitInterval)) ||
      failed(verifyHyperParameter(*this, "beta2", getBeta2(),
                                  tcc::model::kUnitInterval)) ||
      failed(
          verifyHyperParameter(*this, "eps", getEps(), tcc::model::kPositive)))
    return failure();
  return verifyHyperParameter(*this, "weight_decay", getWeightDecay(),
                              tcc::model::kNonNegative);
}

LogicalResult AdamWUpdateOp::buildScalar(OpBuilder &b, Location loc,
                                         ValueRange operands, Value,
                                         SmallVectorImpl<Value> &results) {
  ScalarMath m{b, loc};
  auto type = cast<FloatType>(rtt(getParam()).getElementType());
  FloatType f64 = b.getF64Type();
  Value param = operands[0], grad = operands[1], mom = operands[2],
        vel = operands[3];
  double beta1 = getBeta1().convertToDouble();
  double beta2 = getBeta2().convertToDouble();
  double wd = getWeightDecay().convertToDouble();

  // Per-step coefficients in f64, t = step + 1.
  Value lr = toFloat(b, loc, operands[4], f64);
  Value t = m.add(arith::SIToFPOp::create(b, loc, f64, operands[5]),
                  m.c(f64, 1.0));
  Value one = m.c(f64, 1.0);
  Value bc1 = m.sub(one, m.pow(m.c(f64, beta1), t));
  Value bc2 = m.sub(one, m.pow(m.c(f64, beta2), t));
  Value stepSize = toFloat(b, loc, m.div(lr, bc1), type);
  Value bc2Sqrt = toFloat(b, loc, m.sqrt(bc2), type);

  // p1 = p * (1 - lr * wd)
  Value p1 = param;
  if (wd != 0)
    p1 = m.mul(param,
               toFloat(b, loc, m.sub(one, m.mul(lr, m.c(f64, wd))), type));
  // m' = m * beta1 + grad * (1 - beta1)
  Value newM = m.add(m.mul(mom, m.c(type, beta1)),
                     m.mul(grad, m.c(type, 1.0 - beta1)));
  // v' = v * beta2 + ((1 - beta2) * grad) * grad
  Value newV = m.add(m.mul(vel, m.c(type, beta2)),
                     m.mul(m.mul(m.c(type, 1.0 - beta2), grad), grad));
  // denom = sqrt(v') / sqrt(bc2) + eps; p' = p1 - (step_size * m') / denom
  Value denom = m.add(m.div(m.sqrt(newV), bc2Sqrt),
                      m.c(type, getEps().convertToDouble()));
  results.push_back(m.sub(p1, m.div(m.mul(stepSize, newM), denom)));
  results.push_back(newM);
  results.push_back(newV);
  return success();
}
