// Verifiers of kern.attention and kern.attention_grad: tg's shape contract
// (TgAttentionOps.cpp) on buffers, plus the backward's workspace size and,
// with `layout`, that every strided tensor lies inside its buffer. Also the
// sizes / layout accessors of AttentionLayout.h.
#include "dialects/common/ShapeHelpers.h"
#include "dialects/kern/AttentionLayout.h"
#include "dialects/kern/AttentionWorkspace.h"
#include "dialects/kern/KernDialect.h"

#include <cmath>

using namespace mlir;
using namespace tcc::kern;

namespace {

MemRefType mrt(Value v) { return cast<MemRefType>(v.getType()); }

DenseI64ArrayAttr sizesAttr(Operation *op) {
  return op->getAttrOfType<DenseI64ArrayAttr>("sizes");
}
DenseI64ArrayAttr layoutAttr(Operation *op) {
  return op->getAttrOfType<DenseI64ArrayAttr>("layout");
}

// With `layout`: sizes well formed, one layout per tensor, every tensor
// inside its buffer, one element type.
LogicalResult verifyStridedTensors(Operation *op, const AttentionSizes &s) {
  DenseI64ArrayAttr layout = layoutAttr(op);
  SmallVector<Value> tensors = attentionTensors(op);
  if (static_cast<int64_t>(layout.size()) != 4 * static_cast<int64_t>(tensors.size()))
    return op->emitOpError("layout must hold 4 numbers (offset, batch, head, row strides) for "
                           "each of the ")
           << tensors.size() << " tensors, has " << layout.size();
  SmallVector<AttentionTensorLayout> layouts = attentionLayouts(op, s);
  Type elem = mrt(tensors[0]).getElementType();
  static const char *kNames[] = {"q", "k", "v", "out", "grad", "dq", "dk", "dv"};
  for (auto [i, t] : llvm::enumerate(tensors)) {
    if (mrt(t).getElementType() != elem)
      return op->emitOpError("q, k, v (and out, grad, dq, dk, dv) must have one element type");
    const AttentionTensorLayout &l = layouts[i];
    if (l.offset < 0 || l.batch < 0 || l.head < 0 || l.row < 0)
      return op->emitOpError("layout of ") << kNames[i] << " has a negative offset or stride";
    bool query = attentionTensorIsQueryShaped(op, i);
    int64_t heads = query ? s.heads : s.kvHeads, rows = query ? s.queries : s.keys;
    if (s.batch == 0 || heads == 0 || rows == 0)
      continue;
    int64_t last = l.offset + (s.batch - 1) * l.batch + (heads - 1) * l.head +
                   (rows - 1) * l.row + s.dim;
    if (last > mrt(t).getNumElements())
      return op->emitOpError("layout of ")
             << kNames[i] << " reaches element " << last << " of a buffer of "
             << mrt(t).getNumElements();
  }
  return success();
}

LogicalResult verifyAttentionBuffers(Operation *op, Value q, Value k, Value v, Value lse,
                                     double scale, double rate, bool hasRng,
                                     bool hasOpId) {
  if (static_cast<bool>(sizesAttr(op)) != static_cast<bool>(layoutAttr(op)))
    return op->emitOpError("sizes and layout come together");
  AttentionSizes s;
  MemRefType qt = mrt(q), kt = mrt(k), vt = mrt(v), lt = mrt(lse);
  if (DenseI64ArrayAttr sizes = sizesAttr(op)) {
    if (sizes.size() != 6 || llvm::any_of(sizes.asArrayRef(), [](int64_t x) { return x < 0; }))
      return op->emitOpError("sizes must be [B, H, Hkv, T, S, D], none negative");
    s = *attentionSizes(op);
    if (s.kvHeads < 1 || s.heads % s.kvHeads != 0)
      return op->emitOpError("Hkv must divide H: sizes ") << tcc::formatShape(sizes.asArrayRef());
    if (failed(verifyStridedTensors(op, s)))
      return failure();
  } else {
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
    s = *attentionSizes(op);
  }
  Type lseElem = qt.getElementType().isF64() ? qt.getElementType()
                                              : Float32Type::get(op->getContext());
  SmallVector<int64_t> lseShape{s.batch, s.heads, s.queries};
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

namespace tcc::kern {

SmallVector<Value> attentionTensors(Operation *op) {
  if (auto a = dyn_cast<AttentionOp>(op))
    return {a.getQ(), a.getK(), a.getV(), a.getOut()};
  auto g = cast<AttentionGradOp>(op);
  return {g.getQ(),    g.getK(),  g.getV(),  g.getOut(),
          g.getGrad(), g.getDq(), g.getDk(), g.getDv()};
}

bool attentionTensorIsQueryShaped(Operation *op, unsigned index) {
  // q, out, grad, dq: (B, H, T); k, v, dk, dv: (B, Hkv, S).
  (void)op;
  return index == 0 || index == 3 || index == 4 || index == 5;
}

FailureOr<AttentionSizes> attentionSizes(Operation *op) {
  AttentionSizes s;
  if (DenseI64ArrayAttr sizes = sizesAttr(op)) {
    if (sizes.size() != 6)
      return failure();
    s = {sizes[0], sizes[1], sizes[2], sizes[3], sizes[4], sizes[5]};
    return s;
  }
  SmallVector<Value> t = attentionTensors(op);
  MemRefType q = mrt(t[0]), k = mrt(t[1]);
  if (q.getRank() != 4 || k.getRank() != 4)
    return failure();
  s = {q.getDimSize(0), q.getDimSize(1), k.getDimSize(1),
       q.getDimSize(2), k.getDimSize(2), q.getDimSize(3)};
  return s;
}

SmallVector<AttentionTensorLayout> attentionLayouts(Operation *op, const AttentionSizes &s) {
  SmallVector<AttentionTensorLayout> out;
  unsigned n = attentionTensors(op).size();
  DenseI64ArrayAttr layout = layoutAttr(op);
  for (unsigned i = 0; i < n; ++i) {
    if (layout && layout.size() >= 4 * (i + 1)) {
      out.push_back({layout[4 * i], layout[4 * i + 1], layout[4 * i + 2], layout[4 * i + 3]});
      continue;
    }
    bool query = attentionTensorIsQueryShaped(op, i);
    int64_t heads = query ? s.heads : s.kvHeads, rows = query ? s.queries : s.keys;
    out.push_back({0, heads * rows * s.dim, rows * s.dim, s.dim});
  }
  return out;
}

void setAttentionLayouts(Operation *op, const AttentionSizes &s,
                         ArrayRef<AttentionTensorLayout> layouts) {
  Builder b(op->getContext());
  SmallVector<int64_t> flat;
  for (const AttentionTensorLayout &l : layouts)
    flat.append({l.offset, l.batch, l.head, l.row});
  op->setAttr("sizes", b.getDenseI64ArrayAttr(
                           {s.batch, s.heads, s.kvHeads, s.queries, s.keys, s.dim}));
  op->setAttr("layout", b.getDenseI64ArrayAttr(flat));
}

} // namespace tcc::kern

LogicalResult AttentionOp::verify() {
  if (failed(verifyAttentionBuffers(*this, getQ(), getK(), getV(), getLse(),
                                    getScale().convertToDouble(),
                                    getDropoutRate().convertToDouble(),
                                    static_cast<bool>(getRngSeed()), getOpIdAttr() != nullptr)))
    return failure();
  if (!getLayoutAttr() && getOut().getType() != getQ().getType())
    return emitOpError("out must have q's type");
  return success();
}

LogicalResult AttentionGradOp::verify() {
  if (failed(verifyAttentionBuffers(*this, getQ(), getK(), getV(), getLse(),
                                    getScale().convertToDouble(),
                                    getDropoutRate().convertToDouble(),
                                    static_cast<bool>(getRngSeed()), getOpIdAttr() != nullptr)))
    return failure();
  if (!getLayoutAttr() &&
      (getOut().getType() != getQ().getType() || getGrad().getType() != getQ().getType() ||
       getDq().getType() != getQ().getType() || getDk().getType() != getK().getType() ||
       getDv().getType() != getV().getType()))
    return emitOpError("out, grad and dq must have q's type, dk k's and dv v's");
  AttentionSizes s = *attentionSizes(*this);
  int64_t want = attentionBackwardWorkspaceFloats(s.batch, s.heads, s.kvHeads, s.queries,
                                                  s.keys, s.dim, getDeterministic());
  if (mrt(getWorkspace()).getNumElements() != want)
    return emitOpError("workspace must hold ") << want << " floats, has "
                                               << mrt(getWorkspace()).getNumElements();
  return success();
}

int64_t tcc::kern::attentionWorkspaceBytes(Operation *root, AttentionLibraries libraries) {
  if (!libraries.cudnn) // the flash kernels' scratch is the op's own operand
    return 0;
  int64_t bytes = 0, sm90 = 0;
  root->walk([&](AttentionGradOp op) {
    // The calls cuDNN may run (CudaStepEmitter::cudnnAttentionSite); the
    // others run the flash kernels.
    Type et = mrt(op.getQ()).getElementType();
    if (op.getRngSeed() || !(et.isBF16() || et.isF16()))
      return;
    // From `sizes`, or the (B, H, T, D) q and (B, Hkv, S, D) k.
    FailureOr<AttentionSizes> sizes = attentionSizes(op);
    if (failed(sizes) || (sizes->dim != 64 && sizes->dim != 128))
      return;
    const int64_t batchHeads = sizes->batch * sizes->heads, t = sizes->queries,
                  d = sizes->dim;
    // GQA: f32 dK and dV per query head, summed into the K/V heads.
    const int64_t grouped =
        sizes->kvHeads < sizes->heads ? 2 * batchHeads * sizes->keys * d * 4 : 0;
    bytes = std::max(bytes, batchHeads * t * (d + 1) * 4 + grouped);
    // tcc's sm90 backward: its rows padded to whole query tiles.
    if (libraries.sm90 && !op.getDeterministic()) {
      int64_t tile = d == 64 ? 128 : 64;
      sm90 = std::max(sm90, batchHeads * ((t + tile - 1) / tile * tile) * (d + 2) * 4);
    }
  });
  // cuDNN asked for a few hundred bytes more than its estimate (alignment):
  // with a MiB of slack its workspace fits in the shared one.
  return std::max(bytes ? bytes + (int64_t(1) << 20) : 0, sm90);
}
