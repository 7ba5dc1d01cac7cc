#include "dialects/kern/KernDialect.h"

#include "dialects/tg/TgDialect.h"
#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace tcc::kern;

#include "dialects/kern/KernOpsDialect.cpp.inc"
#include "dialects/kern/KernOpsEnums.cpp.inc"

void KernDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/kern/KernOps.cpp.inc"
      >();
}

#define GET_OP_CLASSES
#include "dialects/kern/KernOps.cpp.inc"

static MemRefType mrt(Value v) { return cast<MemRefType>(v.getType()); }

LogicalResult GemmOp::verify() {
  auto a = mrt(getA()), b = mrt(getB()), c = mrt(getOut());
  if (a.getRank() != 2 || b.getRank() != 2 || c.getRank() != 2)
    return emitOpError("expects rank-2 buffers");
  int64_t m = a.getDimSize(getTransposeA() ? 1 : 0);
  int64_t ka = a.getDimSize(getTransposeA() ? 0 : 1);
  int64_t kb = b.getDimSize(getTransposeB() ? 1 : 0);
  int64_t n = b.getDimSize(getTransposeB() ? 0 : 1);
  if (ka != kb || c.getDimSize(0) != m || c.getDimSize(1) != n)
    return emitOpError("inconsistent gemm shapes");
  return success();
}

LogicalResult ElementwiseOp::verify() {
  unsigned expected = (getKind() == ElementwiseKind::relu ||
                       getKind() == ElementwiseKind::copy)
                          ? 1
                          : 2;
  if (getInputs().size() != expected)
    return emitOpError("kind '") << stringifyElementwiseKind(getKind())
                                 << "' takes " << expected << " inputs";
  auto out = mrt(getOut());
  for (Value in : getInputs()) {
    auto t = mrt(in);
    auto shape = tcc::tg::broadcastShapes(t.getShape(), out.getShape());
    if (!shape || ArrayRef<int64_t>(*shape) != out.getShape())
      return emitOpError("input ") << t << " does not broadcast to " << out;
    if (t.getElementType() != out.getElementType())
      return emitOpError("element types differ");
  }
  return success();
}

LogicalResult ReduceOp::verify() {
  auto in = mrt(getInput()), out = mrt(getOut());
  if (in.getElementType() != out.getElementType())
    return emitOpError("element types differ");
  int64_t count = 1;
  for (int64_t a : getAxes()) {
    if (a < 0 || a >= in.getRank())
      return emitOpError("axis out of range");
    count *= in.getDimSize(a);
  }
  if (in.getNumElements() != out.getNumElements() * count)
    return emitOpError("output size does not match the reduced input");
  return success();
}

LogicalResult ReshapeOp::verify() {
  auto in = mrt(getInput()), out = mrt(getResult());
  if (in.getElementType() != out.getElementType() ||
      in.getNumElements() != out.getNumElements())
    return emitOpError("must keep the element type and count");
  return success();
}
