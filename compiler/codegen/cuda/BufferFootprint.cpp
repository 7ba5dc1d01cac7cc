#include "compiler/codegen/cuda/BufferFootprint.h"

#include "compiler/codegen/common/CTypes.h"
#include "dialects/kern/KernDialect.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace tcc::codegen::cuda {

Footprint footprint(Value buffer) {
  while (auto reshape = buffer.getDefiningOp<kern::ReshapeOp>())
    buffer = reshape.getInput();
  if (auto view = buffer.getDefiningOp<kern::WorkspaceViewOp>()) {
    int64_t begin = static_cast<int64_t>(view.getOffset());
    return {Value(), begin, begin + bufferBytes(cast<MemRefType>(view.getType()))};
  }
  return {buffer, 0, 0};
}

bool overlaps(const Footprint &a, const Footprint &b) {
  return a.argument ? a.argument == b.argument
                    : !b.argument && a.begin < b.end && b.begin < a.end;
}

// The same bytes from the same start: what a cast of `b` may be reused for.
bool sameStart(const Footprint &a, const Footprint &b) {
  return overlaps(a, b) && a.begin == b.begin;
}

bool sameWorkspaceBytes(const Footprint &a, const Footprint &b) {
  return !a.argument && !b.argument && a.begin == b.begin && a.end == b.end;
}

namespace {

// Whether `op` may write (read) `source`: an op without memory effects may.
template <class Effect> bool mayAccess(Operation *op, const Footprint &source) {
  auto effects = dyn_cast<MemoryEffectOpInterface>(op);
  if (!effects)
    return true;
  SmallVector<MemoryEffects::EffectInstance> list;
  effects.getEffects(list);
  for (const MemoryEffects::EffectInstance &e : list)
    if (isa<Effect>(e.getEffect()) &&
        (!e.getValue() || overlaps(footprint(e.getValue()), source)))
      return true;
  return false;
}

} // namespace

bool mayWrite(Operation *op, const Footprint &source) {
  return mayAccess<MemoryEffects::Write>(op, source);
}
bool mayRead(Operation *op, const Footprint &source) {
  return mayAccess<MemoryEffects::Read>(op, source);
}

} // namespace tcc::codegen::cuda
