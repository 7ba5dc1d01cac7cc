// CPU code for kern.layer_norm / kern.layer_norm_grad and batch norm's
// kern.batch_norm_stats / _grad_sums: one call of the prelude's norm
// kernels (cpu/cpu_norm.h) each.
#include "compiler/codegen/cpu/CpuNorm.h"

#include "compiler/codegen/common/CTypes.h"
#include "dialects/kern/NormWorkspace.h"
#include "llvm/Support/FormatVariadic.h"

namespace tcc::codegen {

namespace {

// The buffer as the prelude takes it, or a typed null for an absent one
// (the template argument must still be deducible).
std::string pointer(Value v, const ValueNames &names, bool written, Type et) {
  if (!v)
    return llvm::formatv("static_cast<{0}{1} *>(nullptr)", written ? "" : "const ",
                         familyElementType(et, CodeTarget::Cpu))
        .str();
  return familyPointer(mrt(v).getElementType(), names(v), written, CodeTarget::Cpu);
}

struct RowShape {
  int64_t rows, c;
  static RowShape of(Value input) {
    MemRefType x = mrt(input);
    int64_t c = x.getShape().back();
    return {c == 0 ? 0 : x.getNumElements() / c, c};
  }
};

} // namespace

LogicalResult emitCpuLayerNorm(kern::LayerNormOp op, const ValueNames &names,
                               llvm::raw_ostream &os, double &flops) {
  RowShape s = RowShape::of(op.getInput());
  Type et = mrt(op.getInput()).getElementType();
  flops += 8.0 * s.rows * s.c;
  os << llvm::formatv("  tcc_cpu::layer_norm_forward({0}, {1}, {2}, {3}, {4}, {5:e17}, {6}, {7});\n",
                      s.rows, s.c, pointer(op.getInput(), names, false, et),
                      pointer(op.getWeight(), names, false, et),
                      pointer(op.getBias(), names, false, et), op.getEps().convertToDouble(),
                      op.getRms() ? "true" : "false", pointer(op.getOut(), names, true, et));
  return success();
}

LogicalResult emitCpuLayerNormGrad(kern::LayerNormGradOp op, const ValueNames &names,
                                   llvm::raw_ostream &os, double &flops) {
  RowShape s = RowShape::of(op.getInput());
  Type et = mrt(op.getInput()).getElementType();
  flops += 16.0 * s.rows * s.c;
  std::string workspace =
      op.getWorkspace() ? names(op.getWorkspace())
                        : llvm::formatv("static_cast<tcc_cpu::acc_t<{0}> *>(nullptr)",
                                        familyElementType(et, CodeTarget::Cpu))
                              .str();
  os << llvm::formatv("  tcc_cpu::layer_norm_backward({0}, {1}, {2}, {3}, {4}, {12}, {5:e17}, "
                      "{6}, {7}, {13}, {8}, {9}, {14}, {15}, {10}, {11});\n",
                      s.rows, s.c, pointer(op.getGrad(), names, false, et),
                      pointer(op.getInput(), names, false, et),
                      pointer(op.getWeight(), names, false, et), op.getEps().convertToDouble(),
                      op.getRms() ? "true" : "false", pointer(op.getInputGrad(), names, true, et),
                      pointer(op.getWeightGrad(), names, true, et),
                      pointer(op.getBiasGrad(), names, true, et), workspace,
                      kern::normGradParts(s.rows), pointer(op.getAddend(), names, false, et),
                      pointer(op.getInputGradCast(), names, true, et),
                      pointer(op.getInputGradSum(), names, true, et),
                      op.getSumOfCast() ? "true" : "false");
  return success();
}

// x (N, C, S...) as "N, C, S".
static std::string channelDims(Value input) {
  MemRefType x = mrt(input);
  kern::BatchNormDims d = kern::batchNormDims(x.getDimSize(0), x.getDimSize(1),
                                              x.getNumElements());
  return llvm::formatv("{0}, {1}, {2}", d.n, d.c, d.s).str();
}

LogicalResult emitCpuBatchNormStats(kern::BatchNormStatsOp op, const ValueNames &names,
                                    llvm::raw_ostream &os, double &flops) {
  Type et = mrt(op.getMean()).getElementType();
  flops += 3.0 * mrt(op.getInput()).getNumElements();
  os << llvm::formatv("  tcc_cpu::batch_norm_stats({0}, {1}, {2}, {3});\n",
                      channelDims(op.getInput()),
                      pointer(op.getInput(), names, false, et),
                      pointer(op.getMean(), names, true, et), pointer(op.getVar(), names, true, et));
  return success();
}

LogicalResult emitCpuBatchNormGradSums(kern::BatchNormGradSumsOp op, const ValueNames &names,
                                       llvm::raw_ostream &os, double &flops) {
  Type et = mrt(op.getMean()).getElementType();
  flops += 4.0 * mrt(op.getInput()).getNumElements();
  os << llvm::formatv("  tcc_cpu::batch_norm_grad_sums({0}, {1}, {2}, {3}, {4}, {5}, {6});\n",
                      channelDims(op.getInput()), pointer(op.getGrad(), names, false, et),
                      pointer(op.getInput(), names, false, et),
                      pointer(op.getMean(), names, false, et),
                      pointer(op.getRstd(), names, false, et),
                      pointer(op.getGradSum(), names, true, et),
                      pointer(op.getGradXhatSum(), names, true, et));
  return success();
}

} // namespace tcc::codegen
