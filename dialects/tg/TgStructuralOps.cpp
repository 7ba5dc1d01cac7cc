// Verifiers, gradients and builders of the structural ops
// (TgStructuralOps.td). Gradient comments use the op's own operand names.
#include "dialects/tg/TgStructuralBuilders.h"

#include <cmath>
#include <limits>
#include <numeric>

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;
using namespace tcc::tg;

static RankedTensorType rtt(Value v) {
  return cast<RankedTensorType>(v.getType());
}

static bool isFloatTensor(Value v) {
  return isa<FloatType>(rtt(v).getElementType());
}

//===----------------------------------------------------------------------===//
// Shape helpers
//===----------------------------------------------------------------------===//

namespace tcc::tg {

std::optional<SmallVector<int64_t>> matmulShape(ArrayRef<int64_t> lhs,
                                                ArrayRef<int64_t> rhs,
                                                bool transposeLhs,
                                                bool transposeRhs) {
  if (lhs.size() < 2 || rhs.size() < 2)
    return std::nullopt;
  size_t lr = lhs.size(), rr = rhs.size();
  int64_t m = lhs[transposeLhs ? lr - 1 : lr - 2];
  int64_t kl = lhs[transposeLhs ? lr - 2 : lr - 1];
  int64_t kr = rhs[transposeRhs ? rr - 1 : rr - 2];
  int64_t n = rhs[transposeRhs ? rr - 2 : rr - 1];
  if (kl != kr)
    return std::nullopt;
  auto batch = broadcastShapes(lhs.drop_back(2), rhs.drop_back(2));
  if (!batch)
    return std::nullopt;
  batch->push_back(m);
  batch->push_back(n);
  return batch;
}

} // namespace tcc::tg

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
  auto shape = broadcastShapes(rtt(x).getShape(), rtt(y).getShape());
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
  shape = *broadcastShapes(shape, rtt(y).getShape());
  return SelectOp::create(b, loc, tensorOf(shape, rtt(x).getElementType()),
                          cond, x, y);
}

Value indicator(OpBuilder &b, Location loc, Value cond, Type elementType) {
  return select(b, loc, cond, scalar(b, loc, elementType, 1.0),
                scalar(b, loc, elementType, 0.0));
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
  auto type = tensorOf(reducedShape(rtt(x).getShape(), axes, keepDims),
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
SoftmaxPrefix softmaxPrefix(OpBuilder &b, Location loc, Value x, int64_t axis) {
  Value max = reduceMax(b, loc, x, {axis}, /*keepDims=*/true);
  Value shifted = sub(b, loc, x, max);
  Value exps = exp(b, loc, shifted);
  Value sum = reduceSum(b, loc, exps, {axis}, /*keepDims=*/true);
  return {shifted, exps, sum};
}
} // namespace

Value softmax(OpBuilder &b, Location loc, Value x, int64_t axis) {
  SoftmaxPrefix p = softmaxPrefix(b, loc, x, axis);
  return div(b, loc, p.exps, p.sum);
}

Value logSoftmax(OpBuilder &b, Location loc, Value x, int64_t axis) {
  SoftmaxPrefix p = softmaxPrefix(b, loc, x, axis);
  return sub(b, loc, p.shifted, log(b, loc, p.sum));
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

//===----------------------------------------------------------------------===//
// Verifiers
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::verify() {
  auto l = rtt(getLhs()), r = rtt(getRhs()), out = rtt(getResult());
  if (l.getRank() < 2 || r.getRank() < 2)
    return emitOpError("expects rank-2 operands or batches of them, got lhs ")
           << formatShape(l.getShape()) << ", rhs " << formatShape(r.getShape());
  if (l.getElementType() != r.getElementType() ||
      l.getElementType() != out.getElementType())
    return emitOpError("operands and result must have one element type");
  int64_t lr = l.getRank(), rr = r.getRank();
  int64_t kl = l.getDimSize(getTransposeLhs() ? lr - 2 : lr - 1);
  int64_t kr = r.getDimSize(getTransposeRhs() ? rr - 1 : rr - 2);
  if (kl != kr)
    return emitOpError("contraction sizes differ: lhs ")
           << formatShape(l.getShape()) << " and rhs " << formatShape(r.getShape())
           << " give K = " << kl << " vs " << kr;
  if (!broadcastShapes(l.getShape().drop_back(2), r.getShape().drop_back(2)))
    return emitOpError("batch dimensions ")
           << formatShape(l.getShape().drop_back(2)) << " and "
           << formatShape(r.getShape().drop_back(2)) << " do not broadcast";
  auto expected = *matmulShape(l.getShape(), r.getShape(), getTransposeLhs(),
                               getTransposeRhs());
  if (out.getShape() != ArrayRef<int64_t>(expected))
    return emitOpError("result shape ")
           << formatShape(out.getShape()) << " should be " << formatShape(expected);
  return success();
}

static LogicalResult verifyLabels(Operation *op, RankedTensorType logits,
                                  RankedTensorType labels) {
  if (logits.getRank() != 2)
    return op->emitOpError("logits must be (N, C), got ")
           << formatShape(logits.getShape());
  if (labels.getRank() != 1 || labels.getDimSize(0) != logits.getDimSize(0))
    return op->emitOpError("labels must be (")
           << logits.getDimSize(0) << ") to match logits "
           << formatShape(logits.getShape()) << ", got "
           << formatShape(labels.getShape());
  return success();
}

LogicalResult SoftmaxCrossEntropyOp::verify() {
  auto logits = rtt(getLogits()), out = rtt(getResult());
  if (failed(verifyLabels(*this, logits, rtt(getLabels()))))
    return failure();
  if (out.getShape() != ArrayRef<int64_t>{logits.getDimSize(0)} ||
      out.getElementType() != logits.getElementType())
    return emitOpError("result must be one loss per row: ")
           << formatShape({logits.getDimSize(0)}) << " of "
           << logits.getElementType();
  return success();
}

LogicalResult SoftmaxCrossEntropyGradOp::verify() {
  auto logits = rtt(getLogits());
  if (failed(verifyLabels(*this, logits, rtt(getLabels()))))
    return failure();
  if (rtt(getGrad()).getShape() != ArrayRef<int64_t>{logits.getDimSize(0)} ||
      rtt(getGrad()).getElementType() != logits.getElementType())
    return emitOpError("grad must have one entry per row, of the logits' type");
  if (getResult().getType() != logits)
    return emitOpError("result type must equal the logits type");
  return success();
}

LogicalResult CrossEntropyOp::verify() {
  auto logits = rtt(getLogits()), targets = rtt(getTargets());
  if (logits.getRank() < 1)
    return emitOpError("logits must be (..., C), got a scalar");
  if (targets.getShape() != logits.getShape().drop_back())
    return emitOpError("targets must be ")
           << formatShape(logits.getShape().drop_back()) << " to match logits "
           << formatShape(logits.getShape()) << ", got "
           << formatShape(targets.getShape());
  if (rtt(getResult()).getElementType() != logits.getElementType())
    return emitOpError("result must be a scalar of the logits' type ")
           << logits.getElementType();
  return success();
}

static LogicalResult verifyAxis(Operation *op, RankedTensorType type,
                                int64_t axis) {
  if (axis < 0 || axis >= type.getRank())
    return op->emitOpError("axis ")
           << axis << " out of range for " << formatShape(type.getShape());
  return success();
}

LogicalResult SoftmaxOp::verify() {
  return verifyAxis(*this, rtt(getInput()), getAxis());
}

LogicalResult LogSoftmaxOp::verify() {
  return verifyAxis(*this, rtt(getInput()), getAxis());
}

// weight and bias of a normalization over the last axis are (C).
static LogicalResult verifyNorm(Operation *op, Value input, Value result,
                                ArrayRef<std::pair<StringRef, Value>> affine) {
  auto in = rtt(input);
  if (in.getRank() < 1)
    return op->emitOpError("normalizes over the last axis; got a scalar");
  if (result.getType() != in)
    return op->emitOpError("result type must equal the input type");
  for (auto [name, v] : affine) {
    if (!v)
      continue;
    auto t = rtt(v);
    if (t.getShape() != in.getShape().take_back() ||
        t.getElementType() != in.getElementType())
      return op->emitOpError() << name << " must be "
                               << formatShape(in.getShape().take_back())
                               << " of " << in.getElementType() << ", got "
                               << formatShape(t.getShape()) << " of "
                               << t.getElementType();
  }
  return success();
}

LogicalResult LayerNormOp::verify() {
  return verifyNorm(*this, getInput(), getResult(),
                    {{"weight", getWeight()}, {"bias", getBias()}});
}

LogicalResult RmsNormOp::verify() {
  return verifyNorm(*this, getInput(), getResult(), {{"weight", getWeight()}});
}

LogicalResult CausalMaskOp::verify() {
  if (rtt(getInput()).getRank() < 2)
    return emitOpError("input must be (..., T, S), got ")
           << formatShape(rtt(getInput()).getShape());
  return success();
}

// gather's result and scatter_add's updates: one row of `rows` (the table,
// or the scattered-into result) per id, with its element type.
static LogicalResult verifyRowPerId(Operation *op, StringRef what,
                                    RankedTensorType ids, RankedTensorType rows,
                                    StringRef rowsName, RankedTensorType value) {
  if (rows.getRank() < 1)
    return op->emitOpError(rowsName) << " must be (V, ...), got a scalar";
  SmallVector<int64_t> expected(ids.getShape());
  llvm::append_range(expected, rows.getShape().drop_front());
  if (value.getShape() != ArrayRef<int64_t>(expected) ||
      value.getElementType() != rows.getElementType())
    return op->emitOpError(what)
           << " must be " << formatShape(expected) << " of " << rows.getElementType()
           << " (ids shape, then the " << rowsName << "'s row shape), got "
           << formatShape(value.getShape()) << " of " << value.getElementType();
  return success();
}

LogicalResult GatherOp::verify() {
  return verifyRowPerId(*this, "result", rtt(getIds()), rtt(getTable()), "table",
                        rtt(getResult()));
}

LogicalResult ScatterAddOp::verify() {
  return verifyRowPerId(*this, "updates", rtt(getIds()), rtt(getResult()), "result",
                        rtt(getUpdates()));
}

template <typename ReduceOp>
static LogicalResult verifyReduce(ReduceOp op) {
  auto in = rtt(op.getInput()), out = rtt(op.getResult());
  ArrayRef<int64_t> axes = op.getAxes();
  if (axes.empty())
    return op.emitOpError("needs at least one axis");
  for (auto [i, a] : llvm::enumerate(axes)) {
    if (a < 0 || a >= in.getRank())
      return op.emitOpError("axis ") << a << " out of range for rank "
                                     << in.getRank();
    if (i > 0 && axes[i - 1] >= a)
      return op.emitOpError("axes must be sorted and unique");
  }
  auto expected = reducedShape(in.getShape(), axes, op.getKeepDims());
  if (ArrayRef<int64_t>(expected) != out.getShape() ||
      in.getElementType() != out.getElementType())
    return op.emitOpError("result shape ")
           << formatShape(out.getShape()) << " should be " << formatShape(expected);
  return success();
}

LogicalResult ReduceSumOp::verify() { return verifyReduce(*this); }

LogicalResult ReduceMeanOp::verify() { return verifyReduce(*this); }

LogicalResult ReduceMaxOp::verify() { return verifyReduce(*this); }

LogicalResult BroadcastToOp::verify() {
  auto in = rtt(getInput()), out = rtt(getResult());
  auto shape = broadcastShapes(in.getShape(), out.getShape());
  if (in.getElementType() != out.getElementType() || !shape ||
      ArrayRef<int64_t>(*shape) != out.getShape())
    return emitOpError("cannot broadcast ")
           << formatShape(in.getShape()) << " to " << formatShape(out.getShape());
  return success();
}

LogicalResult ReshapeOp::verify() {
  auto in = rtt(getInput()), out = rtt(getResult());
  if (in.getElementType() != out.getElementType())
    return emitOpError("element type must not change");
  if (in.getNumElements() != out.getNumElements())
    return emitOpError("cannot reshape ")
           << formatShape(in.getShape()) << " (" << in.getNumElements()
           << " elements) to " << formatShape(out.getShape()) << " ("
           << out.getNumElements() << " elements)";
  return success();
}

LogicalResult TransposeOp::verify() {
  auto in = rtt(getInput()), out = rtt(getResult());
  ArrayRef<int64_t> perm = getPerm();
  SmallVector<int64_t> sorted(perm);
  llvm::sort(sorted);
  SmallVector<int64_t> identity(in.getRank());
  std::iota(identity.begin(), identity.end(), 0);
  if (sorted != identity)
    return emitOpError("perm ")
           << formatShape(perm) << " is not a permutation of the "
           << in.getRank() << " dimensions of " << formatShape(in.getShape());
  SmallVector<int64_t> expected;
  for (int64_t p : perm)
    expected.push_back(in.getDimSize(p));
  if (out.getShape() != ArrayRef<int64_t>(expected) ||
      out.getElementType() != in.getElementType())
    return emitOpError("result shape ")
           << formatShape(out.getShape()) << " should be "
           << formatShape(expected);
  return success();
}

LogicalResult SliceOp::verify() {
  auto in = rtt(getInput()), out = rtt(getResult());
  ArrayRef<int64_t> starts = getStarts(), ends = getEnds();
  if (starts.size() != static_cast<size_t>(in.getRank()) ||
      ends.size() != static_cast<size_t>(in.getRank()))
    return emitOpError("needs one start and one end per dimension of ")
           << formatShape(in.getShape()) << ", got starts "
           << formatShape(starts) << " and ends " << formatShape(ends);
  SmallVector<int64_t> expected;
  for (int64_t d = 0; d < in.getRank(); ++d) {
    if (starts[d] < 0 || starts[d] >= ends[d] || ends[d] > in.getDimSize(d))
      return emitOpError("dimension ")
             << d << ": [" << starts[d] << ", " << ends[d]
             << ") is not a non-empty range within [0, " << in.getDimSize(d)
             << ")";
    expected.push_back(ends[d] - starts[d]);
  }
  if (out.getShape() != ArrayRef<int64_t>(expected) ||
      out.getElementType() != in.getElementType())
    return emitOpError("result shape ")
           << formatShape(out.getShape()) << " should be "
           << formatShape(expected);
  return success();
}

// Pieces along `axis` (inputs of concat, results of split) against the
// whole: one element type, equal sizes off the axis, sizes adding up.
static LogicalResult verifyPieces(Operation *op, RankedTensorType whole,
                                  TypeRange pieces, int64_t axis,
                                  StringRef what) {
  if (pieces.empty())
    return op->emitOpError("needs at least one ") << what;
  if (failed(verifyAxis(op, whole, axis)))
    return failure();
  int64_t total = 0;
  for (auto [i, t] : llvm::enumerate(pieces)) {
    auto piece = cast<RankedTensorType>(t);
    bool sameOffAxis = piece.getRank() == whole.getRank();
    for (int64_t d = 0; sameOffAxis && d < whole.getRank(); ++d)
      sameOffAxis = d == axis || piece.getDimSize(d) == whole.getDimSize(d);
    if (!sameOffAxis || piece.getElementType() != whole.getElementType())
      return op->emitOpError()
             << what << " #" << i << " " << formatShape(piece.getShape())
             << " of " << piece.getElementType() << " must match "
             << formatShape(whole.getShape()) << " of "
             << whole.getElementType() << " except along axis " << axis;
    total += piece.getDimSize(axis);
  }
  if (total != whole.getDimSize(axis))
    return op->emitOpError("sizes along axis ")
           << axis << " add up to " << total << ", expected "
           << whole.getDimSize(axis);
  return success();
}

LogicalResult ConcatOp::verify() {
  return verifyPieces(*this, rtt(getResult()), getInputs().getTypes(),
                      getAxis(), "input");
}

LogicalResult SplitOp::verify() {
  return verifyPieces(*this, rtt(getInput()), getPieces().getTypes(),
                      getAxis(), "result");
}

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
  Value dl, dr;
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
    Value flatDc =
        build::reshape(b, loc, dc, {rows, rtt(dc).getShape().back()});
    dr = tb ? matmul(b, loc, flatDc, flatA, true, false)  // dC'^T A'
            : matmul(b, loc, flatA, flatDc, true, false); // A'^T dC'
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

// y = softmax(x): dx = y * (g - sum(g * y)).
LogicalResult SoftmaxOp::buildGradients(OpBuilder &b,
                                        ArrayRef<Value> resultGrads,
                                        SmallVectorImpl<Value> &operandGrads) {
  Location loc = getLoc();
  Value y = getResult(), g = resultGrads[0];
  int64_t axis = getAxis();
  Value dot = build::reduceSum(b, loc, build::mul(b, loc, g, y), {axis},
                               /*keepDims=*/true);
  operandGrads.push_back(build::mul(b, loc, y, build::sub(b, loc, g, dot)));
  return success();
}

// y = log_softmax(x): dx = g - exp(y) * sum(g).
LogicalResult
LogSoftmaxOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                             SmallVectorImpl<Value> &operandGrads) {
  Location loc = getLoc();
  Value y = getResult(), g = resultGrads[0];
  int64_t axis = getAxis();
  Value total = build::reduceSum(b, loc, g, {axis}, /*keepDims=*/true);
  operandGrads.push_back(build::sub(
      b, loc, g, build::mul(b, loc, build::exp(b, loc, y), total)));
  return success();
}

// With x_hat = (x - mean) * r and dx_hat = g * weight:
//   layer_norm: dx = r * (dx_hat - mean(dx_hat) - x_hat * mean(dx_hat * x_hat))
//   rms_norm:   dx = r * (dx_hat - x_hat * mean(dx_hat * x_hat))
//   d weight = sum over rows of g * x_hat, d bias = sum over rows of g.
static void buildNormGradients(OpBuilder &b, Location loc,
                               build::NormParts parts, Value g, Value weight,
                               Value bias, bool centered,
                               SmallVectorImpl<Value> &operandGrads) {
  Value xhat = parts.normalized;
  int64_t last = rtt(xhat).getRank() - 1;
  Value dxhat = weight ? build::mul(b, loc, g, weight) : g;
  Value projection = build::mul(
      b, loc, xhat,
      build::reduceMean(b, loc, build::mul(b, loc, dxhat, xhat), {last},
                        /*keepDims=*/true));
  Value inner = build::sub(b, loc, dxhat, projection);
  if (centered)
    inner = build::sub(
        b, loc, inner,
        build::reduceMean(b, loc, dxhat, {last}, /*keepDims=*/true));
  operandGrads.push_back(build::mul(b, loc, parts.invStd, inner));
  if (weight)
    operandGrads.push_back(
        sumToShape(b, loc, build::mul(b, loc, g, xhat), rtt(weight)));
  if (bias)
    operandGrads.push_back(sumToShape(b, loc, g, rtt(bias)));
}

LogicalResult LayerNormOp::buildGradients(OpBuilder &b,
                                          ArrayRef<Value> resultGrads,
                                          SmallVectorImpl<Value> &operandGrads) {
  build::NormParts parts = build::layerNormParts(
      b, getLoc(), getInput(), getEps().convertToDouble());
  buildNormGradients(b, getLoc(), parts, resultGrads[0], getWeight(), getBias(),
                     /*centered=*/true, operandGrads);
  return success();
}

LogicalResult RmsNormOp::buildGradients(OpBuilder &b,
                                        ArrayRef<Value> resultGrads,
                                        SmallVectorImpl<Value> &operandGrads) {
  build::NormParts parts = build::rmsNormParts(b, getLoc(), getInput(),
                                               getEps().convertToDouble());
  buildNormGradients(b, getLoc(), parts, resultGrads[0], getWeight(), Value(),
                     /*centered=*/false, operandGrads);
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
      reducedShape(inType.getShape(), axes, true), inType.getElementType());
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
  SmallVector<int64_t> kept = reducedShape(inType.getShape(), getAxes(), true);
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
