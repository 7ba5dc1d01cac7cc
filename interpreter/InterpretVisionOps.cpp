// The reference interpreter's 2-D convolution and pooling ops
// (TgVisionOps.td), float64, direct loops over the windows (see
// TgInterpreter.h). The three conv2d products share one loop nest: each
// visits every (output position, kernel tap) pair once. Batch norm's ops
// (TgBatchNormOps.td): statistics per channel (axis 1) in float64, two
// passes (mean, then squared deviations).
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <vector>

#include "interpreter/InterpreterSupport.h"
#include "dialects/tg/TgDialect.h"
#include "dialects/common/Window2d.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace tcc::interp {
namespace {

enum class ConvProduct { Forward, InputGrad, WeightGrad };

tcc::Window2d convWindow(ArrayRef<int64_t> weightShape, ArrayRef<int64_t> stride,
                        ArrayRef<int64_t> padding, ArrayRef<int64_t> dilation) {
  tcc::Window2d w;
  w.kh = weightShape[2], w.kw = weightShape[3];
  w.sh = stride[0], w.sw = stride[1];
  w.ph = padding[0], w.pw = padding[1];
  w.dh = dilation[0], w.dw = dilation[1];
  return w;
}

// x (N, C, H, W), w (O, C / groups, KH, KW), y (N, O, HO, WO). Forward
// writes y from x and w; InputGrad writes x from y (the gradient) and w;
// WeightGrad writes w from y and x. The written tensor starts at zero.
// With `errorSide` +1 / -1 each written element then moves by that sign
// times f32 accumulation's error bound, (its terms) * 2^-24 * sum |terms|
// (interpret's productErrorSide, as for tg.matmul).
void convLoop(ConvProduct product, Tensor &x, Tensor &w, Tensor &y, const tcc::Window2d &win,
              int64_t groups, int errorSide) {
  Tensor &target = product == ConvProduct::Forward ? y : product == ConvProduct::InputGrad ? x : w;
  std::vector<double> magnitude(errorSide != 0 ? target.data.size() : 0);
  std::vector<int64_t> terms(magnitude.size());
  int64_t n = x.shape[0], c = x.shape[1], h = x.shape[2], wd = x.shape[3];
  int64_t o = w.shape[0], cg = w.shape[1];
  int64_t ho = y.shape[2], wo = y.shape[3], og = o / groups;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t oc = 0; oc < o; ++oc) {
      int64_t group = oc / og;
      for (int64_t oy = 0; oy < ho; ++oy)
        for (int64_t ox = 0; ox < wo; ++ox) {
          int64_t yi = ((b * o + oc) * ho + oy) * wo + ox;
          for (int64_t ci = 0; ci < cg; ++ci) {
            int64_t ic = group * cg + ci;
            for (int64_t ky = 0; ky < win.kh; ++ky) {
              int64_t iy = oy * win.sh - win.ph + ky * win.dh;
              if (iy < 0 || iy >= h)
                continue;
              for (int64_t kx = 0; kx < win.kw; ++kx) {
                int64_t ix = ox * win.sw - win.pw + kx * win.dw;
                if (ix < 0 || ix >= wd)
                  continue;
                int64_t xi = ((b * c + ic) * h + iy) * wd + ix;
                int64_t wi = ((oc * cg + ci) * win.kh + ky) * win.kw + kx;
                int64_t at = 0;
                double term = 0;
                switch (product) {
                case ConvProduct::Forward: at = yi, term = x.data[xi] * w.data[wi]; break;
                case ConvProduct::InputGrad: at = xi, term = y.data[yi] * w.data[wi]; break;
                case ConvProduct::WeightGrad: at = wi, term = y.data[yi] * x.data[xi]; break;
                }
                target.data[at] += term;
                if (errorSide != 0) {
                  magnitude[at] += std::abs(term);
                  ++terms[at];
                }
              }
            }
          }
        }
    }
  for (size_t i = 0; i < magnitude.size(); ++i)
    target.data[i] += productErrorShift(errorSide, terms[i], magnitude[i]);
}

// Channels-last ops (layout "NHWC") are evaluated in NCHW: operands and
// result permuted, the loops unchanged.
bool channelsLast(Operation *op) {
  auto layout = op->getAttrOfType<StringAttr>("layout");
  return layout && layout.getValue() == "NHWC";
}

// result dimension i = t's dimension perm[i] (rank 4).
Tensor permute4(const Tensor &t, const std::array<int, 4> &perm) {
  std::array<int64_t, 4> in{t.shape[0], t.shape[1], t.shape[2], t.shape[3]}, stride;
  stride[3] = 1;
  for (int d = 2; d >= 0; --d)
    stride[d] = stride[d + 1] * in[d + 1];
  std::vector<int64_t> shape = {in[perm[0]], in[perm[1]], in[perm[2]], in[perm[3]]};
  Tensor out = Tensor::zeros(shape);
  int64_t k = 0;
  for (int64_t i0 = 0; i0 < shape[0]; ++i0)
    for (int64_t i1 = 0; i1 < shape[1]; ++i1)
      for (int64_t i2 = 0; i2 < shape[2]; ++i2)
        for (int64_t i3 = 0; i3 < shape[3]; ++i3)
          out.data[k++] = t.data[i0 * stride[perm[0]] + i1 * stride[perm[1]] +
                                 i2 * stride[perm[2]] + i3 * stride[perm[3]]];
  return out;
}
constexpr std::array<int, 4> kToNchw = {0, 3, 1, 2}, kToNhwc = {0, 2, 3, 1};

std::vector<int64_t> nchwShape(std::vector<int64_t> shape) {
  return {shape[0], shape[3], shape[1], shape[2]};
}

template <typename ConvLike>
Tensor evalConvNchw(ConvLike op, ConvProduct product, const Tensor &a, const Tensor &b,
                    const std::vector<int64_t> &outShape, int errorSide) {
  Tensor out = Tensor::zeros(outShape);
  Tensor x, w, y;
  switch (product) {
  case ConvProduct::Forward: x = a, w = b; break;   // input, weight
  case ConvProduct::InputGrad: y = a, w = b; break; // grad, weight
  case ConvProduct::WeightGrad: y = a, x = b; break; // grad, input
  }
  Tensor &target = product == ConvProduct::Forward ? y
                   : product == ConvProduct::InputGrad ? x
                                                       : w;
  target = out;
  convLoop(product, x, w, y,
           convWindow(w.shape, op.getStride(), op.getPadding(), op.getDilation()),
           op.getGroups(), errorSide);
  return target;
}

template <typename ConvLike>
Tensor evalConv(ConvLike op, ConvProduct product, const Tensor &a, const Tensor &b,
                int errorSide) {
  if (channelsLast(op)) // weight (O, KH, KW, C/g) -> (O, C/g, KH, KW): the same permutation
    return permute4(evalConvNchw(op, product, permute4(a, kToNchw), permute4(b, kToNchw),
                                 nchwShape(staticShape(op.getResult())), errorSide),
                    kToNhwc);
  return evalConvNchw(op, product, a, b, staticShape(op.getResult()), errorSide);
}

tcc::Window2d poolWindow(ArrayRef<int64_t> kernel, ArrayRef<int64_t> stride,
                        ArrayRef<int64_t> padding) {
  tcc::Window2d w;
  w.kh = kernel[0], w.kw = kernel[1];
  w.sh = stride[0], w.sw = stride[1];
  w.ph = padding[0], w.pw = padding[1];
  return w;
}

// Visits each window of x (N, C, H, W) for output (N, C, HO, WO):
// visit(outIndex, list of input indices inside the input, row-major).
template <typename Visit>
void forEachWindow(ArrayRef<int64_t> xShape, int64_t ho, int64_t wo, const tcc::Window2d &win,
                   Visit visit) {
  int64_t planes = xShape[0] * xShape[1], h = xShape[2], w = xShape[3];
  std::vector<int64_t> taps;
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t oy = 0; oy < ho; ++oy)
      for (int64_t ox = 0; ox < wo; ++ox) {
        taps.clear();
        for (int64_t ky = 0; ky < win.kh; ++ky)
          for (int64_t kx = 0; kx < win.kw; ++kx) {
            int64_t iy = oy * win.sh - win.ph + ky, ix = ox * win.sw - win.pw + kx;
            if (iy >= 0 && iy < h && ix >= 0 && ix < w)
              taps.push_back((p * h + iy) * w + ix);
          }
        visit((p * ho + oy) * wo + ox, taps);
      }
}

Tensor evalPool(ArrayRef<int64_t> outShape, const Tensor &x, bool max,
                const tcc::Window2d &win) {
  Tensor out = Tensor::zeros(outShape);
  forEachWindow(x.shape, outShape[2], outShape[3], win,
                [&](int64_t o, const std::vector<int64_t> &taps) {
                  if (max) {
                    double m = -std::numeric_limits<double>::infinity();
                    for (int64_t t : taps)
                      m = std::max(m, x.data[t]);
                    out.data[o] = m;
                    return;
                  }
                  double sum = 0; // padding counts as zeros in the divisor
                  for (int64_t t : taps)
                    sum += x.data[t];
                  out.data[o] = sum / static_cast<double>(win.kh * win.kw);
                });
  return out;
}

Tensor evalPoolGrad(tg::Pool2dGradOp op, const Tensor &g, const Tensor &x) {
  tcc::Window2d win = poolWindow(op.getKernel(), op.getStride(), op.getPadding());
  Tensor dx = Tensor::zeros(x.shape);
  bool max = op.getMode() == "max";
  forEachWindow(x.shape, g.shape[2], g.shape[3], win,
                [&](int64_t o, const std::vector<int64_t> &taps) {
                  if (max) { // the first maximum in row-major window order (PyTorch)
                    int64_t best = taps.front();
                    for (int64_t t : taps)
                      if (x.data[t] > x.data[best])
                        best = t;
                    dx.data[best] += g.data[o];
                    return;
                  }
                  for (int64_t t : taps)
                    dx.data[t] += g.data[o] / static_cast<double>(win.kh * win.kw);
                });
  return dx;
}

template <typename PoolOp> Tensor evalPoolOp(PoolOp p, const Tensor &x, bool max) {
  tcc::Window2d win = poolWindow(p.getKernel(), p.getStride(), p.getPadding());
  if (!channelsLast(p))
    return evalPool(staticShape(p.getResult()), x, max, win);
  return permute4(
      evalPool(nchwShape(staticShape(p.getResult())), permute4(x, kToNchw), max, win), kToNhwc);
}

// x (N, C, S...) as the index of element (n, c, s) of channel c.
struct Channels {
  int64_t n, c, s;
  explicit Channels(const Tensor &x)
      : n(x.shape[0]), c(x.shape[1]), s(x.numElements() / std::max<int64_t>(1, n * x.shape[1])) {}
  int64_t at(int64_t i, int64_t ch, int64_t j) const { return (i * c + ch) * s + j; }
  double count() const { return static_cast<double>(n * s); }
};

// {mean, biased var} (C).
std::vector<Tensor> batchNormStats(const Tensor &x) {
  Channels d(x);
  Tensor mean = Tensor::zeros({d.c}), var = Tensor::zeros({d.c});
  for (int64_t c = 0; c < d.c; ++c) {
    double sum = 0.0;
    for (int64_t i = 0; i < d.n; ++i)
      for (int64_t j = 0; j < d.s; ++j)
        sum += x.data[d.at(i, c, j)];
    double m = sum / d.count(), squares = 0.0;
    for (int64_t i = 0; i < d.n; ++i)
      for (int64_t j = 0; j < d.s; ++j)
        squares += (x.data[d.at(i, c, j)] - m) * (x.data[d.at(i, c, j)] - m);
    mean.data[c] = m;
    var.data[c] = squares / d.count();
  }
  return {std::move(mean), std::move(var)};
}

// {result, mean, var}.
std::vector<Tensor> evalBatchNorm(tg::BatchNormOp op, ArrayRef<const Tensor *> in) {
  const Tensor &x = *in[0];
  const Tensor *weight = op.getWeight() ? in[1] : nullptr;
  const Tensor *bias = op.getBias() ? in[op.getWeight() ? 2 : 1] : nullptr;
  std::vector<Tensor> stats = batchNormStats(x);
  Channels d(x);
  Tensor y = Tensor::zeros(x.shape);
  double eps = op.getEps().convertToDouble();
  for (int64_t c = 0; c < d.c; ++c) {
    double rstd = 1.0 / std::sqrt(stats[1].data[c] + eps);
    for (int64_t i = 0; i < d.n; ++i)
      for (int64_t j = 0; j < d.s; ++j) {
        int64_t k = d.at(i, c, j);
        double v = (x.data[k] - stats[0].data[c]) * rstd;
        y.data[k] = v * (weight ? weight->data[c] : 1.0) + (bias ? bias->data[c] : 0.0);
      }
  }
  return {std::move(y), std::move(stats[0]), std::move(stats[1])};
}

// {sum(grad), sum(grad * (x - mean) * rstd)} (C).
std::vector<Tensor> batchNormGradSums(const Tensor &g, const Tensor &x, const Tensor &mean,
                                      const Tensor &rstd) {
  Channels d(x);
  Tensor sum = Tensor::zeros({d.c}), dot = Tensor::zeros({d.c});
  for (int64_t c = 0; c < d.c; ++c)
    for (int64_t i = 0; i < d.n; ++i)
      for (int64_t j = 0; j < d.s; ++j) {
        int64_t k = d.at(i, c, j);
        sum.data[c] += g.data[k];
        dot.data[c] += g.data[k] * (x.data[k] - mean.data[c]) * rstd.data[c];
      }
  return {std::move(sum), std::move(dot)};
}

} // namespace

std::optional<OpResults> evaluateVisionOp(Operation *op, ArrayRef<const Tensor *> in,
                                          int productErrorSide) {
  const int side = productErrorSide;
  return llvm::TypeSwitch<Operation *, std::optional<OpResults>>(op)
      .Case([&](tg::Conv2dOp c) {
        return singleResult(evalConv(c, ConvProduct::Forward, *in[0], *in[1], side));
      })
      .Case([&](tg::Conv2dInputGradOp c) {
        return singleResult(evalConv(c, ConvProduct::InputGrad, *in[0], *in[1], side));
      })
      .Case([&](tg::Conv2dWeightGradOp c) {
        return singleResult(evalConv(c, ConvProduct::WeightGrad, *in[0], *in[1], side));
      })
      .Case([&](tg::MaxPool2dOp p) {
        return singleResult(evalPoolOp(p, *in[0], /*max=*/true));
      })
      .Case([&](tg::AvgPool2dOp p) {
        return singleResult(evalPoolOp(p, *in[0], /*max=*/false));
      })
      .Case([&](tg::Pool2dGradOp p) {
        if (!channelsLast(p))
          return singleResult(evalPoolGrad(p, *in[0], *in[1]));
        return singleResult(permute4(
            evalPoolGrad(p, permute4(*in[0], kToNchw), permute4(*in[1], kToNchw)), kToNhwc));
      })
      .Case([&](tg::BatchNormOp b) { return OpResults(evalBatchNorm(b, in)); })
      .Case([&](tg::BatchNormStatsOp) { return OpResults(batchNormStats(*in[0])); })
      .Case([&](tg::BatchNormGradSumsOp) {
        return OpResults(batchNormGradSums(*in[0], *in[1], *in[2], *in[3]));
      })
      .Default([](Operation *) { return std::nullopt; });
}

} // namespace tcc::interp
