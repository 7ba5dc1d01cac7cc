//===- PlanMemory.cpp - one workspace arena for all temporaries -----------===//
//
// Live range of a kern.alloc: from the alloc (placed right before the op that
// writes it) to its last reader in program order, following kern.reshape
// views. Ranges are packed first-fit into one arena; a buffer whose last use
// is strictly before another's alloc may share its bytes. So an op never
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

struct Hole { // a free range of the arena
  int64_t offset, size;
};

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
    SmallVector<kern::AllocOp> allocs;
    f.walk([&](kern::AllocOp a) { allocs.push_back(a); });

    struct Live {
      int64_t end, offset, size;
      Type elementType;
    };
    SmallVector<Live> live;   // placed buffers still in use
    SmallVector<Hole> free; // holes, sorted by offset
    int64_t top = 0;
    BytesByType planned, atPeak;
    int64_t peakLiveBytes = 0;
    for (kern::AllocOp a : allocs) {
      int64_t start = order[a];
      // Release buffers whose last use is before this alloc.
      for (auto it = live.begin(); it != live.end();) {
        if (it->end < start) {
          free.push_back({it->offset, it->size});
          it = live.erase(it);
        } else {
          ++it;
        }
      }
      coalesce(free);
      int64_t size = bufferBytes(a.getType());
      int64_t offset = -1;
      for (auto it = free.begin(); it != free.end(); ++it) {
        if (it->size < size)
          continue;
        offset = it->offset;
        it->offset += size;
        it->size -= size;
        if (it->size == 0)
          free.erase(it);
        break;
      }
      if (offset < 0) {
        offset = top;
        top += size;
      }
      Type elementType = a.getType().getElementType();
      live.push_back({lastUse(a.getResult(), order), offset, size, elementType});
      addBytes(planned, elementType, size);
      int64_t liveBytes = 0;
      for (const Live &l : live)
        liveBytes += l.size;
      if (liveBytes > peakLiveBytes) { // the first of equal peaks is kept
        peakLiveBytes = liveBytes;
        atPeak.clear();
        for (const Live &l : live)
          addBytes(atPeak, l.elementType, l.size);
      }
      OpBuilder b(a);
      Value view = kern::WorkspaceViewOp::create(b, a.getLoc(), a.getType(),
                                                 b.getI64IntegerAttr(offset));
      a.getResult().replaceAllUsesWith(view);
      a.erase();
    }
    f->setAttr("kern.planned_bytes_by_dtype",
               bytesByTypeAttr(f.getContext(), planned));
    f->setAttr("kern.peak_bytes_by_dtype",
               bytesByTypeAttr(f.getContext(), atPeak));
    return top;
  }

  // Sorts holes by offset and merges neighbours.
  static void coalesce(SmallVector<Hole> &free) {
    llvm::sort(free, [](const Hole &x, const Hole &y) {
      return x.offset < y.offset;
    });
    SmallVector<Hole> merged;
    for (const Hole &blk : free) {
      if (!merged.empty() &&
          merged.back().offset + merged.back().size == blk.offset)
        merged.back().size += blk.size;
      else
        merged.push_back(blk);
    }
    free = std::move(merged);
  }
};

} // namespace
