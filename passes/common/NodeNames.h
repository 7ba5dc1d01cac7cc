// How the passes' reports (tg-amp, tg-fuse-attention, tg-cache-rope) name
// an op: by the model node a dump reader knows it by.
#ifndef TCC_PASSES_COMMON_NODENAMES_H
#define TCC_PASSES_COMMON_NODENAMES_H

#include <string>

#include "mlir/IR/Location.h"

namespace tcc {

// The model node name (a NameLoc, also inside a FusedLoc), else the
// location as printed.
std::string nodeName(mlir::Location loc);

} // namespace tcc

#endif // TCC_PASSES_COMMON_NODENAMES_H
