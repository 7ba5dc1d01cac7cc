// Program order and live ranges of kern buffers, as kern-plan-memory places
// them (shared by the planner and its report, so both see the same ranges).
#ifndef TCC_PASSES_MEMORY_LIVERANGES_H
#define TCC_PASSES_MEMORY_LIVERANGES_H

#include "dialects/kern/KernDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"

#include <algorithm>
#include <cstdint>

namespace tcc::memory {

// Buffers are placed at this alignment (their sizes rounded up to it).
constexpr int64_t kAlignment = 64;

inline int64_t plannedBytes(mlir::MemRefType t) {
  int64_t bytes = t.getNumElements() * kern::elementBytes(t.getElementType());
  return (bytes + kAlignment - 1) / kAlignment * kAlignment;
}

// Every op of f (nested ones too) numbered in walk order.
inline llvm::DenseMap<mlir::Operation *, int64_t> programOrder(mlir::func::FuncOp f) {
  llvm::DenseMap<mlir::Operation *, int64_t> order;
  int64_t pos = 0;
  f.walk([&](mlir::Operation *op) { order[op] = pos++; });
  return order;
}

// The position of v's last reader or writer, following kern.reshape views
// (-1: unused). The input of a ZeRO-1 exchange (kern.reduce_scatter,
// kern.all_gather) is live to the end of the function: on a GPU the
// exchange reads it on the communication stream while later kernels run,
// and the step waits for it only at the end (or before a kernel touching
// its buffers), so its bytes may not be reused before.
inline int64_t lastUse(mlir::Value v, const llvm::DenseMap<mlir::Operation *, int64_t> &order) {
  int64_t last = -1;
  for (mlir::Operation *user : v.getUsers()) {
    last = std::max(last, order.lookup(user));
    if (llvm::isa<kern::ReduceScatterOp, kern::AllGatherOp>(user) && user->getOperand(0) == v)
      last = std::max(last, static_cast<int64_t>(order.size()));
    if (auto view = llvm::dyn_cast<kern::ReshapeOp>(user))
      last = std::max(last, lastUse(view.getResult(), order));
  }
  return last;
}

} // namespace tcc::memory

#endif // TCC_PASSES_MEMORY_LIVERANGES_H
