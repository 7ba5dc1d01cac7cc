// The matcher of tg-fuse-attention. From a tg.softmax it walks back to the
// scores product q . k^T through an optional scale and causal mask, and
// forward through an optional dropout to the product with v. Every
// condition that fails names the op it failed at, for the report.
//
// Grouped heads: the batch dimensions L of the scores index B*H query
// heads in row-major order; k and v may cover fewer rows, broadcast over a
// trailing block of L (matmul batch broadcasting, or tg.broadcast_to plus
// reshapes). Query row n then reads key/value row n / G, which is exactly
// tg.attention's head h -> h / (H / Hkv) once q becomes (B, H, T, D) and
// k, v become (B, Hkv, S, D).
#include "passes/fusion/AttentionPattern.h"

#include "dialects/tg/TgTypeHelpers.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <cstdio>

using namespace mlir;
using namespace tcc;
using tcc::tg::rtt;

namespace tcc::fusion {

AttentionTarget AttentionTarget::parse(llvm::StringRef target,
                                       llvm::StringRef arch) {
  AttentionTarget t;
  t.cuda = target == "cuda";
  if (arch.starts_with("sm_"))
    (void)arch.drop_front(3).getAsInteger(10, t.smVersion);
  return t;
}

namespace {

double toDouble(APFloat x) {
  bool lost = false;
  x.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &lost);
  return x.convertToDouble();
}

DenseElementsAttr constantOf(Value v) {
  auto c = v.getDefiningOp<tg::ConstantOp>();
  return c ? dyn_cast<DenseElementsAttr>(c.getValue()) : nullptr;
}

// The value of a float constant with one value in every element.
std::optional<double> splatValue(Value v) {
  DenseElementsAttr attr = constantOf(v);
  if (!attr || !isa<FloatType>(attr.getElementType()) || !attr.isSplat())
    return std::nullopt;
  return toDouble(attr.getSplatValue<APFloat>());
}

} // namespace

std::string formatNumber(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", x);
  return text;
}

namespace {

int64_t product(ArrayRef<int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

ArrayRef<int64_t> batchDims(Value v) { return rtt(v).getShape().drop_back(2); }

// `dims` read by a consumer with batch dimensions `full` (numpy
// broadcasting, `dims` padded with leading 1s): when `dims` equals `full` on
// a prefix and is 1 on the rest, consumer row n reads row n / G; returns G.
std::optional<int64_t> trailingGroup(ArrayRef<int64_t> full,
                                     ArrayRef<int64_t> dims) {
  if (dims.size() > full.size())
    return std::nullopt;
  SmallVector<int64_t> padded(full.size() - dims.size(), 1);
  padded.append(dims.begin(), dims.end());
  size_t p = 0;
  while (p < full.size() && padded[p] == full[p])
    ++p;
  for (size_t i = p; i < full.size(); ++i)
    if (padded[i] != 1)
      return std::nullopt;
  return product(full.drop_front(p));
}

// x * c or x / c with c a splat constant that does not enlarge x: sets
// `scale` and returns x. Null otherwise.
Value peelScale(Value v, double &scale) {
  Operation *def = v.getDefiningOp();
  if (!def || !isa<tg::MulOp, tg::DivOp>(def))
    return nullptr;
  Value lhs = def->getOperand(0), rhs = def->getOperand(1);
  if (std::optional<double> c = splatValue(rhs);
      c && lhs.getType() == v.getType() && (isa<tg::MulOp>(def) || *c != 0)) {
    scale = isa<tg::MulOp>(def) ? *c : 1.0 / *c;
    return lhs;
  }
  if (std::optional<double> c = splatValue(lhs);
      c && isa<tg::MulOp>(def) && rhs.getType() == v.getType()) {
    scale = *c;
    return rhs;
  }
  return nullptr;
}

// A q or k operand scaled by a splat before the product, when nothing else
// reads the scaled value (the scale then moves into the kernel for free).
Value peelOperandScale(Value v, double &scale) {
  double c = 1.0;
  Value inner = v.hasOneUse() ? peelScale(v, c) : nullptr;
  if (!inner || !std::isfinite(c))
    return v;
  scale *= c;
  return inner;
}

// The compact tensor a k or v operand reads, with G (see the file comment).
struct KvSource {
  Value value;
  int64_t groups = 1;
};

std::optional<KvSource> resolveKv(Value operand, ArrayRef<int64_t> full) {
  std::optional<int64_t> g = trailingGroup(full, batchDims(operand));
  if (!g)
    return std::nullopt;
  KvSource src{operand, *g};
  auto lastTwo = [](Value v) { return rtt(v).getShape().take_back(2); };
  while (Operation *def = src.value.getDefiningOp()) {
    Value in = def->getNumOperands() == 1 ? def->getOperand(0) : nullptr;
    if (!in || rtt(in).getRank() < 2 || lastTwo(in) != lastTwo(src.value))
      break;
    if (isa<tg::ReshapeOp>(def) &&
        product(batchDims(in)) == product(batchDims(src.value))) {
      src.value = in; // same rows in the same order
      continue;
    }
    if (isa<tg::BroadcastToOp>(def)) {
      std::optional<int64_t> inner =
          trailingGroup(batchDims(src.value), batchDims(in));
      if (!inner)
        break;
      src.groups *= *inner;
      src.value = in;
      continue;
    }
    break;
  }
  return src;
}

std::string opName(Operation *op) { return op->getName().getStringRef().str(); }

AttentionMatchResult refuse(Operation *op, std::string why) {
  AttentionMatchResult r;
  r.refusal = {op, std::move(why)};
  return r;
}

// Which (i, j) of a (T, S) mask causal attention masks: the future keys.
bool isFuture(int64_t i, int64_t j, int64_t t, int64_t s) { return j > i + (s - t); }

enum class MaskKind { Causal, None, Other };

// A constant mask of the scores' (T, S) positions, the same for every
// batch row (leading dimensions 1): each element classified by `masked`.
template <typename Elem>
MaskKind classifyMask(DenseElementsAttr attr, int64_t t, int64_t s,
                      function_ref<std::optional<bool>(Elem)> masked) {
  auto shape = cast<ShapedType>(attr.getType()).getShape();
  if (shape.size() < 2 || shape.take_back(2) != ArrayRef<int64_t>{t, s} ||
      product(shape.drop_back(2)) != 1)
    return MaskKind::Other;
  bool causal = true, none = true;
  int64_t index = 0;
  for (Elem e : attr.getValues<Elem>()) {
    int64_t i = index / s, j = index % s;
    ++index;
    std::optional<bool> m = masked(e);
    if (!m)
      return MaskKind::Other;
    causal &= *m == isFuture(i, j, t, s);
    none &= !*m;
  }
  return none ? MaskKind::None : causal ? MaskKind::Causal : MaskKind::Other;
}

constexpr llvm::StringLiteral kFiniteMask =
    "the fused kernel masks exactly (weight 0); a finite value leaves masked "
    "keys a weight exp(value - max) and a fully masked row a uniform one, so "
    "it is fused only as -inf";

// One step of the walk from the softmax input back to the scores: a mask.
// Returns the masked value, or null with `why` set.
Value peelMask(Operation *def, int64_t t, int64_t s, bool &causal,
               std::string &why) {
  Value result = def->getResult(0);
  if (auto m = dyn_cast<tg::CausalMaskOp>(def)) {
    double value = m.getValue().convertToDouble();
    if (!(std::isinf(value) && value < 0)) {
      why = "mask value " + formatNumber(value) + " is finite: " + kFiniteMask.str();
      return nullptr;
    }
    causal = true;
    return m.getInput();
  }
  if (isa<tg::AddOp>(def)) {
    for (int side = 0; side < 2; ++side) {
      Value x = def->getOperand(side), mask = def->getOperand(1 - side);
      DenseElementsAttr attr = constantOf(mask);
      if (!attr || x.getType() != result.getType())
        continue;
      bool finite = false;
      MaskKind kind = classifyMask<APFloat>(
          attr, t, s, [&](APFloat e) -> std::optional<bool> {
            double d = toDouble(e);
            if (d == 0)
              return false;
            if (std::isinf(d) && d < 0)
              return true;
            finite |= std::isfinite(d) && d < 0;
            return std::nullopt;
          });
      if (kind == MaskKind::Other) {
        why = finite ? "additive mask has finite negative values: " +
                           kFiniteMask.str()
                     : "additive mask is not 0 on and below the diagonal and "
                       "-inf above (a lower-triangular causal mask of (T, S) "
                       "shared by every head)";
        return nullptr;
      }
      causal = kind == MaskKind::Causal;
      return x;
    }
    why = "tg.add of the scores and a non-constant (or enlarging) operand: "
          "not an additive mask";
    return nullptr;
  }
  if (auto sel = dyn_cast<tg::SelectOp>(def)) {
    DenseElementsAttr cond = constantOf(sel.getCondition());
    bool keepIfTrue = sel.getTrueValue().getType() == result.getType() &&
                      !constantOf(sel.getTrueValue());
    Value x = keepIfTrue ? sel.getTrueValue() : sel.getFalseValue();
    Value fill = keepIfTrue ? sel.getFalseValue() : sel.getTrueValue();
    if (!cond || x.getType() != result.getType()) {
      why = "tg.select masks with a non-constant condition";
      return nullptr;
    }
    std::optional<double> f = splatValue(fill);
    if (!f || !(std::isinf(*f) && *f < 0)) {
      why = f ? "tg.select fills with " + formatNumber(*f) + ": " + kFiniteMask.str()
              : "tg.select's fill value is not a splat -inf constant";
      return nullptr;
    }
    MaskKind kind = classifyMask<bool>(cond, t, s, [&](bool c) -> std::optional<bool> {
      return keepIfTrue ? !c : c;
    });
    if (kind == MaskKind::Other) {
      why = "mask is not lower-triangular: the condition does not keep exactly "
            "the keys j <= i + (S - T) of a (T, S) mask shared by every head";
      return nullptr;
    }
    causal = kind == MaskKind::Causal;
    return x;
  }
  return nullptr;
}

} // namespace

AttentionMatchResult matchAttention(tg::SoftmaxOp softmax,
                                    const AttentionTarget &target) {
  AttentionMatch m;
  m.softmax = softmax;
  auto probsType = rtt(softmax.getResult());
  int64_t rank = probsType.getRank();
  if (rank < 2)
    return refuse(softmax, "softmax of rank < 2: no (T, S) scores");
  if (static_cast<int64_t>(softmax.getAxis()) != rank - 1)
    return refuse(softmax, "softmax axis is not the last (it normalizes over "
                           "axis " + std::to_string(softmax.getAxis()) +
                               ", not the keys)");
  m.queries = probsType.getDimSize(rank - 2);
  m.keys = probsType.getDimSize(rank - 1);

  // Back from the softmax: scale and mask (each at most once, any order).
  Value x = softmax.getInput();
  bool sawMask = false, sawScale = false;
  Operation *scaleAfterMask = nullptr;
  while (true) {
    Operation *def = x.getDefiningOp();
    if (!def)
      return refuse(softmax, "the softmax input is a function argument, not a "
                             "q.k^T product");
    if (isa<tg::MatmulOp>(def))
      break;
    if (!x.hasOneUse())
      return refuse(def, "its result (the scores) feeds another op besides "
                         "the softmax chain");
    double c = 1.0;
    if (isa<tg::MulOp, tg::DivOp>(def)) {
      Value inner = peelScale(x, c);
      if (!inner)
        return refuse(def, "scale is not a splat constant (of a type that does "
                           "not enlarge the scores)");
      if (sawScale)
        return refuse(def, "a second scale of the scores");
      if (!std::isfinite(c))
        return refuse(def, "scale " + formatNumber(c) + " is not finite");
      // Walking back, a scale met before the mask applies after it.
      if (!sawMask && c <= 0)
        scaleAfterMask = def;
      sawScale = true;
      m.scale *= c;
      x = inner;
      continue;
    }
    if (isa<tg::CausalMaskOp, tg::AddOp, tg::SelectOp>(def)) {
      if (sawMask)
        return refuse(def, "a second mask of the scores");
      if (scaleAfterMask)
        return refuse(scaleAfterMask,
                      "scale " + formatNumber(m.scale) +
                          " <= 0 after the mask would turn its -inf into +inf "
                          "or NaN");
      std::string why;
      Value inner = peelMask(def, m.queries, m.keys, m.causal, why);
      if (!inner)
        return refuse(def, why);
      sawMask = true;
      x = inner;
      continue;
    }
    return refuse(def, "the softmax input is not a (scaled, masked) q.k^T "
                       "product: found " + opName(def));
  }
  m.scores = x.getDefiningOp<tg::MatmulOp>();
  if (!x.hasOneUse())
    return refuse(m.scores, "the scores feed another op besides the "
                            "scale/mask/softmax chain");
  if (m.causal && m.queries > m.keys)
    return refuse(softmax, llvm::formatv("causal with more queries than keys "
                                         "(T = {0} > S = {1}): the first rows "
                                         "mask every key (NaN unfused)",
                                         m.queries, m.keys)
                               .str());

  // The scores product: q (L..., T, D) times k^T.
  if (m.scores.getTransposeLhs())
    return refuse(m.scores, "q is transposed (transpose_lhs)");
  Value kOperand = m.scores.getRhs();
  kOperand = peelOperandScale(kOperand, m.scale);
  if (!m.scores.getTransposeRhs()) {
    auto t = kOperand.getDefiningOp<tg::TransposeOp>();
    SmallVector<int64_t> swapLast;
    for (int64_t i = 0, r = rtt(kOperand).getRank(); i < r; ++i)
      swapLast.push_back(i < r - 2 ? i : (i == r - 2 ? r - 1 : r - 2));
    if (!t || t.getPerm() != ArrayRef<int64_t>(swapLast))
      return refuse(m.scores, "k is not transposed (neither transpose_rhs nor "
                              "a tg.transpose of its last two dimensions): "
                              "not q.k^T");
    kOperand = peelOperandScale(t.getInput(), m.scale);
  }
  ArrayRef<int64_t> full = probsType.getShape().drop_back(2);
  Value qOperand = m.scores.getLhs();
  if (batchDims(qOperand) != full)
    return refuse(m.scores, "q is broadcast over the scores' batch dimensions");
  m.q = peelOperandScale(qOperand, m.scale);
  m.headDim = rtt(m.q).getShape().back();

  // Forward from the softmax: optional dropout, then p . v.
  Value p = softmax.getResult();
  if (!p.hasOneUse())
    return refuse(softmax, "the probabilities feed another op besides the "
                           "product with v (fusing would compute them twice)");
  Operation *next = *p.getUsers().begin();
  if (auto d = dyn_cast<tg::DropoutOp>(next)) {
    m.dropout = d;
    p = d.getResult();
    if (!p.hasOneUse())
      return refuse(d, "the dropped probabilities feed another op besides the "
                       "product with v");
    next = *p.getUsers().begin();
  }
  m.context = dyn_cast<tg::MatmulOp>(next);
  if (!m.context)
    return refuse(next, "the probabilities feed " + opName(next) +
                            ", not a product with v");
  if (m.context.getLhs() != p || m.context.getTransposeLhs() ||
      m.context.getTransposeRhs())
    return refuse(m.context, "not probabilities . v (the probabilities must be "
                             "the untransposed left operand, v untransposed)");
  if (batchDims(m.context.getResult()) != full)
    return refuse(m.context, "v has more batch rows than the probabilities");
  if (rtt(m.context.getRhs()).getShape().back() != m.headDim)
    return refuse(m.context, llvm::formatv("v's head size {0} differs from "
                                           "q's and k's ({1})",
                                           rtt(m.context.getRhs()).getShape().back(),
                                           m.headDim)
                                 .str());

  // Heads: k and v read one compact tensor each, with one grouping.
  std::optional<KvSource> k = resolveKv(kOperand, full);
  std::optional<KvSource> v = resolveKv(m.context.getRhs(), full);
  if (!k || !v)
    return refuse(m.scores, "k or v broadcasts over the batch dimensions in a "
                            "pattern that is not head grouping (a leading "
                            "block of dimensions kept, the rest size 1)");
  int64_t rows = product(full);
  if (k->groups != v->groups || rows % k->groups != 0 ||
      product(batchDims(k->value)) != rows / k->groups ||
      product(batchDims(v->value)) != rows / v->groups)
    return refuse(m.context, llvm::formatv("k and v are shared by different "
                                           "groups of query heads ({0} and {1})",
                                           k->groups, v->groups)
                                 .str());
  m.k = k->value;
  m.v = v->value;
  int64_t kvRows = rows / k->groups;
  m.batch = !full.empty() && kvRows % full[0] == 0 ? full[0] : 1;
  m.heads = rows / m.batch;
  m.kvHeads = kvRows / m.batch;

  Type elem = probsType.getElementType();
  if (target.cuda) {
    if (elem.isF64())
      return refuse(m.scores, "f64 attention: the CUDA flash kernels take "
                              "bf16, fp16 and f32");
    if (m.headDim != 64 && m.headDim != 128)
      return refuse(m.scores, llvm::formatv("head size {0}: the CUDA flash "
                                            "kernels support 64 and 128",
                                            m.headDim)
                                  .str());
    if (target.smVersion != 0 && target.smVersion < 80)
      return refuse(m.scores, llvm::formatv("sm_{0}: the CUDA flash kernels "
                                            "need sm_80 or newer",
                                            target.smVersion)
                                  .str());
  }
  AttentionMatchResult r;
  r.match = m;
  return r;
}

} // namespace tcc::fusion
