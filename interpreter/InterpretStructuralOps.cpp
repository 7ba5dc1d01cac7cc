// The reference interpreter's structural ops (TgStructuralOps.td) (see
// TgInterpreter.h): one plain, float64 function per op.
#include <algorithm>
#include <cmath>
#include <limits>

#include "interpreter/InterpreterSupport.h"
#include "dialects/common/ModelAttrs.h"
#include "dialects/tg/TgDialect.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace tcc::interp {
namespace {

// result (batch..., M, N) = op(lhs) x op(rhs) per batch index, op
// transposing the last two dimensions where the flag is set; batch
// dimensions broadcast like numpy. With `errorSide` +1 / -1 each element
// moves by that sign times f32 accumulation's error bound, K * 2^-24 *
// sum |terms| (interpret's productErrorSide).
Tensor evalProduct(const Tensor &lhs, const Tensor &rhs, bool transposeLhs,
                   bool transposeRhs, ArrayRef<int64_t> outShape, int errorSide) {
  size_t batchRank = outShape.size() - 2;
  ArrayRef<int64_t> batchShape = outShape.take_front(batchRank);
  // Element (r, c) of matrix number `matrix` of `t`, or of its transpose.
  auto at = [](const Tensor &t, int64_t matrix, bool transposed, int64_t r,
               int64_t c) {
    int64_t rows = t.shape[t.shape.size() - 2], columns = t.shape.back();
    int64_t base = matrix * rows * columns;
    return transposed ? t.data[base + c * columns + r]
                      : t.data[base + r * columns + c];
  };
  // The matrix of `t` that batch index `index` reads (numpy broadcasting).
  auto matrixOf = [&](const Tensor &t, const std::vector<int64_t> &index) {
    ArrayRef<int64_t> tBatch = ArrayRef<int64_t>(t.shape).drop_back(2);
    size_t lead = batchRank - tBatch.size();
    std::vector<int64_t> tIndex(tBatch.size());
    for (size_t d = 0; d < tBatch.size(); ++d)
      tIndex[d] = tBatch[d] == 1 ? 0 : index[d + lead];
    return ravel(tIndex, tBatch);
  };
  int64_t m = outShape[batchRank], n = outShape[batchRank + 1];
  int64_t k = transposeLhs ? lhs.shape[lhs.shape.size() - 2] : lhs.shape.back();
  Tensor out = Tensor::zeros(outShape);
  for (int64_t batch = 0; batch < product(batchShape); ++batch) {
    std::vector<int64_t> index = unravel(batch, batchShape);
    int64_t lm = matrixOf(lhs, index), rm = matrixOf(rhs, index);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0.0, magnitude = 0.0;
        for (int64_t p = 0; p < k; ++p) {
          double term = at(lhs, lm, transposeLhs, i, p) * at(rhs, rm, transposeRhs, p, j);
          sum += term;
          if (errorSide != 0)
            magnitude += std::abs(term);
        }
        if (errorSide != 0)
          sum += productErrorShift(errorSide, k, magnitude);
        out.data[(batch * m + i) * n + j] = sum;
      }
  }
  return out;
}

// One operand of an FP8 product as the cuda target casts it (current
// scaling, compiler/codegen/cuda/Fp8Gemm.h): scale = max / amax in float (1
// when the amax is 0 or not finite), each value x * scale in float, held
// to +-max (the casts saturate) and rounded to the format, nearest even.
// `inverse` is 1 / scale, the product's dequantization factor.
Tensor quantizeFp8(const Tensor &t, bool e5m2, float &inverse) {
  const llvm::fltSemantics &format =
      e5m2 ? APFloat::Float8E5M2() : APFloat::Float8E4M3FN();
  const float largest = e5m2 ? 57344.0f : 448.0f;
  float amax = 0.0f;
  bool finite = true;
  for (double v : t.data) {
    finite &= std::isfinite(v);
    amax = std::max(amax, std::fabs(static_cast<float>(v)));
  }
  float scale = 1.0f;
  if (finite && amax > 0.0f && amax <= std::numeric_limits<float>::max())
    scale = std::min(largest / amax, std::numeric_limits<float>::max());
  inverse = 1.0f / scale;
  Tensor q = t;
  for (double &v : q.data) {
    float y = static_cast<float>(v) * scale;
    if (!std::isnan(y))
      y = std::clamp(y, -largest, largest);
    v = roundTo(y, format);
  }
  return q;
}

// The product of a tg.matmul or tg.matmul_epilogue. tg-amp's fp8 precision
// (model::kFp8Attr "<lhs>x<rhs>"): the product of the two FP8 operands,
// dequantized, as cuBLASLt computes it (fp32 accumulation; here float64).
Tensor evalMarkedProduct(Operation *op, const Tensor &lhs, const Tensor &rhs, bool ta,
                         bool tb, ArrayRef<int64_t> shape, int errorSide) {
  if (auto fp8 = op->getAttrOfType<StringAttr>(model::kFp8Attr)) {
    auto [a, b] = fp8.getValue().split('x');
    float inverseA = 1.0f, inverseB = 1.0f;
    Tensor out = evalProduct(quantizeFp8(lhs, a == "e5m2", inverseA),
                             quantizeFp8(rhs, b == "e5m2", inverseB), ta, tb, shape,
                             errorSide);
    for (double &v : out.data)
      v *= static_cast<double>(inverseA) * inverseB;
    return out;
  }
  return evalProduct(lhs, rhs, ta, tb, shape, errorSide);
}

Tensor evalMatmul(tg::MatmulOp op, const Tensor &lhs, const Tensor &rhs, int errorSide) {
  return evalMarkedProduct(op, lhs, rhs, op.getTransposeLhs(), op.getTransposeRhs(),
                           staticShape(op.getResult()), errorSide);
}

// pre = product [+ bias]; result = act(pre) [+ residual] (the interpreter
// rounds each result to its type once, as the fused kernel stores it).
OpResults evalMatmulEpilogue(tg::MatmulEpilogueOp op, ArrayRef<const Tensor *> in,
                             int errorSide) {
  ArrayRef<int64_t> shape = staticShape(op.getResult());
  Tensor pre = evalMarkedProduct(op, *in[0], *in[1], op.getTransposeLhs(),
                                 op.getTransposeRhs(), shape, errorSide);
  // Operands in order: lhs, rhs, [bias], [residual].
  size_t next = 2;
  if (op.getBias()) {
    const Tensor &bias = *in[next++];
    int64_t n = shape.back();
    for (int64_t i = 0; i < pre.numElements(); ++i)
      pre.data[i] += bias.data[i % n];
  }
  StringRef act = op.getActivation();
  Tensor result = pre;
  if (act != "none")
    for (double &x : result.data)
      x = gelu(x, act == "gelu_tanh");
  if (op.getResidual())
    for (int64_t i = 0; i < result.numElements(); ++i)
      result.data[i] += in[next]->data[i];
  std::vector<Tensor> results{std::move(result)};
  if (op.getPreActivation())
    results.push_back(std::move(pre));
  return results;
}

// result = gelu'(pre) * product.
Tensor evalMatmulDgelu(tg::MatmulDgeluOp op, const Tensor &lhs, const Tensor &rhs,
                       const Tensor &pre, int errorSide) {
  Tensor out = evalProduct(lhs, rhs, op.getTransposeLhs(), op.getTransposeRhs(),
                           staticShape(op.getResult()), errorSide);
  bool tanhForm = op.getApproximate() == "tanh";
  for (int64_t i = 0; i < out.numElements(); ++i)
    out.data[i] *= geluDerivative(pre.data[i], tanhForm);
  return out;
}

// result = lhs x rhs; bias_grad[n] = sum over the rows k of rhs[k][n].
OpResults evalMatmulBiasGrad(tg::MatmulBiasGradOp op, const Tensor &lhs,
                             const Tensor &rhs, int errorSide) {
  Tensor product = evalProduct(lhs, rhs, op.getTransposeLhs(), false,
                               staticShape(op.getResult()), errorSide);
  int64_t rows = rhs.shape[0], n = rhs.shape[1];
  Tensor biasGrad = Tensor::zeros({n});
  for (int64_t k = 0; k < rows; ++k)
    for (int64_t j = 0; j < n; ++j)
      biasGrad.data[j] += rhs.data[k * n + j];
  std::vector<Tensor> results;
  results.push_back(std::move(product));
  results.push_back(std::move(biasGrad));
  return results;
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

// Maximum over `axes`; with keep_dims the reduced dimensions stay as size 1.
Tensor evalReduceMax(tg::ReduceMaxOp op, const Tensor &input) {
  std::vector<int64_t> keptShape = input.shape;
  for (int64_t a : op.getAxes())
    keptShape[a] = 1;
  Tensor out = Tensor::zeros(keptShape);
  std::vector<bool> seen(out.data.size(), false);
  for (int64_t flat = 0; flat < input.numElements(); ++flat) {
    std::vector<int64_t> index = unravel(flat, input.shape);
    for (int64_t a : op.getAxes())
      index[a] = 0;
    int64_t o = ravel(index, keptShape);
    if (!seen[o] || input.data[flat] > out.data[o])
      out.data[o] = input.data[flat];
    seen[o] = true;
  }
  ArrayRef<int64_t> shape = staticShape(op.getResult());
  out.shape.assign(shape.begin(), shape.end());
  return out;
}

// A tensor seen as (outer, size, inner) around `axis`: element (o, i, k) is
// at (o * size + i) * inner + k.
struct AxisView {
  int64_t outer = 1, size = 1, inner = 1;
  AxisView(ArrayRef<int64_t> shape, int64_t axis) {
    for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d)
      (d < axis ? outer : d == axis ? size : inner) *= shape[d];
  }
  int64_t at(int64_t o, int64_t i, int64_t k) const {
    return (o * size + i) * inner + k;
  }
};

// softmax (or log_softmax) along the op's axis, max-subtracted.
template <typename OpTy>
Tensor evalSoftmax(OpTy op, const Tensor &input, bool logarithm) {
  AxisView v(input.shape, op.getAxis());
  Tensor out = Tensor::zeros(input.shape);
  for (int64_t o = 0; o < v.outer; ++o)
    for (int64_t k = 0; k < v.inner; ++k) {
      double max = input.data[v.at(o, 0, k)];
      for (int64_t i = 1; i < v.size; ++i)
        max = std::max(max, input.data[v.at(o, i, k)]);
      double sum = 0.0;
      for (int64_t i = 0; i < v.size; ++i)
        sum += std::exp(input.data[v.at(o, i, k)] - max);
      for (int64_t i = 0; i < v.size; ++i) {
        double shifted = input.data[v.at(o, i, k)] - max;
        out.data[v.at(o, i, k)] =
            logarithm ? shifted - std::log(sum) : std::exp(shifted) / sum;
      }
    }
  return out;
}

// mean over counted positions p of logsumexp(logits[p]) - logits[p, t[p]];
// 0 when no position is counted.
FailureOr<Tensor> evalCrossEntropy(tg::CrossEntropyOp op, const Tensor &logits,
                                   const Tensor &targets) {
  int64_t classes = logits.shape.back();
  std::optional<int64_t> ignore = op.ignoreIndex();
  double total = 0.0;
  int64_t counted = 0;
  for (int64_t p = 0; p < targets.numElements(); ++p) {
    double target = targets.data[p];
    if (ignore && target == static_cast<double>(*ignore))
      continue;
    if (!(target >= 0.0 && target < static_cast<double>(classes)))
      return op.emitOpError("target ")
             << numberStr(target) << " at position " << p
             << " is outside [0, " << classes << ")"
             << (ignore ? " and is not the ignore_index " +
                              std::to_string(*ignore)
                        : std::string());
    const double *row = &logits.data[p * classes];
    total += logSumExp(row, classes) - row[static_cast<int64_t>(target)];
    ++counted;
  }
  return Tensor::scalar(counted == 0 ? 0.0 : total / counted);
}

// A row's mean (0 unless centered) and 1 / sqrt(mean((x - mean)^2) + eps),
// shared by the norms' forward and gradient.
void rowStatistics(const double *x, int64_t c, double eps, bool centered, double &mean,
                   double &rstd) {
  mean = 0.0;
  if (centered) {
    for (int64_t j = 0; j < c; ++j)
      mean += x[j];
    mean /= c;
  }
  double squares = 0.0;
  for (int64_t j = 0; j < c; ++j)
    squares += (x[j] - mean) * (x[j] - mean);
  rstd = 1.0 / std::sqrt(squares / c + eps);
}

// (x - mean) / sqrt(var + eps) [* weight] [+ bias] over the last axis
// (rms: x / sqrt(mean(x^2) + eps) [* weight]).
Tensor normalizeLastAxis(const Tensor &input, const Tensor *weight,
                         const Tensor *bias, double eps, bool centered) {
  int64_t c = input.shape.back(), rows = input.numElements() / c;
  Tensor out = Tensor::zeros(input.shape);
  for (int64_t r = 0; r < rows; ++r) {
    const double *x = &input.data[r * c];
    double mean, scale;
    rowStatistics(x, c, eps, centered, mean, scale);
    for (int64_t j = 0; j < c; ++j) {
      double y = (x[j] - mean) * scale;
      if (weight)
        y *= weight->data[j];
      if (bias)
        y += bias->data[j];
      out.data[r * c + j] = y;
    }
  }
  return out;
}

Tensor evalLayerNorm(tg::LayerNormOp op, ArrayRef<const Tensor *> in) {
  // Operands: input, then weight and bias when present.
  const Tensor *weight = op.getWeight() ? in[1] : nullptr;
  const Tensor *bias = op.getBias() ? in[op.getWeight() ? 2 : 1] : nullptr;
  return normalizeLastAxis(*in[0], weight, bias, op.getEps().convertToDouble(),
                           /*centered=*/true);
}

Tensor evalRmsNorm(tg::RmsNormOp op, ArrayRef<const Tensor *> in) {
  const Tensor *weight = op.getWeight() ? in[1] : nullptr;
  return normalizeLastAxis(*in[0], weight, nullptr,
                           op.getEps().convertToDouble(), /*centered=*/false);
}

// tg.layer_norm_grad / tg.rms_norm_grad (centered: layer_norm), in float64
// with the statistics recomputed per row: {input_grad, weight_grad when
// wanted, bias_grad when wanted}.
std::vector<Tensor> normGrad(const Tensor &grad, const Tensor &input, const Tensor *weight,
                             bool wantWeightGrad, bool wantBiasGrad, double eps,
                             bool centered) {
  int64_t c = input.shape.back(), rows = input.numElements() / c;
  Tensor dx = Tensor::zeros(input.shape), dw = Tensor::zeros({c}), db = Tensor::zeros({c});
  std::vector<double> xhat(c), dxhat(c);
  for (int64_t r = 0; r < rows; ++r) {
    const double *x = &input.data[r * c], *g = &grad.data[r * c];
    double mean, rstd;
    rowStatistics(x, c, eps, centered, mean, rstd);
    double sumDxhat = 0.0, sumDot = 0.0;
    for (int64_t j = 0; j < c; ++j) {
      xhat[j] = (x[j] - mean) * rstd;
      dxhat[j] = weight ? g[j] * weight->data[j] : g[j];
      sumDxhat += dxhat[j];
      sumDot += dxhat[j] * xhat[j];
      dw.data[j] += g[j] * xhat[j];
      db.data[j] += g[j];
    }
    double meanDxhat = centered ? sumDxhat / c : 0.0, meanDot = sumDot / c;
    for (int64_t j = 0; j < c; ++j)
      dx.data[r * c + j] = rstd * (dxhat[j] - meanDxhat - xhat[j] * meanDot);
  }
  std::vector<Tensor> results{std::move(dx)};
  if (wantWeightGrad)
    results.push_back(std::move(dw));
  if (wantBiasGrad)
    results.push_back(std::move(db));
  return results;
}

// (i, j) of the last two dimensions (T, S) becomes `value` where
// j > i + (S - T).
Tensor evalCausalMask(tg::CausalMaskOp op, const Tensor &input) {
  int64_t t = input.shape[input.shape.size() - 2], s = input.shape.back();
  double value = op.getValue().convertToDouble();
  Tensor out = input;
  for (int64_t flat = 0; flat < out.numElements(); ++flat) {
    int64_t i = (flat / s) % t, j = flat % s;
    if (j > i + (s - t))
      out.data[flat] = value;
  }
  return out;
}

// ids[p] as a row index of a table with `rows` rows, or an error.
FailureOr<int64_t> rowOf(Operation *op, const Tensor &ids, int64_t p,
                         int64_t rows) {
  double id = ids.data[p];
  if (!(id >= 0.0 && id < static_cast<double>(rows)))
    return op->emitOpError("id ") << numberStr(id) << " at position " << p
                                  << " is outside [0, " << rows << ")";
  return static_cast<int64_t>(id);
}

// result[p, d] = table[ids[p], d].
FailureOr<Tensor> evalGather(tg::GatherOp op, const Tensor &table,
                             const Tensor &ids) {
  int64_t rows = table.shape[0], width = table.numElements() / rows;
  Tensor out = Tensor::zeros(staticShape(op.getResult()));
  for (int64_t p = 0; p < ids.numElements(); ++p) {
    FailureOr<int64_t> row = rowOf(op, ids, p, rows);
    if (failed(row))
      return failure();
    for (int64_t d = 0; d < width; ++d)
      out.data[p * width + d] = table.data[*row * width + d];
  }
  return out;
}

// result = 0; result[ids[p], d] += updates[p, d].
FailureOr<Tensor> evalScatterAdd(tg::ScatterAddOp op, const Tensor &ids,
                                 const Tensor &updates) {
  Tensor out = Tensor::zeros(staticShape(op.getResult()));
  int64_t rows = out.shape[0], width = out.numElements() / rows;
  for (int64_t p = 0; p < ids.numElements(); ++p) {
    FailureOr<int64_t> row = rowOf(op, ids, p, rows);
    if (failed(row))
      return failure();
    for (int64_t d = 0; d < width; ++d)
      out.data[*row * width + d] += updates.data[p * width + d];
  }
  return out;
}

// result[i_0, ..., i_n] = input[j] with j[perm[d]] = i_d.
Tensor evalTranspose(tg::TransposeOp op, const Tensor &input) {
  ArrayRef<int64_t> perm = op.getPerm();
  Tensor out = Tensor::zeros(staticShape(op.getResult()));
  for (int64_t flat = 0; flat < out.numElements(); ++flat) {
    std::vector<int64_t> outIndex = unravel(flat, out.shape);
    std::vector<int64_t> inIndex(perm.size());
    for (size_t d = 0; d < perm.size(); ++d)
      inIndex[perm[d]] = outIndex[d];
    out.data[flat] = input.data[ravel(inIndex, input.shape)];
  }
  return out;
}

// result[i] = input[i + starts].
Tensor evalSlice(tg::SliceOp op, const Tensor &input) {
  ArrayRef<int64_t> starts = op.getStarts();
  Tensor out = Tensor::zeros(staticShape(op.getResult()));
  for (int64_t flat = 0; flat < out.numElements(); ++flat) {
    std::vector<int64_t> index = unravel(flat, out.shape);
    for (size_t d = 0; d < index.size(); ++d)
      index[d] += starts[d];
    out.data[flat] = input.data[ravel(index, input.shape)];
  }
  return out;
}

// Each input is copied to its offset along the axis.
Tensor evalConcat(tg::ConcatOp op, ArrayRef<const Tensor *> inputs) {
  int64_t axis = op.getAxis(), offset = 0;
  Tensor out = Tensor::zeros(staticShape(op.getResult()));
  for (const Tensor *in : inputs) {
    for (int64_t flat = 0; flat < in->numElements(); ++flat) {
      std::vector<int64_t> index = unravel(flat, in->shape);
      index[axis] += offset;
      out.data[ravel(index, out.shape)] = in->data[flat];
    }
    offset += in->shape[axis];
  }
  return out;
}

// Result r is the input's elements [offset_r, offset_r + size_r) along the
// axis.
std::vector<Tensor> evalSplit(tg::SplitOp op, const Tensor &input) {
  int64_t axis = op.getAxis(), offset = 0;
  std::vector<Tensor> pieces;
  for (Value piece : op.getPieces()) {
    Tensor out = Tensor::zeros(staticShape(piece));
    for (int64_t flat = 0; flat < out.numElements(); ++flat) {
      std::vector<int64_t> index = unravel(flat, out.shape);
      index[axis] += offset;
      out.data[flat] = input.data[ravel(index, input.shape)];
    }
    offset += out.shape[axis];
    pieces.push_back(std::move(out));
  }
  return pieces;
}

} // namespace

std::optional<OpResults> evaluateStructuralOp(Operation *op, ArrayRef<const Tensor *> in,
                                              int productErrorSide) {
  const int side = productErrorSide;
  return llvm::TypeSwitch<Operation *, std::optional<OpResults>>(op)
      .Case([&](tg::MatmulOp m) { return singleResult(evalMatmul(m, *in[0], *in[1], side)); })
      .Case([&](tg::MatmulEpilogueOp m) { return evalMatmulEpilogue(m, in, side); })
      .Case([&](tg::MatmulDgeluOp m) {
        return singleResult(evalMatmulDgelu(m, *in[0], *in[1], *in[2], side));
      })
      .Case([&](tg::MatmulBiasGradOp m) {
        return evalMatmulBiasGrad(m, *in[0], *in[1], side);
      })
      .Case([&](tg::SoftmaxCrossEntropyOp s) {
        return singleResult(evalSoftmaxCrossEntropy(s, *in[0], *in[1]));
      })
      .Case([&](tg::SoftmaxCrossEntropyGradOp s) {
        return singleResult(evalSoftmaxCrossEntropyGrad(s, *in[0], *in[1], *in[2]));
      })
      .Case([&](tg::ReduceSumOp r) { return singleResult(evalReduceSum(r, *in[0])); })
      // The interpreter is one rank: the sum and the mean over it are the input.
      .Case([&](tg::AllReduceOp) { return singleResult(Tensor(*in[0])); })
      // ZeRO-1's exchanges at one rank (ranks = 1): the shard is the whole
      // tensor, flattened (or reshaped back). More ranks: not evaluated.
      .Case<tg::ReduceScatterOp, tg::RankShardOp, tg::AllGatherOp>(
          [&](Operation *zero) -> std::optional<OpResults> {
            if (cast<IntegerAttr>(zero->getAttr("ranks")).getInt() != 1)
              return std::nullopt;
            ArrayRef<int64_t> shape = staticShape(zero->getResult(0));
            return singleResult(Tensor{std::vector<int64_t>(shape.begin(), shape.end()), in[0]->data});
          })
      .Case([&](tg::ReduceMeanOp r) { return singleResult(evalReduceMean(r, *in[0])); })
      .Case([&](tg::BroadcastToOp b) { return singleResult(evalBroadcastTo(b, *in[0])); })
      .Case([&](tg::ReshapeOp r) { return singleResult(evalReshape(r, *in[0])); })
      // Before tg-strip-train-only-ops resolves it: @forward is written with
      // training semantics.
      .Case([&](tg::TrainSelectOp) { return singleResult(*in[0]); })
      .Case([&](tg::ReduceMaxOp r) { return singleResult(evalReduceMax(r, *in[0])); })
      .Case([&](tg::SoftmaxOp s) {
        return singleResult(evalSoftmax(s, *in[0], /*logarithm=*/false));
      })
      .Case([&](tg::LogSoftmaxOp s) {
        return singleResult(evalSoftmax(s, *in[0], /*logarithm=*/true));
      })
      .Case([&](tg::CrossEntropyOp c) {
        return singleResult(evalCrossEntropy(c, *in[0], *in[1]));
      })
      .Case([&](tg::LayerNormOp l) { return singleResult(evalLayerNorm(l, in)); })
      .Case([&](tg::RmsNormOp r) { return singleResult(evalRmsNorm(r, in)); })
      .Case([&](tg::CausalMaskOp c) { return singleResult(evalCausalMask(c, *in[0])); })
      .Case([&](tg::LayerNormGradOp l) {
        return OpResults(normGrad(*in[0], *in[1], l.getWeight() ? in[2] : nullptr,
                                  static_cast<bool>(l.getWeightGrad()),
                                  static_cast<bool>(l.getBiasGrad()),
                                  l.getEps().convertToDouble(), /*centered=*/true));
      })
      .Case([&](tg::RmsNormGradOp r) {
        return OpResults(normGrad(*in[0], *in[1], r.getWeight() ? in[2] : nullptr,
                                  static_cast<bool>(r.getWeightGrad()), false,
                                  r.getEps().convertToDouble(), /*centered=*/false));
      })

      .Case([&](tg::GatherOp g) { return singleResult(evalGather(g, *in[0], *in[1])); })
      .Case([&](tg::ScatterAddOp s) {
        return singleResult(evalScatterAdd(s, *in[0], *in[1]));
      })
      .Case([&](tg::TransposeOp t) { return singleResult(evalTranspose(t, *in[0])); })
      .Case([&](tg::SliceOp s) { return singleResult(evalSlice(s, *in[0])); })
      .Case([&](tg::ConcatOp c) { return singleResult(evalConcat(c, in)); })
      .Case([&](tg::SplitOp s) { return OpResults(evalSplit(s, *in[0])); })
      .Default([](Operation *) { return std::nullopt; });
}

} // namespace tcc::interp
