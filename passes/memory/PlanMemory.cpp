//===- PlanMemory.cpp - one workspace arena for all temporaries -----------===//
//
// Live range of a kern.alloc: from the alloc (placed right before the op that
// writes it) to its last reader in program order, following kern.reshape
// views. Ranges are packed into one arena, largest first, each at the lowest
// offset free for its whole range; a buffer whose last use is strictly
// before another's alloc may share its bytes. So an op never
// writes a temporary that aliases one of its own inputs; the only aliasing
// a kernel sees is the one the lowering created on purpose (an in-place
// update writing the argument buffer it reads, position by position).
// Multi-output kernels need nothing special: each output is its own alloc,
// live from its alloc to its last reader.
//
// Each function also records its buffers' bytes by element type (for trun
// --info's memory-by-precision table, through the step descriptor):
//   kern.planned_bytes_by_dtype   every planned buffer, summed without reuse
//   kern.peak_bytes_by_dtype      the buffers live where the arena is fullest
//                                 (the largest sum of live buffer sizes)
// each an array of [element type, bytes] pairs in order of first appearance;
// bytes are the planned (64-byte rounded) sizes.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/memory/LiveRanges.h"

#include "mlir/IR/Builders.h"

namespace tcc {
#define GEN_PASS_DEF_KERNPLANMEMORY
#include "passes/Passes.h.inc"
} // namespace tcc

using namespace mlir;
using namespace tcc;

namespace {

using memory::lastUse;

int64_t bufferBytes(MemRefType t) { return memory::plannedBytes(t); }

// Bytes per element type, in order of first appearance.
using BytesByType = SmallVector<std::pair<Type, int64_t>>;

void addBytes(BytesByType &table, Type type, int64_t bytes) {
  for (auto &[t, b] : table)
    if (t == type) {
      b += bytes;
      return;
    }
  table.push_back({type, bytes});
}

ArrayAttr bytesByTypeAttr(MLIRContext *ctx, const BytesByType &table) {
  SmallVector<Attribute> entries;
  for (auto [type, bytes] : table)
    entries.push_back(ArrayAttr::get(
        ctx, {TypeAttr::get(type),
              IntegerAttr::get(IntegerType::get(ctx, 64), bytes)}));
  return ArrayAttr::get(ctx, entries);
}

struct KernPlanMemoryPass : tcc::impl::KernPlanMemoryBase<KernPlanMemoryPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    int64_t moduleBytes = 0;
    for (func::FuncOp f : module.getOps<func::FuncOp>()) {
      int64_t bytes = planFunction(f);
      f->setAttr("kern.workspace_bytes",
                 IntegerAttr::get(IntegerType::get(&getContext(), 64), bytes));
      moduleBytes = std::max(moduleBytes, bytes);
    }
    module->setAttr("kern.workspace_bytes",
                    IntegerAttr::get(IntegerType::get(&getContext(), 64),
                                     moduleBytes));
  }

  int64_t planFunction(func::FuncOp f) {
    llvm::DenseMap<Operation *, int64_t> order = memory::programOrder(f);
    struct Buffer {
      kern::AllocOp alloc;
      int64_t start, end, size, offset = -1;
      Type elementType;
    };
    SmallVector<Buffer> buffers;
    f.walk([&](kern::AllocOp a) {
      buffers.push_back({a, order[a], lastUse(a.getResult(), order), bufferBytes(a.getType()), -1,
                         a.getType().getElementType()});
    });
    int64_t top = place(buffers);

    // Bytes by element type: every buffer, and those live at the largest
    // sum of live sizes (the first of equal peaks).
    BytesByType planned, atPeak;
    int64_t peakLiveBytes = 0;
    SmallVector<Buffer *> live;
    for (Buffer &buffer : buffers) { // in program order
      llvm::erase_if(live, [&](const Buffer *l) { return l->end < buffer.start; });
      live.push_back(&buffer);
      addBytes(planned, buffer.elementType, buffer.size);
      int64_t liveBytes = 0;
      for (const Buffer *l : live)
        liveBytes += l->size;
      if (liveBytes > peakLiveBytes) {
        peakLiveBytes = liveBytes;
        atPeak.clear();
        for (const Buffer *l : live)
          addBytes(atPeak, l->elementType, l->size);
      }
    }
    for (Buffer &buffer : buffers) {
      OpBuilder b(buffer.alloc);
      Value view = kern::WorkspaceViewOp::create(b, buffer.alloc.getLoc(), buffer.alloc.getType(),
                                                 b.getI64IntegerAttr(buffer.offset));
      buffer.alloc.getResult().replaceAllUsesWith(view);
      buffer.alloc.erase();
    }
    f->setAttr("kern.planned_bytes_by_dtype",
               bytesByTypeAttr(f.getContext(), planned));
    f->setAttr("kern.peak_bytes_by_dtype",
               bytesByTypeAttr(f.getContext(), atPeak));
    return top;
  }

  // Offsets by "greedy by size": the largest buffers first, each at the
  // lowest offset where it meets no placed buffer whose live range overlaps
  // its own. Placing in program order instead (first-fit as buffers appear)
  // left holes too small for later buffers: the arena grew past the live
  // peak (a 1-layer GPT's train step: 960 KiB for 683 KiB live at once).
  // Returns the arena's size.
  template <typename Buffer> static int64_t place(SmallVector<Buffer> &buffers) {
    SmallVector<Buffer *> bySize;
    for (Buffer &b : buffers)
      bySize.push_back(&b);
    llvm::stable_sort(bySize, [](const Buffer *x, const Buffer *y) { return x->size > y->size; });
    SmallVector<Buffer *> placed;
    SmallVector<std::pair<int64_t, int64_t>> taken; // [offset, end) of overlapping ones
    int64_t top = 0;
    for (Buffer *b : bySize) {
      taken.clear();
      for (Buffer *p : placed)
        if (p->start <= b->end && b->start <= p->end)
          taken.push_back({p->offset, p->offset + p->size});
      llvm::sort(taken);
      int64_t offset = 0;
      for (auto [begin, end] : taken) {
        if (begin - offset >= b->size)
          break; // fits in the gap before this one
        offset = std::max(offset, end);
      }
      b->offset = offset;
      top = std::max(top, offset + b->size);
      placed.push_back(b);
    }
    return top;
  }
};

} // namespace
