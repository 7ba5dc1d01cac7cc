// The reference evaluator of tg functions. One function per op, each a plain
// loop over its definition; shapes come from the operand tensors and are
// checked against the op's result type after every op, so a slip in here is
// reported rather than silently compared against.
#include "compiler/interpreter/TgInterpreter.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "dialects/tg/TgDialect.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace tcc::interp {

static int64_t product(ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

Tensor Tensor::zeros(ArrayRef<int64_t> shape) {
  return Tensor{std::vector<int64_t>(shape.begin(), shape.end()),
                std::vector<double>(product(shape), 0.0)};
}

int64_t Tensor::numElements() const { return product(shape); }

namespace {


// Shortest exact form of a number for messages: "2", "-1", "0.5".
std::string numberStr(double x) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.17g", x);
  return buffer;
}

ArrayRef<int64_t> staticShape(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

// Row-major multi-index of the flat position `flat` in `shape`.
std::vector<int64_t> unravel(int64_t flat, ArrayRef<int64_t> shape) {
  std::vector<int64_t> index(shape.size());
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return index;
}

// Flat position of a multi-index in `shape`.
int64_t ravel(ArrayRef<int64_t> index, ArrayRef<int64_t> shape) {
  int64_t flat = 0;
  for (auto [i, d] : llvm::zip_equal(index, shape))
    flat = flat * d + i;
  return flat;
}

//===----------------------------------------------------------------------===//
// One function per op
//===----------------------------------------------------------------------===//

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

// numpy broadcast of `in` to `shape`: dimensions align at the trailing end;
// a size-1 (or missing leading) dimension of `in` repeats.
Tensor broadcast(const Tensor &in, ArrayRef<int64_t> shape) {
  Tensor out = Tensor::zeros(shape);
  size_t lead = shape.size() - in.shape.size();
  for (int64_t flat = 0; flat < out.numElements(); ++flat) {
    std::vector<int64_t> outIndex = unravel(flat, shape);
    std::vector<int64_t> inIndex(in.shape.size());
    for (size_t d = 0; d < in.shape.size(); ++d)
      inIndex[d] = in.shape[d] == 1 ? 0 : outIndex[d + lead];
    out.data[flat] = in.data[ravel(inIndex, in.shape)];
  }
  return out;
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

Tensor evalSgdUpdate(const Tensor &param, const Tensor &grad,
                     const Tensor &learningRate) {
  Tensor out = param;
  for (int64_t i = 0; i < out.numElements(); ++i)
    out.data[i] = param.data[i] - learningRate.data[0] * grad.data[i];
  return out;
}

//===----------------------------------------------------------------------===//
// The walk over a function body
//===----------------------------------------------------------------------===//

class Interpreter {
public:
  FailureOr<std::vector<Tensor>> run(func::FuncOp f, ArrayRef<Tensor> args);

private:
  LogicalResult bindArguments(func::FuncOp f, ArrayRef<Tensor> args);
  FailureOr<Tensor> evaluate(Operation *op);
  const Tensor &operand(Operation *op, unsigned i) {
    return values_.find(op->getOperand(i))->second;
  }

  llvm::DenseMap<Value, Tensor> values_;
};

LogicalResult Interpreter::bindArguments(func::FuncOp f,
                                         ArrayRef<Tensor> args) {
  Block &body = f.getBody().front();
  if (args.size() != body.getNumArguments())
    return f.emitError("interpreter: @")
           << f.getSymName() << " takes " << body.getNumArguments()
           << " arguments, got " << args.size();
  for (auto [i, arg, tensor] : llvm::enumerate(body.getArguments(), args)) {
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type)
      return f.emitError("interpreter: argument #")
             << i << " has type " << arg.getType()
             << "; only ranked tensors are supported";
    if (type.getShape() != ArrayRef<int64_t>(tensor.shape) ||
        static_cast<int64_t>(tensor.data.size()) != type.getNumElements())
      return f.emitError("interpreter: argument #")
             << i << " of @" << f.getSymName() << " must be "
             << tg::formatShape(type.getShape()) << " (" << type.getNumElements()
             << " elements), got " << tg::formatShape(tensor.shape) << " with "
             << tensor.data.size() << " elements";
    if (isa<IntegerType>(type.getElementType()))
      for (auto [j, x] : llvm::enumerate(tensor.data))
        if (x != std::floor(x))
          return f.emitError("interpreter: argument #")
                 << i << " is an integer tensor, but element " << j << " is "
                 << numberStr(x);
    values_[arg] = tensor;
  }
  return success();
}

FailureOr<Tensor> Interpreter::evaluate(Operation *op) {
  auto in = [&](unsigned i) -> const Tensor & { return operand(op, i); };
  return llvm::TypeSwitch<Operation *, FailureOr<Tensor>>(op)
      .Case([&](tg::ConstantOp c) { return evalConstant(c); })
      .Case([&](tg::MatmulOp m) { return evalMatmul(m, in(0), in(1)); })
      .Case([&](tg::AddOp a) { return evalAdd(a, in(0), in(1)); })
      .Case([&](tg::MulOp m) { return evalMul(m, in(0), in(1)); })
      .Case([&](tg::ReluOp) { return evalRelu(in(0)); })
      .Case([&](tg::ReluGradOp) { return evalReluGrad(in(0), in(1)); })
      .Case([&](tg::SoftmaxCrossEntropyOp s) {
        return evalSoftmaxCrossEntropy(s, in(0), in(1));
      })
      .Case([&](tg::SoftmaxCrossEntropyGradOp s) {
        return evalSoftmaxCrossEntropyGrad(s, in(0), in(1), in(2));
      })
      .Case([&](tg::ReduceSumOp r) { return evalReduceSum(r, in(0)); })
      .Case([&](tg::ReduceMeanOp r) { return evalReduceMean(r, in(0)); })
      .Case([&](tg::BroadcastToOp b) { return evalBroadcastTo(b, in(0)); })
      .Case([&](tg::ReshapeOp r) { return evalReshape(r, in(0)); })
      .Case([&](tg::SgdUpdateOp) { return evalSgdUpdate(in(0), in(1), in(2)); })
      .Default([](Operation *other) -> FailureOr<Tensor> {
        return other->emitOpError(
            "is not supported by the tg reference interpreter");
      });
}

FailureOr<std::vector<Tensor>> Interpreter::run(func::FuncOp f,
                                                ArrayRef<Tensor> args) {
  if (f.isExternal() || !f.getBody().hasOneBlock())
    return f.emitError("interpreter: @")
           << f.getSymName() << " must have a body of one block";
  if (failed(bindArguments(f, args)))
    return failure();
  for (Operation &op : f.getBody().front()) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      std::vector<Tensor> results;
      for (Value v : ret.getOperands())
        results.push_back(values_.find(v)->second);
      return results;
    }
    if (op.getNumResults() != 1 || op.getNumRegions() != 0)
      return op.emitOpError("is not supported by the tg reference interpreter");
    FailureOr<Tensor> result = evaluate(&op);
    if (failed(result))
      return failure();
    // Guards the evaluator itself: every op's value must fit its type.
    ArrayRef<int64_t> expected = staticShape(op.getResult(0));
    if (expected != ArrayRef<int64_t>(result->shape) ||
        static_cast<int64_t>(result->data.size()) != product(expected))
      return op.emitOpError("interpreter bug: computed ")
             << tg::formatShape(result->shape) << " with " << result->data.size()
             << " elements for a result of shape " << tg::formatShape(expected);
    values_[op.getResult(0)] = std::move(*result);
  }
  return f.emitError("interpreter: @")
         << f.getSymName() << " does not end in func.return";
}

} // namespace

FailureOr<std::vector<Tensor>> interpret(func::FuncOp f,
                                         ArrayRef<Tensor> args) {
  return Interpreter().run(f, args);
}

} // namespace tcc::interp
