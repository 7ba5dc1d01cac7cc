// How tcc prints MLIR diagnostics: one line each, "tcc: error: MODEL: node
// 'fc2': message", naming the model node when the location is a node name.
#ifndef TCC_COMPILER_DRIVER_DIAGNOSTICS_H
#define TCC_COMPILER_DRIVER_DIAGNOSTICS_H

#include <string>

namespace mlir {
class MLIRContext;
}

namespace tcc {
void installDiagnosticPrinter(mlir::MLIRContext &ctx, const std::string &model);
} // namespace tcc

#endif
