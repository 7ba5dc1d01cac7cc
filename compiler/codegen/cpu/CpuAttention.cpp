// CPU code for kern.attention / kern.attention_grad: one call of the
// prelude's flash-attention kernels (cpu/cpu_attention.h) each.
#include "compiler/codegen/cpu/CpuAttention.h"

#include "compiler/codegen/common/AttentionCall.h"
#include "compiler/codegen/common/CTypes.h"
#include "llvm/Support/FormatVariadic.h"

namespace tcc::codegen {

namespace {

// The pointer to tensor `index`'s first element (its layout offset).
std::string pointer(const AttentionCall &c, unsigned index, Value v, const ValueNames &names,
                    bool written) {
  std::string base = familyPointer(mrt(v).getElementType(), names(v), written, CodeTarget::Cpu);
  std::string offset = c.offsetSuffix(index);
  return offset.empty() ? base : "(" + base + ")" + offset;
}

// "seed_key, step": rng_seed ^ mix64(op_id) and the step, read from the
// step's hyper-parameter locals; "0, 0" without dropout.
std::string dropoutKey(const AttentionCall &c, const ValueNames &names) {
  if (!c.rngSeed)
    return "0, 0";
  return llvm::formatv("static_cast<uint64_t>({0}[0]) ^ {1:x}ull, static_cast<uint64_t>({2}[0])",
                       names(c.rngSeed), c.opKey, names(c.step))
      .str();
}

// "shape" or, with `layout`, "shape, layout" of the kernels' signature.
std::string shapeArgument(const AttentionCall &c) {
  std::string shape = "tcc_cpu::AttentionShape{" + c.sizeArguments() + "}";
  if (!c.strided)
    return shape;
  return shape + ", tcc_cpu::AttentionLayout{" + c.layoutInitializer() + "}";
}

} // namespace

LogicalResult emitCpuAttention(kern::AttentionOp op, const ValueNames &names,
                               llvm::raw_ostream &os, double &flops) {
  AttentionCall c = AttentionCall::of(op);
  flops += c.forwardFlops();
  os << llvm::formatv("  if (int32_t rc = tcc_cpu::attention_forward({0}, {1}, {2}, {3}, {4}, "
                      "{5}, {6}, {7})) return rc; // out of memory\n",
                      pointer(c, 0, op.getQ(), names, false), pointer(c, 1, op.getK(), names, false),
                      pointer(c, 2, op.getV(), names, false), pointer(c, 3, op.getOut(), names, true),
                      names(op.getLse()), shapeArgument(c), c.scaleCausalRate(),
                      dropoutKey(c, names));
  return success();
}

// (`deterministic` needs nothing here: the CPU backward always sums in a
// fixed order.)
LogicalResult emitCpuAttentionGrad(kern::AttentionGradOp op, const ValueNames &names,
                                   llvm::raw_ostream &os, double &flops) {
  AttentionCall c = AttentionCall::of(op);
  flops += c.backwardFlops();
  os << llvm::formatv("  if (int32_t rc = tcc_cpu::attention_backward({0}, {1}, {2}, {3}, {4}, "
                      "{5}, {6}, {7}, {8}, {9}, {10}, {11}, {12})) return rc; // out of memory\n",
                      pointer(c, 0, op.getQ(), names, false), pointer(c, 1, op.getK(), names, false),
                      pointer(c, 2, op.getV(), names, false), pointer(c, 3, op.getOut(), names, false),
                      names(op.getLse()), pointer(c, 4, op.getGrad(), names, false),
                      pointer(c, 5, op.getDq(), names, true), pointer(c, 6, op.getDk(), names, true),
                      pointer(c, 7, op.getDv(), names, true), names(op.getWorkspace()),
                      shapeArgument(c), c.scaleCausalRate(), dropoutKey(c, names));
  return success();
}

} // namespace tcc::codegen
