// What both code generators pass to a flash-attention kernel for
// kern.attention / kern.attention_grad: the sizes, the attributes, the
// dropout key and the work done (for the FLOP counts and kernel lists).
#ifndef TCC_COMPILER_CODEGEN_COMMON_ATTENTIONCALL_H
#define TCC_COMPILER_CODEGEN_COMMON_ATTENTIONCALL_H

#include <cstdint>
#include <string>

#include "dialects/kern/AttentionLayout.h"
#include "dialects/kern/KernDialect.h"
#include "llvm/ADT/SmallVector.h"

namespace tcc::codegen {

struct AttentionCall {
  int64_t batch = 0, heads = 0, kvHeads = 0, queries = 0, keys = 0, dim = 0;
  double scale = 1, dropoutRate = 0;
  bool causal = false, deterministic = false;
  // Dropout: the rng_seed and step buffers (null without), and mix64(op_id),
  // so the kernel's seed key is rng_seed ^ opKey (counter_rng.h).
  mlir::Value rngSeed, step;
  uint64_t opKey = 0;
  // Per tensor (q, k, v, out[, grad, dq, dk, dv]: kern::attentionTensors)
  // its offset and strides in elements (kern.attention's `layout`, else
  // contiguous).
  llvm::SmallVector<kern::AttentionTensorLayout> layouts;
  bool strided = false; // the op has a `layout` (else all contiguous)

  static AttentionCall of(kern::AttentionOp op);
  static AttentionCall of(kern::AttentionGradOp op);

  // "B, H, Hkv, T, S, D" as the kernels take them.
  std::string sizeArguments() const;
  // The attributes as C literals, "scale, causal, rate": exact doubles
  // ("0x1p-3, true, 0x1.999999999999ap-4"), or float literals (`asFloat`:
  // the CUDA launchers take float).
  std::string scaleCausalRate(bool asFloat = false) const;
  // The eight tensors' "{batch, head, row}" strides, "{a, b, c}, ..." in
  // q, k, v, out, dout, dq, dk, dv order (a forward call's last four:
  // contiguous, unused): the body of a tcc_cuda::AttnLayout /
  // tcc_cpu::AttentionLayout.
  std::string layoutInitializer() const;
  // " + offset" of tensor `index`'s first element, "" at 0.
  std::string offsetSuffix(unsigned index) const;
  // Bytes the kernel reads and writes of the strided tensors (not of
  // their whole buffers): B*H*T*D or B*Hkv*S*D elements each.
  double tensorBytes(int64_t elementBytes) const;
  // "2x12x1024x1024x64 causal" for kernel lists.
  std::string shapeText() const;
  // Multiply-adds of the T x S products: 2 (s and p v) forward, 5 (s, dv,
  // dp, dq, dk) backward, each 2*B*H*T*S*D flops; half of it when causal.
  double forwardFlops() const;
  double backwardFlops() const;
};

} // namespace tcc::codegen

#endif
