// kern-plan-memory's plan, buffer by buffer (--dump-dir's
// NN-kern-plan-memory-report.txt), and the check that it never gives one
// byte to two buffers live at the same time.
//
// After the pass every temporary is a kern.workspace_view at a byte offset
// of the function's arena; its live range is recomputed the way the planner
// computed it (passes/memory/LiveRanges.h): from the view (where the alloc
// stood) to its last reader or writer.
#include "passes/Passes.h"
#include "passes/common/NodeNames.h"
#include "passes/memory/LiveRanges.h"

#include "llvm/Support/FormatVariadic.h"

#include <tuple>

using namespace mlir;

namespace tcc {

namespace {

std::string typeText(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << t;
  return s;
}

// What a function argument holds, by its tg attribute.
StringRef argumentKind(func::FuncOp f, unsigned i) {
  for (StringRef kind : {"tg.param", "tg.opt_state", "tg.input"})
    if (f.getArgAttr(i, kind))
      return kind.drop_front(3);
  return "output";
}

// The function's memref arguments by kind, in order of first appearance:
// kind, bytes, count.
struct ArgumentKind {
  StringRef kind;
  int64_t bytes = 0, count = 0;
};
SmallVector<ArgumentKind> argumentsByKind(func::FuncOp f) {
  SmallVector<ArgumentKind> kinds;
  for (unsigned i = 0; i < f.getNumArguments(); ++i) {
    auto t = dyn_cast<MemRefType>(f.getArgument(i).getType());
    if (!t)
      continue;
    StringRef kind = argumentKind(f, i);
    auto it = llvm::find_if(kinds, [&](const ArgumentKind &k) { return k.kind == kind; });
    if (it == kinds.end())
      it = kinds.insert(kinds.end(), ArgumentKind{kind});
    it->bytes += t.getNumElements() * kern::elementBytes(t.getElementType());
    ++it->count;
  }
  return kinds;
}

MemorySummary summarize(func::FuncOp f, ArrayRef<PlannedBuffer> buffers) {
  MemorySummary m;
  for (const ArgumentKind &k : argumentsByKind(f)) {
    int64_t &slot = k.kind == "param"       ? m.params
                    : k.kind == "opt_state" ? m.optimizerState
                    : k.kind == "input"     ? m.inputs
                                            : m.outputs;
    slot += k.bytes;
  }
  if (auto a = f->getAttrOfType<IntegerAttr>("kern.workspace_bytes"))
    m.arena = a.getInt();
  std::tie(m.peakLive, m.peakAt) = livePeak(buffers);
  return m;
}

} // namespace

std::string formatBytes(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (bytes >= (int64_t(1) << 30))
    return llvm::formatv("{0:f2} GiB", b / (1 << 30)).str();
  if (bytes >= (int64_t(1) << 20))
    return llvm::formatv("{0:f1} MiB", b / (1 << 20)).str();
  if (bytes >= 1024)
    return llvm::formatv("{0:f1} KiB", b / 1024).str();
  return std::to_string(bytes) + " B";
}

std::pair<int64_t, int64_t> livePeak(ArrayRef<PlannedBuffer> buffers) {
  int64_t peak = 0, at = -1;
  for (const PlannedBuffer &b : buffers) {
    int64_t live = 0;
    for (const PlannedBuffer &o : buffers)
      if (o.start <= b.start && b.start <= o.lastUse)
        live += o.bytes;
    if (live > peak) {
      peak = live;
      at = b.start;
    }
  }
  return {peak, at};
}

MemorySummary summarizeMemory(func::FuncOp f) { return summarize(f, plannedBuffers(f)); }

std::string formatMemorySummary(const MemorySummary &m) {
  return llvm::formatv("parameters {0}, optimizer state {1}, inputs {2}, outputs {3}, "
                       "temporaries {4} (arena; at most {5} live at once): {6} planned",
                       formatBytes(m.params), formatBytes(m.optimizerState),
                       formatBytes(m.inputs), formatBytes(m.outputs), formatBytes(m.arena),
                       formatBytes(m.peakLive), formatBytes(m.total()))
      .str();
}

SmallVector<PlannedBuffer> plannedBuffers(func::FuncOp f) {
  llvm::DenseMap<Operation *, int64_t> order = memory::programOrder(f);
  SmallVector<PlannedBuffer> buffers;
  f.walk([&](kern::WorkspaceViewOp v) {
    buffers.push_back({v, static_cast<int64_t>(v.getOffset()),
                       memory::plannedBytes(cast<MemRefType>(v.getBuffer().getType())),
                       order.lookup(v), memory::lastUse(v.getBuffer(), order)});
  });
  return buffers;
}

SmallVector<std::pair<PlannedBuffer, PlannedBuffer>>
planOverlaps(ArrayRef<PlannedBuffer> buffers) {
  SmallVector<std::pair<PlannedBuffer, PlannedBuffer>> overlaps;
  for (size_t i = 0; i < buffers.size(); ++i)
    for (size_t j = i + 1; j < buffers.size(); ++j) {
      const PlannedBuffer &a = buffers[i], &b = buffers[j];
      bool liveTogether = !(a.lastUse < b.start || b.lastUse < a.start);
      bool shareBytes = a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes;
      if (liveTogether && shareBytes)
        overlaps.push_back({a, b});
    }
  return overlaps;
}

void writeMemoryPlanReport(ModuleOp module, llvm::raw_ostream &os) {
  os << "# kern-plan-memory: each function's workspace arena, buffer by buffer. A\n"
        "# temporary lives from its op index (walk order; where its alloc stood) to\n"
        "# its last reader or writer; buffers whose ranges do not meet may share bytes.\n";
  for (func::FuncOp f : module.getOps<func::FuncOp>()) {
    SmallVector<PlannedBuffer> buffers = plannedBuffers(f);
    MemorySummary m = summarize(f, buffers);
    os << llvm::formatv("\nfunction @{0}: arena {1} bytes ({2}), {3} temporaries; live "
                        "temporaries peak at {4} bytes ({5}) at op {6}\n",
                        f.getName(), m.arena, formatBytes(m.arena), buffers.size(), m.peakLive,
                        formatBytes(m.peakLive), m.peakAt);
    for (const ArgumentKind &k : argumentsByKind(f))
      os << llvm::formatv("  outside the arena: {0,-10} {1,5} buffers {2,14} bytes ({3})\n",
                          k.kind, k.count, k.bytes, formatBytes(k.bytes));
    os << llvm::formatv("  {0,14} {1,14} {2,17}  {3,-28} {4}\n", "offset", "bytes", "live ops",
                        "type", "model node");
    SmallVector<PlannedBuffer> sorted(buffers);
    llvm::stable_sort(sorted, [](const PlannedBuffer &a, const PlannedBuffer &b) {
      return a.start < b.start;
    });
    for (PlannedBuffer b : sorted) // (the op accessors are not const)
      os << llvm::formatv("  {0,14} {1,14} {2,17}  {3,-28} {4}\n", b.offset, b.bytes,
                          llvm::formatv("{0}..{1}", b.start, b.lastUse).str(),
                          typeText(b.view.getBuffer().getType()), nodeName(b.view.getLoc()));
    auto overlaps = planOverlaps(buffers);
    if (overlaps.empty()) {
      os << "  plan check: no two buffers live at the same time share a byte\n";
    } else {
      os << llvm::formatv("  plan check: FAILED, {0} pairs of live buffers share bytes:\n",
                          overlaps.size());
      for (auto [a, b] : overlaps)
        os << llvm::formatv("    [{0}, +{1}) ops {2}..{3} and [{4}, +{5}) ops {6}..{7}\n",
                            a.offset, a.bytes, a.start, a.lastUse, b.offset, b.bytes, b.start,
                            b.lastUse);
    }
  }
}

} // namespace tcc
