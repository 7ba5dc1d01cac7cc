// tg-derive-generate's @decode (GenerateEntries.h): the logits' slice of
// @forward at one position per row, each attention writing its new k and v
// into the KV cache at pos and attending over positions <= pos.
#include "passes/generation/GenerateEntries.h"

#include "dialects/tg/TgStructuralBuilders.h"

#include <limits>

namespace tcc::generate {

namespace build = tcc::tg::build;

namespace {

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

} // namespace

LogicalResult buildDecode(OpBuilder &b, func::FuncOp fwd, const Analysis &a, std::string &why) {
  return DecodeBuilder(b, fwd, a).run(why);
}

} // namespace tcc::generate
