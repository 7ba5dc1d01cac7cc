// Patch convolutions as matrix products, the first step of tg-conv-layout
// on cuda (ConvLayout.cpp).
//
// A convolution whose kernel tiles its input exactly -- kernel == stride,
// larger than 1 in some dimension, no padding or dilation, one group, NCHW,
// H and W multiples of the kernel: ViT's, Swin's and ConvNeXt's patch
// embeddings -- computes one matrix product over the patches:
//
//   x (N, C, H, W) -> (N, C, HP, P, WP, Q) -> transpose (N, HP, WP, C, P, Q)
//     -> (N*HP*WP, C*P*Q) x weight (O, C*P*Q)^T -> (N, HP, WP, O)
//     -> transpose (N, O, HP, WP)
//
// The weight's (O, C, P, Q) is (O, C*P*Q) as it is (a free reshape). Its
// gradient is then one more product, where cuDNN's weight-gradient engines
// took 0.9-1.0 ms a step on ViT-S/16's 3-channel 16x16 patches (no
// tensor-core NHWC for 3 channels either; docs/performance.md).
#include "passes/layout/PatchConvolutions.h"

#include "dialects/tg/TgDialect.h"
#include "dialects/tg/TgStructuralBuilders.h"
#include "passes/common/NodeNames.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;

namespace tcc {
namespace {

// Why `c` is not a patch convolution, or "" when it is.
std::string notPatch(tg::Conv2dOp c) {
  ArrayRef<int64_t> k = cast<RankedTensorType>(c.getWeight().getType()).getShape();
  ArrayRef<int64_t> x = cast<RankedTensorType>(c.getInput().getType()).getShape();
  if (c.getLayout() != "NCHW" || c.getGroups() != 1)
    return "grouped or channels-last";
  if (c.getStride()[0] != k[2] || c.getStride()[1] != k[3] || (k[2] == 1 && k[3] == 1))
    return "stride differs from the kernel (or a 1x1 kernel)";
  if (c.getPadding()[0] || c.getPadding()[1] || c.getDilation()[0] != 1 ||
      c.getDilation()[1] != 1)
    return "padded or dilated";
  if (x[2] % k[2] || x[3] % k[3])
    return "the kernel does not tile the input";
  return "";
}

} // namespace

SmallVector<std::string> rewritePatchConvolutions(func::FuncOp f) {
  SmallVector<tg::Conv2dOp> patches;
  f.walk([&](tg::Conv2dOp c) {
    if (notPatch(c).empty())
      patches.push_back(c);
  });
  SmallVector<std::string> lines;
  for (tg::Conv2dOp c : patches) {
    OpBuilder b(c);
    Location loc = c.getLoc();
    ArrayRef<int64_t> x = cast<RankedTensorType>(c.getInput().getType()).getShape();
    ArrayRef<int64_t> k = cast<RankedTensorType>(c.getWeight().getType()).getShape();
    int64_t n = x[0], ch = x[1], p = k[2], q = k[3], hp = x[2] / p, wp = x[3] / q, o = k[0];
    namespace build = tg::build;
    Value v = build::reshape(b, loc, c.getInput(), {n, ch, hp, p, wp, q});
    v = build::transpose(b, loc, v, {0, 2, 4, 1, 3, 5}); // (N, HP, WP, C, P, Q)
    v = build::reshape(b, loc, v, {n * hp * wp, ch * p * q});
    Value w = build::reshape(b, loc, c.getWeight(), {o, ch * p * q});
    v = build::matmul(b, loc, v, w, /*transposeLhs=*/false, /*transposeRhs=*/true);
    v = build::reshape(b, loc, v, {n, hp, wp, o});
    v = build::transpose(b, loc, v, {0, 3, 1, 2});
    c.getResult().replaceAllUsesWith(v);
    lines.push_back(llvm::formatv("conv2d '{0}': a matrix product over its {1}x{2} patches "
                                  "(kernel = stride): ({3} x {4}) x ({4} x {5})",
                                  nodeName(loc), p, q, n * hp * wp, ch * p * q, o)
                        .str());
    c.erase();
  }
  return lines;
}

} // namespace tcc
