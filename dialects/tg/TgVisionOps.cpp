// Verifiers and gradient rules of the 2-D convolution and pooling ops
// (TgVisionOps.td). Shapes: NCHW or NHWC (checked in NCHW order);
// geometry: Window2d.h.
#include "dialects/tg/TgDialect.h"

#include "dialects/common/ShapeHelpers.h"
#include "dialects/tg/TgTypeHelpers.h"
#include "dialects/common/Window2d.h"
#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace tcc::tg;

namespace tcc::tg {

// The window of a conv2d-family op: KH, KW from the weight shape.
static std::optional<Window2d> convWindow(Operation *op, ArrayRef<int64_t> weight,
                                          ArrayRef<int64_t> stride, ArrayRef<int64_t> padding,
                                          ArrayRef<int64_t> dilation) {
  if (stride.size() != 2 || padding.size() != 2 || dilation.size() != 2) {
    op->emitOpError("stride, padding and dilation must each have 2 values (height, width)");
    return std::nullopt;
  }
  Window2d w;
  w.kh = weight[2], w.kw = weight[3];
  w.sh = stride[0], w.sw = stride[1];
  w.ph = padding[0], w.pw = padding[1];
  w.dh = dilation[0], w.dw = dilation[1];
  return w;
}

// Whether `layout` is "NHWC" (channels-last); "NCHW" is the other valid value.
static FailureOr<bool> channelsLast(Operation *op, StringRef layout) {
  if (layout == "NCHW" || layout == "NHWC")
    return layout == "NHWC";
  return op->emitOpError("layout must be \"NCHW\" or \"NHWC\", got \"") << layout << "\"";
}

// A rank-4 shape in NCHW order: (N, H, W, C) -> (N, C, H, W) for
// channels-last, and likewise a weight (O, KH, KW, C/g) -> (O, C/g, KH, KW).
static SmallVector<int64_t> nchwOrder(ArrayRef<int64_t> shape, bool nhwc) {
  if (!nhwc)
    return SmallVector<int64_t>(shape);
  return {shape[0], shape[3], shape[1], shape[2]};
}

// Checks a conv2d's input / weight / output shapes: `input` (N, C, H, W),
// `weight` (O, C / groups, KH, KW), `output` (N, O, HO, WO); channels-last:
// (N, H, W, C), (O, KH, KW, C / groups), (N, HO, WO, O).
static LogicalResult verifyConvShapes(Operation *op, RankedTensorType input,
                                      RankedTensorType weight, RankedTensorType output,
                                      ArrayRef<int64_t> stride, ArrayRef<int64_t> padding,
                                      ArrayRef<int64_t> dilation, int64_t groups,
                                      StringRef layout, StringRef outName = "output") {
  FailureOr<bool> nhwc = channelsLast(op, layout);
  if (failed(nhwc))
    return failure();
  if (input.getRank() != 4 || weight.getRank() != 4 || output.getRank() != 4)
    return op->emitOpError(*nhwc ? "needs rank-4 NHWC input, (O, KH, KW, C/groups) weight and "
                                   "output; got input "
                                 : "needs rank-4 NCHW input, (O, C/groups, KH, KW) weight and "
                                   "output; got input ")
           << tcc::formatShape(input.getShape()) << ", weight "
           << tcc::formatShape(weight.getShape()) << ", output "
           << tcc::formatShape(output.getShape());
  if (input.getElementType() != weight.getElementType() ||
      input.getElementType() != output.getElementType())
    return op->emitOpError("input, weight and output must have one element type");
  SmallVector<int64_t> in = nchwOrder(input.getShape(), *nhwc),
                       wt = nchwOrder(weight.getShape(), *nhwc);
  auto w = convWindow(op, wt, stride, padding, dilation);
  if (!w)
    return failure();
  int64_t n = in[0], c = in[1], o = wt[0];
  if (groups < 1)
    return op->emitOpError("groups must be >= 1, got ") << groups;
  if (c % groups != 0 || o % groups != 0)
    return op->emitOpError("groups ")
           << groups << " must divide the input channels " << c << " and the output channels "
           << o;
  if (wt[1] != c / groups)
    return op->emitOpError("weight ")
           << tcc::formatShape(weight.getShape()) << " must have " << c / groups
           << " input channels (input channels " << c << " / groups " << groups << ")";
  std::string why = w->check(in[2], in[3]);
  if (!why.empty())
    return op->emitOpError(why);
  SmallVector<int64_t> expected{n, o, w->outH(in[2]), w->outW(in[3])};
  if (*nhwc)
    expected = {n, w->outH(in[2]), w->outW(in[3]), o};
  if (output.getShape() != ArrayRef<int64_t>(expected))
    return op->emitOpError(outName)
           << " must be " << tcc::formatShape(expected) << ", got "
           << tcc::formatShape(output.getShape());
  return success();
}

// A pool's window from its attributes.
static std::optional<Window2d> poolWindow(Operation *op, ArrayRef<int64_t> kernel,
                                          ArrayRef<int64_t> stride, ArrayRef<int64_t> padding) {
  if (kernel.size() != 2 || stride.size() != 2 || padding.size() != 2) {
    op->emitOpError("kernel, stride and padding must each have 2 values (height, width)");
    return std::nullopt;
  }
  Window2d w;
  w.kh = kernel[0], w.kw = kernel[1];
  w.sh = stride[0], w.sw = stride[1];
  w.ph = padding[0], w.pw = padding[1];
  return w;
}

static LogicalResult verifyPoolShapes(Operation *op, RankedTensorType input,
                                      RankedTensorType output, ArrayRef<int64_t> kernel,
                                      ArrayRef<int64_t> stride, ArrayRef<int64_t> padding,
                                      StringRef layout, StringRef outName = "output") {
  FailureOr<bool> nhwc = channelsLast(op, layout);
  if (failed(nhwc))
    return failure();
  if (input.getRank() != 4 || output.getRank() != 4)
    return op->emitOpError("needs rank-4 ")
           << layout << " input and output; got input "
           << tcc::formatShape(input.getShape()) << ", output "
           << tcc::formatShape(output.getShape());
  if (input.getElementType() != output.getElementType())
    return op->emitOpError("input and output must have one element type");
  auto w = poolWindow(op, kernel, stride, padding);
  if (!w)
    return failure();
  SmallVector<int64_t> in = nchwOrder(input.getShape(), *nhwc);
  std::string why = w->check(in[2], in[3]);
  if (!why.empty())
    return op->emitOpError(why);
  // As PyTorch: a window must start inside the input or its left padding.
  if (2 * w->ph > w->kh || 2 * w->pw > w->kw)
    return op->emitOpError("padding (")
           << w->ph << ", " << w->pw << ") must be at most half the kernel (" << w->kh << ", "
           << w->kw << ")";
  SmallVector<int64_t> expected{in[0], in[1], w->outH(in[2]), w->outW(in[3])};
  if (*nhwc)
    expected = {in[0], w->outH(in[2]), w->outW(in[3]), in[1]};
  if (output.getShape() != ArrayRef<int64_t>(expected))
    return op->emitOpError(outName)
           << " must be " << tcc::formatShape(expected) << ", got "
           << tcc::formatShape(output.getShape());
  return success();
}

LogicalResult Conv2dOp::verify() {
  return verifyConvShapes(*this, rtt(getInput()), rtt(getWeight()), rtt(getResult()),
                          getStride(), getPadding(), getDilation(),
                          static_cast<int64_t>(getGroups()), getLayout());
}

LogicalResult Conv2dInputGradOp::verify() {
  return verifyConvShapes(*this, rtt(getResult()), rtt(getWeight()), rtt(getGrad()),
                          getStride(), getPadding(), getDilation(),
                          static_cast<int64_t>(getGroups()), getLayout(), "grad");
}

LogicalResult Conv2dWeightGradOp::verify() {
  return verifyConvShapes(*this, rtt(getInput()), rtt(getResult()), rtt(getGrad()),
                          getStride(), getPadding(), getDilation(),
                          static_cast<int64_t>(getGroups()), getLayout(), "grad");
}

LogicalResult MaxPool2dOp::verify() {
  return verifyPoolShapes(*this, rtt(getInput()), rtt(getResult()), getKernel(), getStride(),
                          getPadding(), getLayout());
}

LogicalResult AvgPool2dOp::verify() {
  return verifyPoolShapes(*this, rtt(getInput()), rtt(getResult()), getKernel(), getStride(),
                          getPadding(), getLayout());
}

LogicalResult Pool2dGradOp::verify() {
  if (getMode() != "max" && getMode() != "avg")
    return emitOpError("mode must be \"max\" or \"avg\", got \"") << getMode() << "\"";
  if (getResult().getType() != getInput().getType())
    return emitOpError("result type must equal the input type ") << getInput().getType();
  return verifyPoolShapes(*this, rtt(getInput()), rtt(getGrad()), getKernel(), getStride(),
                          getPadding(), getLayout(), "grad");
}

//===----------------------------------------------------------------------===//
// Gradients
//===----------------------------------------------------------------------===//

LogicalResult Conv2dOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                       SmallVectorImpl<Value> &operandGrads) {
  Value g = resultGrads[0];
  operandGrads.push_back(Conv2dInputGradOp::create(
      b, getLoc(), getInput().getType(), g, getWeight(), getStrideAttr(), getPaddingAttr(),
      getDilationAttr(), getGroupsAttr(), getLayoutAttr()));
  operandGrads.push_back(Conv2dWeightGradOp::create(
      b, getLoc(), getWeight().getType(), g, getInput(), getStrideAttr(), getPaddingAttr(),
      getDilationAttr(), getGroupsAttr(), getLayoutAttr()));
  return success();
}

// The transposed convolution is the adjoint of conv2d in its input: its
// own adjoint in `grad` is conv2d, and <u, A(w)^T g> = <A(w) u, g> makes
// the weight's gradient conv2d's weight gradient with u as the input.
LogicalResult Conv2dInputGradOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                                SmallVectorImpl<Value> &operandGrads) {
  Value u = resultGrads[0];
  operandGrads.push_back(Conv2dOp::create(b, getLoc(), getGrad().getType(), u, getWeight(),
                                          getStrideAttr(), getPaddingAttr(), getDilationAttr(),
                                          getGroupsAttr(), getLayoutAttr()));
  operandGrads.push_back(Conv2dWeightGradOp::create(
      b, getLoc(), getWeight().getType(), getGrad(), u, getStrideAttr(), getPaddingAttr(),
      getDilationAttr(), getGroupsAttr(), getLayoutAttr()));
  return success();
}

LogicalResult MaxPool2dOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                          SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(Pool2dGradOp::create(b, getLoc(), getInput().getType(), resultGrads[0],
                                              getInput(), b.getStringAttr("max"),
                                              getKernelAttr(), getStrideAttr(),
                                              getPaddingAttr(), getLayoutAttr()));
  return success();
}

LogicalResult AvgPool2dOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                          SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(Pool2dGradOp::create(b, getLoc(), getInput().getType(), resultGrads[0],
                                              getInput(), b.getStringAttr("avg"),
                                              getKernelAttr(), getStrideAttr(),
                                              getPaddingAttr(), getLayoutAttr()));
  return success();
}

} // namespace tcc::tg
