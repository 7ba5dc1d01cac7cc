//===- FuseHorizontal.cpp - independent kernels with one body -> one launch ===//
//
// The train step ends in one optimizer kernel per parameter, computes the
// global gradient norm with one sum per gradient, and starts with one cast
// per weight: hundreds of launches that each do little. This pass groups
//
//   - kern.elementwise kernels with the same body (op by op, attributes and
//     element types included) whose inputs are each either of the kernel's
//     element count or a single element (a learning rate, a clip scale, a
//     step: no other broadcast), into one kern.multi_elementwise;
//   - kern.reduce sums of a whole tensor into one element, of one element
//     type, into one kern.multi_sum.
//
// First, squares are folded into their sums: a whole-tensor f32 kern.reduce
// sum whose input is a temporary that one kern.elementwise writes as
// `x * x` (x an input of the kernel, widened from bf16 / f16 or not, or
// another of its outputs) and nothing else reads becomes a one-member
// kern.multi_sum with `squares` reading x's buffer, and the kernel stops
// writing the square (and goes when it wrote nothing else). The global
// gradient norm wrote an f32 square of every bf16 gradient (6 bytes per
// parameter) for the sum to read (4 more): now the sum reads the 2-byte
// gradient, and the values added are the same (the square in f32, then
// added in f64). Folded sums group with each other like the plain ones.
//
// A group runs where its first kernel ran; a later kernel may join when
// moving it there changes nothing: it reads no buffer that a member writes
// and writes none that a member reads or writes (members run at once), no
// op between the first kernel and it writes what it reads or touches what
// it writes, and no gemm or attention lies between (the hoisted buffers
// would stay alive across the big kernels: only light stretches of the
// step, like the optimizer tail and the norm, are grouped). The buffers it
// uses that are allocated later (kern.alloc, kern.reshape views) move up.
//
// Each group carries kern.fuse_horizontal = "group N: K kernels: nodes";
// a kernel refused by a group of its body says why in the same attribute;
// @train_step's kern.fuse_horizontal counts everything (the report
// --dump-dir writes). Runs after kern-fuse-elementwise, before
// kern-plan-memory (temporaries are still distinct kern.allocs).
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "passes/common/NodeNames.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/FormatVariadic.h"

#include <vector>

namespace tcc {
#define GEN_PASS_DEF_KERNFUSEHORIZONTAL
#include "passes/Passes.h.inc"
} // namespace tcc

using namespace mlir;
using namespace tcc;

namespace {

constexpr llvm::StringLiteral kDecisionAttr = "kern.fuse_horizontal";
// Elements per block of kern.multi_sum's first CUDA pass.
constexpr int64_t kSumChunk = 65536;

MemRefType mrt(Value v) { return cast<MemRefType>(v.getType()); }

// The body as text, values numbered by definition: two bodies with the same
// text compute the same function of their arguments.
std::string bodyKey(Block &body) {
  llvm::DenseMap<Value, unsigned> number;
  for (BlockArgument a : body.getArguments())
    number[a] = number.size();
  std::string key;
  llvm::raw_string_ostream os(key);
  for (Operation &op : body) {
    os << op.getName() << "(";
    for (Value v : op.getOperands())
      os << number.lookup(v) << ",";
    os << ")" << op.getAttrDictionary() << ":";
    for (Type t : op.getResultTypes())
      os << t << ",";
    os << ";";
    for (Value r : op.getResults())
      number[r] = number.size();
  }
  return key;
}

// A kernel that may be grouped: what it reads and writes (root buffers) and
// the key a group's members share.
struct Candidate {
  Operation *op;
  std::string key;
  llvm::SmallPtrSet<Value, 8> reads, writes;
};

struct Group {
  std::string key;
  SmallVector<Candidate *> members;
  llvm::SmallPtrSet<Value, 32> reads, writes;
};

bool isHeavy(Operation *op) {
  return isa<kern::GemmOp, kern::AttentionOp, kern::AttentionGradOp>(op);
}

// Why `c` cannot run at `g`'s first kernel with it, or "" when it can.
// `position` numbers the block's ops in their original order.
std::string refusal(const Group &g, const Candidate &c,
                    const llvm::DenseMap<Operation *, int64_t> &position) {
  for (Value w : c.writes)
    if (g.reads.contains(w) || g.writes.contains(w))
      return "writes a buffer another member of the group reads or writes";
  for (Value r : c.reads)
    if (g.writes.contains(r))
      return "reads a buffer another member of the group writes (dependent)";
  Operation *anchor = g.members.front()->op;
  int64_t from = position.lookup(anchor);
  for (Value v : c.op->getOperands()) {
    // Defined after the group starts: only buffers (allocs, views) move up.
    for (Value d = v; Operation *def = d.getDefiningOp();) {
      if (position.lookup(def) < from)
        break;
      if (auto view = dyn_cast<kern::ReshapeOp>(def)) {
        d = view.getInput();
        continue;
      }
      if (!isa<kern::AllocOp>(def))
        return "an operand is computed after the group's first kernel";
      break;
    }
  }
  llvm::SmallPtrSet<Operation *, 32> members;
  for (Candidate *m : g.members)
    members.insert(m->op);
  for (Operation *op = anchor->getNextNode(); op && op != c.op; op = op->getNextNode()) {
    if (members.contains(op) || isa<kern::AllocOp, kern::ReshapeOp, kern::ConstantOp>(op))
      continue;
    if (isHeavy(op))
      return llvm::formatv("{0} ({1}) lies between it and the group's first kernel: "
                           "grouping would keep buffers alive across it",
                           op->getName(), nodeName(op->getLoc()))
          .str();
    for (Value v : op->getOperands()) {
      if (!isa<MemRefType>(v.getType()))
        continue;
      Value root = kern::rootBuffer(v);
      if (c.writes.contains(root))
        return llvm::formatv("{0} ({1}) between the group's first kernel and it "
                             "uses a buffer it writes",
                             op->getName(), nodeName(op->getLoc()))
            .str();
      if (c.reads.contains(root) && kern::writesBuffer(op, v))
        return llvm::formatv("{0} ({1}) between the group's first kernel and it "
                             "writes a buffer it reads",
                             op->getName(), nodeName(op->getLoc()))
            .str();
    }
  }
  return "";
}

// Moves the definitions of `op`'s operands that come after `anchor` (allocs
// and the views on them) up, right before `anchor`, in their order.
void hoistOperands(Operation *op, Operation *anchor) {
  for (Value v : op->getOperands()) {
    SmallVector<Operation *> chain;
    for (Value d = v; Operation *def = d.getDefiningOp();) {
      if (def->getBlock() != anchor->getBlock() || def->isBeforeInBlock(anchor))
        break;
      chain.push_back(def);
      if (auto view = dyn_cast<kern::ReshapeOp>(def))
        d = view.getInput();
      else
        break;
    }
    for (Operation *def : llvm::reverse(chain))
      def->moveBefore(anchor);
  }
}

Location groupLoc(OpBuilder &b, const Group &g) {
  std::string first = nodeName(g.members.front()->op->getLoc());
  return NameLoc::get(b.getStringAttr(
      llvm::formatv("{0} (+{1} more)", first, g.members.size() - 1).str()));
}

std::string decision(int id, const Group &g) {
  std::string s = llvm::formatv("group {0}: {1} kernels:", id, g.members.size()).str();
  for (Candidate *m : g.members)
    s += " " + nodeName(m->op->getLoc()) + ",";
  s.pop_back();
  return s;
}

// What one pass over a function decided.
struct Tally {
  int groups = 0, grouped = 0, refused = 0, alone = 0, notCandidates = 0;
  int squaresFolded = 0;
  int64_t squareBytes = 0; // f32 squares no longer written and read
};

// The buffer whose elements `r` sums the squares of, when its input is a
// temporary only `producer` writes (as x * x, see the file comment) and
// only `r` reads, and nothing between them writes that buffer; sets
// `producer` and `slot` (the square's output). Else null.
Value squaredSource(kern::ReduceOp r, kern::ElementwiseOp &producer, unsigned &slot) {
  Value x = r.getInput();
  MemRefType in = mrt(x);
  if (r.getKind() != kern::ReduceKind::sum || !in.getElementType().isF32() ||
      !mrt(r.getOut()).getElementType().isF32() ||
      static_cast<int64_t>(r.getAxes().size()) != in.getRank() || in.getNumElements() == 0 ||
      !x.getDefiningOp<kern::AllocOp>())
    return {};
  producer = {};
  for (Operation *user : x.getUsers()) {
    if (user == r.getOperation())
      continue;
    auto e = dyn_cast<kern::ElementwiseOp>(user);
    if (!e || producer || !llvm::is_contained(e.getOutputs(), x) ||
        llvm::is_contained(e.getInputs(), x))
      return {};
    producer = e;
  }
  if (!producer || producer->getBlock() != r->getBlock() || !producer->isBeforeInBlock(r))
    return {};
  slot = llvm::find(producer.getOutputs(), x) - producer.getOutputs().begin();
  Block &body = producer.getBodyBlock();
  auto yield = cast<kern::YieldOp>(body.getTerminator());
  auto square = yield.getOperand(slot).getDefiningOp<arith::MulFOp>();
  if (!square || square.getLhs() != square.getRhs() || !square.getType().isF32())
    return {};
  // x itself: widened from a 16-bit input, an f32 input, or another output.
  Value v = square.getLhs();
  Type widenedFrom;
  if (auto ext = v.getDefiningOp<arith::ExtFOp>()) {
    widenedFrom = ext.getIn().getType();
    v = ext.getIn();
  }
  Value source;
  bool fromInput = false;
  if (auto arg = dyn_cast<BlockArgument>(v); arg && arg.getOwner() == &body &&
                                             arg.getArgNumber() < producer.getInputs().size()) {
    Value input = producer.getInputs()[arg.getArgNumber()];
    if (mrt(input).getShape() == producer.getShape()) {
      source = input;
      fromInput = true;
    }
  }
  for (auto [j, out] : llvm::enumerate(producer.getOutputs()))
    if (!source && j != slot && yield.getOperand(j) == v)
      source = out;
  if (!source)
    return {};
  Type et = mrt(source).getElementType();
  if (widenedFrom ? !(et.isBF16() || et.isF16()) : !et.isF32())
    return {};
  Value root = kern::rootBuffer(source);
  // An input the kernel also writes (in place) holds the new values after
  // it, not the x it squared.
  for (Value out : producer.getOutputs())
    if (fromInput && kern::rootBuffer(out) == root)
      return {};
  for (Operation *op = producer->getNextNode(); op != r.getOperation(); op = op->getNextNode())
    for (Value operand : op->getOperands())
      if (isa<MemRefType>(operand.getType()) && kern::rootBuffer(operand) == root &&
          kern::writesBuffer(op, operand))
        return {};
  return source;
}

// Folds squares into their sums (the file comment): each becomes a
// one-member kern.multi_sum with `squares` where the sum was.
void foldSquaresIntoSums(func::FuncOp f, Tally &tally) {
  SmallVector<kern::ReduceOp> sums(f.getOps<kern::ReduceOp>());
  for (kern::ReduceOp r : sums) {
    kern::ElementwiseOp producer;
    unsigned slot = 0;
    Value source = squaredSource(r, producer, slot);
    if (!source)
      continue;
    OpBuilder b(r);
    int64_t n = mrt(source).getNumElements();
    auto partialsType =
        MemRefType::get({kern::MultiSumOp::partialsFor({n}, kSumChunk)}, b.getF64Type());
    Value partials = kern::AllocOp::create(b, r.getLoc(), partialsType);
    kern::MultiSumOp::create(b, r.getLoc(), ValueRange{source}, ValueRange{r.getOut()},
                             partials, b.getI64IntegerAttr(kSumChunk), b.getUnitAttr());
    Value square = r.getInput();
    r->erase();
    // The producer without the square's output.
    SmallVector<Value> outputs;
    for (auto [j, out] : llvm::enumerate(producer.getOutputs()))
      if (j != slot)
        outputs.push_back(out);
    if (!outputs.empty()) {
      OpBuilder pb(producer);
      auto trimmed = kern::ElementwiseOp::create(pb, producer.getLoc(), producer.getInputs(),
                                                 outputs);
      trimmed->setAttrs(producer->getDiscardableAttrDictionary());
      trimmed.getBody().takeBody(producer.getBody());
      trimmed.getBodyBlock().getTerminator()->eraseOperand(slot);
    }
    producer->erase();
    ++tally.squaresFolded;
    tally.squareBytes += 2 * mrt(square).getNumElements() * 4;
    if (square.use_empty())
      square.getDefiningOp()->erase();
  }
}

// Groups `candidates` (in block order): each joins the latest group of its
// key that takes it, or starts one. Returns the groups of two or more;
// refused candidates left alone get their reason.
std::vector<Group> formGroups(SmallVectorImpl<Candidate> &candidates,
                              const llvm::DenseMap<Operation *, int64_t> &position,
                              Tally &tally) {
  std::vector<Group> groups;
  llvm::StringMap<SmallVector<size_t>> byKey; // group indices, oldest first
  llvm::DenseMap<Operation *, std::string> why;
  for (Candidate &c : candidates) {
    SmallVector<size_t> &open = byKey[c.key];
    bool joined = false;
    // The latest few groups of this key: enough for alternating bodies.
    for (size_t t = 0; t < open.size() && t < 4 && !joined; ++t) {
      Group &g = groups[open[open.size() - 1 - t]];
      std::string no = refusal(g, c, position);
      if (!no.empty()) {
        why[c.op] = no;
        continue;
      }
      g.members.push_back(&c);
      g.reads.insert(c.reads.begin(), c.reads.end());
      g.writes.insert(c.writes.begin(), c.writes.end());
      joined = true;
    }
    if (joined)
      continue;
    Group g;
    g.key = c.key;
    g.members.push_back(&c);
    g.reads.insert(c.reads.begin(), c.reads.end());
    g.writes.insert(c.writes.begin(), c.writes.end());
    open.push_back(groups.size());
    groups.push_back(std::move(g));
  }
  std::vector<Group> result;
  Builder b(candidates.empty() ? nullptr : candidates.front().op->getContext());
  for (Group &g : groups) {
    if (g.members.size() >= 2) {
      tally.grouped += g.members.size();
      result.push_back(std::move(g));
      continue;
    }
    Operation *op = g.members.front()->op;
    auto it = why.find(op);
    if (it == why.end()) {
      ++tally.alone;
      continue;
    }
    ++tally.refused;
    op->setAttr(kDecisionAttr, b.getStringAttr("not grouped: " + it->second));
  }
  return result;
}

// Why `e` is no candidate, or "".
std::string notElementwiseCandidate(kern::ElementwiseOp e) {
  int64_t n = mrt(e.getOutputs()[0]).getNumElements();
  if (n == 0)
    return "empty";
  llvm::SmallPtrSet<Value, 4> written;
  for (Value out : e.getOutputs())
    written.insert(kern::rootBuffer(out));
  for (Value in : e.getInputs()) {
    int64_t count = mrt(in).getNumElements();
    if (count != n && count != 1)
      return "broadcast input";
    if (count != n && written.contains(kern::rootBuffer(in)))
      return "a single-element input aliases an output";
  }
  return "";
}

void groupElementwise(func::FuncOp f, int &nextId, Tally &tally) {
  llvm::DenseMap<Operation *, int64_t> position;
  for (Operation &op : f.getBody().front())
    position[&op] = position.size();
  SmallVector<Candidate> candidates;
  for (kern::ElementwiseOp e : f.getOps<kern::ElementwiseOp>()) {
    if (!notElementwiseCandidate(e).empty()) {
      ++tally.notCandidates;
      continue;
    }
    Candidate c{e, "", {}, {}};
    MemRefType outType = mrt(e.getOutputs()[0]);
    int64_t n = outType.getNumElements();
    llvm::raw_string_ostream key(c.key);
    for (Value in : e.getInputs()) {
      // Read at the position or at 0. In a one-element kernel both are
      // element 0: an input shaped like the output counts as positional,
      // so a size-1 parameter's update groups with the others.
      bool positional = n == 1 ? mrt(in).getShape() == outType.getShape()
                               : mrt(in).getNumElements() == n;
      key << mrt(in).getElementType() << (positional ? "[n]," : "[1],");
      c.reads.insert(kern::rootBuffer(in));
    }
    key << "->";
    for (Value out : e.getOutputs()) {
      key << mrt(out).getElementType() << ",";
      c.writes.insert(kern::rootBuffer(out));
    }
    key << bodyKey(e.getBodyBlock());
    candidates.push_back(std::move(c));
  }
  for (Group &g : formGroups(candidates, position, tally)) {
    Operation *anchor = g.members.front()->op;
    for (Candidate *m : g.members)
      hoistOperands(m->op, anchor);
    SmallVector<Value> inputs, outputs;
    for (Candidate *m : g.members) {
      auto e = cast<kern::ElementwiseOp>(m->op);
      inputs.append(e.getInputs().begin(), e.getInputs().end());
      outputs.append(e.getOutputs().begin(), e.getOutputs().end());
    }
    OpBuilder b(anchor);
    auto multi = kern::MultiElementwiseOp::create(
        b, groupLoc(b, g), inputs, outputs,
        b.getI64IntegerAttr(static_cast<int64_t>(g.members.size())));
    multi.getBody().takeBody(cast<kern::ElementwiseOp>(anchor).getBody());
    multi->setAttr(kDecisionAttr, b.getStringAttr(decision(nextId++, g)));
    ++tally.groups;
    for (Candidate *m : g.members)
      m->op->erase();
  }
}

void groupSums(func::FuncOp f, int &nextId, Tally &tally) {
  llvm::DenseMap<Operation *, int64_t> position;
  for (Operation &op : f.getBody().front())
    position[&op] = position.size();
  SmallVector<Candidate> candidates;
  for (Operation &op : f.getBody().front()) {
    Value input, out;
    bool squares = false;
    if (auto r = dyn_cast<kern::ReduceOp>(op)) {
      MemRefType in = mrt(r.getInput());
      if (r.getKind() != kern::ReduceKind::sum ||
          static_cast<int64_t>(r.getAxes().size()) != in.getRank() ||
          in.getNumElements() == 0 ||
          mrt(r.getOut()).getElementType() != in.getElementType())
        continue; // not a whole-tensor sum of one type: no candidate, not reported
      input = r.getInput();
      out = r.getOut();
    } else if (auto m = dyn_cast<kern::MultiSumOp>(op);
               m && m.getInputs().size() == 1 && m.getSquares()) {
      input = m.getInputs()[0]; // a square folded in above
      out = m.getOutputs()[0];
      squares = true;
    } else {
      continue;
    }
    Candidate c{&op, "", {}, {}};
    llvm::raw_string_ostream key(c.key);
    key << (squares ? "sum of squares " : "sum ") << mrt(input).getElementType();
    c.reads.insert(kern::rootBuffer(input));
    c.writes.insert(kern::rootBuffer(out));
    candidates.push_back(std::move(c));
  }
  for (Group &g : formGroups(candidates, position, tally)) {
    Operation *anchor = g.members.front()->op;
    for (Candidate *m : g.members)
      hoistOperands(m->op, anchor);
    SmallVector<Value> inputs, outputs, oldPartials;
    SmallVector<int64_t> counts;
    const bool squares = isa<kern::MultiSumOp>(anchor);
    for (Candidate *m : g.members) {
      if (auto r = dyn_cast<kern::ReduceOp>(m->op)) {
        inputs.push_back(r.getInput());
        outputs.push_back(r.getOut());
      } else {
        auto one = cast<kern::MultiSumOp>(m->op);
        inputs.push_back(one.getInputs()[0]);
        outputs.push_back(one.getOutputs()[0]);
        oldPartials.push_back(one.getPartials());
      }
      counts.push_back(mrt(inputs.back()).getNumElements());
    }
    OpBuilder b(anchor);
    Location loc = groupLoc(b, g);
    auto partialsType = MemRefType::get(
        {kern::MultiSumOp::partialsFor(counts, kSumChunk)}, b.getF64Type());
    Value partials = kern::AllocOp::create(b, loc, partialsType);
    auto multi = kern::MultiSumOp::create(b, loc, inputs, outputs, partials,
                                          b.getI64IntegerAttr(kSumChunk),
                                          squares ? b.getUnitAttr() : UnitAttr());
    multi->setAttr(kDecisionAttr, b.getStringAttr(decision(nextId++, g)));
    ++tally.groups;
    for (Candidate *m : g.members)
      m->op->erase();
    for (Value p : oldPartials)
      if (p.use_empty())
        p.getDefiningOp()->erase();
  }
}

struct KernFuseHorizontalPass
    : tcc::impl::KernFuseHorizontalBase<KernFuseHorizontalPass> {
  using Base::Base;
  void runOnOperation() override {
    if (!enabled)
      return;
    ModuleOp module = getOperation();
    int nextId = 0;
    Tally tally;
    for (func::FuncOp f : module.getOps<func::FuncOp>()) {
      if (f.getBody().empty())
        continue;
      foldSquaresIntoSums(f, tally);
      groupElementwise(f, nextId, tally);
      groupSums(f, nextId, tally);
    }
    // The count, for the report: on the train step (the function the
    // groups are for), or the first function.
    func::FuncOp target = module.lookupSymbol<func::FuncOp>("train_step");
    if (!target && !module.getOps<func::FuncOp>().empty())
      target = *module.getOps<func::FuncOp>().begin();
    if (target)
      target->setAttr(
          kDecisionAttr,
          StringAttr::get(
              module.getContext(),
              llvm::formatv("{0} groups of {1} kernels; {2} refused by a group of their "
                            "body, {3} alone with their body, {4} elementwise with a "
                            "broadcast input{5} (all functions)",
                            tally.groups, tally.grouped, tally.refused, tally.alone,
                            tally.notCandidates,
                            tally.squaresFolded == 0
                                ? std::string()
                                : llvm::formatv("; {0} squares folded into their sums "
                                                "({1:F1} MiB of f32 squares neither "
                                                "written nor read)",
                                                tally.squaresFolded,
                                                tally.squareBytes / 1048576.0)
                                      .str())
                  .str()));
  }
};

} // namespace

void tcc::writeFuseHorizontalReport(ModuleOp module, llvm::raw_ostream &os) {
  std::string summary;
  for (func::FuncOp f : module.getOps<func::FuncOp>()) {
    if (auto d = f->getAttrOfType<StringAttr>(kDecisionAttr))
      summary = d.getValue().str();
    for (Operation &op : f.getOps())
      if (auto d = op.getAttrOfType<StringAttr>(kDecisionAttr))
        os << "@" << f.getName() << "  " << op.getName() << "  " << nodeName(op.getLoc())
           << "  " << d.getValue() << "\n";
  }
  os << (summary.empty() ? "nothing grouped: kern-fuse-horizontal is off (tcc compile "
                            "--no-fuse-horizontal)"
                          : summary)
     << "\n";
}
