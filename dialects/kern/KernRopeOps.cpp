// Verifier of kern.rope and the sizes / layout accessors of RopeLayout.h.
// Without `layout` x and out are one contiguous (..., T, D) type; with it
// they are buffers holding a strided (B, H, T, D) tensor each, checked to
// lie inside them.
#include "dialects/common/ShapeHelpers.h"
#include "dialects/kern/KernDialect.h"
#include "dialects/kern/RopeLayout.h"

using namespace mlir;
using namespace tcc::kern;

namespace {
MemRefType mrt(Value v) { return cast<MemRefType>(v.getType()); }
} // namespace

namespace tcc::kern {

RopeSizes ropeSizes(RopeOp op) {
  if (DenseI64ArrayAttr s = op.getSizesAttr(); s && s.size() == 4)
    return {s[0], s[1], s[2], s[3]};
  ArrayRef<int64_t> shape = mrt(op.getInput()).getShape();
  RopeSizes r;
  size_t n = shape.size();
  r.dim = n >= 1 ? shape[n - 1] : 0;
  r.positions = n >= 2 ? shape[n - 2] : 0;
  r.heads = n >= 3 ? shape[n - 3] : 1;
  r.batch = 1;
  for (size_t d = 0; d + 3 < n; ++d)
    r.batch *= shape[d];
  return r;
}

SmallVector<AttentionTensorLayout, 2> ropeLayouts(RopeOp op, const RopeSizes &s) {
  if (DenseI64ArrayAttr l = op.getLayoutAttr(); l && l.size() == 8)
    return {{l[0], l[1], l[2], l[3]}, {l[4], l[5], l[6], l[7]}};
  AttentionTensorLayout contiguous{0, s.heads * s.positions * s.dim, s.positions * s.dim,
                                   s.dim};
  return {contiguous, contiguous};
}

void setRopeLayouts(RopeOp op, const RopeSizes &s, ArrayRef<AttentionTensorLayout> layouts) {
  Builder b(op->getContext());
  SmallVector<int64_t> flat;
  for (const AttentionTensorLayout &l : layouts)
    flat.append({l.offset, l.batch, l.head, l.row});
  op.setSizesAttr(b.getDenseI64ArrayAttr({s.batch, s.heads, s.positions, s.dim}));
  op.setLayoutAttr(b.getDenseI64ArrayAttr(flat));
}

} // namespace tcc::kern

LogicalResult RopeOp::verify() {
  auto x = mrt(getInput()), out = mrt(getOut()), cos = mrt(getCos()), sin = mrt(getSin());
  Type et = x.getElementType(), te = cos.getElementType();
  if (te != et && !((et.isBF16() || et.isF16()) && te.isF32()))
    return emitOpError("tables must have the input's element type (or f32 for bf16 / "
                       "f16 input), got ")
           << te;
  if (static_cast<bool>(getSizesAttr()) != static_cast<bool>(getLayoutAttr()))
    return emitOpError("sizes and layout come together");
  if (!getLayoutAttr()) {
    if (x.getRank() < 2 || x.getShape().back() % 2 != 0)
      return emitOpError("input must be (..., T, D) with D even, got ")
             << tcc::formatShape(x.getShape());
    if (out != x)
      return emitOpError("output type ") << out << " must equal the input type " << x;
    ArrayRef<int64_t> table = x.getShape().take_back(2);
    if (cos.getShape() != table || sin != cos)
      return emitOpError("cos and sin must both be ") << tcc::formatShape(table);
    return success();
  }
  DenseI64ArrayAttr sizes = getSizesAttr(), layout = getLayoutAttr();
  if (sizes.size() != 4 || llvm::any_of(sizes.asArrayRef(), [](int64_t v) { return v < 0; }))
    return emitOpError("sizes must be [B, H, T, D], none negative");
  if (layout.size() != 8)
    return emitOpError("layout must hold 4 numbers (offset, batch, head, row strides) for "
                       "the input and the output, has ")
           << layout.size();
  RopeSizes s = ropeSizes(*this);
  if (s.dim % 2 != 0)
    return emitOpError("D must be even, got ") << s.dim;
  SmallVector<int64_t> table{s.positions, s.dim};
  if (cos.getShape() != ArrayRef<int64_t>(table) || sin != cos)
    return emitOpError("cos and sin must both be ") << tcc::formatShape(table);
  if (out.getElementType() != et)
    return emitOpError("input and output must have one element type");
  SmallVector<AttentionTensorLayout, 2> l = ropeLayouts(*this, s);
  const char *names[] = {"input", "out"};
  MemRefType bufs[] = {x, out};
  for (int i = 0; i < 2; ++i) {
    if (l[i].offset < 0 || l[i].batch < 0 || l[i].head < 0 || l[i].row < 0)
      return emitOpError("layout of ") << names[i] << " has a negative offset or stride";
    if (s.elements() == 0)
      continue;
    int64_t last = l[i].offset + (s.batch - 1) * l[i].batch + (s.heads - 1) * l[i].head +
                   (s.positions - 1) * l[i].row + s.dim;
    if (last > bufs[i].getNumElements())
      return emitOpError("layout of ") << names[i] << " reaches element " << last
                                       << " of a buffer of " << bufs[i].getNumElements();
  }
  return success();
}
