// The tg op classes generated from TgOps.td. Their verifiers, gradients and
// scalar bodies live with their op group (TgElementwiseOps.cpp and
// TgElementwiseScalarBodies.cpp, TgStructuralOps.cpp and
// TgStructuralGradients.cpp, TgOptimizerOps.cpp); messages say what was
// expected and what was found, and MLIR attaches the op's location (the
// model's node name). The shape helpers they share are dialect-neutral:
// dialects/common/ShapeHelpers.h.
#include "dialects/tg/TgDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;
using namespace tcc::tg;

#define GET_OP_CLASSES
#include "dialects/tg/TgOps.cpp.inc"
