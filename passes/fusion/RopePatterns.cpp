// Recognizing rotary embeddings written out in primitives (RopePatterns.h).
// Each check that fails names the op and the condition, so the
// tg-cache-rope report says why an almost-rotation was left alone.
#include "passes/fusion/RopePatterns.h"
#include "passes/common/NodeNames.h"

#include "dialects/common/ModelAttrs.h"
#include "dialects/common/ShapeHelpers.h"
#include "dialects/tg/TgStructuralBuilders.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace tcc;

namespace tcc::rope {

namespace {

RankedTensorType rtt(Value v) { return cast<RankedTensorType>(v.getType()); }

// "'h.0.attn.q.rope.rotated' (tg.concat)", or the value's kind when it is a
// function argument.
std::string describe(Value v) {
  Operation *op = v.getDefiningOp();
  if (!op)
    return "a function argument";
  return llvm::formatv("'{0}' ({1})", nodeName(op->getLoc()), op->getName()).str();
}
std::string describeOp(Operation *op) { return describe(op->getResult(0)); }

// Whether `v` is half `which` (0: [..., :h], 1: [..., h:]) of `x` along x's
// last axis, taken by a tg.slice or as a piece of a two-piece tg.split.
// Without `x`, returns the tensor `v` is a half of (or null).
Value halfSource(Value v, int which) {
  if (auto s = v.getDefiningOp<tg::SliceOp>()) {
    RankedTensorType in = rtt(s.getInput());
    int64_t rank = in.getRank(), d = rank ? in.getShape().back() : 0;
    if (rank == 0 || d % 2 != 0)
      return {};
    ArrayRef<int64_t> starts = s.getStarts(), ends = s.getEnds();
    for (int64_t i = 0; i + 1 < rank; ++i)
      if (starts[i] != 0 || ends[i] != in.getDimSize(i))
        return {};
    int64_t h = d / 2;
    if (starts[rank - 1] == which * h && ends[rank - 1] == which * h + h)
      return s.getInput();
    return {};
  }
  auto result = dyn_cast<OpResult>(v);
  auto split = result ? dyn_cast<tg::SplitOp>(result.getOwner()) : nullptr;
  if (!split || split.getNumResults() != 2 ||
      static_cast<int>(result.getResultNumber()) != which)
    return {};
  RankedTensorType in = rtt(split.getInput());
  if (split.getAxisAttr().getInt() != in.getRank() - 1 ||
      rtt(split.getResult(0)) != rtt(split.getResult(1)))
    return {};
  return split.getInput();
}

bool isHalfOf(Value v, Value x, int which) { return x && halfSource(v, which) == x; }

// The other factor when `product` is a tg.mul with one operand matching
// `isFactor`; null otherwise.
template <typename Pred> Value otherFactor(Value product, Pred isFactor) {
  auto m = product.getDefiningOp<tg::MulOp>();
  if (!m)
    return {};
  if (isFactor(m.getLhs()))
    return m.getRhs();
  if (isFactor(m.getRhs()))
    return m.getLhs();
  return {};
}

// A table for x (..., T, D) must be `want` = (T, D) (form A) or (T, D / 2)
// (form B), optionally with leading size-1 dimensions, of x's element type.
std::string checkTable(Value table, StringRef role, RankedTensorType x,
                       ArrayRef<int64_t> want) {
  RankedTensorType t = rtt(table);
  ArrayRef<int64_t> shape = t.getShape();
  while (!shape.empty() && shape.front() == 1 && shape.size() > want.size())
    shape = shape.drop_front();
  if (shape != want || t.getRank() > x.getRank())
    return llvm::formatv("the {0} table ({1}) is {2}; tg.rope needs {3} (one row per "
                         "position, shared by the leading dimensions of x {4})",
                         role, describe(table), tcc::formatShape(t.getShape()),
                         tcc::formatShape(want), tcc::formatShape(x.getShape()))
        .str();
  if (t.getElementType() != x.getElementType())
    return llvm::formatv("the {0} table ({1}) is {2} but x is {3}", role, describe(table),
                         t.getElementType(), x.getElementType())
        .str();
  return "";
}

// `table` as exactly `want`: constants are re-made (so they stay step
// data), anything else gets a tg.reshape; form B's half tables are doubled
// along the last axis (concat(c, c)).
Value tableAs(OpBuilder &b, Location loc, Value table, ArrayRef<int64_t> want,
              bool doubled) {
  RankedTensorType t = rtt(table);
  auto exact = RankedTensorType::get(want, t.getElementType());
  SmallVector<int64_t> full(want);
  if (doubled)
    full.back() *= 2;
  auto fullType = RankedTensorType::get(full, t.getElementType());
  if (t == exact && !doubled)
    return table;
  if (auto c = table.getDefiningOp<tg::ConstantOp>()) {
    if (auto dense = dyn_cast<DenseElementsAttr>(c.getValue())) {
      DenseElementsAttr data = dense.reshape(exact);
      if (doubled) {
        auto values = llvm::to_vector(data.getValues<APFloat>());
        SmallVector<APFloat> twice;
        int64_t half = want.back();
        for (int64_t row = 0; row < static_cast<int64_t>(values.size()) / half; ++row)
          for (int copy = 0; copy < 2; ++copy)
            twice.append(values.begin() + row * half, values.begin() + (row + 1) * half);
        data = DenseElementsAttr::get(fullType, twice);
      }
      auto made = tg::ConstantOp::create(b, loc, data.getType(), data);
      if (auto why = c->getAttrOfType<StringAttr>(model::kCacheRopeAttr))
        made->setAttr(model::kCacheRopeAttr,
                      b.getStringAttr(why.getValue() +
                                      (doubled ? "; doubled along D for tg.rope" : "")));
      return made;
    }
  }
  Value v = t == exact ? table : tg::ReshapeOp::create(b, loc, exact, table).getResult();
  if (doubled)
    v = tg::build::concat(b, loc, {v, v}, want.size() - 1);
  return v;
}

struct Rotation {
  Value x, cos, sin;
  bool halfTables; // form B: cos / sin are (T, h)
};

// rotate_half(x) = concat(-x[..., h:], x[..., :h]): x, or the reason.
Value decodeRotateHalf(tg::ConcatOp concat, std::string &why) {
  auto inputs = concat.getInputs();
  int64_t rank = rtt(concat.getResult()).getRank();
  if (inputs.size() != 2) {
    why = llvm::formatv("{0} joins {1} inputs; rotate_half joins two halves",
                        describeOp(concat), inputs.size());
    return {};
  }
  if (concat.getAxisAttr().getInt() != rank - 1) {
    why = llvm::formatv("{0} joins along axis {1}, not the last one", describeOp(concat),
                        concat.getAxisAttr().getInt());
    return {};
  }
  auto neg = inputs[0].getDefiningOp<tg::NegOp>();
  if (!neg) {
    why = llvm::formatv("the first input of {0} is {1}, not a negation (rotate_half "
                        "is concat(-x[..., h:], x[..., :h]))",
                        describeOp(concat), describe(inputs[0]));
    return {};
  }
  Value x = halfSource(neg.getInput(), 1);
  if (!x) {
    why = llvm::formatv("{0} does not negate the second half x[..., h:] of a tensor",
                        describeOp(neg));
    return {};
  }
  if (!isHalfOf(inputs[1], x, 0)) {
    why = llvm::formatv("the second input of {0} is not the first half x[..., :h] of "
                        "the tensor {1} negates",
                        describeOp(concat), describeOp(neg));
    return {};
  }
  return x;
}

// Form A at `add`: x * cos + rotate_half(x) * sin.
std::string matchFormA(tg::AddOp add, Rotation &r) {
  auto lhs = add.getLhs().getDefiningOp<tg::MulOp>();
  auto rhs = add.getRhs().getDefiningOp<tg::MulOp>();
  if (!lhs || !rhs)
    return "";
  std::string why;
  bool candidate = false;
  for (auto [rotMul, other] : {std::pair{lhs, rhs}, std::pair{rhs, lhs}}) {
    for (auto [rotated, sin] : {std::pair{rotMul.getLhs(), rotMul.getRhs()},
                                std::pair{rotMul.getRhs(), rotMul.getLhs()}}) {
      auto concat = rotated.getDefiningOp<tg::ConcatOp>();
      if (!concat)
        continue;
      candidate = true;
      std::string failed;
      Value x = decodeRotateHalf(concat, failed);
      Value cos = x ? otherFactor(other.getResult(), [&](Value v) { return v == x; })
                    : Value();
      if (x && !cos)
        failed = llvm::formatv("the other product {0} of {1} does not multiply the "
                               "rotated tensor {2} by a table",
                               describeOp(other), describeOp(add), describe(x));
      if (failed.empty()) {
        r = {x, cos, sin, false};
        return "ok";
      }
      if (why.empty())
        why = failed;
    }
  }
  return candidate ? why : "";
}

// Form B at `concat`: concat(x1 * c - x2 * s, x2 * c + x1 * s).
std::string matchFormB(tg::ConcatOp concat, Rotation &r) {
  auto inputs = concat.getInputs();
  if (inputs.size() != 2)
    return "";
  auto sub = inputs[0].getDefiningOp<tg::SubOp>();
  auto add = inputs[1].getDefiningOp<tg::AddOp>();
  if (!sub || !add || concat.getAxisAttr().getInt() != rtt(concat.getResult()).getRank() - 1)
    return "";
  auto m = sub.getLhs().getDefiningOp<tg::MulOp>();
  Value x = m ? halfSource(m.getLhs(), 0) : Value();
  if (m && !x)
    x = halfSource(m.getRhs(), 0);
  if (!x)
    return llvm::formatv("the first term of {0} is {1}, not a first half x[..., :h] "
                         "times a cos table",
                         describeOp(sub), describe(sub.getLhs()));
  auto half = [&](int which) { return [=](Value v) { return isHalfOf(v, x, which); }; };
  Value c = otherFactor(sub.getLhs(), half(0));
  Value s = otherFactor(sub.getRhs(), half(1));
  if (!s)
    return llvm::formatv("the second term of {0} is {1}, not the second half "
                         "x[..., h:] of {2} times a sin table",
                         describeOp(sub), describe(sub.getRhs()), describe(x));
  for (auto [u, w] : {std::pair{add.getLhs(), add.getRhs()},
                      std::pair{add.getRhs(), add.getLhs()}})
    if (otherFactor(u, half(1)) == c && otherFactor(w, half(0)) == s) {
      r = {x, c, s, true};
      return "ok";
    }
  return llvm::formatv("{0} is not x[..., h:] * cos + x[..., :h] * sin with the cos "
                       "and sin tables of {1}",
                       describeOp(add), describeOp(sub));
}

} // namespace

std::string fuseRotation(OpBuilder &b, Operation *root, Value &fused) {
  Rotation r;
  std::string matched;
  if (auto add = dyn_cast<tg::AddOp>(root))
    matched = matchFormA(add, r);
  else if (auto concat = dyn_cast<tg::ConcatOp>(root))
    matched = matchFormB(concat, r);
  if (matched.empty())
    return "";
  if (matched != "ok")
    return "not fused: " + matched;
  RankedTensorType x = rtt(r.x);
  if (x != rtt(root->getResult(0)))
    return llvm::formatv("not fused: x {0} is {1} but {2} is {3} (x is broadcast)",
                         describe(r.x), tcc::formatShape(x.getShape()), describeOp(root),
                         tcc::formatShape(rtt(root->getResult(0)).getShape()));
  if (x.getRank() < 2)
    return "not fused: x " + describe(r.x) + " has no (T, D) trailing dimensions";
  SmallVector<int64_t> want(x.getShape().take_back(2));
  if (r.halfTables)
    want.back() /= 2;
  for (auto [table, role] : {std::pair{r.cos, "cos"}, std::pair{r.sin, "sin"}}) {
    std::string bad = checkTable(table, role, x, want);
    if (!bad.empty())
      return "not fused: " + bad;
  }
  b.setInsertionPoint(root);
  Location loc = root->getLoc();
  Value cos = tableAs(b, loc, r.cos, want, r.halfTables);
  Value sin = tableAs(b, loc, r.sin, want, r.halfTables);
  fused = tg::RopeOp::create(b, loc, x, r.x, cos, sin, b.getBoolAttr(false));
  bool constant = cos.getDefiningOp<tg::ConstantOp>() && sin.getDefiningOp<tg::ConstantOp>();
  root->getResult(0).replaceAllUsesWith(fused);
  return llvm::formatv("fused: {0} of {1} {2}, {3} tables -> tg.rope",
                       r.halfTables ? "concat(x1*c - x2*s, x2*c + x1*s)"
                                    : "x*cos + rotate_half(x)*sin",
                       describe(r.x), tcc::formatShape(x.getShape()),
                       constant ? "constant" : "computed (not constant)")
      .str();
}

} // namespace tcc::rope
