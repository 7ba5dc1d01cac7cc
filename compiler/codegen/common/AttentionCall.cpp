#include "compiler/codegen/common/AttentionCall.h"

#include <cstdio>

#include "tcc/counter_rng.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;

namespace tcc::codegen {

namespace {

template <typename Op> AttentionCall fromOp(Op op) {
  AttentionCall c;
  auto q = cast<MemRefType>(op.getQ().getType()), k = cast<MemRefType>(op.getK().getType());
  c.batch = q.getDimSize(0);
  c.heads = q.getDimSize(1);
  c.queries = q.getDimSize(2);
  c.dim = q.getDimSize(3);
  c.kvHeads = k.getDimSize(1);
  c.keys = k.getDimSize(2);
  c.scale = op.getScale().convertToDouble();
  c.dropoutRate = op.getDropoutRate().convertToDouble();
  c.causal = op.getCausal();
  c.rngSeed = op.getRngSeed();
  c.step = op.getStep();
  if (auto id = op.getOpIdAttr())
    c.opKey = tcc_rng_mix64(static_cast<uint64_t>(id.getInt()));
  return c;
}

} // namespace

AttentionCall AttentionCall::of(kern::AttentionOp op) { return fromOp(op); }

AttentionCall AttentionCall::of(kern::AttentionGradOp op) {
  AttentionCall c = fromOp(op);
  c.deterministic = op.getDeterministic();
  return c;
}

std::string AttentionCall::sizeArguments() const {
  return llvm::formatv("{0}, {1}, {2}, {3}, {4}, {5}", batch, heads, kvHeads, queries, keys, dim)
      .str();
}

std::string AttentionCall::scaleCausalRate(bool asFloat) const {
  // (Exact hexadecimal literals: both are checked finite by the verifier.)
  auto literal = [&](double v) {
    char text[64];
    if (asFloat)
      std::snprintf(text, sizeof(text), "%af", static_cast<double>(static_cast<float>(v)));
    else
      std::snprintf(text, sizeof(text), "%a", v);
    return std::string(text);
  };
  return literal(scale) + ", " + (causal ? "true" : "false") + ", " + literal(dropoutRate);
}

std::string AttentionCall::shapeText() const {
  return llvm::formatv("{0}x{1}x{2}x{3}x{4}{5}{6}", batch, heads, queries, keys, dim,
                       kvHeads != heads ? llvm::formatv(" kv_heads={0}", kvHeads).str() : "",
                       causal ? " causal" : "")
      .str();
}

double AttentionCall::forwardFlops() const {
  double product = 2.0 * batch * heads * queries * keys * dim;
  return (causal ? 0.5 : 1.0) * 2 * product;
}

double AttentionCall::backwardFlops() const {
  double product = 2.0 * batch * heads * queries * keys * dim;
  return (causal ? 0.5 : 1.0) * 5 * product;
}

} // namespace tcc::codegen
