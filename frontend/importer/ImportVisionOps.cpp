// Model nodes -> tg 2-D convolution and pooling ops (dialects/tg/
// TgVisionOps.td), NCHW:
//   conv2d(x, weight): ints stride = [1, 1], padding = [0, 0],
//     dilation = [1, 1], int groups = 1; weight (O, C / groups, KH, KW).
//   conv_transpose2d(x, weight): PyTorch's ConvTranspose2d, weight (C_in,
//     C_out / groups, KH, KW); ints stride, padding, dilation,
//     output_padding = [0, 0], int groups = 1: tg.conv2d_input_grad of the
//     convolution it transposes.
//   max_pool2d(x), avg_pool2d(x): ints kernel (required), stride = kernel,
//     padding = [0, 0]. avg_pool2d divides by KH * KW (padding counts).
// A one-value list means the same value for height and width. Every shape
// problem is reported here, at the node, before an op is built.
#include "dialects/common/ShapeHelpers.h"
#include "dialects/tg/TgDialect.h"
#include "dialects/common/Window2d.h"
#include "frontend/importer/NodeImporter.h"

using namespace mlir;

namespace tcc {

const char *visionOpNames() {
  return "conv2d, conv_transpose2d, max_pool2d, avg_pool2d, batch_norm";
}

namespace {

NodeResults single(Value v) { return SmallVector<Value, 1>{v}; }

// The (height, width) pair of ints attribute `key`: absent -> dflt, one
// value -> both.
FailureOr<SmallVector<int64_t>> pairAttr(NodeContext &n, StringRef key,
                                         ArrayRef<int64_t> dflt) {
  FailureOr<SmallVector<int64_t>> v = n.intsAttr(key);
  if (failed(v))
    return failure();
  if (v->empty() && !dflt.empty())
    return SmallVector<int64_t>(dflt.begin(), dflt.end());
  if (v->size() == 1)
    return SmallVector<int64_t>{(*v)[0], (*v)[0]};
  if (v->size() != 2) {
    n.error() << "op " << n.op() << ": attribute '" << key
              << "' needs 2 values (height, width), got " << v->size();
    return failure();
  }
  return *v;
}

LogicalResult requireNchw(NodeContext &n, int i, StringRef what) {
  if (n.type(i).getRank() != 4)
    return n.error() << "op " << n.op() << ": " << what << " '" << n.node.inputs(i)
                     << "' must be rank 4 (" << (i == 0 ? "N, C, H, W" : "O, C/groups, KH, KW")
                     << "), got " << tcc::formatShape(n.type(i).getShape());
  return success();
}

// The window of a convolution by weight w (O, C/g, KH, KW) or (C_in,
// C_out/g, KH, KW): the kernel is w's last two dimensions.
tcc::Window2d convWindow(RankedTensorType w, ArrayRef<int64_t> stride,
                         ArrayRef<int64_t> padding, ArrayRef<int64_t> dilation) {
  tcc::Window2d win;
  win.kh = w.getDimSize(2), win.kw = w.getDimSize(3);
  win.sh = stride[0], win.sw = stride[1];
  win.ph = padding[0], win.pw = padding[1];
  win.dh = dilation[0], win.dw = dilation[1];
  return win;
}

LogicalResult requireOneElementType(NodeContext &n, RankedTensorType x, RankedTensorType w) {
  if (x.getElementType() != w.getElementType())
    return n.error() << n.op() << ": input and weight must have one element type, got "
                     << x.getElementType() << " and " << w.getElementType();
  return success();
}

NodeResults importConv2d(NodeContext &n) {
  if (failed(n.arity(2)) || failed(n.attrs({"stride", "padding", "dilation", "groups"})) ||
      failed(n.requireFloat(0)) || failed(n.requireFloat(1)) ||
      failed(requireNchw(n, 0, "input")) || failed(requireNchw(n, 1, "weight")))
    return failure();
  auto stride = pairAttr(n, "stride", {1, 1});
  auto padding = pairAttr(n, "padding", {0, 0});
  auto dilation = pairAttr(n, "dilation", {1, 1});
  FailureOr<int64_t> groups = n.intAttr("groups", 1);
  if (failed(stride) || failed(padding) || failed(dilation) || failed(groups))
    return failure();
  RankedTensorType x = n.type(0), w = n.type(1);
  if (failed(requireOneElementType(n, x, w)))
    return failure();
  int64_t c = x.getDimSize(1), o = w.getDimSize(0);
  if (*groups < 1 || c % *groups != 0 || o % *groups != 0)
    return n.error() << "conv2d: groups " << *groups << " must be >= 1 and divide the input "
                     << "channels " << c << " and the output channels " << o;
  if (w.getDimSize(1) != c / *groups)
    return n.error() << "conv2d: weight " << tcc::formatShape(w.getShape()) << " must have "
                     << c / *groups << " input channels (input channels " << c
                     << " / groups " << *groups << ")";
  tcc::Window2d win = convWindow(w, *stride, *padding, *dilation);
  std::string why = win.check(x.getDimSize(2), x.getDimSize(3));
  if (!why.empty())
    return n.error() << "conv2d: " << why << " (input " << tcc::formatShape(x.getShape())
                     << ")";
  auto type = RankedTensorType::get(
      {x.getDimSize(0), o, win.outH(x.getDimSize(2)), win.outW(x.getDimSize(3))},
      x.getElementType());
  return single(tg::Conv2dOp::create(n.b, n.loc, type, n.operands[0], n.operands[1],
                                     n.b.getDenseI64ArrayAttr(*stride),
                                     n.b.getDenseI64ArrayAttr(*padding),
                                     n.b.getDenseI64ArrayAttr(*dilation),
                                     n.b.getI64IntegerAttr(*groups)));
}

// (N, C_in, H, W) -> (N, C_out, HO, WO), HO = (H - 1) * stride - 2 * padding
// + dilation * (KH - 1) + output_padding + 1: the input gradient of the
// convolution of (N, C_out, HO, WO) by the same weight read as (O = C_in,
// C_out / groups, KH, KW), which maps HO back to H.
NodeResults importConvTranspose2d(NodeContext &n) {
  if (failed(n.arity(2)) ||
      failed(n.attrs({"stride", "padding", "dilation", "groups", "output_padding"})) ||
      failed(n.requireFloat(0)) || failed(n.requireFloat(1)) ||
      failed(requireNchw(n, 0, "input")) || failed(requireNchw(n, 1, "weight")))
    return failure();
  auto stride = pairAttr(n, "stride", {1, 1});
  auto padding = pairAttr(n, "padding", {0, 0});
  auto dilation = pairAttr(n, "dilation", {1, 1});
  auto outputPadding = pairAttr(n, "output_padding", {0, 0});
  FailureOr<int64_t> groups = n.intAttr("groups", 1);
  if (failed(stride) || failed(padding) || failed(dilation) || failed(outputPadding) ||
      failed(groups))
    return failure();
  RankedTensorType x = n.type(0), w = n.type(1);
  if (failed(requireOneElementType(n, x, w)))
    return failure();
  int64_t cin = x.getDimSize(1);
  if (*groups < 1 || cin % *groups != 0)
    return n.error() << "conv_transpose2d: groups " << *groups
                     << " must be >= 1 and divide the input channels " << cin;
  if (w.getDimSize(0) != cin)
    return n.error() << "conv_transpose2d: weight " << tcc::formatShape(w.getShape())
                     << " must be (C_in = " << cin << ", C_out / groups, KH, KW)";
  int64_t cout = w.getDimSize(1) * *groups;
  tcc::Window2d win = convWindow(w, *stride, *padding, *dilation);
  if (std::string why = win.checkAttributes(); !why.empty())
    return n.error() << "conv_transpose2d: " << why;
  // PyTorch allows output_padding up to max(stride, dilation); at or above
  // the stride the extra rows lie outside what the convolution it
  // transposes maps back (tg.conv2d_input_grad's shape), so they are refused.
  for (int d = 0; d < 2; ++d)
    if ((*outputPadding)[d] < 0 || (*outputPadding)[d] >= (*stride)[d])
      return n.error() << "conv_transpose2d: output_padding " << (*outputPadding)[d]
                       << " must be >= 0 and smaller than the stride " << (*stride)[d]
                       << " (PyTorch also allows it below the dilation; tcc does not)";
  int64_t size[2];
  for (int d = 0; d < 2; ++d)
    size[d] = tcc::Window2d::transposedSize(x.getDimSize(2 + d), w.getDimSize(2 + d),
                                            (*stride)[d], (*padding)[d], (*dilation)[d],
                                            (*outputPadding)[d]);
  if (size[0] < 1 || size[1] < 1)
    return n.error() << "conv_transpose2d: the output would be " << size[0] << " x " << size[1]
                     << " (input " << tcc::formatShape(x.getShape()) << ")";
  std::string why = win.check(size[0], size[1]);
  if (!why.empty())
    return n.error() << "conv_transpose2d: " << why << " (output " << size[0] << " x "
                     << size[1] << ")";
  auto type = RankedTensorType::get({x.getDimSize(0), cout, size[0], size[1]},
                                    x.getElementType());
  return single(tg::Conv2dInputGradOp::create(
      n.b, n.loc, type, n.operands[0], n.operands[1], n.b.getDenseI64ArrayAttr(*stride),
      n.b.getDenseI64ArrayAttr(*padding), n.b.getDenseI64ArrayAttr(*dilation),
      n.b.getI64IntegerAttr(*groups), n.b.getStringAttr("NCHW")));
}

NodeResults importPool2d(NodeContext &n) {
  if (failed(n.arity(1)) || failed(n.attrs({"kernel", "stride", "padding"})) ||
      failed(n.requireFloat(0)) || failed(requireNchw(n, 0, "input")))
    return failure();
  if (!n.hasAttr("kernel"))
    return n.error() << "op " << n.op() << " needs attribute 'kernel' (ints: KH, KW)";
  auto kernel = pairAttr(n, "kernel", {});
  if (failed(kernel))
    return failure();
  auto stride = pairAttr(n, "stride", *kernel);
  auto padding = pairAttr(n, "padding", {0, 0});
  if (failed(stride) || failed(padding))
    return failure();
  RankedTensorType x = n.type(0);
  tcc::Window2d win;
  win.kh = (*kernel)[0], win.kw = (*kernel)[1];
  win.sh = (*stride)[0], win.sw = (*stride)[1];
  win.ph = (*padding)[0], win.pw = (*padding)[1];
  std::string why = win.check(x.getDimSize(2), x.getDimSize(3));
  if (why.empty() && (2 * win.ph > win.kh || 2 * win.pw > win.kw))
    why = "padding must be at most half the kernel";
  if (!why.empty())
    return n.error() << n.op() << ": " << why << " (input " << tcc::formatShape(x.getShape())
                     << ")";
  auto type = RankedTensorType::get({x.getDimSize(0), x.getDimSize(1),
                                     win.outH(x.getDimSize(2)), win.outW(x.getDimSize(3))},
                                    x.getElementType());
  auto k = n.b.getDenseI64ArrayAttr(*kernel), s = n.b.getDenseI64ArrayAttr(*stride),
       p = n.b.getDenseI64ArrayAttr(*padding);
  if (n.op() == "max_pool2d")
    return single(tg::MaxPool2dOp::create(n.b, n.loc, type, n.operands[0], k, s, p));
  return single(tg::AvgPool2dOp::create(n.b, n.loc, type, n.operands[0], k, s, p));
}

} // namespace

std::optional<NodeResults> importVisionNode(NodeContext &n) {
  StringRef op = n.op();
  if (op == "conv2d")
    return importConv2d(n);
  if (op == "conv_transpose2d")
    return importConvTranspose2d(n);
  if (op == "max_pool2d" || op == "avg_pool2d")
    return importPool2d(n);
  if (op == "batch_norm")
    return importBatchNorm(n);
  return std::nullopt;
}

} // namespace tcc
