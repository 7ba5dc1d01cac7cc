// pb -> tg: turns a validated model proto into a module holding
// `func.func @forward(params..., inputs...) -> (loss, outputs...)`.
//
// Errors are emitted as MLIR diagnostics located at the offending node
// (NameLoc of the node name), so callers print e.g.
//   node 'fc2' (matmul): contraction sizes differ: [64, 128] x [100, 10]
// The importer never aborts on bad input; it returns null.
#ifndef TCC_FRONTEND_IMPORTER_IMPORTER_H
#define TCC_FRONTEND_IMPORTER_IMPORTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace tcc {
namespace model {
class Model;
}

// Registers the dialects the importer creates (tg, func) in `ctx`.
void loadImporterDialects(mlir::MLIRContext &ctx);

mlir::OwningOpRef<mlir::ModuleOp> importModel(const model::Model &model,
                                              mlir::MLIRContext &ctx);

} // namespace tcc

#endif
