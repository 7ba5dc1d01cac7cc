#include "compiler/driver/Diagnostics.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/raw_ostream.h"

namespace tcc {

// Prints diagnostics as one line each, naming the model node when the
// location is a node name.
void installDiagnosticPrinter(mlir::MLIRContext &ctx, const std::string &model) {
  ctx.getDiagEngine().registerHandler([model](mlir::Diagnostic &d) {
    std::string where;
    if (auto name = llvm::dyn_cast<mlir::NameLoc>(d.getLocation()))
      where = "node '" + name.getName().str() + "': ";
    else if (auto file = llvm::dyn_cast<mlir::FileLineColLoc>(d.getLocation()))
      where = file.getFilename().str() + ":" + std::to_string(file.getLine()) + ": ";
    const char *sev = d.getSeverity() == mlir::DiagnosticSeverity::Error ? "error"
                      : d.getSeverity() == mlir::DiagnosticSeverity::Warning ? "warning"
                                                                             : "note";
    llvm::errs() << "tcc: " << sev << ": " << model << ": " << where << d.str() << "\n";
    for (mlir::Diagnostic &note : d.getNotes())
      llvm::errs() << "tcc: note: " << note.str() << "\n";
    return mlir::success();
  });
}

} // namespace tcc
