// kern.rope: a wrapper around the prelude's launch_rope (rope_kernels.cuh /
// rope_launchers.cuh), one launch per rotation (forward or its transpose).
#include "compiler/codegen/cuda/CudaStepEmitter.h"
#include "dialects/kern/RopeLayout.h"

#include "llvm/Support/FormatVariadic.h"

namespace tcc::codegen::cuda {

LogicalResult CudaStepEmitter::emitRope(kern::RopeOp r, llvm::raw_ostream &os,
                                        double &flops) {
  // The rotated tensor as (B, H, T, D) rows with one stride set for the input
  // and one for the output (packed buffers after kern-fold-attention-layout).
  kern::RopeSizes s = kern::ropeSizes(r);
  SmallVector<kern::AttentionTensorLayout, 2> layouts = kern::ropeLayouts(r, s);
  auto strides = [](const kern::AttentionTensorLayout &t) {
    return llvm::formatv("tcc_cuda::RopeStrides{{{0}, {1}, {2}, {3}}", t.offset, t.batch,
                         t.head, t.row)
        .str();
  };
  double work = 3.0 * static_cast<double>(s.elements()); // two products and a sum
  flops += work;
  Type et = mrt(r.getInput()).getElementType(), te = mrt(r.getCos()).getElementType();
  FamilyLaunch l;
  l.kind = "rope";
  l.launcherCall = llvm::formatv(
      "tcc_cuda::launch_rope<{0}, {1}>({2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}, {10}, {11}, "
      "{12}, s);",
      familyElementType(et, CodeTarget::Cuda), familyElementType(te, CodeTarget::Cuda),
      familyPointer(et, "p0", false, CodeTarget::Cuda), strides(layouts[0]),
      familyPointer(te, "p1", false, CodeTarget::Cuda),
      familyPointer(te, "p2", false, CodeTarget::Cuda),
      familyPointer(et, "p3", true, CodeTarget::Cuda), strides(layouts[1]), s.batch, s.heads,
      s.positions, s.dim, r.getTransposed() ? "true" : "false");
  l.buffers = {r.getInput(), r.getCos(), r.getSin(), r.getOut()};
  l.written = {false, false, false, true};
  l.flops = work;
  l.bytes = 2.0 * static_cast<double>(s.elements()) * kern::elementBytes(et) +
             2.0 * bufferBytes(mrt(r.getCos()));
  l.shape = llvm::formatv("{0} rows of {1}, {2} positions{3}{4}",
                           s.batch * s.heads * s.positions, s.dim, s.positions,
                           r.getTransposed() ? ", transposed" : "",
                           r.getLayoutAttr() ? ", strided" : "")
                 .str();
  return emitFamily(r, os, l);
}

} // namespace tcc::codegen::cuda
