// Model nodes -> tg elementwise ops (dialects/tg/TgElementwiseOps.td).
#include "dialects/tg/TgDialect.h"
#include "frontend/importer/NodeImporter.h"

using namespace mlir;

namespace tcc {

const char *elementwiseOpNames() { return "add, mul, relu"; }

namespace {

// add, mul: numpy broadcasting of two float tensors of one dtype.
NodeResults importBroadcastBinary(NodeContext &n) {
  if (failed(n.arity(2)) || failed(n.attrs({})) || failed(n.requireFloat(0)) ||
      failed(n.requireFloat(1)))
    return failure();
  auto l = n.type(0), r = n.type(1);
  if (l.getElementType() != r.getElementType())
    return n.error() << "inputs have different dtypes: " << l << " and " << r;
  auto shape = tg::broadcastShapes(l.getShape(), r.getShape());
  if (!shape)
    return n.error() << "shape mismatch: " << tg::formatShape(l.getShape())
                     << " and " << tg::formatShape(r.getShape())
                     << " do not broadcast";
  auto out = RankedTensorType::get(*shape, l.getElementType());
  Value v = n.op() == "add"
                ? tg::AddOp::create(n.b, n.loc, out, n.operands[0], n.operands[1])
                      .getResult()
                : tg::MulOp::create(n.b, n.loc, out, n.operands[0], n.operands[1])
                      .getResult();
  return SmallVector<Value, 1>{v};
}

NodeResults importRelu(NodeContext &n) {
  if (failed(n.arity(1)) || failed(n.attrs({})) || failed(n.requireFloat(0)))
    return failure();
  return SmallVector<Value, 1>{
      tg::ReluOp::create(n.b, n.loc, n.type(0), n.operands[0])};
}

} // namespace

std::optional<NodeResults> importElementwiseNode(NodeContext &n) {
  StringRef op = n.op();
  if (op == "add" || op == "mul")
    return importBroadcastBinary(n);
  if (op == "relu")
    return importRelu(n);
  return std::nullopt;
}

} // namespace tcc
