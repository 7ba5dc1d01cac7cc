// Gradients (GradientOpInterface) of the structural ops
// (TgStructuralOps.td), built from the builders of TgStructuralBuilders.h.
// Gradient comments use the op's own operand names.
#include "dialects/tg/TgStructuralBuilders.h"

#include "dialects/common/ModelAttrs.h"
#include "dialects/common/ShapeHelpers.h"
#include "dialects/tg/TgTypeHelpers.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;
using namespace tcc::tg;

//===----------------------------------------------------------------------===//
// Gradients (GradientOpInterface)
//===----------------------------------------------------------------------===//

// result (..., M, N) = op(lhs) x op(rhs). Each case is the matrix identity
// dA = dC op(B)^T, dB = op(A)^T dC, rewritten so no explicit transpose op is
// needed; the transpose flags absorb it. An operand whose batch dimensions
// were broadcast gets the sum over them.
LogicalResult MatmulOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                       SmallVectorImpl<Value> &operandGrads) {
  using build::matmul;
  Value dc = resultGrads[0];
  Value lhs = getLhs(), rhs = getRhs();
  auto lt = rtt(lhs), rt = rtt(rhs);
  Location loc = getLoc();
  bool ta = getTransposeLhs(), tb = getTransposeRhs();
  // A rank-2 B shared by a batched A (a linear layer on (B, T, C)): rather
  // than one (K, N) product per batch and a sum over the batch, fold the
  // batch into the rows: dB = A'^T dC' with A' (B*T, K) and dC' (B*T, N).
  bool foldBatch = rt.getRank() == 2 && lt.getRank() > 2 && !ta;
  Value dl, dr, flatDc;
  if (!ta && !tb) {        // C = A B
    dl = matmul(b, loc, dc, rhs, false, true);  // dC B^T
    if (!foldBatch)
      dr = matmul(b, loc, lhs, dc, true, false); // A^T dC
  } else if (ta && !tb) {  // C = A^T B, A is (K,M)
    dl = matmul(b, loc, rhs, dc, false, true);  // B dC^T
    dr = matmul(b, loc, lhs, dc, false, false); // A dC
  } else if (!ta && tb) {  // C = A B^T, B is (N,K)
    dl = matmul(b, loc, dc, rhs, false, false); // dC B
    if (!foldBatch)
      dr = matmul(b, loc, dc, lhs, true, false); // dC^T A
  } else {                 // C = A^T B^T
    dl = matmul(b, loc, rhs, dc, true, true);   // B^T dC^T
    dr = matmul(b, loc, dc, lhs, true, true);   // dC^T A^T
  }
  if (foldBatch) {
    int64_t k = lt.getShape().back();
    int64_t rows = lt.getNumElements() / k;
    Value flatA = build::reshape(b, loc, lhs, {rows, k});
    flatDc = build::reshape(b, loc, dc, {rows, rtt(dc).getShape().back()});
    dr = tb ? matmul(b, loc, flatDc, flatA, true, false)  // dC'^T A'
            : matmul(b, loc, flatA, flatDc, true, false); // A'^T dC'
  }
  // tg-amp's fp8 precision: the gradient products are FP8 too, the
  // incoming gradient dC in E5M2 (its range), the saved operand in E4M3.
  if ((*this)->hasAttr(model::kFp8Attr)) {
    for (Value g : {dl, dr}) {
      auto product = g.getDefiningOp<MatmulOp>();
      if (!product)
        continue;
      bool lhsIsGrad = product.getLhs() == dc || (flatDc && product.getLhs() == flatDc);
      product->setAttr(model::kFp8Attr,
                       b.getStringAttr(lhsIsGrad ? "e5m2xe4m3" : "e4m3xe5m2"));
    }
  }
  operandGrads.push_back(sumToShape(b, loc, dl, lt));
  operandGrads.push_back(sumToShape(b, loc, dr, rt));
  return success();
}

LogicalResult
SoftmaxCrossEntropyOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                      SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(SoftmaxCrossEntropyGradOp::create(
      b, getLoc(), getLogits().getType(), getLogits(), getLabels(),
      resultGrads[0]));
  operandGrads.push_back(Value()); // integer labels: no gradient
  return success();
}

// d logits = (softmax(logits) - onehot(targets)) * weights * g / denominator.
LogicalResult
CrossEntropyOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  Location loc = getLoc();
  Value logits = getLogits();
  build::CrossEntropyParts parts =
      build::crossEntropyParts(b, loc, logits, getTargets(), ignoreIndex());
  Value probs = build::softmax(b, loc, logits, rtt(logits).getRank() - 1);
  Value d = build::sub(b, loc, probs, parts.oneHot);
  if (parts.weights)
    d = build::mul(b, loc, d, parts.weights);
  Value scale = build::div(b, loc, resultGrads[0], parts.denominator);
  operandGrads.push_back(build::mul(b, loc, d, scale));
  operandGrads.push_back(Value()); // integer targets: no gradient
  return success();
}

// y = softmax(x): dx = y * (g - sum(g * y)). For bf16/f16 the products
// g * y are formed in f32 and rounded once to x's type before the f32 sum
// (so the sum reads a 16-bit buffer, not f32 copies of g and y: half the
// bytes of this, the step's largest backward stage), and dx is computed in
// f32 from g, y and the f32 sum, rounded once.
LogicalResult SoftmaxOp::buildGradients(OpBuilder &b,
                                        ArrayRef<Value> resultGrads,
                                        SmallVectorImpl<Value> &operandGrads) {
  Location loc = getLoc();
  Type elt = rtt(getResult()).getElementType();
  Type math = build::isHalfFloat(elt) ? Type(b.getF32Type()) : elt;
  Value y = getResult(), g = resultGrads[0];
  int64_t axis = getAxis();
  Value dot = build::reduceSum(b, loc, build::castTo(b, loc, build::mul(b, loc, g, y), math),
                               {axis}, /*keepDims=*/true);
  Value dx = build::mul(b, loc, build::castTo(b, loc, y, math),
                        build::sub(b, loc, build::castTo(b, loc, g, math), dot));
  operandGrads.push_back(build::castTo(b, loc, dx, elt));
  return success();
}

// y = log_softmax(x): dx = g - exp(y) * sum(g).
LogicalResult
LogSoftmaxOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                             SmallVectorImpl<Value> &operandGrads) {
  Location loc = getLoc();
  Type elt = rtt(getResult()).getElementType();
  Type math = build::isHalfFloat(elt) ? Type(b.getF32Type()) : elt;
  Value y = build::castTo(b, loc, getResult(), math);
  Value g = build::castTo(b, loc, resultGrads[0], math);
  int64_t axis = getAxis();
  Value total = build::reduceSum(b, loc, g, {axis}, /*keepDims=*/true);
  operandGrads.push_back(build::castTo(
      b, loc,
      build::sub(b, loc, g, build::mul(b, loc, build::exp(b, loc, y), total)),
      elt));
  return success();
}

// One fused op each way (statistics recomputed from the input); its
// primitive expansion is build::normGradExpansion.
LogicalResult LayerNormOp::buildGradients(OpBuilder &b,
                                          ArrayRef<Value> resultGrads,
                                          SmallVectorImpl<Value> &operandGrads) {
  Value weight = getWeight(), bias = getBias();
  auto grad = LayerNormGradOp::create(
      b, getLoc(), getInput().getType(), weight ? weight.getType() : Type(),
      bias ? bias.getType() : Type(), resultGrads[0], getInput(), weight, getEpsAttr());
  operandGrads.push_back(grad.getInputGrad());
  if (weight)
    operandGrads.push_back(grad.getWeightGrad());
  if (bias)
    operandGrads.push_back(grad.getBiasGrad());
  return success();
}

LogicalResult RmsNormOp::buildGradients(OpBuilder &b,
                                        ArrayRef<Value> resultGrads,
                                        SmallVectorImpl<Value> &operandGrads) {
  Value weight = getWeight();
  auto grad = RmsNormGradOp::create(b, getLoc(), getInput().getType(),
                                    weight ? weight.getType() : Type(), resultGrads[0],
                                    getInput(), weight, getEpsAttr());
  operandGrads.push_back(grad.getInputGrad());
  if (weight)
    operandGrads.push_back(grad.getWeightGrad());
  return success();
}

// Masked positions are constants: their gradient is 0.
LogicalResult
CausalMaskOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                             SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(CausalMaskOp::create(b, getLoc(), getType(),
                                              resultGrads[0],
                                              b.getF64FloatAttr(0.0)));
  return success();
}

LogicalResult GatherOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                       SmallVectorImpl<Value> &operandGrads) {
  if (isFloatTensor(getTable()))
    operandGrads.push_back(ScatterAddOp::create(
        b, getLoc(), getTable().getType(), getIds(), resultGrads[0]));
  else
    operandGrads.push_back(Value());
  operandGrads.push_back(Value()); // integer ids: no gradient
  return success();
}

LogicalResult
ScatterAddOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                             SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(Value()); // integer ids: no gradient
  operandGrads.push_back(GatherOp::create(b, getLoc(), getUpdates().getType(),
                                          resultGrads[0], getIds()));
  return success();
}

// d(input) = broadcast of d(result) back over the reduced axes.
static Value broadcastReduced(OpBuilder &b, Location loc, Value dc,
                              RankedTensorType inType, ArrayRef<int64_t> axes) {
  auto keptType = RankedTensorType::get(
      tcc::reducedShape(inType.getShape(), axes, true), inType.getElementType());
  if (dc.getType() != keptType)
    dc = ReshapeOp::create(b, loc, keptType, dc);
  return BroadcastToOp::create(b, loc, inType, dc);
}

LogicalResult ReduceSumOp::buildGradients(OpBuilder &b,
                                          ArrayRef<Value> resultGrads,
                                          SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(broadcastReduced(b, getLoc(), resultGrads[0],
                                          rtt(getInput()), getAxes()));
  return success();
}

LogicalResult
ReduceMeanOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                             SmallVectorImpl<Value> &operandGrads) {
  auto inType = rtt(getInput());
  int64_t count = 1;
  for (int64_t a : getAxes())
    count *= inType.getDimSize(a);
  Value spread =
      broadcastReduced(b, getLoc(), resultGrads[0], inType, getAxes());
  auto scalarType = RankedTensorType::get({}, inType.getElementType());
  Value scale = ConstantOp::create(
      b, getLoc(), scalarType,
      DenseElementsAttr::get(scalarType,
                             b.getFloatAttr(inType.getElementType(),
                                            1.0 / static_cast<double>(count))));
  operandGrads.push_back(MulOp::create(b, getLoc(), inType, spread, scale));
  return success();
}

// The positions equal to the maximum share the gradient equally:
// dx = [x == max] * g / count(x == max).
LogicalResult ReduceMaxOp::buildGradients(OpBuilder &b,
                                          ArrayRef<Value> resultGrads,
                                          SmallVectorImpl<Value> &operandGrads) {
  Location loc = getLoc();
  auto inType = rtt(getInput());
  SmallVector<int64_t> kept = tcc::reducedShape(inType.getShape(), getAxes(), true);
  Value max = build::reshape(b, loc, getResult(), kept);
  Value g = build::reshape(b, loc, resultGrads[0], kept);
  Value isMax = build::indicator(b, loc, build::equal(b, loc, getInput(), max),
                                 inType.getElementType());
  Value count = build::reduceSum(b, loc, isMax, getAxes(), /*keepDims=*/true);
  operandGrads.push_back(
      build::mul(b, loc, isMax, build::div(b, loc, g, count)));
  return success();
}

LogicalResult
BroadcastToOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(
      sumToShape(b, getLoc(), resultGrads[0], rtt(getInput())));
  return success();
}

LogicalResult ReshapeOp::buildGradients(OpBuilder &b,
                                        ArrayRef<Value> resultGrads,
                                        SmallVectorImpl<Value> &operandGrads) {
  if (!isFloatTensor(getInput())) {
    operandGrads.push_back(Value());
    return success();
  }
  operandGrads.push_back(ReshapeOp::create(b, getLoc(), getInput().getType(),
                                           resultGrads[0]));
  return success();
}

LogicalResult
TransposeOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                            SmallVectorImpl<Value> &operandGrads) {
  if (!isFloatTensor(getInput())) {
    operandGrads.push_back(Value());
    return success();
  }
  ArrayRef<int64_t> perm = getPerm();
  SmallVector<int64_t> inverse(perm.size());
  for (auto [i, p] : llvm::enumerate(perm))
    inverse[p] = i;
  operandGrads.push_back(
      build::transpose(b, getLoc(), resultGrads[0], inverse));
  return success();
}

LogicalResult SliceOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                      SmallVectorImpl<Value> &operandGrads) {
  if (!isFloatTensor(getInput())) {
    operandGrads.push_back(Value());
    return success();
  }
  operandGrads.push_back(build::padWithZeros(b, getLoc(), resultGrads[0],
                                             rtt(getInput()), getStarts()));
  return success();
}

LogicalResult ConcatOp::buildGradients(OpBuilder &b,
                                       ArrayRef<Value> resultGrads,
                                       SmallVectorImpl<Value> &operandGrads) {
  int64_t axis = getAxis(), start = 0;
  for (Value in : getInputs()) {
    int64_t size = rtt(in).getDimSize(axis);
    if (!isFloatTensor(in))
      operandGrads.push_back(Value());
    else if (getInputs().size() == 1)
      operandGrads.push_back(resultGrads[0]);
    else
      operandGrads.push_back(
          build::sliceAxis(b, getLoc(), resultGrads[0], axis, start, size));
    start += size;
  }
  return success();
}

// Autodiff gives zeros to pieces that do not reach the loss.
LogicalResult SplitOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                      SmallVectorImpl<Value> &operandGrads) {
  if (!isFloatTensor(getInput())) {
    operandGrads.push_back(Value());
    return success();
  }
  operandGrads.push_back(
      resultGrads.size() == 1
          ? resultGrads[0]
          : build::concat(b, getLoc(), resultGrads, getAxis()));
  return success();
}

// train_select(train, eval) is `train` wherever gradients are taken (the
// training step); the eval computation gets none.
LogicalResult TrainSelectOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                            SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(resultGrads[0]);
  operandGrads.push_back(Value());
  return success();
}
