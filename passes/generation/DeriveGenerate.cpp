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
#include "passes/generation/GenerateEntries.h"

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
using namespace tcc::generate;
namespace build = tcc::tg::build;

namespace {

constexpr llvm::StringLiteral kDecisionAttr = "tg.derive_generate";

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
    if (failed(buildPrefill(b, fwd, a, why)) || failed(buildDecode(b, fwd, a, why))) {
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
