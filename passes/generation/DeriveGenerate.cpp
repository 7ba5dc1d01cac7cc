// tg-derive-generate: generation with a KV cache, derived from @forward.
//
// A GPT-like @forward (token ids (B, T) in, logits (B, T, V) out, causal
// tg.attention after tg-fuse-attention, rotations as tg.rope after
// tg-cache-rope) gets two further entry points (tcc.entry, step_abi.h):
//
//   @prefill(params, tokens (B, T), lengths (B)) -> logits (B, V), caches'
//     the forward at the full context with its causal mask (rows past a
//     row's prompt length are padding: causality keeps them out of the
//     positions before), every attention's k and v written into the KV cache
//     state, and the logits of each row's last prompt position
//     (lengths - 1, picked by a one-hot select and a sum over T).
//   @decode(params, tokens (B), pos (B)) -> logits (B, V), caches'
//     one new token per row at position pos: every op of the logits' slice
//     re-specialized from T to 1 (the "time axis" of each value is tracked
//     through transposes, reshapes, reductions, splits); a position table
//     added to the activations (a learned position embedding, (T, C)) is
//     read at pos by tg.gather; tg.rope's (T, D) tables are gathered at pos
//     and the row's batch axis takes the table's axis; each attention writes
//     its new k and v into the cache at pos (select of an iota == pos mask)
//     and attends over the cache with keys j > pos masked to -inf (written
//     out: matmul, select, softmax, matmul; O(T) per token).
//
// The caches are one state tensor per attention and per k / v, (B, Hkv, T,
// D), named "kv.<layer>.k" / "kv.<layer>.v" (tcc.entry_state), shared by
// both entries (the runtime passes the same buffers). Only existing tg ops
// are used, so the interpreter, the CPU and the CUDA back ends need nothing
// new. The decision, or why nothing was derived, is recorded on @forward as
// tg.derive_generate (--dump-dir: NN-tg-derive-generate-report.txt).
#include "passes/Passes.h"
#include "passes/common/DecisionReport.h"

#include "dialects/common/ModelAttrs.h"
#include "dialects/tg/TgStructuralBuilders.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/FormatVariadic.h"

#include <limits>

namespace tcc {
#define GEN_PASS_DEF_TGDERIVEGENERATE
#include "passes/Passes.h.inc"
} // namespace tcc

using namespace mlir;
using namespace tcc;
namespace build = tcc::tg::build;

namespace {

constexpr llvm::StringLiteral kDecisionAttr = "tg.derive_generate";

RankedTensorType rtt(Value v) { return cast<RankedTensorType>(v.getType()); }

std::string shapeText(ArrayRef<int64_t> shape) {
  std::string s = "(";
  for (auto [i, d] : llvm::enumerate(shape))
    s += (i ? ", " : "") + std::to_string(d);
  return s + ")";
}

std::string describe(Operation *op) {
  std::string s = op->getName().getStringRef().str();
  if (auto loc = dyn_cast<NameLoc>(op->getLoc()))
    s += " '" + loc.getName().str() + "'";
  else if (auto fused = dyn_cast<FusedLoc>(op->getLoc()))
    for (Location l : fused.getLocations())
      if (auto n = dyn_cast<NameLoc>(l)) {
        s += " '" + n.getName().str() + "'";
        break;
      }
  return s;
}

// What @forward offers: the logits result, the token input and the ops the
// logits depend on, in order.
struct Analysis {
  unsigned logitsResult = 0;
  BlockArgument tokens;
  SmallVector<Operation *> slice;
  SmallVector<tg::AttentionOp> attentions;
  int64_t batch = 0, context = 0, vocab = 0;
};

// Empty string: applies; otherwise why not.
std::string analyze(func::FuncOp fwd, Analysis &a) {
  if (fwd.isExternal() || !llvm::hasSingleElement(fwd.getBody()))
    return "@forward has no single-block body";
  int found = -1;
  for (unsigned i = 0; i < fwd.getNumResults(); ++i) {
    auto name = fwd.getResultAttrOfType<StringAttr>(i, model::kOutputAttr);
    auto t = dyn_cast<RankedTensorType>(fwd.getResultTypes()[i]);
    if (!name || !t || t.getRank() != 3 || !isa<FloatType>(t.getElementType()))
      continue;
    if (found < 0 || name.getValue() == "logits")
      found = static_cast<int>(i);
  }
  if (found < 0)
    return "no eval output of shape (B, T, V) (the logits of a language model)";
  a.logitsResult = found;
  auto logitsType = cast<RankedTensorType>(fwd.getResultTypes()[found]);
  a.batch = logitsType.getDimSize(0);
  a.context = logitsType.getDimSize(1);
  a.vocab = logitsType.getDimSize(2);
  if (a.context < 2)
    return "the logits' context T = " + std::to_string(a.context) + " (need T >= 2)";

  auto ret = cast<func::ReturnOp>(fwd.getBody().front().getTerminator());
  llvm::SetVector<Operation *> ops;
  SmallVector<Value> work = {ret.getOperand(found)};
  llvm::SetVector<BlockArgument> args;
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      args.insert(arg);
      continue;
    }
    Operation *op = v.getDefiningOp();
    if (!ops.insert(op))
      continue;
    for (Value o : op->getOperands())
      work.push_back(o);
  }
  for (Operation &op : fwd.getBody().front())
    if (ops.contains(&op))
      a.slice.push_back(&op);

  SmallVector<BlockArgument> inputs;
  for (BlockArgument arg : args)
    if (fwd.getArgAttr(arg.getArgNumber(), model::kInputAttr))
      inputs.push_back(arg);
  if (inputs.size() != 1)
    return llvm::formatv("the logits depend on {0} data inputs (need one: the token ids)",
                         inputs.size())
        .str();
  a.tokens = inputs.front();
  auto tt = rtt(a.tokens);
  if (tt.getRank() != 2 || !isa<IntegerType>(tt.getElementType()) ||
      tt.getDimSize(0) != a.batch || tt.getDimSize(1) != a.context)
    return "the input the logits depend on is not token ids (B, T) = " +
           shapeText({a.batch, a.context}) + " of an integer type";

  for (Operation *op : a.slice) {
    if (auto att = dyn_cast<tg::AttentionOp>(op)) {
      auto q = rtt(att.getQ()), k = rtt(att.getK());
      if (!att.getCausal())
        return describe(op) + " is not causal";
      if (q.getDimSize(2) != a.context || k.getDimSize(2) != a.context)
        return describe(op) + " does not attend over the context T = " +
               std::to_string(a.context);
      a.attentions.push_back(att);
    } else if (isa<tg::SoftmaxOp, tg::CausalMaskOp>(op)) {
      return describe(op) + " in the logits' slice: attention written out, not one "
                            "tg.attention (tg-fuse-attention refused or was off)";
    }
  }
  if (a.attentions.empty())
    return "no tg.attention in the logits' slice (not a transformer language model)";
  return "";
}

// Builds one entry function: params of @forward (same attributes), then
// `inputs`, then the caches as entry state.
struct EntryBuilder {
  func::FuncOp fwd;
  func::FuncOp f;
  Block *body = nullptr;
  SmallVector<BlockArgument> params; // by @forward argument number
  DenseMap<unsigned, BlockArgument> paramOf;

  EntryBuilder(OpBuilder &b, func::FuncOp fwd, StringRef name,
               ArrayRef<std::pair<std::string, RankedTensorType>> inputs,
               ArrayRef<std::pair<std::string, RankedTensorType>> state)
      : fwd(fwd) {
    SmallVector<Type> types;
    SmallVector<DictionaryAttr> attrs;
    SmallVector<unsigned> paramArgs;
    for (unsigned i = 0; i < fwd.getNumArguments(); ++i)
      if (fwd.getArgAttr(i, model::kParamAttr)) {
        types.push_back(fwd.getArgumentTypes()[i]);
        attrs.push_back(fwd.getArgAttrDict(i));
        paramArgs.push_back(i);
      }
    for (auto &[n, t] : inputs) {
      types.push_back(t);
      attrs.push_back(b.getDictionaryAttr(
          b.getNamedAttr(model::kInputAttr, b.getStringAttr(n))));
    }
    for (auto &[n, t] : state) {
      types.push_back(t);
      attrs.push_back(b.getDictionaryAttr(
          b.getNamedAttr(model::kEntryStateAttr, b.getStringAttr(n))));
    }
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointAfter(fwd);
    f = func::FuncOp::create(b, fwd.getLoc(), name, b.getFunctionType(types, {}));
    f.setAllArgAttrs(attrs);
    f->setAttr(model::kEntryAttr, b.getStringAttr(name));
    body = f.addEntryBlock();
    for (auto [k, i] : llvm::enumerate(paramArgs))
      paramOf[i] = f.getArgument(k);
  }
  BlockArgument input(unsigned k) { return f.getArgument(paramOf.size() + k); }
  BlockArgument stateArg(unsigned numInputs, unsigned k) {
    return f.getArgument(paramOf.size() + numInputs + k);
  }
  void finish(OpBuilder &b, ArrayRef<Value> results, ArrayRef<DictionaryAttr> attrs) {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToEnd(body);
    func::ReturnOp::create(b, fwd.getLoc(), results);
    f.setType(b.getFunctionType(f.getArgumentTypes(), ValueRange(results).getTypes()));
    f.setAllResultAttrs(attrs);
  }
};

SmallVector<std::pair<std::string, RankedTensorType>> cacheState(const Analysis &a) {
  SmallVector<std::pair<std::string, RankedTensorType>> state;
  for (auto [l, op] : llvm::enumerate(a.attentions)) {
    tg::AttentionOp att = op;
    auto k = rtt(att.getK()), v = rtt(att.getV());
    state.push_back({llvm::formatv("kv.{0}.k", l).str(), k});
    state.push_back({llvm::formatv("kv.{0}.v", l).str(), v});
  }
  return state;
}

DictionaryAttr attr(OpBuilder &b, StringRef name, Attribute value) {
  return b.getDictionaryAttr(b.getNamedAttr(name, value));
}

// @prefill: the logits' slice as it is (dropout off), caches = each
// attention's k and v, logits at lengths - 1.
LogicalResult buildPrefill(OpBuilder &b, func::FuncOp fwd, const Analysis &a,
                           std::string &why) {
  MLIRContext *ctx = b.getContext();
  auto i32 = IntegerType::get(ctx, 32);
  auto state = cacheState(a);
  std::string tokensName =
      fwd.getArgAttrOfType<StringAttr>(a.tokens.getArgNumber(), model::kInputAttr).str();
  EntryBuilder e(b, fwd, "prefill",
                 {{tokensName, rtt(a.tokens)},
                  {"lengths", RankedTensorType::get({a.batch}, i32)}},
                 state);
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPointToStart(e.body);
  IRMapping map;
  for (auto [i, arg] : e.paramOf)
    map.map(fwd.getArgument(i), arg);
  map.map(a.tokens, e.input(0));
  SmallVector<Value> caches;
  for (Operation *op : a.slice) {
    if (auto d = dyn_cast<tg::DropoutOp>(op)) {
      map.map(d.getResult(), map.lookup(d.getInput()));
      continue;
    }
    if (auto att = dyn_cast<tg::AttentionOp>(op)) {
      Value q = map.lookup(att.getQ()), k = map.lookup(att.getK()), v = map.lookup(att.getV());
      auto n = tg::AttentionOp::create(b, att.getLoc(), att.getResult().getType(),
                                       att.getLse().getType(), q, k, v, Value(), Value(),
                                       att.getScaleAttr(), att.getCausalAttr(),
                                       b.getF64FloatAttr(0.0), IntegerAttr());
      map.map(att.getResult(), n.getResult());
      map.map(att.getLse(), n.getLse());
      caches.push_back(k);
      caches.push_back(v);
      continue;
    }
    for (Value o : op->getOperands())
      if (!map.contains(o)) {
        why = "prefill: " + describe(op) + " reads a value other than parameters and tokens";
        return failure();
      }
    b.clone(*op, map);
  }
  Location loc = fwd.getLoc();
  Value logits = map.lookup(fwd.getBody().front().getTerminator()->getOperand(a.logitsResult));
  Type elt = rtt(logits).getElementType();
  // One-hot of each row's last prompt position: iota + 1 == length (f32:
  // exact for any context a step holds).
  Value positions = build::iota(b, loc, RankedTensorType::get({1, a.context, 1}, b.getF32Type()), 1);
  Value next = build::add(b, loc, positions, build::scalar(b, loc, b.getF32Type(), 1.0));
  Value lengths = build::castTo(
      b, loc, build::reshape(b, loc, e.input(1), {a.batch, 1, 1}), b.getF32Type());
  Value last = build::equal(b, loc, next, lengths);
  Value picked = build::select(b, loc, last, logits, build::scalar(b, loc, elt, 0.0));
  Value out = build::reduceSum(b, loc, picked, {1}, /*keepDims=*/false);
  SmallVector<Value> results = {out};
  SmallVector<DictionaryAttr> attrs = {attr(b, model::kOutputAttr, b.getStringAttr("logits"))};
  for (auto [i, c] : llvm::enumerate(caches)) {
    results.push_back(c);
    attrs.push_back(attr(b, model::kUpdatesEntryStateAttr, b.getI64IntegerAttr(i)));
  }
  e.finish(b, results, attrs);
  return success();
}

// @decode: the slice at one position. Each value's time axis (where T
// was; its size is 1 now) is tracked; -1: independent of the position.
class DecodeBuilder {
public:
  DecodeBuilder(OpBuilder &b, func::FuncOp fwd, const Analysis &a) : b_(b), fwd_(fwd), a_(a) {}

  LogicalResult run(std::string &why) {
    MLIRContext *ctx = b_.getContext();
    auto i32 = IntegerType::get(ctx, 32);
    auto state = cacheState(a_);
    std::string tokensName =
        fwd_.getArgAttrOfType<StringAttr>(a_.tokens.getArgNumber(), model::kInputAttr).str();
    auto tokType = RankedTensorType::get({a_.batch}, rtt(a_.tokens).getElementType());
    EntryBuilder e(b_, fwd_, "decode",
                   {{tokensName, tokType}, {"pos", RankedTensorType::get({a_.batch}, i32)}},
                   state);
    e_ = &e;
    OpBuilder::InsertionGuard g(b_);
    b_.setInsertionPointToStart(e.body);
    loc_ = fwd_.getLoc();
    for (auto [i, arg] : e.paramOf)
      map_[fwd_.getArgument(i)] = {arg, -1};
    map_[a_.tokens] = {build::reshape(b_, loc_, e.input(0), {a_.batch, 1}), 1};
    pos_ = e.input(1);
    for (Operation *op : a_.slice)
      if (failed(visit(op, why))) {
        why = "decode: " + why;
        return failure();
      }
    auto [logits, axis] =
        map_.lookup(fwd_.getBody().front().getTerminator()->getOperand(a_.logitsResult));
    if (axis != 1) {
      why = "decode: the logits do not keep T on axis 1";
      return failure();
    }
    SmallVector<Value> results = {build::reshape(b_, loc_, logits, {a_.batch, a_.vocab})};
    SmallVector<DictionaryAttr> attrs = {
        attr(b_, model::kOutputAttr, b_.getStringAttr("logits"))};
    for (auto [i, c] : llvm::enumerate(caches_)) {
      results.push_back(c);
      attrs.push_back(attr(b_, model::kUpdatesEntryStateAttr, b_.getI64IntegerAttr(i)));
    }
    e.finish(b_, results, attrs);
    return success();
  }

private:
  struct TV {
    Value v;
    int64_t axis = -1;
  };

  RankedTensorType oneStep(RankedTensorType t, int64_t axis) {
    SmallVector<int64_t> shape(t.getShape());
    shape[axis] = 1;
    return RankedTensorType::get(shape, t.getElementType());
  }

  // pos as (B, 1, ..., 1) of `rank`.
  Value posAs(int64_t rank) {
    SmallVector<int64_t> shape(rank, 1);
    shape[0] = a_.batch;
    return build::reshape(b_, loc_, pos_, shape);
  }

  LogicalResult fail(std::string &why, Operation *op, const Twine &what) {
    why = describe(op) + ": " + what.str();
    return failure();
  }

  LogicalResult visit(Operation *op, std::string &why) {
    if (auto d = dyn_cast<tg::DropoutOp>(op)) {
      map_[d.getResult()] = map_.lookup(d.getInput());
      return success();
    }
    if (auto att = dyn_cast<tg::AttentionOp>(op))
      return attention(att, why);
    if (auto r = dyn_cast<tg::RopeOp>(op))
      return rope(r, why);
    SmallVector<Value> operands;
    int64_t firstAxis = -1, firstRank = 0;
    bool anyTime = false;
    for (Value o : op->getOperands()) {
      auto it = map_.find(o);
      if (it == map_.end())
        return fail(why, op, "reads a value other than parameters and tokens");
      operands.push_back(it->second.v);
      if (it->second.axis >= 0 && !anyTime) {
        anyTime = true;
        firstAxis = it->second.axis;
        firstRank = rtt(o).getRank();
      }
    }
    if (!anyTime) { // weights, constants, position tables: as they are
      Operation *c = b_.clone(*op);
      for (auto [i, o] : llvm::enumerate(operands))
        c->setOperand(i, o);
      for (auto [r, n] : llvm::zip(op->getResults(), c->getResults()))
        map_[r] = {n, -1};
      return success();
    }
    if (op->getNumResults() == 0)
      return fail(why, op, "has no result");
    auto resType = dyn_cast<RankedTensorType>(op->getResult(0).getType());
    if (!resType)
      return fail(why, op, "has an unranked result");
    int64_t R = resType.getRank();
    int64_t axis = firstAxis + (R - firstRank);
    SmallVector<Type> newTypes;

    if (auto t = dyn_cast<tg::TransposeOp>(op)) {
      ArrayRef<int64_t> perm = t.getPerm();
      auto it = llvm::find(perm, firstAxis);
      axis = it - perm.begin();
      newTypes.push_back(oneStep(resType, axis));
    } else if (auto r = dyn_cast<tg::ReshapeOp>(op)) {
      auto in = rtt(r.getInput()).getShape();
      auto out = resType.getShape();
      int64_t before = 1, after = 1;
      for (int64_t d = 0; d < firstAxis; ++d)
        before *= in[d];
      for (int64_t d = firstAxis + 1; d < (int64_t)in.size(); ++d)
        after *= in[d];
      axis = -1;
      int64_t prefix = 1;
      for (int64_t d = 0; d < R; ++d) {
        if (prefix == before && out[d] == a_.context && resType.getNumElements() / (prefix * out[d]) == after) {
          axis = d;
          break;
        }
        prefix *= out[d];
      }
      if (axis < 0)
        return fail(why, op, "merges or splits the position axis with another");
      newTypes.push_back(oneStep(resType, axis));
    } else if (auto m = dyn_cast<tg::MatmulOp>(op)) {
      auto lhs = map_.lookup(m.getLhs()), rhs = map_.lookup(m.getRhs());
      if (lhs.axis < 0 || rhs.axis >= 0 || m.getTransposeLhs() ||
          lhs.axis >= rtt(m.getLhs()).getRank() - 1)
        return fail(why, op, "a product that mixes positions (only rows of the activations "
                             "times position-independent weights re-specialize)");
      axis = lhs.axis + (R - rtt(m.getLhs()).getRank());
      newTypes.push_back(oneStep(resType, axis));
    } else if (isa<tg::ReduceSumOp, tg::ReduceMeanOp, tg::ReduceMaxOp>(op)) {
      auto axes = op->getAttrOfType<DenseI64ArrayAttr>("axes").asArrayRef();
      bool keep = false;
      if (auto k = op->getAttrOfType<BoolAttr>("keep_dims"))
        keep = k.getValue();
      if (llvm::is_contained(axes, firstAxis))
        return fail(why, op, "reduces over positions");
      axis = firstAxis;
      if (!keep)
        axis -= llvm::count_if(axes, [&](int64_t x) { return x < firstAxis; });
      newTypes.push_back(oneStep(resType, axis));
    } else if (isa<tg::SoftmaxOp, tg::LogSoftmaxOp, tg::SplitOp, tg::ConcatOp>(op)) {
      int64_t ax = op->getAttrOfType<IntegerAttr>("axis").getInt();
      if (ax < 0)
        ax += firstRank;
      if (ax == firstAxis)
        return fail(why, op, "works along positions");
      if (isa<tg::ConcatOp>(op))
        for (Value o : op->getOperands())
          if (map_.lookup(o).axis != firstAxis)
            return fail(why, op, "joins values with and without positions");
      for (Value r : op->getResults())
        newTypes.push_back(oneStep(cast<RankedTensorType>(r.getType()), axis));
    } else if (auto s = dyn_cast<tg::SliceOp>(op)) {
      auto starts = s.getStarts();
      auto ends = s.getEnds();
      if (starts[firstAxis] != 0 || ends[firstAxis] != a_.context)
        return fail(why, op, "slices positions");
      newTypes.push_back(oneStep(resType, axis));
    } else if (isa<tg::LayerNormOp, tg::RmsNormOp>(op)) {
      if (firstAxis == firstRank - 1)
        return fail(why, op, "normalizes over positions");
      newTypes.push_back(oneStep(resType, axis));
    } else if (isa<tg::GatherOp>(op)) {
      if (map_.lookup(op->getOperand(0)).axis >= 0)
        return fail(why, op, "gathers from a position-dependent table");
      axis = map_.lookup(op->getOperand(1)).axis;
      newTypes.push_back(oneStep(resType, axis));
    } else if (isa<tg::ScalarOpInterface, tg::BroadcastToOp>(op)) {
      // Elementwise with broadcasting: an operand without positions whose
      // size at the time axis is T is position-dependent (a position
      // embedding): read at pos.
      for (auto [i, o] : llvm::enumerate(op->getOperands())) {
        if (map_.lookup(o).axis >= 0)
          continue;
        int64_t r = rtt(o).getRank(), aligned = axis - (R - r);
        if (aligned < 0 || rtt(o).getDimSize(aligned) != a_.context)
          continue;
        if (aligned != 0 || axis != 1 || R != r + 1 || resType.getDimSize(0) != a_.batch)
          return fail(why, op, "a position-dependent operand that is not a (T, ...) table "
                               "under (B, T, ...) activations");
        SmallVector<int64_t> rows = {a_.batch, 1};
        llvm::append_range(rows, rtt(o).getShape().drop_front());
        operands[i] = tg::GatherOp::create(
            b_, loc_, RankedTensorType::get(rows, rtt(o).getElementType()), operands[i],
            posAs(2));
      }
      if (resType.getDimSize(axis) != a_.context)
        return fail(why, op, "the position axis does not line up with its operands'");
      newTypes.push_back(oneStep(resType, axis));
    } else {
      return fail(why, op, "not known to act row by row (needed to decode one position)");
    }
    if (axis < 0 || axis >= R)
      return fail(why, op, "lost the position axis");
    Operation *c = b_.clone(*op);
    for (auto [i, o] : llvm::enumerate(operands))
      c->setOperand(i, o);
    for (auto [r, t] : llvm::zip(c->getResults(), newTypes))
      r.setType(t);
    if (auto s = dyn_cast<tg::SliceOp>(c)) {
      SmallVector<int64_t> ends(s.getEnds());
      ends[firstAxis] = 1;
      s.setEnds(ends);
    }
    for (auto [r, n] : llvm::zip(op->getResults(), c->getResults()))
      map_[r] = {n, axis};
    return success();
  }

  // x (B, H.., 1, D): the rows' batch axis takes the table's position axis,
  // so tg.rope reads row b's tables at pos[b]: swap axes 0 and rank - 2,
  // rotate with (B, D) tables gathered at pos, swap back.
  LogicalResult rope(tg::RopeOp r, std::string &why) {
    TV x = map_.lookup(r.getInput());
    TV cos = map_.lookup(r.getCos()), sin = map_.lookup(r.getSin());
    int64_t rank = rtt(r.getInput()).getRank();
    if (x.axis != rank - 2 || cos.axis >= 0 || sin.axis >= 0 || rank < 3 ||
        rtt(r.getCos()).getDimSize(0) != a_.context ||
        rtt(x.v).getDimSize(0) != a_.batch)
      return fail(why, r, "a rotation that is not x (B, .., T, D) with (T, D) tables");
    auto table = [&](Value t) {
      auto tt = rtt(t);
      return tg::GatherOp::create(
          b_, loc_, RankedTensorType::get({a_.batch, tt.getDimSize(1)}, tt.getElementType()),
          t, pos_);
    };
    SmallVector<int64_t> perm;
    for (int64_t d = 0; d < rank; ++d)
      perm.push_back(d);
    std::swap(perm[0], perm[rank - 2]);
    Value swapped = build::transpose(b_, loc_, x.v, perm);
    Value rotated = tg::RopeOp::create(b_, r.getLoc(), swapped.getType(), swapped,
                                       table(cos.v), table(sin.v), r.getTransposedAttr());
    map_[r.getResult()] = {build::transpose(b_, loc_, rotated, perm), x.axis};
    return success();
  }

  // Writes the new k, v at pos into the caches; attends over positions <= pos.
  LogicalResult attention(tg::AttentionOp att, std::string &why) {
    if (!att.getLse().use_empty() &&
        llvm::any_of(att.getLse().getUsers(), [&](Operation *u) {
          return llvm::is_contained(a_.slice, u);
        }))
      return fail(why, att, "its log-sum-exp is read");
    TV q = map_.lookup(att.getQ()), k = map_.lookup(att.getK()), v = map_.lookup(att.getV());
    if (q.axis != 2 || k.axis != 2 || v.axis != 2)
      return fail(why, att, "q, k, v are not (B, H, T, D) by positions");
    unsigned layer = caches_.size() / 2;
    unsigned numInputs = 2;
    Value kc = e_->stateArg(numInputs, 2 * layer), vc = e_->stateArg(numInputs, 2 * layer + 1);
    auto i32 = b_.getI32Type();
    int64_t B = a_.batch, T = a_.context;
    int64_t H = rtt(q.v).getDimSize(1), Hkv = rtt(k.v).getDimSize(1), D = rtt(q.v).getDimSize(3);
    Value here = build::equal(
        b_, loc_, build::iota(b_, loc_, RankedTensorType::get({1, 1, T, 1}, i32), 2), posAs(4));
    Value kNew = build::select(b_, loc_, here, k.v, kc);
    Value vNew = build::select(b_, loc_, here, v.v, vc);
    caches_.push_back(kNew);
    caches_.push_back(vNew);
    Type elt = rtt(q.v).getElementType();
    Value q2 = build::reshape(b_, loc_, q.v, {B, Hkv, H / Hkv, D});
    Value scores = build::matmul(b_, loc_, q2, kNew, false, /*transposeRhs=*/true);
    scores = build::mul(b_, loc_, scores,
                        build::scalar(b_, loc_, elt, att.getScale().convertToDouble()));
    Value seen = build::greaterEqual(
        b_, loc_, posAs(4), build::iota(b_, loc_, RankedTensorType::get({1, 1, 1, T}, i32), 3));
    scores = build::select(b_, loc_, seen, scores,
                           build::scalar(b_, loc_, elt, -std::numeric_limits<double>::infinity()));
    Value p = build::softmax(b_, loc_, scores, 3);
    Value out = build::matmul(b_, loc_, p, vNew, false, false);
    map_[att.getResult()] = {build::reshape(b_, loc_, out, {B, H, 1, D}), 2};
    return success();
  }

  OpBuilder &b_;
  func::FuncOp fwd_;
  const Analysis &a_;
  EntryBuilder *e_ = nullptr;
  Location loc_ = UnknownLoc::get(b_.getContext());
  Value pos_;
  DenseMap<Value, TV> map_;
  SmallVector<Value> caches_;
};

struct TgDeriveGeneratePass : tcc::impl::TgDeriveGenerateBase<TgDeriveGeneratePass> {
  using TgDeriveGenerateBase::TgDeriveGenerateBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto fwd = module.lookupSymbol<func::FuncOp>(model::kForwardFunc);
    if (!fwd)
      return;
    OpBuilder b(module.getContext());
    auto record = [&](ArrayRef<std::string> lines) {
      SmallVector<Attribute> list;
      for (const std::string &l : lines)
        list.push_back(b.getStringAttr(l));
      fwd->setAttr(kDecisionAttr, b.getArrayAttr(list));
    };
    if (module.lookupSymbol("prefill") || module.lookupSymbol("decode"))
      return record({"not derived: the module already has @prefill or @decode"});
    Analysis a;
    std::string why = analyze(fwd, a);
    if (!why.empty())
      return record({"not derived: " + why});
    if (failed(buildPrefill(b, fwd, a, why)) || failed(DecodeBuilder(b, fwd, a).run(why))) {
      for (StringRef n : {"prefill", "decode"})
        if (auto f = module.lookupSymbol<func::FuncOp>(n))
          f.erase();
      return record({"not derived: " + why});
    }
    for (StringRef n : {"prefill", "decode"})
      if (failed(mlir::verify(module.lookupSymbol<func::FuncOp>(n)))) {
        fwd.emitError("tg-derive-generate: the derived @") << n << " does not verify";
        return signalPassFailure();
      }
    auto k = rtt(a.attentions.front().getK());
    std::string cache = llvm::formatv("{0} caches {1} {2}", 2 * a.attentions.size(),
                                      shapeText(k.getShape()), k.getElementType())
                            .str();
    record({llvm::formatv("derived @prefill: tokens {0} + lengths ({1}) -> logits ({1}, {2}) "
                          "at each row's last prompt position; writes {3}",
                          shapeText({a.batch, a.context}), a.batch, a.vocab, cache)
                .str(),
            llvm::formatv("derived @decode: tokens ({0}) at pos ({0}) -> logits ({0}, {1}); "
                          "writes k, v at pos and attends over positions <= pos of {2}",
                          a.batch, a.vocab, cache)
                .str()});
  }
};

} // namespace

namespace tcc {

void writeDeriveGenerateReport(ModuleOp module, llvm::raw_ostream &os) {
  writeFunctionDecisions(module, kDecisionAttr,
                         "# tg-derive-generate report: the KV-cache generation entries "
                         "(@prefill, @decode) derived from @forward, or why not\n",
                         os);
}

} // namespace tcc
