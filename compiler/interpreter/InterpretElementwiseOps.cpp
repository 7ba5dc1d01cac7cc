// The reference interpreter's elementwise ops (TgElementwiseOps.td) (see TgInterpreter.h): one plain,
// float64 function per op.
#include <algorithm>
#include <cmath>

#include "compiler/interpreter/InterpreterSupport.h"
#include "dialects/tg/TgDialect.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace tcc::interp {
namespace {

FailureOr<Tensor> evalConstant(tg::ConstantOp op) {
  auto attr = op.getValue();
  auto type = cast<ShapedType>(attr.getType());
  Tensor out = Tensor::zeros(type.getShape());
  Type elementType = type.getElementType();
  if (isa<FloatType>(elementType)) {
    auto values = attr.tryGetValues<APFloat>();
    if (!values)
      return op.emitOpError("reference interpreter cannot read this constant");
    for (auto [i, v] : llvm::enumerate(*values)) {
      APFloat asDouble = v;
      bool losesInfo = false;
      asDouble.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven,
                       &losesInfo);
      out.data[i] = asDouble.convertToDouble();
    }
    return out;
  }
  if (auto intType = dyn_cast<IntegerType>(elementType)) {
    auto values = attr.tryGetValues<APInt>();
    if (!values)
      return op.emitOpError("reference interpreter cannot read this constant");
    bool isBool = intType.getWidth() == 1;
    for (auto [i, v] : llvm::enumerate(*values))
      out.data[i] = isBool || intType.isUnsigned()
                        ? static_cast<double>(v.getZExtValue())
                        : static_cast<double>(v.getSExtValue());
    return out;
  }
  return op.emitOpError("reference interpreter supports float and integer "
                        "constants, got element type ")
         << elementType;
}

// Elementwise `combine` of both operands broadcast to the result shape.
template <typename Combine>
Tensor evalBroadcastBinary(Value result, const Tensor &lhs, const Tensor &rhs,
                           Combine combine) {
  ArrayRef<int64_t> shape = staticShape(result);
  Tensor a = broadcast(lhs, shape), b = broadcast(rhs, shape);
  Tensor out = Tensor::zeros(shape);
  for (int64_t i = 0; i < out.numElements(); ++i)
    out.data[i] = combine(a.data[i], b.data[i]);
  return out;
}

Tensor evalAdd(tg::AddOp op, const Tensor &lhs, const Tensor &rhs) {
  return evalBroadcastBinary(op.getResult(), lhs, rhs,
                             [](double a, double b) { return a + b; });
}

Tensor evalMul(tg::MulOp op, const Tensor &lhs, const Tensor &rhs) {
  return evalBroadcastBinary(op.getResult(), lhs, rhs,
                             [](double a, double b) { return a * b; });
}

Tensor evalRelu(const Tensor &input) {
  Tensor out = input;
  for (double &x : out.data)
    x = x > 0.0 ? x : 0.0;
  return out;
}

Tensor evalReluGrad(const Tensor &input, const Tensor &grad) {
  Tensor out = grad;
  for (int64_t i = 0; i < out.numElements(); ++i)
    if (!(input.data[i] > 0.0))
      out.data[i] = 0.0;
  return out;
}

} // namespace

std::optional<OpResults> evaluateElementwiseOp(Operation *op,
                                               ArrayRef<const Tensor *> in) {
  return llvm::TypeSwitch<Operation *, std::optional<OpResults>>(op)
      .Case([&](tg::ConstantOp c) { return singleResult(evalConstant(c)); })
      .Case([&](tg::AddOp a) { return singleResult(evalAdd(a, *in[0], *in[1])); })
      .Case([&](tg::MulOp m) { return singleResult(evalMul(m, *in[0], *in[1])); })
      .Case([&](tg::ReluOp) { return singleResult(evalRelu(*in[0])); })
      .Case([&](tg::ReluGradOp) { return singleResult(evalReluGrad(*in[0], *in[1])); })
      .Default([](Operation *) { return std::nullopt; });
}

} // namespace tcc::interp
