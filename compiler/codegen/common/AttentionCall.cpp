#include "compiler/codegen/common/AttentionCall.h"

#include <cstdio>

#include "tcc/counter_rng.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;

namespace tcc::codegen {

namespace {

template <typename Op> AttentionCall fromOp(Op op) {
  AttentionCall c;
  // (Verified: sizes from `sizes` or the operand types.)
  kern::AttentionSizes s = *kern::attentionSizes(op);
  c.batch = s.batch;
  c.heads = s.heads;
  c.queries = s.queries;
  c.dim = s.dim;
  c.kvHeads = s.kvHeads;
  c.keys = s.keys;
  c.layouts = kern::attentionLayouts(op, s);
  c.strided = static_cast<bool>(op.getLayoutAttr());
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

std::string AttentionCall::layoutInitializer() const {
  kern::AttentionSizes s{batch, heads, kvHeads, queries, keys, dim};
  std::string text;
  for (unsigned i = 0; i < 8; ++i) {
    kern::AttentionTensorLayout l;
    if (i < layouts.size()) {
      l = layouts[i];
    } else { // a forward call: dout, dq like q; dk, dv like k
      bool query = i == 4 || i == 5;
      int64_t h = query ? s.heads : s.kvHeads, n = query ? s.queries : s.keys;
      l = {0, h * n * s.dim, n * s.dim, s.dim};
    }
    text += llvm::formatv("{0}{{{1}, {2}, {3}}", i ? ", " : "", l.batch, l.head, l.row).str();
  }
  return text;
}

std::string AttentionCall::offsetSuffix(unsigned index) const {
  if (index >= layouts.size() || layouts[index].offset == 0)
    return "";
  return " + " + std::to_string(layouts[index].offset);
}

double AttentionCall::tensorBytes(int64_t elementBytes) const {
  double queryElems = double(batch) * heads * queries * dim;
  double keyElems = double(batch) * kvHeads * keys * dim;
  double total = 0;
  for (unsigned i = 0; i < layouts.size(); ++i)
    total += (i == 0 || i == 3 || i == 4 || i == 5) ? queryElems : keyElems;
  return total * elementBytes;
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
