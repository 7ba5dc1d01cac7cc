// kern.reduce: a plan of coalesced phases over any axes (ReducePlan.h),
// partials in the step's shared workspace; a generated kernel (one thread
// per output element) only for element types the prelude does not take.
#include "compiler/codegen/cuda/CudaStepEmitter.h"
#include "compiler/codegen/cuda/ReducePlan.h"

#include <algorithm>

#include "llvm/Support/FormatVariadic.h"

namespace tcc::codegen::cuda {

// out = sum / mean / max of input over axes: the phases of planReduce, one
// prelude launcher call each, in one wrapper that takes the scratch area
// (ws + tcc_gemm_workspace_offset: kernels of the step's stream only, as
// cuBLASLt's and cuDNN's use of it) for the partials between phases.
LogicalResult CudaStepEmitter::emitReduce(kern::ReduceOp r, llvm::raw_ostream &os,
                                          double &flops) {
  MemRefType in = mrt(r.getInput()), out = mrt(r.getOut());
  Type et = out.getElementType();
  int kind = r.getKind() == kern::ReduceKind::sum ? 0
             : r.getKind() == kern::ReduceKind::mean ? 1
                                                      : 2;
  flops += in.getNumElements();
  if (in.getNumElements() == 0 || out.getNumElements() == 0)
    return success(); // (an empty input: the output is left to the plan)
  double bytes = bufferBytes(in) + bufferBytes(out);
  // The input's type is out's, or bf16 / f16 read into an f32 out (a
  // widening cast folded into the reduction: the prelude loads each element
  // into its f32 accumulator either way).
  Type it = in.getElementType();
  if (!(et.isF32() || et.isF64() || et.isBF16() || et.isF16()) ||
      (it != et && !((it.isBF16() || it.isF16()) && et.isF32())))
    return emitGenericReduce(r, os, kind, bytes);
  ReducePlan plan = planReduce(
      reduceRuns(std::vector<int64_t>(in.getShape().begin(), in.getShape().end()),
                 std::vector<int64_t>(r.getAxes().begin(), r.getAxes().end())),
      kern::elementBytes(it));
  std::string ftIn = familyElementType(it, CodeTarget::Cuda);
  std::string ft = familyElementType(et, CodeTarget::Cuda);
  std::string acc = "tcc_cuda::acc_t<" + ft + ">";
  int64_t accBytes = et.isF64() ? 8 : 4;
  std::string body, shape;
  for (const ReducePhase &p : plan.phases) {
    auto slot = [&](int k, bool written) {
      return llvm::formatv("reinterpret_cast<{0}{1} *>(scratch + {2})", written ? "" : "const ",
                           acc, plan.slotOffset(k, accBytes))
          .str();
    };
    std::string src = p.src < 0 ? familyPointer(it, "p0", false, CodeTarget::Cuda)
                                : slot(p.src, false);
    std::string dst = p.dst < 0 ? familyPointer(et, "p1", true, CodeTarget::Cuda)
                                : slot(p.dst, true);
    // Earlier phases of a mean sum; the last divides by the whole count.
    int phaseKind = p.finishes ? kind : (kind == 1 ? 0 : kind);
    std::string sizes =
        p.cluster > 1
            ? llvm::formatv("{0}, {1}, {2}, {3}", p.outer, p.reduced, p.inner, p.cluster).str()
        : p.strided ? llvm::formatv("{0}, {1}, {2}, {3}", p.outer, p.reduced, p.inner, p.cols).str()
        : p.rows  ? llvm::formatv("{0}, {1}, {2}, {3}", p.outer, p.reduced, p.segs, p.chunk).str()
                  : llvm::formatv("{0}, {1}, {2}, {3}, {4}", p.outer, p.reduced, p.inner, p.segs,
                                  p.chunk)
                        .str();
    // A cluster phase also takes the slot of its fallback's partials.
    std::string fallback =
        p.cluster > 1 ? llvm::formatv("scratch + {0}, ", plan.slotOffset(p.fallback, accBytes)).str()
                      : "";
    body += llvm::formatv("  tcc_cuda::launch_reduce_phase_{0}<{1}, {2}, {3}>({4}, {5}, {6}, "
                          "{7}, {8}s); // {9}\n",
                          p.cluster > 1 ? "middle_cluster"
                          : p.strided   ? "strided"
                          : p.rows      ? "rows"
                                        : "middle",
                          p.src < 0 ? ftIn : acc, p.dst < 0 ? ft : acc, phaseKind, src, dst,
                          sizes, plan.count, fallback, p.describe());
    shape += (shape.empty() ? "" : " -> ") + p.describe();
  }
  int64_t scratch = plan.scratchBytes(accBytes);
  reduceScratchBytes_ = std::max(reduceScratchBytes_, scratch);
  std::string params = "const " + storageType(it) + " *p0, " + storageType(et) +
                       " *p1, char *scratch";
  std::string text = "extern \"C\" void @NAME@(cudaStream_t s, " + params + ") {\n" +
                     (scratch ? "" : "  (void)scratch;\n") + body + "}\n";
  std::string kernel = kernels_.add("reduce", text, params);
  launch(os, r, kernel,
         kernel + "(s, " + name(r.getInput()) + ", " + name(r.getOut()) +
             ", ws + tcc_gemm_workspace_offset);",
         shape, in.getNumElements(), bytes);
  return success();
}

LogicalResult CudaStepEmitter::emitGenericReduce(kern::ReduceOp r, llvm::raw_ostream &os,
                                                 int kind, double bytes) {
  MemRefType in = mrt(r.getInput()), out = mrt(r.getOut());
  Type et = out.getElementType();
  ReduceAxes axes = ReduceAxes::of(r);
  const SmallVector<int64_t> &keptSizes = axes.keptSizes, &keptStrides = axes.keptStrides,
                             &redSizes = axes.reducedSizes, &redStrides = axes.reducedStrides;
  int64_t count = axes.count;
  std::string st = storageType(et), ct = scalarType(et);
  std::string acc = kind == 2 ? ct : "double";
  std::string it = indexType(in.getNumElements());
  std::string keptOff = "0", redOff = "0";
  for (auto [d, s] : llvm::enumerate(keptStrides))
    keptOff += llvm::formatv(" + o{0} * {1}", d, s).str();
  for (auto [d, s] : llvm::enumerate(redStrides))
    redOff += llvm::formatv(" + j{0} * {1}", d, s).str();
  std::string init = kind == 2 ? "-std::numeric_limits<" + ct + ">::infinity()" : "0.0";
  std::string combine =
      kind == 2 ? "{ const " + ct + " v = " + load(et, "in[base + " + redOff + "]") +
                      "; acc = (v > acc || v != v) ? v : acc; }"
                : "acc += " + load(et, "in[base + " + redOff + "]") + ";";
  std::string scale = kind == 1 ? llvm::formatv(" * (1.0 / {0})", count).str() : "";
  int64_t n = out.getNumElements();
  GridStrideKernel k;
  k.kind = "reduce";
  k.params = "const " + st + " *in, " + st + " *out";
  k.args = "in, out";
  k.indexType = it;
  k.var = "o";
  k.items = n;
  k.body = llvm::formatv("{{\n{0}"
                         "    const {1} base = {2};\n"
                         "    {3} acc = {4};\n"
                         "    for ({1} r = 0; r < {5}u; ++r) {{\n{6}"
                         "      {7}\n    }\n"
                         "    out[o] = {8};\n  }\n",
                         coordinates(keptSizes, "o", it, "o"), it, keptOff, acc, init, count,
                         coordinates(redSizes, "r", it, "j"), combine,
                         store(et, "static_cast<" + ct + ">(acc" + scale + ")"))
               .str();
  launchGridStride(os, r, k, {r.getInput(), r.getOut()}, in.getNumElements(), bytes);
  return success();
}

} // namespace tcc::codegen::cuda
