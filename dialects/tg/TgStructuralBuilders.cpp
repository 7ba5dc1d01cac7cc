// Type-inferring builders of tg ops and the expansions of the composite NN
// ops, declared (and explained) in TgStructuralBuilders.h.
#include "dialects/tg/TgStructuralBuilders.h"

#include <limits>
#include <numeric>

#include "dialects/common/ShapeHelpers.h"
#include "dialects/tg/TgTypeHelpers.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;
using namespace tcc::tg;

//===----------------------------------------------------------------------===//
// Builders
//===----------------------------------------------------------------------===//

namespace tcc::tg::build {

RankedTensorType tensorOf(ArrayRef<int64_t> shape, Type elementType) {
  return RankedTensorType::get(shape, elementType);
}

Value splat(OpBuilder &b, Location loc, RankedTensorType type, double value) {
  Type elt = type.getElementType();
  Attribute element;
  if (isa<FloatType>(elt))
    element = b.getFloatAttr(elt, value);
  else
    element = b.getIntegerAttr(elt, static_cast<int64_t>(value));
  return ConstantOp::create(b, loc, type, DenseElementsAttr::get(type, element));
}

Value scalar(OpBuilder &b, Location loc, Type elementType, double value) {
  return splat(b, loc, tensorOf({}, elementType), value);
}

// The numpy broadcast of both shapes; callers pass compatible operands (the
// verifier reports a slip).
static SmallVector<int64_t> broadcastOf(Value x, Value y) {
  auto shape = tcc::broadcastShapes(rtt(x).getShape(), rtt(y).getShape());
  return shape ? *shape : SmallVector<int64_t>(rtt(x).getShape());
}

template <typename OpTy>
static Value binary(OpBuilder &b, Location loc, Value x, Value y) {
  return OpTy::create(b, loc,
                      tensorOf(broadcastOf(x, y), rtt(x).getElementType()), x,
                      y);
}

template <typename OpTy>
static Value compare(OpBuilder &b, Location loc, Value x, Value y) {
  return OpTy::create(b, loc, tensorOf(broadcastOf(x, y), b.getI1Type()), x, y);
}

Value add(OpBuilder &b, Location loc, Value x, Value y) {
  return binary<AddOp>(b, loc, x, y);
}
Value sub(OpBuilder &b, Location loc, Value x, Value y) {
  return binary<SubOp>(b, loc, x, y);
}
Value mul(OpBuilder &b, Location loc, Value x, Value y) {
  return binary<MulOp>(b, loc, x, y);
}
Value div(OpBuilder &b, Location loc, Value x, Value y) {
  return binary<DivOp>(b, loc, x, y);
}
Value maximum(OpBuilder &b, Location loc, Value x, Value y) {
  return binary<MaxOp>(b, loc, x, y);
}
Value neg(OpBuilder &b, Location loc, Value x) {
  return NegOp::create(b, loc, x.getType(), x);
}
Value exp(OpBuilder &b, Location loc, Value x) {
  return ExpOp::create(b, loc, x.getType(), x);
}
Value log(OpBuilder &b, Location loc, Value x) {
  return LogOp::create(b, loc, x.getType(), x);
}
Value rsqrt(OpBuilder &b, Location loc, Value x) {
  return RsqrtOp::create(b, loc, x.getType(), x);
}
Value equal(OpBuilder &b, Location loc, Value x, Value y) {
  return compare<EqualOp>(b, loc, x, y);
}
Value notEqual(OpBuilder &b, Location loc, Value x, Value y) {
  return compare<NotEqualOp>(b, loc, x, y);
}
Value less(OpBuilder &b, Location loc, Value x, Value y) {
  return compare<LessOp>(b, loc, x, y);
}
Value greater(OpBuilder &b, Location loc, Value x, Value y) {
  return compare<GreaterOp>(b, loc, x, y);
}
Value greaterEqual(OpBuilder &b, Location loc, Value x, Value y) {
  return compare<GreaterEqualOp>(b, loc, x, y);
}

Value select(OpBuilder &b, Location loc, Value cond, Value x, Value y) {
  SmallVector<int64_t> shape = broadcastOf(cond, x);
  shape = *tcc::broadcastShapes(shape, rtt(y).getShape());
  return SelectOp::create(b, loc, tensorOf(shape, rtt(x).getElementType()),
                          cond, x, y);
}

Value indicator(OpBuilder &b, Location loc, Value cond, Type elementType) {
  return select(b, loc, cond, scalar(b, loc, elementType, 1.0),
                scalar(b, loc, elementType, 0.0));
}

Value castTo(OpBuilder &b, Location loc, Value x, Type elementType) {
  RankedTensorType type = rtt(x);
  if (type.getElementType() == elementType)
    return x;
  return CastOp::create(b, loc, type.clone(elementType), x);
}

bool isHalfFloat(Type elementType) {
  return elementType.isBF16() || elementType.isF16();
}

Value iota(OpBuilder &b, Location loc, RankedTensorType type, int64_t axis) {
  return IotaOp::create(b, loc, type, b.getI64IntegerAttr(axis));
}

Value matmul(OpBuilder &b, Location loc, Value lhs, Value rhs,
             bool transposeLhs, bool transposeRhs) {
  auto shape = matmulShape(rtt(lhs).getShape(), rtt(rhs).getShape(),
                           transposeLhs, transposeRhs);
  return MatmulOp::create(
      b, loc,
      tensorOf(shape ? *shape : SmallVector<int64_t>(rtt(lhs).getShape()),
               rtt(lhs).getElementType()),
      lhs, rhs, b.getBoolAttr(transposeLhs), b.getBoolAttr(transposeRhs));
}

template <typename OpTy>
static Value reduce(OpBuilder &b, Location loc, Value x, ArrayRef<int64_t> axes,
                    bool keepDims) {
  auto type = tensorOf(tcc::reducedShape(rtt(x).getShape(), axes, keepDims),
                       rtt(x).getElementType());
  return OpTy::create(b, loc, type, x, b.getDenseI64ArrayAttr(axes),
                      b.getBoolAttr(keepDims));
}

Value reduceSum(OpBuilder &b, Location loc, Value x, ArrayRef<int64_t> axes,
                bool keepDims) {
  return reduce<ReduceSumOp>(b, loc, x, axes, keepDims);
}
Value reduceMean(OpBuilder &b, Location loc, Value x, ArrayRef<int64_t> axes,
                 bool keepDims) {
  return reduce<ReduceMeanOp>(b, loc, x, axes, keepDims);
}
Value reduceMax(OpBuilder &b, Location loc, Value x, ArrayRef<int64_t> axes,
                bool keepDims) {
  return reduce<ReduceMaxOp>(b, loc, x, axes, keepDims);
}

Value reduceAll(OpBuilder &b, Location loc, Value x) {
  if (rtt(x).getRank() == 0)
    return x;
  SmallVector<int64_t> axes(rtt(x).getRank());
  std::iota(axes.begin(), axes.end(), 0);
  return reduceSum(b, loc, x, axes, /*keepDims=*/false);
}

Value reshape(OpBuilder &b, Location loc, Value x, ArrayRef<int64_t> shape) {
  auto type = tensorOf(shape, rtt(x).getElementType());
  if (x.getType() == type)
    return x;
  return ReshapeOp::create(b, loc, type, x);
}

Value transpose(OpBuilder &b, Location loc, Value x, ArrayRef<int64_t> perm) {
  SmallVector<int64_t> shape;
  for (int64_t p : perm)
    shape.push_back(rtt(x).getDimSize(p));
  return TransposeOp::create(b, loc, tensorOf(shape, rtt(x).getElementType()),
                             x, b.getDenseI64ArrayAttr(perm));
}

Value slice(OpBuilder &b, Location loc, Value x, ArrayRef<int64_t> starts,
            ArrayRef<int64_t> ends) {
  SmallVector<int64_t> shape;
  for (auto [s, e] : llvm::zip_equal(starts, ends))
    shape.push_back(e - s);
  return SliceOp::create(b, loc, tensorOf(shape, rtt(x).getElementType()), x,
                         b.getDenseI64ArrayAttr(starts),
                         b.getDenseI64ArrayAttr(ends));
}

Value sliceAxis(OpBuilder &b, Location loc, Value x, int64_t axis,
                int64_t start, int64_t size) {
  SmallVector<int64_t> starts(rtt(x).getRank(), 0);
  SmallVector<int64_t> ends(rtt(x).getShape());
  starts[axis] = start;
  ends[axis] = start + size;
  return slice(b, loc, x, starts, ends);
}

Value concat(OpBuilder &b, Location loc, ValueRange inputs, int64_t axis) {
  SmallVector<int64_t> shape(rtt(inputs[0]).getShape());
  shape[axis] = 0;
  for (Value in : inputs)
    shape[axis] += rtt(in).getDimSize(axis);
  return ConcatOp::create(b, loc,
                          tensorOf(shape, rtt(inputs[0]).getElementType()),
                          inputs, b.getI64IntegerAttr(axis));
}

Value padWithZeros(OpBuilder &b, Location loc, Value x, RankedTensorType type,
                   ArrayRef<int64_t> starts) {
  // One concat [zeros, x, zeros] per dimension that is cut, innermost
  // first; each widens that dimension to its full size.
  Value padded = x;
  for (int64_t d = type.getRank() - 1; d >= 0; --d) {
    int64_t before = starts[d];
    int64_t after = type.getDimSize(d) - before - rtt(padded).getDimSize(d);
    if (before == 0 && after == 0)
      continue;
    SmallVector<Value> pieces;
    auto zeros = [&](int64_t size) {
      SmallVector<int64_t> shape(rtt(padded).getShape());
      shape[d] = size;
      return splat(b, loc, tensorOf(shape, type.getElementType()), 0.0);
    };
    if (before > 0)
      pieces.push_back(zeros(before));
    pieces.push_back(padded);
    if (after > 0)
      pieces.push_back(zeros(after));
    padded = concat(b, loc, pieces, d);
  }
  return padded;
}

//===----------------------------------------------------------------------===//
// Expansions
//===----------------------------------------------------------------------===//

namespace {
// z = x - max(x), e = exp(z), s = sum(e) along `axis` (kept as size 1): the
// common prefix of softmax and log_softmax, max-subtracted so exp cannot
// overflow.
struct SoftmaxPrefix {
  Value shifted, exps, sum;
};
// For a bf16/f16 `x`: the max is taken on x itself (exact in any type, and
// read from the 16-bit buffer), then x - max, the exponentials and the sum
// are f32 (`statsType`), so no f32 copy of x is ever stored.
SoftmaxPrefix softmaxPrefix(OpBuilder &b, Location loc, Value x, int64_t axis,
                            Type statsType) {
  Value max = castTo(b, loc, reduceMax(b, loc, x, {axis}, /*keepDims=*/true), statsType);
  Value shifted = sub(b, loc, castTo(b, loc, x, statsType), max);
  Value exps = exp(b, loc, shifted);
  Value sum = reduceSum(b, loc, exps, {axis}, /*keepDims=*/true);
  return {shifted, exps, sum};
}
} // namespace

Value softmax(OpBuilder &b, Location loc, Value x, int64_t axis) {
  Type elt = rtt(x).getElementType();
  Type statsType = isHalfFloat(elt) ? Type(b.getF32Type()) : elt;
  SoftmaxPrefix p = softmaxPrefix(b, loc, x, axis, statsType);
  return castTo(b, loc, div(b, loc, p.exps, p.sum), elt);
}

Value logSoftmax(OpBuilder &b, Location loc, Value x, int64_t axis) {
  Type elt = rtt(x).getElementType();
  Type statsType = isHalfFloat(elt) ? Type(b.getF32Type()) : elt;
  SoftmaxPrefix p = softmaxPrefix(b, loc, x, axis, statsType);
  return castTo(b, loc, sub(b, loc, p.shifted, log(b, loc, p.sum)), elt);
}

CrossEntropyParts crossEntropyParts(OpBuilder &b, Location loc, Value logits,
                                    Value targets,
                                    std::optional<int64_t> ignoreIndex) {
  auto logitsType = rtt(logits);
  Type elt = logitsType.getElementType();
  Type idType = rtt(targets).getElementType();
  int64_t classes = logitsType.getShape().back();
  // targets (...) -> (..., 1), compared with the class positions (C).
  SmallVector<int64_t> columnShape(rtt(targets).getShape());
  columnShape.push_back(1);
  Value column = reshape(b, loc, targets, columnShape);
  Value classIds = iota(b, loc, tensorOf({classes}, idType), 0);
  CrossEntropyParts parts;
  parts.oneHot = indicator(b, loc, equal(b, loc, column, classIds), elt);
  if (ignoreIndex) {
    Value counted =
        notEqual(b, loc, column, scalar(b, loc, idType, *ignoreIndex));
    parts.weights = indicator(b, loc, counted, elt);
    // max(count, 1): a batch with every position ignored has loss 0.
    parts.denominator = maximum(b, loc, reduceAll(b, loc, parts.weights),
                                scalar(b, loc, elt, 1.0));
  } else {
    int64_t positions = rtt(targets).getNumElements();
    parts.denominator =
        scalar(b, loc, elt, static_cast<double>(std::max<int64_t>(positions, 1)));
  }
  return parts;
}

Value crossEntropy(OpBuilder &b, Location loc, Value logits, Value targets,
                   std::optional<int64_t> ignoreIndex) {
  auto logitsType = rtt(logits);
  Type elt = logitsType.getElementType();
  Type idType = rtt(targets).getElementType();
  int64_t classes = logitsType.getShape().back();
  CrossEntropyParts parts =
      crossEntropyParts(b, loc, logits, targets, ignoreIndex);
  Value picked = mul(b, loc, logSoftmax(b, loc, logits, logitsType.getRank() - 1),
                     parts.oneHot);
  if (parts.weights)
    picked = mul(b, loc, picked, parts.weights);
  Value loss =
      div(b, loc, neg(b, loc, reduceAll(b, loc, picked)), parts.denominator);

  // A counted target outside [0, C) matches no class: poison the loss.
  SmallVector<int64_t> columnShape(rtt(targets).getShape());
  columnShape.push_back(1);
  Value column = reshape(b, loc, targets, columnShape);
  Value below = indicator(b, loc, less(b, loc, column, scalar(b, loc, idType, 0)),
                          elt);
  Value above = indicator(
      b, loc,
      greaterEqual(b, loc, column,
                   scalar(b, loc, idType, static_cast<double>(classes))),
      elt);
  Value outside = add(b, loc, below, above);
  if (parts.weights)
    outside = mul(b, loc, outside, parts.weights);
  Value anyOutside = greater(b, loc, reduceAll(b, loc, outside),
                             scalar(b, loc, elt, 0.0));
  return select(b, loc, anyOutside,
                scalar(b, loc, elt, std::numeric_limits<double>::quiet_NaN()),
                loss);
}

NormParts layerNormParts(OpBuilder &b, Location loc, Value x, double eps) {
  // x is (..., C); statistics are (..., 1).
  int64_t last = rtt(x).getRank() - 1;
  Type elt = rtt(x).getElementType();
  Value mean = reduceMean(b, loc, x, {last}, /*keepDims=*/true);
  Value centered = sub(b, loc, x, mean);
  Value variance = reduceMean(b, loc, mul(b, loc, centered, centered), {last},
                              /*keepDims=*/true);
  Value invStd =
      rsqrt(b, loc, add(b, loc, variance, scalar(b, loc, elt, eps)));
  return {mul(b, loc, centered, invStd), invStd};
}

NormParts rmsNormParts(OpBuilder &b, Location loc, Value x, double eps) {
  int64_t last = rtt(x).getRank() - 1;
  Type elt = rtt(x).getElementType();
  Value meanSquare =
      reduceMean(b, loc, mul(b, loc, x, x), {last}, /*keepDims=*/true);
  Value invRms =
      rsqrt(b, loc, add(b, loc, meanSquare, scalar(b, loc, elt, eps)));
  return {mul(b, loc, x, invRms), invRms};
}

// With x_hat = (x - mean) * r and dx_hat = g * weight:
//   layer_norm: dx = r * (dx_hat - mean(dx_hat) - x_hat * mean(dx_hat * x_hat))
//   rms_norm:   dx = r * (dx_hat - x_hat * mean(dx_hat * x_hat))
//   d weight = sum over rows of g * x_hat, d bias = sum over rows of g.
SmallVector<Value> normGradExpansion(OpBuilder &b, Location loc, Value grad, Value x,
                                     Value weight, bool withBias, double eps,
                                     bool centered) {
  NormParts parts = centered ? layerNormParts(b, loc, x, eps) : rmsNormParts(b, loc, x, eps);
  Value g = castTo(b, loc, grad, rtt(x).getElementType());
  Value xhat = parts.normalized;
  int64_t last = rtt(xhat).getRank() - 1;
  SmallVector<int64_t> rows;
  for (int64_t a = 0; a < last; ++a)
    rows.push_back(a);
  Value dxhat = weight ? mul(b, loc, g, weight) : g;
  Value projection = mul(
      b, loc, xhat,
      reduceMean(b, loc, mul(b, loc, dxhat, xhat), {last}, /*keepDims=*/true));
  Value inner = sub(b, loc, dxhat, projection);
  if (centered)
    inner = sub(b, loc, inner, reduceMean(b, loc, dxhat, {last}, /*keepDims=*/true));
  SmallVector<Value> grads{mul(b, loc, parts.invStd, inner)};
  // Summing over no axis (a rank-1 x) is the value itself.
  auto sumRows = [&](Value v) { return rows.empty() ? v : reduceSum(b, loc, v, rows, false); };
  if (weight)
    grads.push_back(sumRows(mul(b, loc, g, xhat)));
  if (withBias)
    grads.push_back(sumRows(g));
  return grads;
}

Type batchNormStatsType(Type inputElement) {
  return isHalfFloat(inputElement) ? Float32Type::get(inputElement.getContext())
                                   : inputElement;
}

Value perChannel(OpBuilder &b, Location loc, Value vector, int64_t rank) {
  SmallVector<int64_t> shape(rank, 1);
  shape[1] = rtt(vector).getNumElements();
  return reshape(b, loc, vector, shape);
}

Value batchNormRstd(OpBuilder &b, Location loc, Value var, double eps) {
  return rsqrt(b, loc, add(b, loc, var, scalar(b, loc, rtt(var).getElementType(), eps)));
}

// ((x - mean) * rstd) * weight + bias in the statistics' type: one
// elementwise kernel after fusion, which a following ReLU or residual add
// joins.
Value batchNormNormalize(OpBuilder &b, Location loc, Value x, Value mean, Value rstd,
                         Value weight, Value bias) {
  int64_t rank = rtt(x).getRank();
  Type stats = rtt(mean).getElementType();
  auto channel = [&](Value v) {
    return v ? perChannel(b, loc, castTo(b, loc, v, stats), rank) : Value();
  };
  Value xhat = mul(b, loc, sub(b, loc, castTo(b, loc, x, stats), channel(mean)), channel(rstd));
  return castTo(b, loc, affine(b, loc, xhat, channel(weight), channel(bias)),
                rtt(x).getElementType());
}

// rstd * weight * (g - sum(g) / n - x_hat * sum(g x_hat) / n), with the
// per-channel factors folded into (C) vectors first so the full-size work
// is one multiply-add chain.
Value batchNormInputGrad(OpBuilder &b, Location loc, Value grad, Value x, Value mean,
                         Value rstd, Value weight, Value gradSum, Value gradXhatSum) {
  auto xt = rtt(x);
  int64_t rank = xt.getRank();
  Type stats = rtt(mean).getElementType();
  double n = static_cast<double>(xt.getNumElements() / std::max<int64_t>(1, xt.getDimSize(1)));
  Value invN = scalar(b, loc, stats, 1.0 / n);
  Value scale = weight ? mul(b, loc, rstd, castTo(b, loc, weight, stats)) : rstd; // (C)
  Value meanG = mul(b, loc, gradSum, invN);                                       // (C)
  Value meanGx = mul(b, loc, gradXhatSum, invN);                                  // (C)
  Value xhat = mul(b, loc, sub(b, loc, castTo(b, loc, x, stats), perChannel(b, loc, mean, rank)),
                   perChannel(b, loc, rstd, rank));
  Value inner = sub(b, loc, sub(b, loc, castTo(b, loc, grad, stats), perChannel(b, loc, meanG, rank)),
                    mul(b, loc, xhat, perChannel(b, loc, meanGx, rank)));
  return castTo(b, loc, mul(b, loc, inner, perChannel(b, loc, scale, rank)), xt.getElementType());
}

Value affine(OpBuilder &b, Location loc, Value normalized, Value weight,
             Value bias) {
  Value y = normalized;
  if (weight)
    y = mul(b, loc, y, weight);
  if (bias)
    y = add(b, loc, y, bias);
  return y;
}

Value causalMask(OpBuilder &b, Location loc, Value x, double value) {
  // x is (..., T, S). Masked: key j > query i + (S - T), i.e.
  // j + max(T - S, 0) > i + max(S - T, 0). Integer positions keep the
  // comparison exact at any size; a shifted position range is the tail of
  // a longer iota.
  auto type = rtt(x);
  int64_t rank = type.getRank();
  int64_t t = type.getDimSize(rank - 2), s = type.getDimSize(rank - 1);
  int64_t n = std::max(t, s);
  Type i64 = b.getI64Type();
  Value keys = iota(b, loc, tensorOf({1, n}, i64), 1);
  if (s != n)
    keys = slice(b, loc, keys, {0, n - s}, {1, n});
  Value queries = iota(b, loc, tensorOf({n, 1}, i64), 0);
  if (t != n)
    queries = slice(b, loc, queries, {n - t, 0}, {n, 1});
  Value future = greater(b, loc, keys, queries); // (T, S)
  return select(b, loc, future, scalar(b, loc, type.getElementType(), value),
                x);
}

SmallVector<Value> splitIntoSlices(OpBuilder &b, Location loc, Value x,
                                   int64_t axis, TypeRange pieceTypes) {
  SmallVector<Value> pieces;
  int64_t start = 0;
  for (Type t : pieceTypes) {
    int64_t size = cast<RankedTensorType>(t).getDimSize(axis);
    pieces.push_back(sliceAxis(b, loc, x, axis, start, size));
    start += size;
  }
  return pieces;
}

} // namespace tcc::tg::build
