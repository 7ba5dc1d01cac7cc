// Shape helpers shared by every dialect (tg and kern verifiers, gradients,
// lowering) and by the tools: how shapes and numbers print in messages, and
// numpy broadcasting. Dialect-neutral, so kern needs no tg to use them.
#ifndef TCC_DIALECTS_COMMON_SHAPEHELPERS_H
#define TCC_DIALECTS_COMMON_SHAPEHELPERS_H

#include <cstdint>
#include <optional>
#include <string>

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

namespace tcc {

// "[64, 784]": how every message in tcc prints a shape.
std::string formatShape(llvm::ArrayRef<int64_t> shape);
// "0.001", "1e+06" (printf %g): how messages print a number.
std::string formatNumber(double x);

// numpy broadcasting of two shapes; nullopt when incompatible.
std::optional<llvm::SmallVector<int64_t>>
broadcastShapes(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b);

// The shape left after reducing `axes` of `shape`.
llvm::SmallVector<int64_t> reducedShape(llvm::ArrayRef<int64_t> shape,
                                        llvm::ArrayRef<int64_t> axes,
                                        bool keepDims);

} // namespace tcc

#endif
