// The workspace cuDNN's convolutions may use, planned at compile time.
//
// cuDNN tells an engine's workspace only when trun builds its plans, so the
// step reserves an estimate in the workspace it shares between cuBLASLt,
// cuDNN's attention and reductions (planned like the rest: trun's peak is
// then the plan). trun takes cuDNN's first choice where it fits, else the
// first engine that does (prepare_conv_sites); only a site with none is
// given more, named in trun's convolutions note.
//
// The estimate: 2 x element bytes x the largest operand, + 16 MiB, over the
// step's convolutions. Measured (cuDNN 9.14, H200, bf16, NCHW, 2026-11-29):
// the first choices of ResNet-50 (B64, 224²) and a UNet (B32, 128²) asked
// for 2.5-4.6 bytes per element of the larger of x and y at every large
// site (the most: 160 MB for the 7x7 stem, ResNet-50's x 64x64x112x112),
// which looks like an NHWC copy of the operands: the NCHW layout's cost.
// Held to 64 MiB instead, the 8 ResNet-50 sites above it took engines
// without workspace that ran its convolution backward at 7 TFLOP/s
// (103 ms a step against 18.5).
#ifndef TCC_COMPILER_CODEGEN_CUDA_CUDNNCONVWORKSPACE_H
#define TCC_COMPILER_CODEGEN_CUDA_CUDNNCONVWORKSPACE_H

#include <algorithm>
#include <cstdint>

#include "dialects/kern/KernDialect.h"
#include "mlir/IR/BuiltinTypes.h"

namespace tcc::codegen::cuda {

// The estimate above for the kern.conv2d ops in `root` that cuDNN can run
// (f32, bf16, f16; f64 runs on tcc's kernels), 0 without any.
//
// Channels-last sites (layout "NHWC", tg-conv-layout) need far less: their
// first choices asked for at most 8.7 MB on ResNet-50 (B64, 224², bf16,
// H200, cuDNN 9.14, 2026-11-29), except where a channel count is not a
// multiple of 8 (the RGB stem: 51.4 and 57.6 MB, an NHWC copy of x padded
// to 8 channels). Their estimate: the operands whose channels are not
// multiples of 8, padded to 8 channels, + 16 MiB.
inline int64_t cudnnConvWorkspaceBytes(mlir::Operation *root) {
  int64_t nchw = 0, nhwc = 0; // bytes beyond the 16 MiB
  bool any = false;
  root->walk([&](kern::Conv2dOp op) {
    auto out = mlir::cast<mlir::MemRefType>(op.getOut().getType());
    mlir::Type et = out.getElementType();
    if (!(et.isF32() || et.isBF16() || et.isF16()))
      return;
    any = true;
    const int64_t bytes = et.isF32() ? 4 : 2;
    if (op.getLayout() == "NHWC") {
      int64_t padded = 0;
      for (mlir::Value v : {op.getA(), op.getB(), op.getOut()}) {
        auto t = mlir::cast<mlir::MemRefType>(v.getType());
        const int64_t c = t.getDimSize(3), n = t.getNumElements();
        if (c % 8 != 0)
          padded += n / c * ((c + 7) / 8 * 8) * bytes;
      }
      nhwc = std::max(nhwc, padded);
      return;
    }
    for (mlir::Value v : {op.getA(), op.getB(), op.getOut()})
      nchw = std::max(nchw, 2 * bytes * mlir::cast<mlir::MemRefType>(v.getType()).getNumElements());
  });
  if (!any)
    return 0;
  const int64_t mib = int64_t(1) << 20;
  return (std::max(nchw, nhwc) + 16 * mib + mib - 1) / mib * mib;
}

} // namespace tcc::codegen::cuda

#endif
