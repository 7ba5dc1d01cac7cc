// Verifiers of the structural ops (TgStructuralOps.td), and matmulShape,
// which verifiers and builders share. Builders: TgStructuralBuilders.cpp;
// gradients: TgStructuralGradients.cpp.
#include "dialects/tg/TgStructuralBuilders.h"

#include <numeric>

#include "dialects/common/ShapeHelpers.h"
#include "dialects/tg/TgTypeHelpers.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;
using namespace tcc::tg;

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
  auto batch = tcc::broadcastShapes(lhs.drop_back(2), rhs.drop_back(2));
  if (!batch)
    return std::nullopt;
  batch->push_back(m);
  batch->push_back(n);
  return batch;
}

} // namespace tcc::tg

//===----------------------------------------------------------------------===//
// Verifiers
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::verify() {
  auto l = rtt(getLhs()), r = rtt(getRhs()), out = rtt(getResult());
  if (l.getRank() < 2 || r.getRank() < 2)
    return emitOpError("expects rank-2 operands or batches of them, got lhs ")
           << tcc::formatShape(l.getShape()) << ", rhs " << tcc::formatShape(r.getShape());
  if (l.getElementType() != r.getElementType() ||
      l.getElementType() != out.getElementType())
    return emitOpError("operands and result must have one element type");
  int64_t lr = l.getRank(), rr = r.getRank();
  int64_t kl = l.getDimSize(getTransposeLhs() ? lr - 2 : lr - 1);
  int64_t kr = r.getDimSize(getTransposeRhs() ? rr - 1 : rr - 2);
  if (kl != kr)
    return emitOpError("contraction sizes differ: lhs ")
           << tcc::formatShape(l.getShape()) << " and rhs " << tcc::formatShape(r.getShape())
           << " give K = " << kl << " vs " << kr;
  if (!tcc::broadcastShapes(l.getShape().drop_back(2), r.getShape().drop_back(2)))
    return emitOpError("batch dimensions ")
           << tcc::formatShape(l.getShape().drop_back(2)) << " and "
           << tcc::formatShape(r.getShape().drop_back(2)) << " do not broadcast";
  auto expected = *matmulShape(l.getShape(), r.getShape(), getTransposeLhs(),
                               getTransposeRhs());
  if (out.getShape() != ArrayRef<int64_t>(expected))
    return emitOpError("result shape ")
           << tcc::formatShape(out.getShape()) << " should be " << tcc::formatShape(expected);
  return success();
}

static LogicalResult verifyLabels(Operation *op, RankedTensorType logits,
                                  RankedTensorType labels) {
  if (logits.getRank() != 2)
    return op->emitOpError("logits must be (N, C), got ")
           << tcc::formatShape(logits.getShape());
  if (labels.getRank() != 1 || labels.getDimSize(0) != logits.getDimSize(0))
    return op->emitOpError("labels must be (")
           << logits.getDimSize(0) << ") to match logits "
           << tcc::formatShape(logits.getShape()) << ", got "
           << tcc::formatShape(labels.getShape());
  return success();
}

// The per-row loss (and its upstream gradient) of softmax cross-entropy:
// the logits' type, or f32 with bf16 / f16 logits (mixed precision keeps
// the (N, vocab) logits in 16 bits and the loss in f32; the kernels compute
// in float either way).
static bool isLossTypeOf(Type loss, Type logits) {
  return loss == logits || ((logits.isBF16() || logits.isF16()) && loss.isF32());
}

LogicalResult SoftmaxCrossEntropyOp::verify() {
  auto logits = rtt(getLogits()), out = rtt(getResult());
  if (failed(verifyLabels(*this, logits, rtt(getLabels()))))
    return failure();
  if (out.getShape() != ArrayRef<int64_t>{logits.getDimSize(0)} ||
      !isLossTypeOf(out.getElementType(), logits.getElementType()))
    return emitOpError("result must be one loss per row: ")
           << tcc::formatShape({logits.getDimSize(0)}) << " of "
           << logits.getElementType()
           << (logits.getElementType().isBF16() || logits.getElementType().isF16()
                   ? " or f32"
                   : "");
  return success();
}

LogicalResult SoftmaxCrossEntropyGradOp::verify() {
  auto logits = rtt(getLogits());
  if (failed(verifyLabels(*this, logits, rtt(getLabels()))))
    return failure();
  if (rtt(getGrad()).getShape() != ArrayRef<int64_t>{logits.getDimSize(0)} ||
      !isLossTypeOf(rtt(getGrad()).getElementType(), logits.getElementType()))
    return emitOpError("grad must have one entry per row, of the logits' type "
                       "(or f32 with bf16 / f16 logits)");
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
           << tcc::formatShape(logits.getShape().drop_back()) << " to match logits "
           << tcc::formatShape(logits.getShape()) << ", got "
           << tcc::formatShape(targets.getShape());
  if (rtt(getResult()).getElementType() != logits.getElementType())
    return emitOpError("result must be a scalar of the logits' type ")
           << logits.getElementType();
  return success();
}

static LogicalResult verifyAxis(Operation *op, RankedTensorType type,
                                int64_t axis) {
  if (axis < 0 || axis >= type.getRank())
    return op->emitOpError("axis ")
           << axis << " out of range for " << tcc::formatShape(type.getShape());
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
                               << tcc::formatShape(in.getShape().take_back())
                               << " of " << in.getElementType() << ", got "
                               << tcc::formatShape(t.getShape()) << " of "
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

// The fused norm gradients: grad of input's shape (any float type),
// input_grad of input's type, weight and the (C) gradients of input's
// element type; a weight gradient only with a weight.
static LogicalResult verifyNormGrad(Operation *op, Value grad, Value input,
                                    Value weight, Value inputGrad,
                                    ArrayRef<std::pair<StringRef, Value>> vectors) {
  auto in = rtt(input), g = rtt(grad);
  if (in.getRank() < 1)
    return op->emitOpError("normalizes over the last axis; got a scalar input");
  if (g.getShape() != in.getShape())
    return op->emitOpError("grad must have the input's shape ")
           << tcc::formatShape(in.getShape()) << ", got " << tcc::formatShape(g.getShape());
  if (inputGrad.getType() != in)
    return op->emitOpError("input_grad type must equal the input type ") << in;
  if (failed(verifyNorm(op, input, input, {{"weight", weight}})))
    return failure();
  for (auto [name, v] : vectors)
    if (failed(verifyNorm(op, input, input, {{name, v}})))
      return failure();
  if (!weight != !vectors.front().second)
    return op->emitOpError(weight ? "has a weight but no weight_grad result"
                                  : "has a weight_grad result but no weight");
  return success();
}

LogicalResult LayerNormGradOp::verify() {
  return verifyNormGrad(*this, getGrad(), getInput(), getWeight(), getInputGrad(),
                        {{"weight_grad", getWeightGrad()}, {"bias_grad", getBiasGrad()}});
}

LogicalResult RmsNormGradOp::verify() {
  return verifyNormGrad(*this, getGrad(), getInput(), getWeight(), getInputGrad(),
                        {{"weight_grad", getWeightGrad()}});
}

LogicalResult CausalMaskOp::verify() {
  if (rtt(getInput()).getRank() < 2)
    return emitOpError("input must be (..., T, S), got ")
           << tcc::formatShape(rtt(getInput()).getShape());
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
           << " must be " << tcc::formatShape(expected) << " of " << rows.getElementType()
           << " (ids shape, then the " << rowsName << "'s row shape), got "
           << tcc::formatShape(value.getShape()) << " of " << value.getElementType();
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
  auto expected = tcc::reducedShape(in.getShape(), axes, op.getKeepDims());
  if (ArrayRef<int64_t>(expected) != out.getShape() ||
      in.getElementType() != out.getElementType())
    return op.emitOpError("result shape ")
           << tcc::formatShape(out.getShape()) << " should be " << tcc::formatShape(expected);
  return success();
}

LogicalResult ReduceSumOp::verify() { return verifyReduce(*this); }

LogicalResult ReduceMeanOp::verify() { return verifyReduce(*this); }

LogicalResult ReduceMaxOp::verify() { return verifyReduce(*this); }

LogicalResult BroadcastToOp::verify() {
  auto in = rtt(getInput()), out = rtt(getResult());
  auto shape = tcc::broadcastShapes(in.getShape(), out.getShape());
  if (in.getElementType() != out.getElementType() || !shape ||
      ArrayRef<int64_t>(*shape) != out.getShape())
    return emitOpError("cannot broadcast ")
           << tcc::formatShape(in.getShape()) << " to " << tcc::formatShape(out.getShape());
  return success();
}

LogicalResult ReshapeOp::verify() {
  auto in = rtt(getInput()), out = rtt(getResult());
  if (in.getElementType() != out.getElementType())
    return emitOpError("element type must not change");
  if (in.getNumElements() != out.getNumElements())
    return emitOpError("cannot reshape ")
           << tcc::formatShape(in.getShape()) << " (" << in.getNumElements()
           << " elements) to " << tcc::formatShape(out.getShape()) << " ("
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
           << tcc::formatShape(perm) << " is not a permutation of the "
           << in.getRank() << " dimensions of " << tcc::formatShape(in.getShape());
  SmallVector<int64_t> expected;
  for (int64_t p : perm)
    expected.push_back(in.getDimSize(p));
  if (out.getShape() != ArrayRef<int64_t>(expected) ||
      out.getElementType() != in.getElementType())
    return emitOpError("result shape ")
           << tcc::formatShape(out.getShape()) << " should be "
           << tcc::formatShape(expected);
  return success();
}

LogicalResult SliceOp::verify() {
  auto in = rtt(getInput()), out = rtt(getResult());
  ArrayRef<int64_t> starts = getStarts(), ends = getEnds();
  if (starts.size() != static_cast<size_t>(in.getRank()) ||
      ends.size() != static_cast<size_t>(in.getRank()))
    return emitOpError("needs one start and one end per dimension of ")
           << tcc::formatShape(in.getShape()) << ", got starts "
           << tcc::formatShape(starts) << " and ends " << tcc::formatShape(ends);
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
           << tcc::formatShape(out.getShape()) << " should be "
           << tcc::formatShape(expected);
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
             << what << " #" << i << " " << tcc::formatShape(piece.getShape())
             << " of " << piece.getElementType() << " must match "
             << tcc::formatShape(whole.getShape()) << " of "
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

namespace {

// A shard op's types: `whole` has n elements, `shard` is 1-D with n / ranks,
// and ranks >= 1 divides n; both have one element type.
LogicalResult verifyShard(Operation *op, int64_t ranks, Type whole, Type shard) {
  auto w = cast<RankedTensorType>(whole), s = cast<RankedTensorType>(shard);
  if (ranks < 1)
    return op->emitOpError("ranks must be >= 1, got ") << ranks;
  if (w.getElementType() != s.getElementType())
    return op->emitOpError("element types differ: ") << w << " and " << s;
  int64_t n = w.getNumElements();
  if (n % ranks != 0)
    return op->emitOpError("ranks ") << ranks << " must divide the " << n << " elements of " << w;
  if (s.getRank() != 1 || s.getDimSize(0) != n / ranks)
    return op->emitOpError("shard ") << s << " must be 1-D with " << n / ranks << " elements ("
                                     << n << " / " << ranks << ")";
  return success();
}

} // namespace

LogicalResult ReduceScatterOp::verify() {
  if (getReduction() != "sum" && getReduction() != "mean")
    return emitOpError("reduction must be sum or mean, got '") << getReduction() << "'";
  return verifyShard(*this, getRanks(), getInput().getType(), getResult().getType());
}

LogicalResult RankShardOp::verify() {
  return verifyShard(*this, getRanks(), getInput().getType(), getResult().getType());
}

LogicalResult AllGatherOp::verify() {
  return verifyShard(*this, getRanks(), getResult().getType(), getInput().getType());
}

LogicalResult AllReduceOp::verify() {
  if (getReduction() != "sum" && getReduction() != "mean")
    return emitOpError("reduction must be sum or mean, got '") << getReduction() << "'";
  if (getResult().getType() != getInput().getType())
    return emitOpError("result ") << getResult().getType() << " must have the input's type "
                                  << getInput().getType();
  return success();
}
