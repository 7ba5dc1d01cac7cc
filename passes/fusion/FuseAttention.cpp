// tg-fuse-attention: scaled dot-product attention written out from
// primitives,
//
//   p = softmax(mask(scale * matmul(q, k^T)), last axis)   [+ dropout(p)]
//   out = matmul(p, v)
//
// becomes one tg.attention (flash attention: nothing of size T x S is
// computed into memory or saved for the backward; its gradient is one
// tg.attention_grad that recomputes p from the saved log-sum-exp). Runs
// before tg-amp and tg-autodiff, so both see the fused op. The matcher
// (AttentionPattern.cpp) lists what is recognized; q, k and v are reshaped
// to tg.attention's (B, H, T, D) and (B, Hkv, S, D) and the result back to
// the product's shape.
//
// Every tg.softmax is a candidate and is reported: the tg.attention that
// replaced it carries tg.fuse_attention = "fused: <shape>", a softmax left
// alone carries "not fused at <op> (<node>): <condition>".
// writeAttentionFusionReport lists both (the --dump-dir file
// NN-tg-fuse-attention-report.txt).
#include "passes/Passes.h"
#include "passes/common/NodeNames.h"
#include "passes/fusion/AttentionPattern.h"

#include "dialects/common/ModelAttrs.h"
#include "dialects/common/ShapeHelpers.h"
#include "dialects/tg/TgStructuralBuilders.h"
#include "dialects/tg/TgTypeHelpers.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/FormatVariadic.h"

namespace tcc {
#define GEN_PASS_DEF_TGFUSEATTENTION
#include "passes/Passes.h.inc"
} // namespace tcc

using namespace mlir;
using namespace tcc;
using namespace tcc::fusion;
namespace build = tcc::tg::build;

namespace {


Value reshapeTo(OpBuilder &b, Location loc, Value x, ArrayRef<int64_t> shape) {
  if (tg::rtt(x).getShape() == shape)
    return x;
  return build::reshape(b, loc, x, shape);
}

std::string describe(AttentionMatch m) {
  std::string text = llvm::formatv("fused: B={0} H={1} Hkv={2} T={3} S={4} D={5}",
                                    m.batch, m.heads, m.kvHeads, m.queries,
                                    m.keys, m.headDim)
                         .str();
  text += m.causal ? " causal" : " not-causal";
  text += " scale=" + formatNumber(m.scale);
  if (m.dropout && m.dropout.getRate().convertToDouble() > 0)
    text += " dropout=" + formatNumber(m.dropout.getRate().convertToDouble());
  return text;
}

// The ops the attention replaces, from its result back to the scores
// product (each of them has exactly one user, the next one).
SmallVector<Operation *> chainOf(AttentionMatch m) {
  SmallVector<Operation *> chain{m.context};
  if (m.dropout)
    chain.push_back(m.dropout);
  chain.push_back(m.softmax);
  for (Value x = m.softmax.getInput(); x.getDefiningOp() != m.scores;) {
    Operation *def = x.getDefiningOp();
    chain.push_back(def);
    // Scale and mask ops: the scores flow through the non-constant operand.
    for (Value operand : def->getOperands())
      if (operand.getType() == x.getType() &&
          !operand.getDefiningOp<tg::ConstantOp>()) {
        x = operand;
        break;
      }
  }
  chain.push_back(m.scores);
  return chain;
}

void fuse(AttentionMatch m) {
  MLIRContext *ctx = m.softmax.getContext();
  OpBuilder b(m.context);
  Location loc = FusedLoc::get(
      ctx, {m.softmax.getLoc(), m.scores.getLoc(), m.context.getLoc()});
  Type elem = tg::rtt(m.q).getElementType();
  Value q = reshapeTo(b, loc, m.q, {m.batch, m.heads, m.queries, m.headDim});
  Value k = reshapeTo(b, loc, m.k, {m.batch, m.kvHeads, m.keys, m.headDim});
  Value v = reshapeTo(b, loc, m.v, {m.batch, m.kvHeads, m.keys, m.headDim});
  auto resultType =
      RankedTensorType::get({m.batch, m.heads, m.queries, m.headDim}, elem);
  // lse in f32 for 16-bit and f32 inputs (the kernels' accumulator), f64
  // for the f64 reference.
  auto lseType = RankedTensorType::get(
      {m.batch, m.heads, m.queries},
      elem.isF64() ? elem : Type(b.getF32Type()));
  Value seed, step;
  FloatAttr rate = b.getF64FloatAttr(0.0);
  IntegerAttr opId;
  // A tg.dropout of rate 0 keeps everything: tg.attention then takes no
  // dropout operands (its verifier's contract).
  if (m.dropout && m.dropout.getRate().convertToDouble() > 0) {
    seed = m.dropout.getRngSeed();
    step = m.dropout.getStep();
    rate = m.dropout.getRateAttr();
    opId = m.dropout.getOpIdAttr();
  }
  auto attention = tg::AttentionOp::create(
      b, loc, resultType, lseType, q, k, v, seed, step,
      b.getF64FloatAttr(m.scale), m.causal ? b.getUnitAttr() : UnitAttr(),
      rate, opId);
  attention->setAttr(model::kFuseAttentionAttr, b.getStringAttr(describe(m)));
  Value out = reshapeTo(b, loc, attention.getResult(),
                        tg::rtt(m.context.getResult()).getShape());
  m.context.getResult().replaceAllUsesWith(out);

  // Erase the chain, then what only fed it (the peeled scale of q or k,
  // k's transpose, the expansion of grouped k/v, mask constants).
  SmallVector<Operation *> chain = chainOf(m);
  llvm::SetVector<Operation *> feeders;
  for (Operation *op : chain) {
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp();
          def && !llvm::is_contained(chain, def))
        feeders.insert(def);
    op->erase();
  }
  llvm::DenseSet<Operation *> erased;
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < feeders.size(); ++i) {
      Operation *op = feeders[i];
      if (erased.contains(op) || !op->use_empty() ||
          !isa<tg::MulOp, tg::DivOp, tg::TransposeOp, tg::ReshapeOp,
               tg::BroadcastToOp, tg::ConstantOp>(op))
        continue;
      for (Value operand : op->getOperands())
        if (Operation *def = operand.getDefiningOp())
          feeders.insert(def);
      op->erase();
      erased.insert(op);
      changed = true;
    }
  }
}

struct TgFuseAttentionPass
    : tcc::impl::TgFuseAttentionBase<TgFuseAttentionPass> {
  using TgFuseAttentionBase::TgFuseAttentionBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (target != "cpu" && target != "cuda") {
      module.emitError() << "tg-fuse-attention: unknown target '" << target
                         << "' (expected cpu or cuda)";
      return signalPassFailure();
    }
    AttentionTarget kernels = AttentionTarget::parse(target, cudaArch);
    SmallVector<tg::SoftmaxOp> candidates;
    module.walk([&](tg::SoftmaxOp op) { candidates.push_back(op); });
    OpBuilder b(module.getContext());
    for (tg::SoftmaxOp softmax : candidates) {
      AttentionMatchResult r = matchAttention(softmax, kernels);
      if (r.match && !enabled) {
        softmax->setAttr(model::kFuseAttentionAttr,
                         b.getStringAttr("not fused: matches, but fusion is "
                                         "off (tcc compile "
                                         "--no-fuse-attention)"));
        continue;
      }
      if (r.match) {
        fuse(*r.match);
        continue;
      }
      Operation *at = r.refusal.op;
      softmax->setAttr(
          model::kFuseAttentionAttr,
          b.getStringAttr(llvm::formatv("not fused at {0} ({1}): {2}",
                                        at->getName().getStringRef(),
                                        nodeName(at->getLoc()), r.refusal.why)
                              .str()));
    }
  }
};

} // namespace

namespace tcc {

void writeAttentionFusionReport(ModuleOp module, llvm::raw_ostream &os) {
  os << "# tg-fuse-attention report: every softmax, fused into tg.attention "
        "or not and why\n";
  os << llvm::formatv("{0,-32} {1}\n", "# node", "decision");
  int fused = 0, refused = 0;
  module.walk([&](Operation *op) {
    auto text = op->getAttrOfType<StringAttr>(model::kFuseAttentionAttr);
    if (!text)
      return;
    (isa<tg::AttentionOp>(op) ? fused : refused) += 1;
    os << llvm::formatv("{0,-32} {1}\n", nodeName(op->getLoc()), text.getValue());
  });
  os << "# summary: " << fused << " fused, " << refused << " not fused\n";
}

} // namespace tcc
