// Verifiers and gradient rules of the 2-D convolution and pooling ops
// (TgVisionOps.td). Shapes: NCHW; geometry: Window2d.h.
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

// Checks a conv2d's input / weight / output shapes: `input` (N, C, H, W),
// `weight` (O, C / groups, KH, KW), `output` (N, O, HO, WO).
static LogicalResult verifyConvShapes(Operation *op, RankedTensorType input,
                                      RankedTensorType weight, RankedTensorType output,
                                      ArrayRef<int64_t> stride, ArrayRef<int64_t> padding,
                                      ArrayRef<int64_t> dilation, int64_t groups,
                                      StringRef outName = "output") {
  if (input.getRank() != 4 || weight.getRank() != 4 || output.getRank() != 4)
    return op->emitOpError("needs rank-4 NCHW input, (O, C/groups, KH, KW) weight and "
                           "output; got input ")
           << tcc::formatShape(input.getShape()) << ", weight "
           << tcc::formatShape(weight.getShape()) << ", output "
           << tcc::formatShape(output.getShape());
  if (input.getElementType() != weight.getElementType() ||
      input.getElementType() != output.getElementType())
    return op->emitOpError("input, weight and output must have one element type");
  auto w = convWindow(op, weight.getShape(), stride, padding, dilation);
  if (!w)
    return failure();
  int64_t n = input.getDimSize(0), c = input.getDimSize(1), o = weight.getDimSize(0);
  if (groups < 1)
    return op->emitOpError("groups must be >= 1, got ") << groups;
  if (c % groups != 0 || o % groups != 0)
    return op->emitOpError("groups ")
           << groups << " must divide the input channels " << c << " and the output channels "
           << o;
  if (weight.getDimSize(1) != c / groups)
    return op->emitOpError("weight ")
           << tcc::formatShape(weight.getShape()) << " must have " << c / groups
           << " input channels (input channels " << c << " / groups " << groups << ")";
  std::string why = w->check(input.getDimSize(2), input.getDimSize(3));
  if (!why.empty())
    return op->emitOpError(why);
  SmallVector<int64_t> expected{n, o, w->outH(input.getDimSize(2)),
                                w->outW(input.getDimSize(3))};
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
                                      StringRef outName = "output") {
  if (input.getRank() != 4 || output.getRank() != 4)
    return op->emitOpError("needs rank-4 NCHW input and output; got input ")
           << tcc::formatShape(input.getShape()) << ", output "
           << tcc::formatShape(output.getShape());
  if (input.getElementType() != output.getElementType())
    return op->emitOpError("input and output must have one element type");
  auto w = poolWindow(op, kernel, stride, padding);
  if (!w)
    return failure();
  std::string why = w->check(input.getDimSize(2), input.getDimSize(3));
  if (!why.empty())
    return op->emitOpError(why);
  // As PyTorch: a window must start inside the input or its left padding.
  if (2 * w->ph > w->kh || 2 * w->pw > w->kw)
    return op->emitOpError("padding (")
           << w->ph << ", " << w->pw << ") must be at most half the kernel (" << w->kh << ", "
           << w->kw << ")";
  SmallVector<int64_t> expected{input.getDimSize(0), input.getDimSize(1),
                                w->outH(input.getDimSize(2)), w->outW(input.getDimSize(3))};
  if (output.getShape() != ArrayRef<int64_t>(expected))
    return op->emitOpError(outName)
           << " must be " << tcc::formatShape(expected) << ", got "
           << tcc::formatShape(output.getShape());
  return success();
}

LogicalResult Conv2dOp::verify() {
  return verifyConvShapes(*this, rtt(getInput()), rtt(getWeight()), rtt(getResult()),
                          getStride(), getPadding(), getDilation(),
                          static_cast<int64_t>(getGroups()));
}

LogicalResult Conv2dInputGradOp::verify() {
  return verifyConvShapes(*this, rtt(getResult()), rtt(getWeight()), rtt(getGrad()),
                          getStride(), getPadding(), getDilation(),
                          static_cast<int64_t>(getGroups()), "grad");
}

LogicalResult Conv2dWeightGradOp::verify() {
  return verifyConvShapes(*this, rtt(getInput()), rtt(getResult()), rtt(getGrad()),
                          getStride(), getPadding(), getDilation(),
                          static_cast<int64_t>(getGroups()), "grad");
}

LogicalResult MaxPool2dOp::verify() {
  return verifyPoolShapes(*this, rtt(getInput()), rtt(getResult()), getKernel(), getStride(),
                          getPadding());
}

LogicalResult AvgPool2dOp::verify() {
  return verifyPoolShapes(*this, rtt(getInput()), rtt(getResult()), getKernel(), getStride(),
                          getPadding());
}

LogicalResult Pool2dGradOp::verify() {
  if (getMode() != "max" && getMode() != "avg")
    return emitOpError("mode must be \"max\" or \"avg\", got \"") << getMode() << "\"";
  if (getResult().getType() != getInput().getType())
    return emitOpError("result type must equal the input type ") << getInput().getType();
  return verifyPoolShapes(*this, rtt(getInput()), rtt(getGrad()), getKernel(), getStride(),
                          getPadding(), "grad");
}

//===----------------------------------------------------------------------===//
// Gradients
//===----------------------------------------------------------------------===//

LogicalResult Conv2dOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                       SmallVectorImpl<Value> &operandGrads) {
  Value g = resultGrads[0];
  operandGrads.push_back(Conv2dInputGradOp::create(
      b, getLoc(), getInput().getType(), g, getWeight(), getStrideAttr(), getPaddingAttr(),
      getDilationAttr(), getGroupsAttr()));
  operandGrads.push_back(Conv2dWeightGradOp::create(
      b, getLoc(), getWeight().getType(), g, getInput(), getStrideAttr(), getPaddingAttr(),
      getDilationAttr(), getGroupsAttr()));
  return success();
}

LogicalResult MaxPool2dOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                          SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(Pool2dGradOp::create(b, getLoc(), getInput().getType(), resultGrads[0],
                                              getInput(), b.getStringAttr("max"),
                                              getKernelAttr(), getStrideAttr(),
                                              getPaddingAttr()));
  return success();
}

LogicalResult AvgPool2dOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                          SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(Pool2dGradOp::create(b, getLoc(), getInput().getType(), resultGrads[0],
                                              getInput(), b.getStringAttr("avg"),
                                              getKernelAttr(), getStrideAttr(),
                                              getPaddingAttr()));
  return success();
}

} // namespace tcc::tg
