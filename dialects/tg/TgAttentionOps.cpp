// Verifiers and the gradient of the flash-attention ops (tg.attention,
// tg.attention_grad in TgStructuralOps.td). Both share one shape contract:
// q (B, H, T, D), k and v (B, Hkv, S, D) with H a multiple of Hkv, lse
// (B, H, T) in f32 (f64 for f64 inputs), dropout operands iff rate > 0.
#include "dialects/common/ShapeHelpers.h"
#include "dialects/tg/TgDialect.h"
#include "dialects/tg/TgTypeHelpers.h"
#include "mlir/IR/Builders.h"

#include <cmath>

using namespace mlir;
using namespace tcc::tg;

namespace {

// The type lse has for inputs of element type `elem`: f32 accumulates the
// 16-bit and f32 kernels; the f64 reference keeps f64.
Type lseElementType(Type elem) {
  return elem.isF64() ? elem : Float32Type::get(elem.getContext());
}

LogicalResult verifyAttentionContract(Operation *op, Value q, Value k, Value v,
                                      Value lse, Value rngSeed, Value step,
                                      double scale, double rate, bool hasOpId) {
  auto qt = rtt(q), kt = rtt(k), vt = rtt(v);
  if (qt.getRank() != 4)
    return op->emitOpError("q must be (B, H, T, D), got ")
           << tcc::formatShape(qt.getShape());
  if (kt.getRank() != 4 || vt.getShape() != kt.getShape())
    return op->emitOpError("k and v must both be (B, Hkv, S, D), got k ")
           << tcc::formatShape(kt.getShape()) << " and v "
           << tcc::formatShape(vt.getShape());
  int64_t batch = qt.getDimSize(0), heads = qt.getDimSize(1),
          headDim = qt.getDimSize(3);
  int64_t kvHeads = kt.getDimSize(1);
  if (kt.getDimSize(0) != batch || kt.getDimSize(3) != headDim)
    return op->emitOpError("k and v must share q's batch B and head size D: q ")
           << tcc::formatShape(qt.getShape()) << ", k "
           << tcc::formatShape(kt.getShape());
  if (kvHeads < 1 || heads % kvHeads != 0)
    return op->emitOpError("q's head count H = ")
           << heads << " must be a multiple of k/v's head count Hkv = "
           << kvHeads;
  if (kt.getElementType() != qt.getElementType() ||
      vt.getElementType() != qt.getElementType())
    return op->emitOpError("q, k and v must have one element type, got ")
           << qt.getElementType() << ", " << kt.getElementType() << ", "
           << vt.getElementType();
  auto lt = rtt(lse);
  SmallVector<int64_t> lseShape{batch, heads, qt.getDimSize(2)};
  Type lseElem = lseElementType(qt.getElementType());
  if (lt.getShape() != ArrayRef<int64_t>(lseShape) ||
      lt.getElementType() != lseElem)
    return op->emitOpError("lse must be (B, H, T) = ")
           << tcc::formatShape(lseShape) << " of " << lseElem << ", got "
           << tcc::formatShape(lt.getShape()) << " of " << lt.getElementType();
  // The generic form can give one of the two optional operands alone.
  if (static_cast<bool>(rngSeed) != static_cast<bool>(step))
    return op->emitOpError("rng_seed and step must be given together");
  bool hasRng = static_cast<bool>(rngSeed);
  if (!std::isfinite(scale))
    return op->emitOpError("scale must be finite, got ")
           << tcc::formatNumber(scale);
  if (!(rate >= 0 && rate < 1))
    return op->emitOpError("dropout_rate must be in [0, 1), got ")
           << tcc::formatNumber(rate);
  if ((rate > 0) != hasRng)
    return op->emitOpError(rate > 0
                               ? "dropout_rate > 0 needs the dropout(rng_seed, "
                                 "step) operands"
                               : "dropout operands given with dropout_rate 0");
  if (rate > 0 && !hasOpId)
    return op->emitOpError("dropout_rate > 0 needs op_id (the dropout mask's "
                           "stream)");
  return success();
}

} // namespace

LogicalResult AttentionOp::verify() {
  if (failed(verifyAttentionContract(
          *this, getQ(), getK(), getV(), getLse(), getRngSeed(), getStep(),
          getScale().convertToDouble(), getDropoutRate().convertToDouble(),
          getOpIdAttr() != nullptr)))
    return failure();
  if (getResult().getType() != getQ().getType())
    return emitOpError("result must have q's type ") << getQ().getType();
  return success();
}

LogicalResult AttentionGradOp::verify() {
  if (failed(verifyAttentionContract(
          *this, getQ(), getK(), getV(), getLse(), getRngSeed(), getStep(),
          getScale().convertToDouble(), getDropoutRate().convertToDouble(),
          getOpIdAttr() != nullptr)))
    return failure();
  if (getOut().getType() != getQ().getType() ||
      getGrad().getType() != getQ().getType())
    return emitOpError("out and grad must have q's type ") << getQ().getType();
  if (getDq().getType() != getQ().getType() ||
      getDk().getType() != getK().getType() ||
      getDv().getType() != getV().getType())
    return emitOpError("dq, dk, dv must have the types of q, k, v");
  return success();
}

// One attention_grad op gives all three gradients; lse is an internal
// result (nothing downstream differentiates through it).
LogicalResult AttentionOp::buildGradients(OpBuilder &b,
                                          ArrayRef<Value> resultGrads,
                                          SmallVectorImpl<Value> &operandGrads) {
  Value grad = resultGrads[0];
  auto appendNone = [&] {
    if (getRngSeed()) {
      operandGrads.push_back(Value()); // rng_seed
      operandGrads.push_back(Value()); // step
    }
  };
  if (!grad) { // the result does not reach the loss
    operandGrads.append(3, Value());
    appendNone();
    return success();
  }
  auto g = AttentionGradOp::create(
      b, getLoc(), getQ().getType(), getK().getType(), getV().getType(),
      getQ(), getK(), getV(), getResult(), getLse(), grad, getRngSeed(),
      getStep(), getScaleAttr(), getCausalAttr(), getDropoutRateAttr(),
      getOpIdAttr());
  operandGrads.push_back(g.getDq());
  operandGrads.push_back(g.getDk());
  operandGrads.push_back(g.getDv());
  appendNone();
  return success();
}
