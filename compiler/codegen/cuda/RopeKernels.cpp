// kern.rope: a wrapper around the prelude's launch_rope (rope_kernels.cuh /
// rope_launchers.cuh), one launch per rotation (forward or its transpose).
#include "compiler/codegen/cuda/CudaStepEmitter.h"

#include "llvm/Support/FormatVariadic.h"

namespace tcc::codegen::cuda {

LogicalResult CudaStepEmitter::emitRope(kern::RopeOp r, llvm::raw_ostream &os,
                                        double &flops) {
  MemRefType x = mrt(r.getInput());
  int64_t d = x.getShape().back(), t = x.getShape().drop_back().back();
  int64_t rows = x.getNumElements() / d;
  double work = 3.0 * x.getNumElements(); // two products and a sum per element
  flops += work;
  Type et = x.getElementType(), te = mrt(r.getCos()).getElementType();
  FamilyLaunch l;
  l.kind = "rope";
  l.launcherCall = llvm::formatv(
      "tcc_cuda::launch_rope<{0}, {1}>({2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}, s);",
      familyElementType(et, CodeTarget::Cuda), familyElementType(te, CodeTarget::Cuda),
      familyPointer(et, "p0", false, CodeTarget::Cuda),
      familyPointer(te, "p1", false, CodeTarget::Cuda),
      familyPointer(te, "p2", false, CodeTarget::Cuda),
      familyPointer(et, "p3", true, CodeTarget::Cuda), rows, t, d,
      r.getTransposed() ? "true" : "false");
  l.buffers = {r.getInput(), r.getCos(), r.getSin(), r.getOut()};
  l.written = {false, false, false, true};
  l.flops = work;
  l.bytes = 2.0 * bufferBytes(x) + 2.0 * bufferBytes(mrt(r.getCos()));
  l.shape = llvm::formatv("{0} rows of {1}, {2} positions{3}", rows, d, t,
                          r.getTransposed() ? ", transposed" : "")
                .str();
  return emitFamily(r, os, l);
}

} // namespace tcc::codegen::cuda
