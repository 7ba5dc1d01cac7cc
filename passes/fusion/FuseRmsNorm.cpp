// tg-fuse-rms-norm: an RMSNorm written in primitives becomes one tg.rms_norm.
//
// Imported PyTorch code writes RMSNorm out (LLaMA, Mistral, Qwen, Gemma):
//
//   x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight
//
// which arrives as mul(x, x) (or pow(x, 2)), reduce_mean over the last axis
// with keep_dims, add of a splat eps, rsqrt (or 1 / sqrt, or x / sqrt(...)),
// mul by x and an optional mul by a (C) weight: a reduction and three
// elementwise passes forward and about six kernels backward. tg.rms_norm
// lowers to the fused norm kernels (one forward, one backward plus the
// weight gradient's column sums). Runs before autodiff (so the backward is
// the fused rule) and tg-amp (which keeps norms in f32 as it does for
// tg.layer_norm).
//
// Matched from each reduce_mean of a square; every intermediate must be read
// only by the next op of the pattern (otherwise fusing would keep it and add
// the norm). Each candidate's decision is recorded as tg.fuse_rms_norm on
// the op that ends the match (fused) or on the reduce_mean (not fused, with
// the condition that failed); writeRmsNormFusionReport prints them.
#include "passes/Passes.h"
#include "passes/common/NodeNames.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/Support/FormatVariadic.h"

#include <optional>

namespace tcc {
#define GEN_PASS_DEF_TGFUSERMSNORM
#include "passes/Passes.h.inc"
} // namespace tcc

using namespace mlir;
using namespace tcc;

namespace {

constexpr llvm::StringLiteral kDecisionAttr = "tg.fuse_rms_norm";

RankedTensorType rtt(Value v) { return cast<RankedTensorType>(v.getType()); }

std::optional<double> splatConstant(Value v) {
  auto c = v.getDefiningOp<tg::ConstantOp>();
  if (!c)
    return std::nullopt;
  auto dense = dyn_cast<DenseFPElementsAttr>(c.getValue());
  if (!dense || !dense.isSplat())
    return std::nullopt;
  APFloat f = dense.getSplatValue<APFloat>();
  bool lost = false;
  f.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &lost);
  return f.convertToDouble();
}

// The one user of `v`, if it has exactly one.
Operation *soleUser(Value v) {
  if (!v.hasOneUse())
    return nullptr;
  return *v.getUsers().begin();
}

// The operand of a binary op that is not `v` (null when both are).
Value otherOperand(Operation *op, Value v) {
  if (op->getNumOperands() != 2)
    return nullptr;
  if (op->getOperand(0) == v)
    return op->getOperand(1);
  if (op->getOperand(1) == v)
    return op->getOperand(0);
  return nullptr;
}

// x when `sq` is x * x or pow(x, 2).
Value squaredInput(Value sq) {
  if (auto m = sq.getDefiningOp<tg::MulOp>())
    return m.getLhs() == m.getRhs() ? m.getLhs() : Value();
  if (auto p = sq.getDefiningOp<tg::PowOp>())
    return p.getExponent().convertToDouble() == 2.0 ? p.getInput() : Value();
  return nullptr;
}

struct Match {
  Value x, weight;
  double eps = 0;
  Operation *epsConstant = nullptr; // erased with the pattern when nothing else reads it
  Operation *last = nullptr;        // the op whose result the norm replaces
  SmallVector<Operation *> pattern; // erased after the replacement, last first
};

// Follows the pattern from reduce_mean(square(x)); the failed condition in
// `why`.
std::optional<Match> matchFrom(tg::ReduceMeanOp mean, std::string &why) {
  Match m;
  Value sq = mean.getInput();
  m.x = squaredInput(sq);
  if (!m.x)
    return std::nullopt; // not a mean of a square: not a candidate at all
  RankedTensorType xt = rtt(m.x);
  int64_t rank = xt.getRank();
  if (rank < 1 || mean.getAxes().size() != 1 || mean.getAxes()[0] != rank - 1 ||
      !mean.getKeepDims()) {
    why = "the mean is not over the last axis alone with keep_dims";
    return std::nullopt;
  }
  if (!sq.hasOneUse()) {
    why = "the square is read elsewhere";
    return std::nullopt;
  }
  // + eps
  auto add = dyn_cast_or_null<tg::AddOp>(soleUser(mean.getResult()));
  if (!add) {
    why = "the mean is not followed by an add (of eps) alone";
    return std::nullopt;
  }
  Value epsValue = otherOperand(add, mean.getResult());
  std::optional<double> eps = splatConstant(epsValue);
  if (!eps || !(*eps >= 0) || rtt(add.getResult()) != rtt(mean.getResult())) {
    why = "the add's other operand is not a splat constant eps >= 0";
    return std::nullopt;
  }
  m.eps = *eps;
  m.epsConstant = epsValue.getDefiningOp();
  m.pattern = {sq.getDefiningOp(), mean, add};
  // rsqrt(a) * x | x * rsqrt(a) | x / sqrt(a) | x * (1 / sqrt(a))
  Operation *next = soleUser(add.getResult());
  Value normalized;
  auto takeProduct = [&](Operation *op, Value factor) -> bool {
    auto mul = dyn_cast_or_null<tg::MulOp>(op);
    if (!mul || otherOperand(mul, factor) != m.x)
      return false;
    normalized = mul.getResult();
    m.pattern.push_back(mul);
    return true;
  };
  if (auto r = dyn_cast_or_null<tg::RsqrtOp>(next)) {
    m.pattern.push_back(r);
    if (!takeProduct(soleUser(r.getResult()), r.getResult())) {
      why = "the rsqrt is not multiplied by the squared x alone";
      return std::nullopt;
    }
  } else if (auto s = dyn_cast_or_null<tg::SqrtOp>(next)) {
    m.pattern.push_back(s);
    Operation *u = soleUser(s.getResult());
    auto div = dyn_cast_or_null<tg::DivOp>(u);
    if (div && div.getRhs() == s.getResult() && div.getLhs() == m.x) {
      normalized = div.getResult();
      m.pattern.push_back(div);
    } else if (div && div.getRhs() == s.getResult() && splatConstant(div.getLhs()) == 1.0) {
      m.pattern.push_back(div);
      if (!takeProduct(soleUser(div.getResult()), div.getResult())) {
        why = "1 / sqrt is not multiplied by the squared x alone";
        return std::nullopt;
      }
    } else {
      why = "the sqrt does not divide the squared x (or 1) alone";
      return std::nullopt;
    }
  } else {
    why = "mean + eps is not followed by rsqrt or sqrt alone";
    return std::nullopt;
  }
  if (rtt(normalized) != xt) {
    why = "the normalized value does not keep x's type";
    return std::nullopt;
  }
  m.last = normalized.getDefiningOp();
  // * weight (C), optional
  if (auto w = dyn_cast_or_null<tg::MulOp>(soleUser(normalized))) {
    Value weight = otherOperand(w, normalized);
    RankedTensorType wt = weight ? dyn_cast<RankedTensorType>(weight.getType()) : nullptr;
    if (wt && wt.getRank() == 1 && wt.getDimSize(0) == xt.getShape().back() &&
        wt.getElementType() == xt.getElementType() && rtt(w.getResult()) == xt) {
      m.weight = weight;
      m.pattern.push_back(w);
      m.last = w;
    }
  }
  return m;
}

struct TgFuseRmsNormPass : tcc::impl::TgFuseRmsNormBase<TgFuseRmsNormPass> {
  void runOnOperation() override {
    SmallVector<tg::ReduceMeanOp> means;
    getOperation().walk([&](tg::ReduceMeanOp op) { means.push_back(op); });
    for (tg::ReduceMeanOp mean : means) {
      std::string why;
      std::optional<Match> m = matchFrom(mean, why);
      Builder attrs(mean.getContext());
      if (!m) {
        if (!why.empty())
          mean->setAttr(kDecisionAttr, attrs.getStringAttr("not fused: " + why));
        continue;
      }
      OpBuilder b(m->last);
      auto norm = tg::RmsNormOp::create(b, m->last->getLoc(), rtt(m->x), m->x, m->weight,
                                        b.getF64FloatAttr(m->eps));
      Operation *producer = m->x.getDefiningOp();
      std::string of = producer ? "'" + nodeName(producer->getLoc()) + "'"
                                : std::string("a function argument");
      norm->setAttr(kDecisionAttr,
                    attrs.getStringAttr(llvm::formatv("fused: x of {0}, eps {1:e2}, {2}", of,
                                                      m->eps,
                                                      m->weight ? "weight" : "no weight")
                                            .str()));
      m->last->getResult(0).replaceAllUsesWith(norm.getResult());
      for (Operation *op : llvm::reverse(m->pattern))
        op->erase();
      if (m->epsConstant->use_empty())
        m->epsConstant->erase();
    }
  }
};

} // namespace

namespace tcc {

void writeRmsNormFusionReport(ModuleOp module, llvm::raw_ostream &os) {
  os << "# tg-fuse-rms-norm report: each RMSNorm written out (mean of a square over the\n"
        "# last axis) fused into tg.rms_norm or not and why\n";
  os << llvm::formatv("{0,-32} {1}\n", "# node", "decision");
  int fused = 0, notFused = 0;
  module.walk([&](Operation *op) {
    auto why = op->getAttrOfType<StringAttr>(kDecisionAttr);
    if (!why)
      return;
    (why.getValue().starts_with("fused") ? fused : notFused) += 1;
    os << llvm::formatv("{0,-32} {1}\n", nodeName(op->getLoc()), why.getValue());
  });
  os << "# summary: " << fused << " fused, " << notFused << " not fused\n";
}

} // namespace tcc
