// tg-cache-rope: rotary position embeddings become step constants and one op.
//
// 1. Tables. A value whose inputs are only constants and iotas (no function
//    argument reaches it: it depends on positions alone) and whose subgraph
//    holds a transcendental op (exp, sin, cos, ...) is computed once, here,
//    by the float64 reference interpreter and rounded to its type: a dense
//    tg.constant, which the step carries as constant data instead of
//    recomputing the subgraph (and its backward readers) every step.
//    Subgraphs of cheap ops only (an iota compared with another: causal
//    masks) are left alone, since a kernel computes them for free while a
//    table costs memory traffic. A table over max-table-bytes (64 MiB) stays
//    computed; the report says so.
// 2. Rotations. x * cos + rotate_half(x) * sin (and the half-table form,
//    RopePatterns.h) becomes one tg.rope: one kernel reading x and the two
//    tables, whose gradient is one tg.rope too (the transposed rotation).
//
// Every decision is recorded on the op as tg.cache_rope = "<decision>: <why>";
// writeCacheRopeReport lists them (the --dump-dir file
// NN-tg-cache-rope-report.txt). Runs before autodiff and tg-amp.
#include "passes/Passes.h"
#include "passes/common/NodeNames.h"
#include "passes/common/TensorBytes.h"

#include "interpreter/TgInterpreter.h"
#include "dialects/common/ModelAttrs.h"
#include "dialects/common/ShapeHelpers.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/IRMapping.h"
#include "passes/fusion/RopePatterns.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"

namespace tcc {
#define GEN_PASS_DEF_TGCACHEROPE
#include "passes/Passes.h.inc"
} // namespace tcc

using namespace mlir;
using namespace tcc;

namespace {

RankedTensorType rtt(Value v) { return cast<RankedTensorType>(v.getType()); }

std::string bytesText(int64_t bytes) {
  if (bytes >= (int64_t(1) << 20))
    return llvm::formatv("{0:F1} MiB", bytes / double(1 << 20)).str();
  if (bytes >= 1024)
    return llvm::formatv("{0:F1} KiB", bytes / 1024.0).str();
  return llvm::formatv("{0} bytes", bytes).str();
}

// Ops whose cost makes a table worth keeping (cheap ones recompute for free).
bool isTranscendental(Operation *op) {
  return isa<tg::ExpOp, tg::LogOp, tg::SinOp, tg::CosOp, tg::PowOp, tg::SqrtOp,
             tg::RsqrtOp, tg::TanhOp, tg::SigmoidOp, tg::SiluOp, tg::GeluOp>(op);
}

class TableCacher {
public:
  TableCacher(func::FuncOp fn, int64_t maxBytes) : fn_(fn), maxBytes_(maxBytes) {}

  void run() {
    SmallVector<Value> roots;
    for (Operation &op : fn_.getBody().front()) {
      if (!isa<tg::TgDialect>(op.getDialect()) || op.getNumRegions() != 0)
        continue;
      bool sourceOnly = op.getNumOperands() == 0 && isa<tg::ConstantOp, tg::IotaOp>(op);
      bool fromPositions =
          op.getNumOperands() > 0 && llvm::all_of(op.getOperands(), [&](Value v) {
            Operation *def = v.getDefiningOp();
            return def && positionOnly_.contains(def);
          });
      if (!sourceOnly && !fromPositions)
        continue;
      positionOnly_.insert(&op);
      if (isTranscendental(&op) || llvm::any_of(op.getOperands(), [&](Value v) {
            return costly_.contains(v.getDefiningOp());
          }))
        costly_.insert(&op);
    }
    for (Operation *op : positionOnly_) {
      if (!costly_.contains(op) || isa<tg::ConstantOp>(op))
        continue;
      for (Value r : op->getResults())
        if (llvm::any_of(r.getUsers(),
                         [&](Operation *u) { return !positionOnly_.contains(u); }))
          roots.push_back(r);
    }
    for (Value root : roots)
      cache(root);
  }

private:
  // The ops `root` is computed from, in block order.
  SmallVector<Operation *> subgraph(Value root) {
    llvm::SetVector<Operation *> ops;
    SmallVector<Operation *> work{root.getDefiningOp()};
    while (!work.empty()) {
      Operation *op = work.pop_back_val();
      if (!ops.insert(op))
        continue;
      for (Value v : op->getOperands())
        work.push_back(v.getDefiningOp());
    }
    SmallVector<Operation *> sorted(ops.begin(), ops.end());
    llvm::sort(sorted, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
    return sorted;
  }

  void cache(Value root) {
    Operation *def = root.getDefiningOp();
    OpBuilder b(def->getContext());
    RankedTensorType type = rtt(root);
    int64_t bytes = tensorBytes(type);
    auto note = [&](const std::string &why) {
      def->setAttr(model::kCacheRopeAttr, b.getStringAttr(why));
    };
    if (!isa<FloatType>(type.getElementType()))
      return note("not cached: a position-only table of non-float type " +
                  llvm::formatv("{0}", type.getElementType()).str());
    if (bytes > maxBytes_)
      return note(llvm::formatv("not cached: the table is {0}, over the {1} cap per "
                                "table (max-table-bytes); computed every step",
                                bytesText(bytes), bytesText(maxBytes_)));
    SmallVector<Operation *> ops = subgraph(root);
    std::string diagnostic;
    FailureOr<DenseElementsAttr> data = evaluate(root, ops, diagnostic);
    if (failed(data))
      return note("not cached: the reference interpreter cannot evaluate it: " +
                  diagnostic);
    b.setInsertionPointAfter(def);
    auto c = tg::ConstantOp::create(b, def->getLoc(), type, *data);
    llvm::StringSet<> kinds;
    std::string names;
    for (Operation *op : ops)
      if (kinds.insert(op->getName().stripDialect()).second)
        names += (names.empty() ? "" : ", ") + op->getName().stripDialect().str();
    c->setAttr(model::kCacheRopeAttr,
               b.getStringAttr(llvm::formatv(
                   "cached: {0} {1} ({2}) from {3} position-only ops ({4}), evaluated "
                   "at compile time",
                   tcc::formatShape(type.getShape()), type.getElementType(),
                   bytesText(bytes), ops.size(), names)));
    root.replaceAllUsesWith(c.getResult());
  }

  // Runs `ops` (the subgraph of `root`) in the float64 interpreter and rounds
  // the result to root's element type.
  FailureOr<DenseElementsAttr> evaluate(Value root, ArrayRef<Operation *> ops,
                                        std::string &diagnostic) {
    MLIRContext *ctx = root.getContext();
    Location loc = root.getLoc();
    OwningOpRef<ModuleOp> scratch = ModuleOp::create(loc);
    OpBuilder b(ctx);
    b.setInsertionPointToEnd(scratch->getBody());
    auto fn = func::FuncOp::create(b, loc, "table", b.getFunctionType({}, {root.getType()}));
    b.setInsertionPointToEnd(fn.addEntryBlock());
    IRMapping map;
    for (Operation *op : ops)
      b.clone(*op, map);
    func::ReturnOp::create(b, loc, map.lookup(root));
    ScopedDiagnosticHandler capture(ctx, [&](Diagnostic &d) {
      diagnostic = d.str();
      return success();
    });
    FailureOr<std::vector<interp::Tensor>> out = interp::interpret(fn, {});
    if (failed(out))
      return failure();
    RankedTensorType type = rtt(root);
    auto ft = cast<FloatType>(type.getElementType());
    SmallVector<APFloat> values;
    values.reserve(type.getNumElements());
    for (double v : (*out)[0].data) {
      APFloat x(v);
      bool lost = false;
      x.convert(ft.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
      values.push_back(x);
    }
    return DenseElementsAttr::get(type, values);
  }

  func::FuncOp fn_;
  int64_t maxBytes_;
  llvm::SetVector<Operation *> positionOnly_;
  llvm::DenseSet<Operation *> costly_;
};

// Removes the tg ops nobody reads any more (the subgraphs tables and
// rotations replaced); tg ops are pure.
void eraseDeadOps(func::FuncOp fn) {
  SmallVector<Operation *> ops;
  for (Operation &op : fn.getBody().front())
    ops.push_back(&op);
  for (Operation *op : llvm::reverse(ops))
    if (isa<tg::TgDialect>(op->getDialect()) && op->use_empty())
      op->erase();
}

struct TgCacheRopePass : tcc::impl::TgCacheRopeBase<TgCacheRopePass> {
  using TgCacheRopeBase::TgCacheRopeBase;

  void runOnOperation() override {
    getOperation().walk([&](func::FuncOp fn) {
      if (fn.isExternal())
        return;
      TableCacher(fn, maxTableBytes).run();
      SmallVector<Operation *> roots;
      for (Operation &op : fn.getBody().front())
        if (isa<tg::AddOp, tg::ConcatOp>(op))
          roots.push_back(&op);
      OpBuilder b(fn.getContext());
      for (Operation *root : roots) {
        if (root->use_empty())
          continue; // part of a rotation fused already
        Value fused;
        std::string decision = rope::fuseRotation(b, root, fused);
        if (decision.empty())
          continue;
        Operation *at = fused ? fused.getDefiningOp() : root;
        at->setAttr(model::kCacheRopeAttr, b.getStringAttr(decision));
      }
      eraseDeadOps(fn);
    });
  }
};

} // namespace

namespace tcc {

void writeCacheRopeReport(ModuleOp module, llvm::raw_ostream &os) {
  os << "# tg-cache-rope report: position-only tables computed at compile time\n"
        "# (cached) and rotations fused into tg.rope, with what was left and why\n";
  os << llvm::formatv("{0,-32} {1,-12} {2}\n", "# node", "op", "decision: why");
  int cached = 0, fused = 0, notCached = 0, notFused = 0;
  int64_t tableBytes = 0;
  module.walk([&](Operation *op) {
    auto why = op->getAttrOfType<StringAttr>(model::kCacheRopeAttr);
    if (!why)
      return;
    os << llvm::formatv("{0,-32} {1,-12} {2}\n", tcc::nodeName(op->getLoc()),
                        op->getName().getStringRef(), why.getValue());
    StringRef kind = why.getValue().split(':').first;
    if (kind == "cached" && op->getNumResults() == 1 && !op->use_empty()) {
      ++cached;
      tableBytes += tensorBytes(rtt(op->getResult(0)));
    }
    fused += kind == "fused";
    notCached += kind == "not cached";
    notFused += kind == "not fused";
  });
  os << llvm::formatv("# summary: {0} tables cached ({1} of constant data), {2} "
                      "rotations fused into tg.rope, {3} not cached, {4} not fused\n",
                      cached, bytesText(tableBytes), fused, notCached, notFused);
}

} // namespace tcc
