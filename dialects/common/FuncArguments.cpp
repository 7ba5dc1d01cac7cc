#include "dialects/common/FuncArguments.h"

#include "dialects/common/ModelAttrs.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;

namespace tcc::model {

BlockArgument appendArgument(func::FuncOp f, Type type, DictionaryAttr attrs) {
  unsigned index = f.getNumArguments();
  // A func.func accepts any argument type, so the insertion cannot fail.
  (void)f.insertArgument(index, type, attrs, f.getLoc());
  return f.getArgument(index);
}

BlockArgument getOrAddHyperArgument(func::FuncOp f, StringRef name,
                                    Type elementType) {
  for (BlockArgument arg : f.getArguments())
    if (auto h = f.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kHyperAttr);
        h && h.getValue() == name)
      return arg;
  Builder b(f.getContext());
  return appendArgument(
      f, RankedTensorType::get({}, elementType),
      b.getDictionaryAttr(b.getNamedAttr(kHyperAttr, b.getStringAttr(name))));
}

} // namespace tcc::model
