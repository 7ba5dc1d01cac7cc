// tg-amp's fp8 precision: the decision per matrix product (Fp8Products.h
// lists the rules). The products keep their bf16 types in the graph; the
// mark tells codegen to cast their operands to FP8 with per-tensor scales
// and multiply on FP8 tensor cores (compiler/codegen/cuda/Fp8Gemm.h), and
// autodiff marks the two gradient products of each (TgStructuralGradients).
#include "passes/precision/Fp8Products.h"
#include "passes/common/NodeNames.h"

#include <string>

#include "dialects/common/ModelAttrs.h"
#include "dialects/tg/TgDialect.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;

namespace tcc {
namespace {

// The function argument (or other value) under `v`'s casts, reshapes and
// transposes.
Value rootOf(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    if (!isa<tg::CastOp, tg::ReshapeOp, tg::TransposeOp>(def))
      break;
    v = def->getOperand(0);
  }
  return v;
}

// The parameter `v` reads through casts, reshapes and transposes, or "".
std::string parameterName(func::FuncOp fn, Value v) {
  auto arg = dyn_cast<BlockArgument>(rootOf(v));
  if (!arg || arg.getOwner()->getParentOp() != fn.getOperation())
    return "";
  auto info = model::ParamInfo::fromAttr(fn.getArgAttr(arg.getArgNumber(), model::kParamAttr));
  return info ? info->name : "";
}

// Does `v` reach a loss through reshapes, casts, transposes and slices
// only (the logits of an LM head or a classifier)?
bool feedsLoss(Value v, int depth = 0) {
  if (depth > 8)
    return false;
  for (Operation *user : v.getUsers()) {
    if (isa<tg::SoftmaxCrossEntropyOp, tg::CrossEntropyOp, tg::LogSoftmaxOp>(user))
      return true;
    if (isa<tg::CastOp, tg::ReshapeOp, tg::TransposeOp, tg::SliceOp>(user) &&
        feedsLoss(user->getResult(0), depth + 1))
      return true;
  }
  return false;
}

// Is the weight under `v` also read by an embedding lookup (a tied head)?
bool isEmbeddingTable(Value v) {
  Value root = rootOf(v);
  for (Operation *user : root.getUsers()) {
    if (isa<tg::GatherOp>(user) && user->getOperand(0) == root)
      return true;
    if (isa<tg::CastOp, tg::ReshapeOp, tg::TransposeOp>(user))
      for (Operation *next : user->getResult(0).getUsers())
        if (isa<tg::GatherOp>(next) && next->getOperand(0) == user->getResult(0))
          return true;
  }
  return false;
}

// Why `m` stays bf16, or "" when it becomes an FP8 product.
std::string refusal(func::FuncOp fn, tg::MatmulOp m, ArrayRef<std::string> keep) {
  auto lhs = cast<RankedTensorType>(m.getLhs().getType());
  auto rhs = cast<RankedTensorType>(m.getRhs().getType());
  if (!lhs.getElementType().isBF16() || !rhs.getElementType().isBF16())
    return "its operands are not bf16";
  std::string weight = parameterName(fn, m.getRhs());
  if (weight.empty())
    weight = parameterName(fn, m.getLhs());
  if (weight.empty())
    return "neither operand is a weight (a product of activations, as attention's)";
  if (feedsLoss(m.getResult()) || isEmbeddingTable(m.getRhs()) || isEmbeddingTable(m.getLhs()))
    return "the LM head or classifier (its logits feed the loss; kept bf16 by rule)";
  if (rhs.getRank() != 2 || (m.getTransposeLhs() && lhs.getRank() > 2))
    return "not one 2-D product (a batched weight or a transposed batched lhs)";
  int64_t k = lhs.getShape()[lhs.getRank() - (m.getTransposeLhs() ? 2 : 1)];
  int64_t mRows = lhs.getNumElements() / k;
  int64_t n = rhs.getShape()[m.getTransposeRhs() ? 0 : 1];
  if (mRows % 16 != 0 || n % 16 != 0 || k % 16 != 0)
    return llvm::formatv("{0}x{1}x{2}: M, N and K must be multiples of 16 (cuBLASLt's FP8 "
                         "rows are 16-byte aligned in the forward and both gradients)",
                         mRows, n, k)
        .str();
  std::string node = nodeName(m.getLoc());
  for (const std::string &name : keep)
    if (StringRef(node).contains(name) || StringRef(weight).contains(name))
      return "--fp8-keep " + name;
  return "";
}

} // namespace

void markFp8Products(func::FuncOp forward, StringRef keepList) {
  SmallVector<std::string> keep;
  SmallVector<StringRef> parts;
  keepList.split(parts, ',', -1, /*KeepEmpty=*/false);
  for (StringRef p : parts)
    if (!p.trim().empty())
      keep.push_back(p.trim().str());
  OpBuilder b(forward.getContext());
  forward.walk([&](tg::MatmulOp m) {
    auto amp = m->getAttrOfType<StringAttr>(model::kAmpAttr);
    std::string decision = amp ? amp.getValue().str() : "bf16: matmul";
    if (std::string why = refusal(forward, m, keep); !why.empty()) {
      decision += "; not FP8: " + why;
    } else {
      m->setAttr(model::kFp8Attr, b.getStringAttr("e4m3xe4m3"));
      decision += "; FP8 product: E4M3 x E4M3, per-tensor scales (gradients E5M2 x "
                  "E4M3)";
    }
    m->setAttr(model::kAmpAttr, b.getStringAttr(decision));
  });
}

} // namespace tcc
