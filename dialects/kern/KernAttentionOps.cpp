// Verifiers of kern.attention and kern.attention_grad: tg's shape contract
// (TgAttentionOps.cpp) on buffers, plus the backward's workspace size.
#include "dialects/common/ShapeHelpers.h"
#include "dialects/kern/AttentionWorkspace.h"
#include "dialects/kern/KernDialect.h"

#include <cmath>

using namespace mlir;
using namespace tcc::kern;

namespace {

MemRefType mrt(Value v) { return cast<MemRefType>(v.getType()); }

LogicalResult verifyAttentionBuffers(Operation *op, Value q, Value k, Value v, Value lse,
                                     double scale, double rate, bool hasRng,
                                     bool hasOpId) {
  MemRefType qt = mrt(q), kt = mrt(k), vt = mrt(v), lt = mrt(lse);
  if (qt.getRank() != 4 || kt.getRank() != 4 || vt.getShape() != kt.getShape())
    return op->emitOpError("q must be (B, H, T, D) and k, v (B, Hkv, S, D), got q ")
           << tcc::formatShape(qt.getShape()) << ", k " << tcc::formatShape(kt.getShape())
           << ", v " << tcc::formatShape(vt.getShape());
  int64_t heads = qt.getDimSize(1), kvHeads = kt.getDimSize(1);
  if (kt.getDimSize(0) != qt.getDimSize(0) || kt.getDimSize(3) != qt.getDimSize(3) ||
      kvHeads < 1 || heads % kvHeads != 0)
    return op->emitOpError("k, v must share q's B and D and have a head count dividing q's: q ")
           << tcc::formatShape(qt.getShape()) << ", k " << tcc::formatShape(kt.getShape());
  if (kt.getElementType() != qt.getElementType() || vt.getElementType() != qt.getElementType())
    return op->emitOpError("q, k and v must have one element type");
  Type lseElem = qt.getElementType().isF64() ? qt.getElementType()
                                              : Float32Type::get(op->getContext());
  SmallVector<int64_t> lseShape{qt.getDimSize(0), heads, qt.getDimSize(2)};
  if (lt.getShape() != ArrayRef<int64_t>(lseShape) || lt.getElementType() != lseElem)
    return op->emitOpError("lse must be (B, H, T) = ")
           << tcc::formatShape(lseShape) << " of " << lseElem;
  if (!std::isfinite(scale))
    return op->emitOpError("scale must be finite");
  if (!(rate >= 0 && rate < 1))
    return op->emitOpError("dropout_rate must be in [0, 1), got ") << rate;
  if ((rate > 0) != hasRng || (rate > 0 && !hasOpId))
    return op->emitOpError("dropout_rate > 0 needs exactly the dropout(rng_seed, step) "
                           "operands and op_id");
  return success();
}

} // namespace

LogicalResult AttentionOp::verify() {
  if (failed(verifyAttentionBuffers(*this, getQ(), getK(), getV(), getLse(),
                                    getScale().convertToDouble(),
                                    getDropoutRate().convertToDouble(),
                                    static_cast<bool>(getRngSeed()), getOpIdAttr() != nullptr)))
    return failure();
  if (getOut().getType() != getQ().getType())
    return emitOpError("out must have q's type");
  return success();
}

LogicalResult AttentionGradOp::verify() {
  if (failed(verifyAttentionBuffers(*this, getQ(), getK(), getV(), getLse(),
                                    getScale().convertToDouble(),
                                    getDropoutRate().convertToDouble(),
                                    static_cast<bool>(getRngSeed()), getOpIdAttr() != nullptr)))
    return failure();
  if (getOut().getType() != getQ().getType() || getGrad().getType() != getQ().getType() ||
      getDq().getType() != getQ().getType() || getDk().getType() != getK().getType() ||
      getDv().getType() != getV().getType())
    return emitOpError("out, grad and dq must have q's type, dk k's and dv v's");
  MemRefType qt = mrt(getQ()), kt = mrt(getK());
  int64_t want = attentionBackwardWorkspaceFloats(
      qt.getDimSize(0), qt.getDimSize(1), kt.getDimSize(1), qt.getDimSize(2),
      kt.getDimSize(2), qt.getDimSize(3), getDeterministic());
  if (mrt(getWorkspace()).getNumElements() != want)
    return emitOpError("workspace must hold ") << want << " floats, has "
                                               << mrt(getWorkspace()).getNumElements();
  return success();
}
