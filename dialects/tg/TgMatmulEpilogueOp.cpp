// Verifiers of tg.matmul_epilogue, tg.matmul_dgelu and tg.matmul_bias_grad
// (TgStructuralOps.td):
// the product's contract is tg.matmul's. matmul_epilogue: bias (N) has the
// result's element type (no bias: only with a residual and no activation);
// the result has the product's shape and type, or the residual's type; the
// pre-activation result exists exactly when there is an activation. matmul_dgelu: pre and the result have the product's type.
// matmul_bias_grad: rank-2 operands, rhs (K, N), bias_grad (N), one type.
#include "dialects/common/ShapeHelpers.h"
#include "dialects/tg/TgStructuralBuilders.h"
#include "dialects/tg/TgTypeHelpers.h"

using namespace mlir;
using namespace tcc::tg;

LogicalResult MatmulEpilogueOp::verify() {
  auto l = rtt(getLhs()), r = rtt(getRhs()), out = rtt(getResult());
  StringRef act = getActivation();
  if (act != "none" && act != "gelu_tanh" && act != "gelu_erf")
    return emitOpError("activation must be none, gelu_tanh or gelu_erf, got '")
           << act << "'";
  if (l.getElementType() != r.getElementType())
    return emitOpError("lhs and rhs must have one element type");
  auto product = matmulShape(l.getShape(), r.getShape(), getTransposeLhs(),
                             getTransposeRhs());
  if (!product)
    return emitOpError("lhs ")
           << tcc::formatShape(l.getShape()) << " and rhs "
           << tcc::formatShape(r.getShape())
           << " have no product (contraction sizes or batch dimensions differ)";
  Type productElem = l.getElementType();
  if (out.getShape() != ArrayRef<int64_t>(*product))
    return emitOpError("result shape ")
           << tcc::formatShape(out.getShape()) << " should be the product's "
           << tcc::formatShape(*product);
  Type resultElem = productElem;
  if (Value residual = getResidual()) {
    if (rtt(residual) != out)
      return emitOpError("residual ")
             << rtt(residual) << " must have the result's type " << out;
    resultElem = rtt(residual).getElementType();
  } else if (act == "none" && build::isHalfFloat(productElem) &&
             out.getElementType().isF32()) {
    // The f32 accumulator kept as it is (tg-chunk-loss-head's weight
    // gradient, summed over row chunks in f32).
    resultElem = out.getElementType();
  }
  if (out.getElementType() != resultElem)
    return emitOpError("result element type ")
           << out.getElementType() << " should be " << resultElem
           << (getResidual() ? " (the residual's)"
                             : " (the operands', or f32 for 16-bit operands without an "
                               "activation)");
  int64_t n = product->back();
  if (Value biasValue = getBias()) {
    auto bias = rtt(biasValue);
    if (bias.getRank() != 1 || bias.getDimSize(0) != n)
      return emitOpError("bias must be (") << n << "), got "
                                           << tcc::formatShape(bias.getShape());
    if (bias.getElementType() != resultElem)
      return emitOpError("bias element type ")
             << bias.getElementType() << " should be the result's " << resultElem;
  } else if (!getResidual() || act != "none") {
    return emitOpError("without a bias, needs a residual and no activation");
  }
  Value pre = getPreActivation();
  if ((act == "none") != !pre)
    return emitOpError(pre ? "has a pre_activation result without an activation"
                           : "with an activation must return its pre_activation");
  if (pre && rtt(pre) != RankedTensorType::get(*product, productElem))
    return emitOpError("pre_activation ")
           << rtt(pre) << " should be the product's type "
           << RankedTensorType::get(*product, productElem);
  return success();
}

LogicalResult MatmulDgeluOp::verify() {
  auto l = rtt(getLhs()), r = rtt(getRhs()), out = rtt(getResult());
  if (getApproximate() != "tanh" && getApproximate() != "none")
    return emitOpError("approximate must be tanh or none, got '")
           << getApproximate() << "'";
  if (l.getElementType() != r.getElementType())
    return emitOpError("lhs and rhs must have one element type");
  auto product = matmulShape(l.getShape(), r.getShape(), getTransposeLhs(),
                             getTransposeRhs());
  if (!product)
    return emitOpError("lhs ")
           << tcc::formatShape(l.getShape()) << " and rhs "
           << tcc::formatShape(r.getShape())
           << " have no product (contraction sizes or batch dimensions differ)";
  auto productType = RankedTensorType::get(*product, l.getElementType());
  if (out != productType)
    return emitOpError("result ") << out << " should be the product's type "
                                  << productType;
  if (rtt(getPre()) != productType)
    return emitOpError("pre ") << rtt(getPre()) << " should be the product's type "
                               << productType;
  return success();
}

LogicalResult MatmulBiasGradOp::verify() {
  auto l = rtt(getLhs()), r = rtt(getRhs()), out = rtt(getResult());
  auto grad = rtt(getBiasGrad());
  if (l.getRank() != 2 || r.getRank() != 2)
    return emitOpError("lhs and rhs must be rank 2 (one product), got ")
           << tcc::formatShape(l.getShape()) << " and "
           << tcc::formatShape(r.getShape());
  Type elem = l.getElementType();
  if (r.getElementType() != elem)
    return emitOpError("lhs and rhs must have one element type");
  auto product = matmulShape(l.getShape(), r.getShape(), getTransposeLhs(), false);
  if (!product)
    return emitOpError("lhs ")
           << tcc::formatShape(l.getShape()) << " and rhs "
           << tcc::formatShape(r.getShape()) << " have no product";
  auto productType = RankedTensorType::get(*product, elem);
  if (out != productType)
    return emitOpError("result ") << out << " should be the product's type "
                                  << productType;
  auto gradType = RankedTensorType::get({r.getDimSize(1)}, elem);
  if (grad != gradType)
    return emitOpError("bias_grad ") << grad << " should be " << gradType
                                     << " (the sums of rhs over its rows)";
  return success();
}
