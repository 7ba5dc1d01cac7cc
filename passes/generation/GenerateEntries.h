// What tg-derive-generate's two builders share (DeriveGenerate.cpp: the
// analysis of @forward, @prefill and the pass; DeriveDecode.cpp: @decode):
// the analysis result, the entry-function builder and small helpers.
#ifndef TCC_PASSES_GENERATION_GENERATEENTRIES_H
#define TCC_PASSES_GENERATION_GENERATEENTRIES_H

#include "dialects/common/ModelAttrs.h"
#include "dialects/tg/TgDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/FormatVariadic.h"

#include <string>
#include <utility>

namespace tcc::generate {

using namespace mlir;

inline RankedTensorType rtt(Value v) { return cast<RankedTensorType>(v.getType()); }

inline std::string shapeText(ArrayRef<int64_t> shape) {
  std::string s = "(";
  for (auto [i, d] : llvm::enumerate(shape))
    s += (i ? ", " : "") + std::to_string(d);
  return s + ")";
}

inline std::string describe(Operation *op) {
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

inline SmallVector<std::pair<std::string, RankedTensorType>> cacheState(const Analysis &a) {
  SmallVector<std::pair<std::string, RankedTensorType>> state;
  for (auto [l, op] : llvm::enumerate(a.attentions)) {
    tg::AttentionOp att = op;
    auto k = rtt(att.getK()), v = rtt(att.getV());
    state.push_back({llvm::formatv("kv.{0}.k", l).str(), k});
    state.push_back({llvm::formatv("kv.{0}.v", l).str(), v});
  }
  return state;
}

inline DictionaryAttr attr(OpBuilder &b, StringRef name, Attribute value) {
  return b.getDictionaryAttr(b.getNamedAttr(name, value));
}

// @decode (DeriveDecode.cpp): the logits' slice re-specialized to one
// position; false with `why` when an op of the slice cannot be.
LogicalResult buildDecode(OpBuilder &b, func::FuncOp fwd, const Analysis &a, std::string &why);

} // namespace tcc::generate

#endif
