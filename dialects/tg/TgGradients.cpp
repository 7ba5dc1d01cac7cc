// Helpers shared by the gradient rules of all op groups. The rules
// themselves (GradientOpInterface::buildGradients) live with each op group:
// TgElementwiseOps.cpp, TgStructuralGradients.cpp.
#include "dialects/tg/TgDialect.h"

#include "dialects/common/ShapeHelpers.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;
using namespace tcc::tg;

namespace tcc::tg {

Value sumToShape(OpBuilder &b, Location loc, Value grad,
                 RankedTensorType targetType) {
  auto gradType = cast<RankedTensorType>(grad.getType());
  if (gradType == targetType)
    return grad;
  ArrayRef<int64_t> g = gradType.getShape(), t = targetType.getShape();
  int64_t lead = g.size() - t.size();
  // Broadcast added the leading dims and stretched size-1 dims: sum them.
  SmallVector<int64_t> axes;
  for (int64_t i = 0; i < static_cast<int64_t>(g.size()); ++i)
    if (i < lead || (t[i - lead] == 1 && g[i] != 1))
      axes.push_back(i);
  Value summed = grad;
  if (!axes.empty()) {
    auto keptType = RankedTensorType::get(tcc::reducedShape(g, axes, true),
                                          gradType.getElementType());
    summed = ReduceSumOp::create(b, loc, keptType, grad,
                                 b.getDenseI64ArrayAttr(axes),
                                 b.getBoolAttr(true));
  }
  if (summed.getType() != targetType)
    summed = ReshapeOp::create(b, loc, targetType, summed);
  return summed;
}

} // namespace tcc::tg
