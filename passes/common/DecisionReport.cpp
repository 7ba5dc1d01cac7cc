#include "passes/common/DecisionReport.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace tcc {

void writeFunctionDecisions(mlir::ModuleOp module, llvm::StringRef attr,
                            llvm::StringRef header, llvm::raw_ostream &os) {
  os << header;
  for (auto f : module.getOps<mlir::func::FuncOp>()) {
    auto decisions = f->getAttrOfType<mlir::ArrayAttr>(attr);
    if (!decisions)
      continue;
    os << "\nfunction @" << f.getName() << "\n";
    for (mlir::Attribute d : decisions)
      os << "  " << llvm::cast<mlir::StringAttr>(d).getValue() << "\n";
  }
}

} // namespace tcc
