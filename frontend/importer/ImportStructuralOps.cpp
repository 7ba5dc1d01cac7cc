// Model nodes -> tg structural ops (dialects/tg/TgStructuralOps.td): linear
// algebra, reductions, shapes, losses.
#include <algorithm>

#include "dialects/tg/TgDialect.h"
#include "frontend/importer/NodeImporter.h"

using namespace mlir;

namespace tcc {

const char *structuralOpNames() {
  return "matmul, softmax_cross_entropy, mean, sum, reshape";
}

namespace {

NodeResults importMatmul(NodeContext &n) {
  if (failed(n.arity(2)) || failed(n.attrs({"transpose_a", "transpose_b"})) ||
      failed(n.requireFloat(0)) || failed(n.requireFloat(1)))
    return failure();
  FailureOr<bool> ta = n.boolAttr("transpose_a", false);
  FailureOr<bool> tb = n.boolAttr("transpose_b", false);
  if (failed(ta) || failed(tb))
    return failure();
  auto l = n.type(0), r = n.type(1);
  if (l.getRank() != 2 || r.getRank() != 2)
    return n.error() << "matmul expects 2-D inputs, got "
                     << tg::formatShape(l.getShape()) << " x "
                     << tg::formatShape(r.getShape());
  int64_t m = l.getDimSize(*ta ? 1 : 0), kl = l.getDimSize(*ta ? 0 : 1);
  int64_t kr = r.getDimSize(*tb ? 1 : 0), cols = r.getDimSize(*tb ? 0 : 1);
  if (kl != kr)
    return n.error() << "shape mismatch: " << tg::formatShape(l.getShape())
                     << " x " << tg::formatShape(r.getShape())
                     << " contracts K = " << kl << " with K = " << kr;
  auto out = RankedTensorType::get({m, cols}, l.getElementType());
  return SmallVector<Value, 1>{tg::MatmulOp::create(
      n.b, n.loc, out, n.operands[0], n.operands[1], n.b.getBoolAttr(*ta),
      n.b.getBoolAttr(*tb))};
}

NodeResults importSoftmaxCrossEntropy(NodeContext &n) {
  if (failed(n.arity(2)) || failed(n.attrs({})) || failed(n.requireFloat(0)))
    return failure();
  auto logits = n.type(0), labels = n.type(1);
  if (!isa<IntegerType>(labels.getElementType()))
    return n.error() << "labels '" << n.node.inputs(1)
                     << "' must be I32 or I64, got " << labels;
  if (logits.getRank() != 2 || labels.getRank() != 1 ||
      labels.getDimSize(0) != logits.getDimSize(0))
    return n.error() << "shape mismatch: logits must be (N, C) and labels (N), got "
                     << tg::formatShape(logits.getShape()) << " and "
                     << tg::formatShape(labels.getShape());
  auto out = RankedTensorType::get({logits.getDimSize(0)}, logits.getElementType());
  return SmallVector<Value, 1>{tg::SoftmaxCrossEntropyOp::create(
      n.b, n.loc, out, n.operands[0], n.operands[1])};
}

// mean, sum: `axes` (default all, negative counts from the end), keep_dims.
NodeResults importReduce(NodeContext &n) {
  if (failed(n.arity(1)) || failed(n.attrs({"axes", "keep_dims"})) ||
      failed(n.requireFloat(0)))
    return failure();
  auto in = n.type(0);
  FailureOr<SmallVector<int64_t>> axes = n.intsAttr("axes");
  FailureOr<bool> keep = n.boolAttr("keep_dims", false);
  if (failed(axes) || failed(keep))
    return failure();
  if (axes->empty())
    for (int64_t i = 0; i < in.getRank(); ++i)
      axes->push_back(i);
  for (int64_t &a : *axes) {
    if (a < -in.getRank() || a >= in.getRank())
      return n.error() << "axis " << a << " out of range for "
                       << tg::formatShape(in.getShape());
    if (a < 0)
      a += in.getRank();
  }
  llvm::sort(*axes);
  if (std::adjacent_find(axes->begin(), axes->end()) != axes->end())
    return n.error() << "axes repeat an axis";
  if (axes->empty())
    return n.error() << "cannot reduce a scalar";
  auto out = RankedTensorType::get(
      tg::reducedShape(in.getShape(), *axes, *keep), in.getElementType());
  auto axesAttr = n.b.getDenseI64ArrayAttr(*axes);
  Value v = n.op() == "mean"
                ? tg::ReduceMeanOp::create(n.b, n.loc, out, n.operands[0],
                                           axesAttr, n.b.getBoolAttr(*keep))
                      .getResult()
                : tg::ReduceSumOp::create(n.b, n.loc, out, n.operands[0],
                                          axesAttr, n.b.getBoolAttr(*keep))
                      .getResult();
  return SmallVector<Value, 1>{v};
}

NodeResults importReshape(NodeContext &n) {
  if (failed(n.arity(1)) || failed(n.attrs({"shape"})))
    return failure();
  FailureOr<SmallVector<int64_t>> shape = n.intsAttr("shape");
  if (failed(shape))
    return failure();
  auto in = n.type(0);
  int64_t count = 1;
  for (int64_t d : *shape) {
    if (d <= 0)
      return n.error() << "reshape target " << tg::formatShape(*shape)
                       << " has a non-positive dimension";
    count *= d;
  }
  if (count != in.getNumElements())
    return n.error() << "cannot reshape " << tg::formatShape(in.getShape())
                     << " to " << tg::formatShape(*shape);
  auto out = RankedTensorType::get(*shape, in.getElementType());
  return SmallVector<Value, 1>{
      tg::ReshapeOp::create(n.b, n.loc, out, n.operands[0])};
}

} // namespace

std::optional<NodeResults> importStructuralNode(NodeContext &n) {
  StringRef op = n.op();
  if (op == "matmul")
    return importMatmul(n);
  if (op == "softmax_cross_entropy")
    return importSoftmaxCrossEntropy(n);
  if (op == "mean" || op == "sum")
    return importReduce(n);
  if (op == "reshape")
    return importReshape(n);
  return std::nullopt;
}

} // namespace tcc
