// tg-cache-frozen: splits off the part of the train step computed from the
// per-sample inputs and frozen parameters only (a frozen encoder feeding a
// trainable head) as the entry @encode, and adds @train_cached, the train
// step reading those values ("cut values") as inputs instead of computing
// them. trun runs @encode once per sample and trains from its cache
// afterwards (docs/runtime.md). Runs after the training recipe (so the
// cached step is @train_step itself with the encoder's values as inputs:
// the same loss, gradients and update), only with tcc compile
// --cache-frozen. Every op of the encoder must keep batch rows apart
// (elementwise, products with a frozen right-hand side, reductions and
// norms over non-batch axes, reshapes keeping the batch leading, conv and
// pooling, ...) so that caching per sample is exact; dropout or an op that
// mixes rows ends the encoder there. The decision, or why nothing was cut,
// is @train_step's tg.cache_frozen (the NN-tg-cache-frozen-report.txt dump).
#include "dialects/common/ModelAttrs.h"
#include "dialects/tg/TgDialect.h"
#include "passes/Passes.h"
#include "passes/common/DecisionReport.h"
#include "passes/common/NodeNames.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/FormatVariadic.h"

#include <map>
#include <set>

namespace tcc {
#define GEN_PASS_DEF_TGCACHEFROZEN
#include "passes/Passes.h.inc"
} // namespace tcc

using namespace mlir;

namespace tcc {
namespace {

constexpr llvm::StringLiteral kDecisionAttr = "tg.cache_frozen";

// Static: from frozen parameters and constants only. Batched: from
// per-sample inputs (and static values), with sample i owning rows
// [i * k, (i + 1) * k) of dimension 0 (so its values are contiguous).
// Other: anything else (trainable parameters, hyper-parameters, a row mix).
enum class Kind { Static, Batched, Other };

RankedTensorType tensorOf(Value v) { return dyn_cast<RankedTensorType>(v.getType()); }

int64_t normalizedAxis(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }

// Why `op`, whose operands are batched or static, does not keep the rows of
// different samples apart; "" when it does.
std::string rowMixing(Operation *op, const llvm::DenseMap<Value, Kind> &kind, int64_t batch) {
  auto batched = [&](Value v) { return kind.lookup(v) == Kind::Batched; };
  auto keepsDim0 = [&](Value in, Value out) {
    auto a = tensorOf(in), b = tensorOf(out);
    return a && b && a.getRank() >= 1 && b.getRank() >= 1 && a.getDimSize(0) == b.getDimSize(0);
  };
  StringRef name = op->getName().stripDialect();
  if (isa<tg::DropoutOp>(op))
    return "dropout in the encoder";
  if (name.contains("batch_norm"))
    return "batch norm mixes rows (train mode normalizes over the batch)";
  if (name.contains("cross_entropy"))
    return "the loss reduces over the batch";
  for (Value r : op->getResults()) {
    auto t = tensorOf(r);
    if (!t || t.getRank() < 1 || t.getDimSize(0) % batch != 0)
      return "its result does not keep the batch leading";
  }
  if (isa<tg::ScalarOpInterface>(op) || isa<tg::CastOp>(op)) {
    // Same shape, any element type: a cast (tg-amp's bf16 input) keeps rows.
    auto shape = tensorOf(op->getResult(0)).getShape();
    for (Value v : op->getOperands())
      if (batched(v) && tensorOf(v).getShape() != shape)
        return "a batched operand is broadcast";
    return "";
  }
  if (auto m = dyn_cast<tg::MatmulOp>(op)) {
    if (m.getTransposeLhs())
      return "the product runs over the batch rows (transposed left-hand side)";
    if (!batched(m.getLhs()))
      return "the batched operand is the right-hand side";
    if (batched(m.getRhs()) && (tensorOf(m.getLhs()).getRank() < 3 ||
                                !keepsDim0(m.getLhs(), m.getRhs())))
      return "a product of two batched values over the batch";
    return "";
  }
  if (isa<tg::ReduceSumOp, tg::ReduceMeanOp, tg::ReduceMaxOp>(op)) {
    int64_t rank = tensorOf(op->getOperand(0)).getRank();
    for (int64_t a : cast<DenseI64ArrayAttr>(op->getAttr("axes")).asArrayRef())
      if (normalizedAxis(a, rank) == 0)
        return "a reduction over the batch axis";
    return keepsDim0(op->getOperand(0), op->getResult(0)) ? "" : "the batch axis is dropped";
  }
  if (isa<tg::SoftmaxOp, tg::LogSoftmaxOp>(op)) {
    auto axis = op->getAttrOfType<IntegerAttr>("axis");
    int64_t rank = tensorOf(op->getOperand(0)).getRank();
    return axis && normalizedAxis(axis.getInt(), rank) != 0 ? "" : "a softmax over the batch axis";
  }
  if (isa<tg::LayerNormOp, tg::RmsNormOp>(op)) {
    for (Value w : op->getOperands().drop_front())
      if (batched(w))
        return "a batched norm weight";
    return tensorOf(op->getOperand(0)).getRank() >= 2 ? "" : "a norm over the batch axis";
  }
  if (isa<tg::ReshapeOp>(op))
    return ""; // the result's dimension 0 is a multiple of the batch (above)
  if (auto t = dyn_cast<tg::TransposeOp>(op))
    return t.getPerm().empty() || t.getPerm()[0] == 0 ? "" : "a transpose moving the batch axis";
  if (auto s = dyn_cast<tg::SliceOp>(op))
    return s.getStarts()[0] == 0 && keepsDim0(s.getInput(), s.getResult()) ? ""
                                                                            : "a slice of the batch";
  if (isa<tg::ConcatOp, tg::SplitOp>(op)) {
    auto axis = op->getAttrOfType<IntegerAttr>("axis");
    int64_t rank = tensorOf(op->getOperand(0)).getRank();
    return axis && normalizedAxis(axis.getInt(), rank) != 0 ? "" : "a concat / split of the batch";
  }
  if (isa<tg::BroadcastToOp>(op))
    return keepsDim0(op->getOperand(0), op->getResult(0)) &&
                   tensorOf(op->getOperand(0)).getRank() == tensorOf(op->getResult(0)).getRank()
               ? ""
               : "a broadcast across the batch";
  if (isa<tg::Conv2dOp, tg::MaxPool2dOp, tg::AvgPool2dOp>(op)) {
    for (Value w : op->getOperands().drop_front())
      if (batched(w))
        return "a batched convolution weight";
    return "";
  }
  if (isa<tg::RopeOp>(op)) { // x (..., T, D) rotated by (T, D) tables shared by every row
    for (Value table : op->getOperands().drop_front())
      if (batched(table))
        return "a batched rotary table";
    return tensorOf(op->getOperand(0)).getRank() >= 3 ? "" : "a rotation over the batch axis";
  }
  if (isa<tg::CausalMaskOp>(op)) // over the last two dims only
    return tensorOf(op->getOperand(0)).getRank() >= 3 ? "" : "a mask over the batch axis";
  if (auto g = dyn_cast<tg::GatherOp>(op))
    return batched(g.getTable()) ? "a lookup into a batched table" : "";
  if (auto a = dyn_cast<tg::AttentionOp>(op)) {
    if (!a.getDropoutRate().isZero() || a.getRngSeed())
      return "dropout in the encoder (attention)";
    return keepsDim0(a.getQ(), a.getK()) && keepsDim0(a.getQ(), a.getV()) ? ""
                                                                          : "attention across the batch";
  }
  return (op->getName().getStringRef() + " is not known to keep batch rows apart").str();
}

// Estimated FLOPs of one encoder op (products and convolutions counted
// exactly, the rest one per result element); `heavy` marks real work.
double opFlops(Operation *op, bool &heavy) {
  auto elements = [](Value v) {
    auto t = tensorOf(v);
    return t ? static_cast<double>(t.getNumElements()) : 0.0;
  };
  if (auto m = dyn_cast<tg::MatmulOp>(op)) {
    heavy = true;
    auto lhs = tensorOf(m.getLhs());
    int64_t k = m.getTransposeLhs() ? lhs.getDimSize(lhs.getRank() - 2)
                                    : lhs.getDimSize(lhs.getRank() - 1);
    return 2.0 * elements(m.getResult()) * static_cast<double>(k);
  }
  if (isa<tg::Conv2dOp>(op)) {
    heavy = true;
    auto w = tensorOf(op->getOperand(1)); // (Cout, Cin / groups, KH, KW)
    return 2.0 * elements(op->getResult(0)) *
           static_cast<double>(w.getDimSize(1) * w.getDimSize(2) * w.getDimSize(3));
  }
  if (auto a = dyn_cast<tg::AttentionOp>(op)) {
    heavy = true;
    auto q = tensorOf(a.getQ()), k = tensorOf(a.getK());
    return 4.0 * elements(a.getQ()) * static_cast<double>(k.getDimSize(k.getRank() - 2)) *
           (q.getRank() ? 1.0 : 0.0);
  }
  double out = 0;
  for (Value r : op->getResults())
    out += elements(r);
  return out;
}

std::string sanitize(std::string name) {
  for (char &c : name)
    if (!(llvm::isAlnum(c) || c == '.' || c == '_' || c == '-' || c == ':'))
      c = '_';
  return name.empty() ? "cut" : name;
}

struct Cut {
  SmallVector<Value> values; // in @train_step, program order
  SmallVector<std::string> names;
  llvm::SetVector<Operation *> encoderOps; // every op the cut values need
  double flopsPerSample = 0, bytesPerSample = 0;
  bool heavy = false;
};

// Removes ops without uses (pure tg ops), last first so chains go too.
void eraseDeadOps(func::FuncOp f) {
  SmallVector<Operation *> ops;
  for (Operation &op : f.getBody().front().without_terminator())
    ops.push_back(&op);
  for (Operation *op : llvm::reverse(ops))
    if (op->use_empty() && op->getNumRegions() == 0)
      op->erase();
}

struct TgCacheFrozenPass : impl::TgCacheFrozenBase<TgCacheFrozenPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto train = module.lookupSymbol<func::FuncOp>(model::kTrainStepFunc);
    if (!train || train.getBody().empty())
      return;
    Builder b(module.getContext());
    SmallVector<std::string> decisions;
    auto record = [&](std::string line) {
      decisions.push_back(std::move(line));
      train->setAttr(kDecisionAttr, b.getStrArrayAttr(SmallVector<StringRef>(
                                        decisions.begin(), decisions.end())));
    };
    for (func::FuncOp f : module.getOps<func::FuncOp>())
      if (auto e = f->getAttrOfType<StringAttr>(model::kEntryAttr);
          e && (e.getValue() == "encode" || e.getValue() == "train_cached"))
        return record("not cut: the module already has entry '" + e.getValue().str() + "'");

    // Kinds of the arguments: frozen parameters static, inputs batched.
    llvm::DenseMap<Value, Kind> kind;
    int64_t batch = -1;
    bool anyFrozen = false;
    for (BlockArgument a : train.getArguments()) {
      unsigned i = a.getArgNumber();
      kind[a] = Kind::Other;
      if (auto p = model::ParamInfo::fromAttr(train.getArgAttr(i, model::kParamAttr))) {
        if (!p->trainable) {
          kind[a] = Kind::Static;
          anyFrozen = true;
        }
      } else if (train.getArgAttr(i, model::kInputAttr)) {
        auto t = tensorOf(a);
        if (!t || t.getRank() < 1)
          continue;
        if (batch < 0)
          batch = t.getDimSize(0);
        if (t.getDimSize(0) == batch && batch > 0)
          kind[a] = Kind::Batched;
      }
    }
    if (!anyFrozen)
      return record("not cut: no frozen parameters");
    if (batch <= 0)
      return record("not cut: no batched input");

    // Kinds of the ops' results, in program order; the first reason each
    // candidate op was refused.
    std::map<std::string, std::string> refused; // reason -> first op
    Block &body = train.getBody().front();
    for (Operation &op : body.without_terminator()) {
      bool anyOther = false, anyBatched = false;
      for (Value v : op.getOperands()) {
        Kind k = kind.lookup(v);
        anyOther |= k == Kind::Other;
        anyBatched |= k == Kind::Batched;
      }
      Kind result = anyOther ? Kind::Other : anyBatched ? Kind::Batched : Kind::Static;
      if (result == Kind::Batched) {
        std::string why = rowMixing(&op, kind, batch);
        if (!why.empty()) {
          refused.emplace(why, nodeName(op.getLoc()) + " (" +
                                   op.getName().getStringRef().str() + ")");
          result = Kind::Other;
        }
      }
      for (Value r : op.getResults())
        kind[r] = result;
    }

    // Cut values: batched results of ops read by the rest of the step.
    Cut cut;
    std::set<std::string> taken;
    for (BlockArgument a : train.getArguments())
      if (auto in = train.getArgAttrOfType<StringAttr>(a.getArgNumber(), model::kInputAttr))
        taken.insert(in.str());
    for (Operation &op : body.without_terminator())
      for (Value r : op.getResults()) {
        if (kind.lookup(r) != Kind::Batched)
          continue;
        bool readOutside = llvm::any_of(r.getUsers(), [&](Operation *u) {
          return isa<func::ReturnOp>(u) ||
                 llvm::any_of(u->getResults(),
                              [&](Value ur) { return kind.lookup(ur) != Kind::Batched; });
        });
        if (!readOutside)
          continue;
        std::string name = sanitize(nodeName(op.getLoc()));
        for (int n = 1; taken.count(name); ++n)
          name = sanitize(nodeName(op.getLoc())) + "." + std::to_string(n);
        taken.insert(name);
        cut.values.push_back(r);
        cut.names.push_back(name);
      }
    auto reasons = [&] {
      std::string s;
      for (auto &[why, at] : refused)
        s += "; " + why + " at " + at;
      return s;
    };
    if (cut.values.empty())
      return record("not cut: no value computed from the inputs and frozen parameters alone "
                    "is read by the trainable part" + reasons());

    // The encoder: every op the cut values depend on.
    SmallVector<Value> work(cut.values.begin(), cut.values.end());
    while (!work.empty()) {
      Operation *def = work.pop_back_val().getDefiningOp();
      if (!def || !cut.encoderOps.insert(def))
        continue;
      for (Value v : def->getOperands())
        work.push_back(v);
    }
    for (Operation *op : cut.encoderOps)
      if (llvm::any_of(op->getResults(), [&](Value r) { return kind.lookup(r) == Kind::Batched; }))
        cut.flopsPerSample += opFlops(op, cut.heavy) / static_cast<double>(batch);
    for (Value v : cut.values) {
      auto t = tensorOf(v);
      cut.bytesPerSample += static_cast<double>(t.getNumElements()) / batch *
                            (t.getElementType().getIntOrFloatBitWidth() / 8.0);
    }
    double valuesPerSample = 0;
    for (Value v : cut.values)
      valuesPerSample += static_cast<double>(tensorOf(v).getNumElements()) / batch;
    // Reading a cached value costs about one memory access; recomputing the
    // encoder costs its FLOPs: cut only where those are several per value.
    if (!cut.heavy || cut.flopsPerSample < 4 * valuesPerSample)
      return record(llvm::formatv("not cut: the frozen part does too little work ({0:e} FLOPs "
                                  "per sample for {1} cached values per sample)",
                                  cut.flopsPerSample, static_cast<int64_t>(valuesPerSample))
                        .str() +
                    reasons());

    if (failed(buildEncode(module, train, cut)) || failed(buildTrainCached(train, cut)))
      return signalPassFailure();
    std::string names;
    for (auto [i, n] : llvm::enumerate(cut.names))
      names += (i ? ", " : "") + n + " " + llvm::formatv("{0}", tensorOf(cut.values[i])).str();
    record(llvm::formatv("cut: {0} value(s) [{1}]: {2} bytes per sample cached; encoder of {3} "
                         "ops, {4:e} FLOPs per sample, {5:e} FLOPs per step saved (batch {6})",
                         cut.values.size(), names, static_cast<int64_t>(cut.bytesPerSample),
                         cut.encoderOps.size(), cut.flopsPerSample, cut.flopsPerSample * batch,
                         batch)
               .str());
    if (!refused.empty())
      record("encoder ends at" + reasons().substr(1));
  }

  // @encode: the encoder's inputs and frozen parameters -> the cut values.
  LogicalResult buildEncode(ModuleOp module, func::FuncOp train, const Cut &cut) {
    SmallVector<BlockArgument> args;
    for (BlockArgument a : train.getArguments())
      if (llvm::any_of(a.getUsers(), [&](Operation *u) { return cut.encoderOps.contains(u); }))
        args.push_back(a);
    SmallVector<Type> argTypes, resultTypes;
    for (BlockArgument a : args)
      argTypes.push_back(a.getType());
    for (Value v : cut.values)
      resultTypes.push_back(v.getType());
    OpBuilder b(module.getContext());
    b.setInsertionPointAfter(train);
    auto f = func::FuncOp::create(b, train.getLoc(), "encode",
                                  b.getFunctionType(argTypes, resultTypes));
    f->setAttr(model::kEntryAttr, b.getStringAttr("encode"));
    for (auto [i, a] : llvm::enumerate(args))
      f.setArgAttrs(i, train.getArgAttrDict(a.getArgNumber()));
    for (auto [i, n] : llvm::enumerate(cut.names))
      f.setResultAttr(i, model::kOutputAttr, b.getStringAttr(n));
    Block *entry = f.addEntryBlock();
    IRMapping map;
    for (auto [i, a] : llvm::enumerate(args))
      map.map(a, entry->getArgument(i));
    b.setInsertionPointToStart(entry);
    for (Operation &op : train.getBody().front().without_terminator())
      if (cut.encoderOps.contains(&op))
        b.clone(op, map);
    SmallVector<Value> results;
    for (Value v : cut.values)
      results.push_back(map.lookup(v));
    func::ReturnOp::create(b, train.getLoc(), results);
    return success();
  }

  // @train_cached: @train_step with the cut values as inputs (after its
  // other arguments), the encoder and the inputs only it read removed.
  LogicalResult buildTrainCached(func::FuncOp train, const Cut &cut) {
    OpBuilder b(train.getContext());
    b.setInsertionPointAfter(train);
    auto f = cast<func::FuncOp>(b.clone(*train));
    f.setName("train_cached");
    f->setAttr(model::kEntryAttr, b.getStringAttr("train_cached"));
    f->removeAttr(kDecisionAttr);
    // Clones keep op order: the i-th op of f is the i-th op of train.
    llvm::DenseMap<Operation *, Operation *> twin;
    SmallVector<Operation *> clones;
    for (Operation &c : f.getBody().front())
      clones.push_back(&c);
    size_t i = 0;
    for (Operation &o : train.getBody().front())
      twin[&o] = clones[i++];
    for (auto [v, name] : llvm::zip(cut.values, cut.names)) {
      auto r = cast<OpResult>(v);
      Value cloned = twin[r.getOwner()]->getResult(r.getResultNumber());
      unsigned index = f.getNumArguments();
      if (failed(f.insertArgument(index, v.getType(),
                                  b.getDictionaryAttr(b.getNamedAttr(
                                      model::kInputAttr, b.getStringAttr(name))),
                                  v.getLoc())))
        return failure();
      cloned.replaceAllUsesWith(f.getArgument(index));
    }
    eraseDeadOps(f);
    // Inputs only the encoder read; parameters stay (indices into them).
    llvm::BitVector unused(f.getNumArguments());
    for (BlockArgument a : f.getArguments())
      if (a.use_empty() && f.getArgAttr(a.getArgNumber(), model::kInputAttr))
        unused.set(a.getArgNumber());
    return f.eraseArguments(unused);
  }
};

} // namespace

void writeCacheFrozenReport(ModuleOp module, llvm::raw_ostream &os) {
  writeFunctionDecisions(
      module, kDecisionAttr,
      "# tg-cache-frozen: the part of the train step computed from per-sample inputs and\n"
      "# frozen parameters only, split off as @encode (cached per sample by trun) with\n"
      "# @train_cached reading its values, or why nothing was cut.\n",
      os);
}

} // namespace tcc
