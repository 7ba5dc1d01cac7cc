#include "dialects/common/ShapeHelpers.h"

#include <algorithm>
#include <cstdio>

#include "llvm/ADT/STLExtras.h"

namespace tcc {

std::string formatNumber(double x) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%g", x);
  return buffer;
}

std::string formatShape(llvm::ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (auto [i, d] : llvm::enumerate(shape))
    s += (i ? ", " : "") + std::to_string(d);
  return s + "]";
}

std::optional<llvm::SmallVector<int64_t>>
broadcastShapes(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  llvm::SmallVector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return std::nullopt;
    out[i] = da == 1 ? db : da;
  }
  return out;
}

llvm::SmallVector<int64_t> reducedShape(llvm::ArrayRef<int64_t> shape,
                                        llvm::ArrayRef<int64_t> axes,
                                        bool keepDims) {
  llvm::SmallVector<int64_t> out;
  for (auto [i, d] : llvm::enumerate(shape)) {
    bool reduced = llvm::is_contained(axes, static_cast<int64_t>(i));
    if (!reduced)
      out.push_back(d);
    else if (keepDims)
      out.push_back(1);
  }
  return out;
}

} // namespace tcc
