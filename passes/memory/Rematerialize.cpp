//===- Rematerialize.cpp - recompute forward values to fit a memory budget ===//
//
// A train step keeps every forward value the backward reads alive from the
// forward to its backward reader: at the end of the forward (the loss) all
// of them are live at once, and that is the step's peak. This pass trades
// FLOPs for bytes: it drops a value across the peak and computes it again,
// by clones of the ops that made it, right before its first reader after
// the peak.
//
// The model of memory is the tensors of the function's top-level ops in
// program order: each result lives from its op to its last reader
// (tg.reshape results are views of their operand and extend its life);
// function arguments (parameters, optimizer state, inputs) and results
// (outputs, parameters and state updated in place) lie outside it, as they
// lie outside kern-plan-memory's arena. Greedy, one value at a time:
//
//   1. Find the peak: the op where the live bytes are largest. Stop when
//      they are at most `budget` (or budget < 0: report only).
//   2. Each value live across the peak (made before it, read after it, not
//      read by the peak op) is a candidate. Its recipe is its op plus,
//      transitively, the ops of operands that are not live at the
//      recompute point themselves (a tg.layer_norm whose f32 result died at
//      its cast); operands that are live anyway (the residual the norm's
//      gradient reads, the parameters) cost nothing. A recipe frees every
//      result of its ops that is live across the peak (both results of a
//      gelu GEMM: the output and the saved pre-activation) and keeps alive
//      any operand it cannot recompute (bytes charged against it).
//   3. Take the candidate with the least estimated time per byte freed
//      (GEMMs and attention by FLOPs, everything else by bytes moved, at a
//      nominal GPU's rates: the order, not the seconds, matters), clone its
//      recipe before the first reader after the peak, and point every
//      reader after the peak at the clones. Repeat.
//
// Cheap recomputes come first (bf16 copies of weights, norms, elementwise),
// then GEMMs in order of FLOPs per byte, attention when nothing cheaper is
// left. The clones compute exactly what the originals did (the same ops on
// the same values), so the step's results are bit-identical.
//
// Each clone carries tg.remat = "recomputed for <readers>: ..." and
// @train_step's tg.remat_decisions lists every choice with its bytes freed
// and FLOPs added, and, at the last peak, the largest values left and why
// (the report --dump-dir writes). Runs on @train_step after the last CSE
// (which would merge the clones back into the originals), before
// tg-lower-to-kern; tcc compile --memory-budget sets the budget.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "passes/common/DecisionReport.h"
#include "passes/common/NodeNames.h"
#include "passes/common/TensorBytes.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <vector>

namespace tcc {
#define GEN_PASS_DEF_TGREMAT
#include "passes/Passes.h.inc"
} // namespace tcc

using namespace mlir;
using namespace tcc;

namespace {

constexpr llvm::StringLiteral kCloneAttr = "tg.remat";
constexpr llvm::StringLiteral kDecisionsAttr = "tg.remat_decisions";

// Nominal rates for ranking recipes: dense 16-bit tensor-core GEMMs and
// HBM bandwidth of a current datacenter GPU, plus a launch.
constexpr double kFlopsPerSecond = 400e12;
constexpr double kBytesPerSecond = 2.5e12;
constexpr double kLaunchSeconds = 4e-6;
// A recipe recomputes at most this many ops (a layer's worth).
constexpr size_t kMaxRecipeOps = 24;

bool isLayoutOp(Operation *op) { return isa<tg::TransposeOp, tg::SliceOp>(op); }

// Ops that only move elements: a broadcast (nearest upsampling), a
// concatenation (a UNet's skip), a transpose, a slice or a reshape. Their
// recompute costs bandwidth and no arithmetic, and they are few and large.
// Casts are not among them: recomputing tg-amp's bf16 copy of an f32
// activation reads twice the bytes it frees, once per layer (ViT-S/16 on
// an H200: 25 casts, 9% less memory for a 4% slower step), and a weight's
// copy is made once per step for every micro-batch, cast with the others
// in one launch (kern-fuse-horizontal).
bool isCopyOp(Operation *op) {
  return isa<tg::BroadcastToOp, tg::ConcatOp, tg::TransposeOp, tg::SliceOp, tg::ReshapeOp>(op);
}

// Through reshapes, transposes and slices: does v reach an attention op?
bool feedsAttention(Value v, int depth = 0) {
  for (Operation *user : v.getUsers()) {
    if (isa<tg::AttentionOp, tg::AttentionGradOp>(user))
      return true;
    if (depth < 4 && (isa<tg::ReshapeOp>(user) || isLayoutOp(user)) &&
        feedsAttention(user->getResult(0), depth + 1))
      return true;
  }
  return false;
}
bool fromAttention(Value v) {
  for (int depth = 0; depth < 4; ++depth) {
    Operation *def = v.getDefiningOp();
    if (!def)
      return false;
    if (isa<tg::AttentionOp, tg::AttentionGradOp>(def))
      return true;
    if (!isa<tg::ReshapeOp>(def) && !isLayoutOp(def))
      return false;
    v = def->getOperand(0);
  }
  return false;
}

// Ops that own no bytes after lowering: reshapes, and the slices and
// transposes around attention (kern-fold-attention-layout turns them into
// the attention kernels' strides).
bool isView(Operation *op) {
  if (isa<tg::ReshapeOp>(op))
    return true;
  return isLayoutOp(op) && (fromAttention(op->getOperand(0)) || feedsAttention(op->getResult(0)));
}

// Why `op` may not be recomputed ("" when it may).
std::string whyNotRecomputable(Operation *op) {
  if (!isa<tg::TgDialect>(op->getDialect()))
    return "it is not a tg op";
  if (op->getNumRegions())
    return "it has regions";
  // Atomic accumulation: the order of the adds, hence the bits, may differ.
  if (isa<tg::ScatterAddOp, tg::AttentionGradOp>(op))
    return "its GPU kernel accumulates with atomics (the bits could differ)";
  if (isa<tg::AdamWUpdateOp, tg::SgdUpdateOp, tg::MomentumUpdateOp>(op))
    return "it is an optimizer update";
  for (Type t : op->getResultTypes())
    if (!isa<RankedTensorType>(t))
      return "a result is not a tensor";
  return "";
}

// Floating-point operations of the GEMMs and attention (what bounds them);
// 0 for the rest.
double opFlops(Operation *op) {
  if (isa<tg::MatmulOp, tg::MatmulEpilogueOp, tg::MatmulDgeluOp, tg::MatmulBiasGradOp>(op)) {
    auto lhs = cast<RankedTensorType>(op->getOperand(0).getType());
    int64_t rank = lhs.getRank();
    auto transposed = op->getAttrOfType<BoolAttr>("transpose_lhs");
    int64_t k = transposed && transposed.getValue() ? lhs.getDimSize(rank - 2)
                                                    : lhs.getDimSize(rank - 1);
    auto result = cast<RankedTensorType>(op->getResult(0).getType());
    return 2.0 * static_cast<double>(result.getNumElements()) * static_cast<double>(k);
  }
  if (auto attention = dyn_cast<tg::AttentionOp>(op)) {
    auto q = cast<RankedTensorType>(attention.getQ().getType());   // (B, H, T, D)
    auto k = cast<RankedTensorType>(attention.getK().getType());   // (B, Hkv, S, D)
    double flops = 4.0 * q.getNumElements() * k.getDimSize(2);
    return attention.getCausal() ? flops / 2 : flops;
  }
  return 0;
}

// Bytes an op reads and writes (views move nothing).
double opBytes(Operation *op) {
  if (isView(op))
    return 0;
  double bytes = 0;
  for (Value v : op->getOperands())
    bytes += tensorBytes(v.getType());
  for (Value v : op->getResults())
    bytes += tensorBytes(v.getType());
  return bytes;
}

double opSeconds(Operation *op) {
  if (isView(op))
    return 0;
  return std::max(opFlops(op) / kFlopsPerSecond, opBytes(op) / kBytesPerSecond) +
         kLaunchSeconds;
}

std::string bytesText(double bytes) { return formatBytes(static_cast<int64_t>(bytes)); }
std::string gflop(double flops) {
  if (flops >= 1e9)
    return llvm::formatv("{0:F2} GFLOP", flops / 1e9).str();
  return llvm::formatv("{0:F2} MFLOP", flops / 1e6).str();
}

// Live ranges of the top-level values of one block, in program order.
class Liveness {
public:
  explicit Liveness(Block &block) {
    for (Operation &op : block)
      position_[&op] = static_cast<int64_t>(ops_.size()), ops_.push_back(&op);
    // Returned values are written to the step's outputs or, for updated
    // parameters and optimizer state, in place: not temporaries.
    llvm::DenseSet<Value> returned;
    if (!ops_.empty() && ops_.back()->hasTrait<OpTrait::IsTerminator>())
      for (Value v : ops_.back()->getOperands())
        returned.insert(v);
    for (Operation *op : ops_)
      for (Value r : op->getResults())
        if (!isView(op) && !returned.count(r))
          end_[r] = lastReader(r, position_[op]);
  }

  Operation *op(int64_t i) const { return ops_[i]; }
  int64_t position(Operation *op) const { return position_.lookup(topLevel(op)); }
  // The value a view chain aliases.
  static Value root(Value v) {
    while (v.getDefiningOp() && isView(v.getDefiningOp()))
      v = v.getDefiningOp()->getOperand(0);
    return v;
  }
  // Values that own bytes: results of top-level non-view ops.
  bool owns(Value v) const { return end_.count(v); }
  int64_t def(Value v) const { return position(v.getDefiningOp()); }
  int64_t end(Value v) const { return end_.lookup(v); }
  // Live across p: made before p, read after it, not read at it.
  bool across(Value v, int64_t p) const {
    return owns(v) && def(v) < p && end(v) > p && !readAt(v, p);
  }
  bool readAt(Value v, int64_t p) const {
    for (Operation *user : v.getUsers()) {
      if (position(user) == p)
        return true;
      if (isView(user) && readAt(user->getResult(0), p))
        return true;
    }
    return false;
  }

  // The op index with the most live bytes, and those bytes.
  std::pair<int64_t, int64_t> peak() const {
    std::vector<int64_t> delta(ops_.size() + 1, 0);
    for (auto &[v, e] : end_) {
      int64_t bytes = tensorBytes(v.getType());
      delta[def(v)] += bytes;
      delta[e + 1] -= bytes;
    }
    int64_t live = 0, best = -1, at = -1;
    for (size_t i = 0; i < ops_.size(); ++i) {
      live += delta[i];
      if (live > best)
        best = live, at = static_cast<int64_t>(i);
    }
    return {at, std::max<int64_t>(best, 0)};
  }

private:
  Operation *topLevel(Operation *op) const {
    while (op && !position_.count(op))
      op = op->getParentOp();
    return op;
  }
  int64_t lastReader(Value v, int64_t from) const {
    int64_t last = from;
    for (Operation *user : v.getUsers()) {
      last = std::max(last, position(user));
      if (isView(user))
        last = std::max(last, lastReader(user->getResult(0), from));
    }
    return last;
  }

  std::vector<Operation *> ops_;
  llvm::DenseMap<Operation *, int64_t> position_;
  llvm::DenseMap<Value, int64_t> end_;
};

// One candidate: the ops to clone (a recipe) and what it frees at the peak.
struct Recipe {
  Value value;                           // the candidate
  llvm::SetVector<Operation *> ops;      // to clone (program order after sort)
  llvm::SmallVector<OpOperand *> readers; // readers after the peak, redirected
  double freed = 0, kept = 0;            // bytes freed across the peak, kept alive
  double seconds = 0, flops = 0, bytesMoved = 0;
  std::string whyNot;                    // set: not a usable recipe
  double net() const { return freed - kept; }
};

// Does v (or a view of it) have a reader after p?
bool readAfter(const Liveness &live, Value v, int64_t p) {
  for (Operation *user : v.getUsers())
    if (live.position(user) > p || (isView(user) && readAfter(live, user->getResult(0), p)))
      return true;
  return false;
}

// Readers of v after p. Views of v made before p with readers after it join
// the recipe (the work list collects their readers in turn).
void collectLateReaders(const Liveness &live, Value v, int64_t p, Recipe &recipe,
                        llvm::SmallVectorImpl<Operation *> &work) {
  for (OpOperand &use : v.getUses()) {
    Operation *user = use.getOwner();
    if (user->hasTrait<OpTrait::IsTerminator>()) {
      recipe.whyNot = "it is a result of the step";
    } else if (live.position(user) > p) {
      recipe.readers.push_back(&use);
    } else if (isView(user) && user->getBlock() == v.getParentBlock() &&
               readAfter(live, user->getResult(0), p) && recipe.ops.insert(user)) {
      work.push_back(user);
    }
  }
}

// copiesOnly: the recipe may hold only copy ops (isCopyOp); an operand made
// by anything else is kept alive (charged) instead of recomputed.
Recipe buildRecipe(const Liveness &live, Value value, int64_t p, bool copiesOnly = false) {
  Recipe recipe;
  recipe.value = value;
  llvm::SmallVector<Operation *> work;
  Operation *first = value.getDefiningOp();
  recipe.ops.insert(first);
  work.push_back(first);
  if (copiesOnly && !isCopyOp(first)) {
    recipe.whyNot = "it is not a copy";
    return recipe;
  }
  llvm::DenseSet<Value> charged;
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    if (std::string why = whyNotRecomputable(op); !why.empty()) {
      recipe.whyNot = "its op " + op->getName().getStringRef().str() + " cannot be recomputed: " + why;
      return recipe;
    }
    if (recipe.ops.size() > kMaxRecipeOps) {
      recipe.whyNot = llvm::formatv("recomputing it takes more than {0} ops", kMaxRecipeOps).str();
      return recipe;
    }
    for (Value r : op->getResults()) {
      if (live.across(r, p))
        recipe.freed += tensorBytes(r.getType());
      collectLateReaders(live, r, p, recipe, work);
    }
    for (Value operand : op->getOperands()) {
      Operation *producer = operand.getDefiningOp();
      if (!producer || recipe.ops.count(producer))
        continue; // a function argument (always live), or recomputed too
      Value root = Liveness::root(operand);
      if (root.getDefiningOp() && live.owns(root) && live.end(root) > p)
        continue; // live at the recompute point anyway
      if (!root.getDefiningOp())
        continue; // a view of a function argument
      if (whyNotRecomputable(producer).empty() &&
          (!copiesOnly || isCopyOp(producer))) {
        recipe.ops.insert(producer);
        work.push_back(producer);
      } else if (charged.insert(root).second) {
        recipe.kept += tensorBytes(root.getType());
      }
    }
  }
  // Sort into program order (clones are made in it).
  std::vector<Operation *> sorted(recipe.ops.begin(), recipe.ops.end());
  llvm::sort(sorted, [&](Operation *a, Operation *b) { return live.position(a) < live.position(b); });
  recipe.ops.clear();
  recipe.ops.insert(sorted.begin(), sorted.end());
  for (Operation *op : recipe.ops) {
    recipe.seconds += opSeconds(op);
    recipe.flops += opFlops(op);
    recipe.bytesMoved += opBytes(op);
  }
  if (!recipe.whyNot.empty())
    return recipe;
  if (recipe.readers.empty())
    recipe.whyNot = "no reader after the peak";
  else if (recipe.net() <= 0)
    recipe.whyNot = llvm::formatv("recomputing it keeps {0} alive, not less than the {1} it frees",
                                  bytesText(recipe.kept), bytesText(recipe.freed))
                        .str();
  return recipe;
}

std::string readerNames(const Recipe &recipe) {
  std::vector<std::string> names;
  for (OpOperand *use : recipe.readers)
    if (std::string n = nodeName(use->getOwner()->getLoc()); !llvm::is_contained(names, n))
      names.push_back(n);
  return llvm::join(names, ", ");
}

// Clones the recipe before its first late reader and redirects the readers.
void apply(const Liveness &live, Recipe &recipe, int64_t p, const std::string &note) {
  Operation *first = nullptr;
  for (OpOperand *use : recipe.readers) {
    Operation *owner = use->getOwner();
    while (owner->getBlock() != recipe.value.getParentBlock())
      owner = owner->getParentOp();
    if (!first || live.position(owner) < live.position(first))
      first = owner;
  }
  OpBuilder b(first);
  IRMapping map;
  for (Operation *op : recipe.ops) {
    Operation *clone = b.clone(*op, map);
    clone->setAttr(kCloneAttr, b.getStringAttr(note));
  }
  for (OpOperand *use : recipe.readers)
    use->set(map.lookupOrDefault(use->get()));
}

struct TgRematPass : public tcc::impl::TgRematBase<TgRematPass> {
  using TgRematBase::TgRematBase;

  void runOnOperation() override {
    for (auto f : getOperation().getOps<func::FuncOp>())
      if (f.getName() == "train_step" && !f.getBody().empty())
        rematerialize(f);
  }

  void rematerialize(func::FuncOp f) {
    Block &block = f.getBody().front();
    llvm::SmallVector<Attribute> decisions;
    Builder b(f.getContext());
    Liveness live(block); // rebuilt after each change
    auto [firstAt, before] = live.peak();
    double addedFlops = 0, addedSeconds = 0;
    int choices = 0;
    std::string stop;
    // A bound on choices, far above what a step needs (one per saved value).
    const int maxChoices = 4 * static_cast<int>(block.getOperations().size());
    // The candidate across peak p with the least estimated time per byte
    // freed (copiesOnly: recipes of copies freeing >= copy-min-bytes, 1 MiB
    // by default: below it the launch is the cost).
    auto cheapest = [&](int64_t p, bool copiesOnly) {
      std::optional<Recipe> best;
      for (int64_t i = 0; i < p; ++i)
        for (Value r : live.op(i)->getResults()) {
          if (!live.across(r, p))
            continue;
          Recipe recipe = buildRecipe(live, r, p, copiesOnly);
          if (!recipe.whyNot.empty() || (copiesOnly && recipe.net() < static_cast<double>(copyMinBytes)))
            continue;
          if (!best || recipe.seconds / recipe.net() < best->seconds / best->net())
            best = std::move(recipe);
        }
      return best;
    };
    auto record = [&](Recipe &best, int64_t p, int64_t bytes, llvm::StringRef why) {
      std::string what = nodeName(best.value.getLoc());
      std::string note = llvm::formatv(
          "recomputed for {0} (dropped across op {1}, {2}{3}): frees {4}, adds {5}, {6} moved",
          readerNames(best), p, live.op(p)->getName().getStringRef(), why,
          bytesText(best.net()), gflop(best.flops), bytesText(best.bytesMoved));
      decisions.push_back(b.getStringAttr(
          llvm::formatv("recompute {0} ({1} ops: {2}{3}): peak {4} at op {5}; frees {6}, adds {7}, "
                        "{8} moved, ~{9:F3} ms",
                        what, best.ops.size(), opNames(best), why, bytesText(bytes), p,
                        bytesText(best.net()), gflop(best.flops), bytesText(best.bytesMoved),
                        best.seconds * 1e3)
              .str()));
      addedFlops += best.flops;
      addedSeconds += best.seconds;
      ++choices;
      apply(live, best, p, note);
      live = Liveness(block);
    };
    // 1. Copies (broadcasts, concatenations, ... of values live anyway)
    //    cost only bandwidth: recomputed with or without a budget, as
    //    torch.compile's partitioner recomputes views and copies.
    int copyChoices = 0;
    while (copies && choices < maxChoices) {
      auto [p, bytes] = live.peak();
      std::optional<Recipe> best = cheapest(p, /*copiesOnly=*/true);
      if (!best)
        break;
      record(*best, p, bytes, "; a copy");
      ++copyChoices;
    }
    // 2. Under a budget, anything, cheapest per byte first.
    while (true) {
      auto [p, bytes] = live.peak();
      if (budget < 0) {
        stop = copyChoices ? "no budget: only copies recomputed" : "no budget: nothing recomputed";
        break;
      }
      if (bytes <= budget) {
        stop = llvm::formatv("the estimate fits the budget ({0} <= {1})", bytesText(bytes),
                             bytesText(budget));
        break;
      }
      std::optional<Recipe> best = cheapest(p, /*copiesOnly=*/false);
      if (!best || choices >= maxChoices) {
        stop = llvm::formatv("budget not reached: {0} live at op {1} ({2}) and nothing left "
                             "to recompute there",
                             bytesText(bytes), p, live.op(p)->getName().getStringRef())
                   .str();
        break;
      }
      record(*best, p, bytes, "");
    }
    // Why the largest values at the last peak stay.
    auto [p, after] = live.peak();
    std::vector<std::pair<int64_t, std::string>> left;
    for (int64_t i = 0; i < p; ++i)
      for (Value r : live.op(i)->getResults()) {
        if (!live.owns(r) || live.end(r) < p)
          continue;
        std::string why;
        if (!live.across(r, p))
          why = "read by the peak op";
        else if (Recipe recipe = buildRecipe(live, r, p); !recipe.whyNot.empty())
          why = recipe.whyNot;
        else
          why = budget < 0 ? "no budget" : "the budget is met without it";
        left.push_back({tensorBytes(r.getType()),
                        llvm::formatv("kept {0} ({1}): {2}", nodeName(r.getLoc()),
                                      bytesText(tensorBytes(r.getType())), why)
                            .str()});
      }
    llvm::stable_sort(left, [](auto &a, auto &b) { return a.first > b.first; });
    for (size_t i = 0; i < left.size() && i < 12; ++i)
      decisions.push_back(b.getStringAttr(left[i].second));
    decisions.insert(decisions.begin(),
                     b.getStringAttr(llvm::formatv(
                         "budget {0}; live temporaries peak {1} at op {2} before, {3} at op {4} "
                         "after; {5} values recomputed, {6} added (~{7:F2} ms at nominal "
                         "rates); {8}{9}",
                         budget < 0 ? std::string("none") : bytesText(budget), bytesText(before), firstAt,
                         bytesText(after), p, choices, gflop(addedFlops), addedSeconds * 1e3, stop,
                         !copies ? std::string("; copies kept (copies=false)")
                         : copyChoices ? llvm::formatv("; {0} of them copies", copyChoices).str()
                                       : std::string())
                         .str()));
    f->setAttr(kDecisionsAttr, b.getArrayAttr(decisions));
    // What tcc compile --memory-budget weighs against tg-chunk-loss-head's.
    f->setAttr(kRematSecondsAttr, b.getF64FloatAttr(addedSeconds));
  }

  static std::string opNames(const Recipe &recipe) {
    std::vector<std::string> names;
    for (Operation *op : recipe.ops)
      if (!isView(op))
        names.push_back(op->getName().getStringRef().drop_front(3).str());
    return llvm::join(names, ", ");
  }
};

} // namespace

void tcc::writeRematReport(ModuleOp module, llvm::raw_ostream &os) {
  writeFunctionDecisions(
      module, kDecisionsAttr,
      "# tg-remat: forward values dropped across the step's peak and recomputed before\n"
      "# their readers (budget: tcc compile --memory-budget). Bytes are the pass's\n"
      "# estimate over tensors; kern-plan-memory's report has the plan.\n",
      os);
}
