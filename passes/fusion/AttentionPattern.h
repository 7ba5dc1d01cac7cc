// The matcher of tg-fuse-attention (FuseAttention.cpp): from one tg.softmax,
// the written-out scaled dot-product attention around it, or the first
// condition that keeps it from being one tg.attention.
#ifndef TCC_PASSES_FUSION_ATTENTIONPATTERN_H
#define TCC_PASSES_FUSION_ATTENTIONPATTERN_H

#include "dialects/tg/TgDialect.h"
#include "mlir/IR/BuiltinOps.h"

#include <optional>
#include <string>

namespace tcc::fusion {

// What the compiled code can run: on the cuda target only the shapes and
// types the flash kernels take may fuse (the cpu kernels are generic).
struct AttentionTarget {
  bool cuda = false;
  int smVersion = 0; // sm_XY -> XY; 0 when unknown
  // From the pass options: target "cpu" | "cuda", arch "sm_XY" or empty.
  static AttentionTarget parse(llvm::StringRef target, llvm::StringRef arch);
};

// A matched attention: the result of `context` equals
// reshape(attention(reshape(q), reshape(k), reshape(v))).
struct AttentionMatch {
  tg::SoftmaxOp softmax;
  tg::MatmulOp scores;  // q . k^T
  tg::MatmulOp context; // p . v
  tg::DropoutOp dropout; // on the probabilities; null when none
  // The compact operands: q is (L..., T, D) with B*H = prod(L); k and v
  // have B*Hkv rows of (S, D) in row-major batch order.
  mlir::Value q, k, v;
  int64_t batch = 1, heads = 1, kvHeads = 1, queries = 0, keys = 0,
          headDim = 0;
  double scale = 1.0;
  bool causal = false;
};

// The op whose condition failed, and the condition in words.
struct AttentionRefusal {
  mlir::Operation *op = nullptr;
  std::string why;
};

struct AttentionMatchResult {
  std::optional<AttentionMatch> match;
  AttentionRefusal refusal; // when !match
};

// `x` in the report: %.6g (0.125, -inf, 1e+09).
std::string formatNumber(double x);

AttentionMatchResult matchAttention(tg::SoftmaxOp softmax,
                                    const AttentionTarget &target);

} // namespace tcc::fusion

#endif
