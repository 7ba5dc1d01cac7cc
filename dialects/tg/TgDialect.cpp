#include "dialects/tg/TgDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h" // dependent dialects
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"

using namespace mlir;
using namespace tcc::tg;

#include "dialects/tg/TgOpsDialect.cpp.inc"
#include "dialects/tg/TgInterfaces.cpp.inc"

void TgDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/tg/TgOps.cpp.inc"
      >();
}

Operation *TgDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                          Type type, Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements)
    return nullptr;
  return ConstantOp::create(builder, loc, type, elements);
}
