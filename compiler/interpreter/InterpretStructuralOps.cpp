// The reference interpreter's structural ops (TgStructuralOps.td) (see TgInterpreter.h): one plain,
// float64 function per op.
#include <algorithm>
#include <cmath>

#include "compiler/interpreter/InterpreterSupport.h"
#include "dialects/tg/TgDialect.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace tcc::interp {
namespace {

// result (M, N) = op(lhs) x op(rhs), op transposing where the flag is set.
Tensor evalMatmul(tg::MatmulOp op, const Tensor &lhs, const Tensor &rhs) {
  bool transposeLhs = op.getTransposeLhs(), transposeRhs = op.getTransposeRhs();
  // Element (r, c) of the matrix `t`, or of its transpose.
  auto at = [](const Tensor &t, bool transposed, int64_t r, int64_t c) {
    int64_t columns = t.shape[1];
    return transposed ? t.data[c * columns + r] : t.data[r * columns + c];
  };
  int64_t m = transposeLhs ? lhs.shape[1] : lhs.shape[0];
  int64_t k = transposeLhs ? lhs.shape[0] : lhs.shape[1];
  int64_t n = transposeRhs ? rhs.shape[0] : rhs.shape[1];
  Tensor out = Tensor::zeros({m, n});
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0.0;
      for (int64_t p = 0; p < k; ++p)
        sum += at(lhs, transposeLhs, i, p) * at(rhs, transposeRhs, p, j);
      out.data[i * n + j] = sum;
    }
  return out;
}

// The label of row `row` as a class index, or an error naming the row when it
// is not an integer in [0, classes).
FailureOr<int64_t> labelOf(Operation *op, const Tensor &labels, int64_t row,
                           int64_t classes) {
  double label = labels.data[row];
  if (!(label >= 0.0 && label < static_cast<double>(classes)) ||
      label != std::floor(label))
    return op->emitOpError("label ") << numberStr(label) << " of row " << row
                                     << " is outside [0, " << classes << ")";
  return static_cast<int64_t>(label);
}

// log(sum(exp(row))), shifted by the row's maximum so exp cannot overflow.
double logSumExp(const double *row, int64_t count) {
  double maximum = row[0];
  for (int64_t c = 1; c < count; ++c)
    maximum = std::max(maximum, row[c]);
  double sum = 0.0;
  for (int64_t c = 0; c < count; ++c)
    sum += std::exp(row[c] - maximum);
  return maximum + std::log(sum);
}

// result[n] = logsumexp(logits[n]) - logits[n, labels[n]].
FailureOr<Tensor> evalSoftmaxCrossEntropy(tg::SoftmaxCrossEntropyOp op,
                                          const Tensor &logits,
                                          const Tensor &labels) {
  int64_t rows = logits.shape[0], classes = logits.shape[1];
  Tensor out = Tensor::zeros({rows});
  for (int64_t n = 0; n < rows; ++n) {
    FailureOr<int64_t> label = labelOf(op, labels, n, classes);
    if (failed(label))
      return failure();
    const double *row = &logits.data[n * classes];
    out.data[n] = logSumExp(row, classes) - row[*label];
  }
  return out;
}

// result[n, c] = (softmax(logits[n])[c] - (c == labels[n])) * grad[n].
FailureOr<Tensor> evalSoftmaxCrossEntropyGrad(tg::SoftmaxCrossEntropyGradOp op,
                                              const Tensor &logits,
                                              const Tensor &labels,
                                              const Tensor &grad) {
  int64_t rows = logits.shape[0], classes = logits.shape[1];
  Tensor out = Tensor::zeros(logits.shape);
  for (int64_t n = 0; n < rows; ++n) {
    FailureOr<int64_t> label = labelOf(op, labels, n, classes);
    if (failed(label))
      return failure();
    const double *row = &logits.data[n * classes];
    double lse = logSumExp(row, classes);
    for (int64_t c = 0; c < classes; ++c) {
      double softmax = std::exp(row[c] - lse);
      double onehot = c == *label ? 1.0 : 0.0;
      out.data[n * classes + c] = (softmax - onehot) * grad.data[n];
    }
  }
  return out;
}

// Sum over `axes`; with keep_dims the reduced dimensions stay as size 1.
Tensor reduceSum(const Tensor &input, ArrayRef<int64_t> axes, bool keepDims) {
  std::vector<int64_t> keptShape = input.shape;
  for (int64_t a : axes)
    keptShape[a] = 1;
  Tensor out = Tensor::zeros(keptShape);
  for (int64_t flat = 0; flat < input.numElements(); ++flat) {
    std::vector<int64_t> index = unravel(flat, input.shape);
    for (int64_t a : axes)
      index[a] = 0;
    out.data[ravel(index, keptShape)] += input.data[flat];
  }
  if (!keepDims) { // dropping size-1 dimensions keeps the row-major order
    out.shape.clear();
    for (auto [d, size] : llvm::enumerate(input.shape))
      if (!llvm::is_contained(axes, static_cast<int64_t>(d)))
        out.shape.push_back(size);
  }
  return out;
}

Tensor evalReduceSum(tg::ReduceSumOp op, const Tensor &input) {
  return reduceSum(input, op.getAxes(), op.getKeepDims());
}

Tensor evalReduceMean(tg::ReduceMeanOp op, const Tensor &input) {
  Tensor out = reduceSum(input, op.getAxes(), op.getKeepDims());
  int64_t count = 1;
  for (int64_t a : op.getAxes())
    count *= input.shape[a];
  for (double &x : out.data)
    x /= static_cast<double>(count);
  return out;
}

Tensor evalBroadcastTo(tg::BroadcastToOp op, const Tensor &input) {
  return broadcast(input, staticShape(op.getResult()));
}

Tensor evalReshape(tg::ReshapeOp op, const Tensor &input) {
  ArrayRef<int64_t> shape = staticShape(op.getResult());
  return Tensor{std::vector<int64_t>(shape.begin(), shape.end()), input.data};
}

} // namespace

std::optional<OpResults> evaluateStructuralOp(Operation *op,
                                              ArrayRef<const Tensor *> in) {
  return llvm::TypeSwitch<Operation *, std::optional<OpResults>>(op)
      .Case([&](tg::MatmulOp m) { return singleResult(evalMatmul(m, *in[0], *in[1])); })
      .Case([&](tg::SoftmaxCrossEntropyOp s) {
        return singleResult(evalSoftmaxCrossEntropy(s, *in[0], *in[1]));
      })
      .Case([&](tg::SoftmaxCrossEntropyGradOp s) {
        return singleResult(evalSoftmaxCrossEntropyGrad(s, *in[0], *in[1], *in[2]));
      })
      .Case([&](tg::ReduceSumOp r) { return singleResult(evalReduceSum(r, *in[0])); })
      .Case([&](tg::ReduceMeanOp r) { return singleResult(evalReduceMean(r, *in[0])); })
      .Case([&](tg::BroadcastToOp b) { return singleResult(evalBroadcastTo(b, *in[0])); })
      .Case([&](tg::ReshapeOp r) { return singleResult(evalReshape(r, *in[0])); })
      .Default([](Operation *) { return std::nullopt; });
}

} // namespace tcc::interp
