// The reference interpreter's elementwise ops (TgElementwiseOps.td) (see
// TgInterpreter.h): one plain, float64 function per op.
//
// Booleans (i1) are 0 and 1. f32 values are not rounded to their element
// type (f32 math runs in double), except by tg.cast, which rounds like the
// real type: to f32 through (float), to bf16/f16 by rounding to nearest even
// at that precision, to integers by truncation toward zero (a value out of the
// integer's range is an error), to bool as x != 0. bf16/f16 results of every
// op are rounded by the core (TgInterpreter.cpp), not here.
#include <algorithm>
#include <cmath>

#include "interpreter/InterpreterSupport.h"
#include "dialects/tg/TgDialect.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/TypeSwitch.h"
#include "tcc/counter_rng.h"

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

Tensor evalIota(tg::IotaOp op) {
  ArrayRef<int64_t> shape = staticShape(op.getResult());
  int64_t axis = op.getAxisAttr().getInt();
  Tensor out = Tensor::zeros(shape);
  for (int64_t i = 0; i < out.numElements(); ++i)
    out.data[i] = static_cast<double>(unravel(i, shape)[axis]);
  return out;
}

template <typename Fn> Tensor evalUnary(const Tensor &input, Fn fn) {
  Tensor out = input;
  for (double &x : out.data)
    x = fn(x);
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

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

constexpr double kPi = 3.14159265358979323846;

} // namespace

// gelu and its derivative are shared with the GEMM-epilogue ops' rules
// (InterpreterSupport.h).
double gelu(double x, bool tanhForm) {
  if (tanhForm)
    return 0.5 * x *
           (1.0 + std::tanh(std::sqrt(2.0 / kPi) *
                            (x + 0.044715 * x * x * x)));
  return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
}

double geluDerivative(double x, bool tanhForm) {
  if (tanhForm) {
    double k = std::sqrt(2.0 / kPi);
    double t = std::tanh(k * (x + 0.044715 * x * x * x));
    return 0.5 * (1.0 + t) +
           0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * 0.044715 * x * x);
  }
  double cdf = 0.5 * (1.0 + std::erf(x / std::sqrt(2.0)));
  double pdf = std::exp(-0.5 * x * x) / std::sqrt(2.0 * kPi);
  return cdf + x * pdf;
}

namespace {

// max/min that propagate NaN (arith.maximumf / minimumf).
double maxNaN(double a, double b) {
  return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b);
}
double minNaN(double a, double b) {
  return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b);
}

Tensor evalSelect(tg::SelectOp op, const Tensor &cond, const Tensor &t,
                  const Tensor &f) {
  ArrayRef<int64_t> shape = staticShape(op.getResult());
  Tensor c = broadcast(cond, shape), a = broadcast(t, shape),
         b = broadcast(f, shape);
  Tensor out = Tensor::zeros(shape);
  for (int64_t i = 0; i < out.numElements(); ++i)
    out.data[i] = c.data[i] != 0.0 ? a.data[i] : b.data[i];
  return out;
}

FailureOr<Tensor> evalCast(tg::CastOp op, const Tensor &input) {
  Type to = cast<RankedTensorType>(op.getType()).getElementType();
  Tensor out = input;
  for (double &x : out.data) {
    if (to.isF64())
      continue;
    if (to.isF32())
      x = static_cast<double>(static_cast<float>(x));
    else if (auto f = dyn_cast<FloatType>(to))
      x = roundTo(x, f.getFloatSemantics());
    else if (to.isInteger(1))
      x = x != 0.0 ? 1.0 : 0.0;
    else {
      double limit = std::ldexp(1.0, to.getIntOrFloatBitWidth() - 1);
      double truncated = std::trunc(x);
      if (!(truncated >= -limit && truncated < limit))
        return op.emitOpError("reference interpreter: ")
               << numberStr(x) << " is out of the range of " << to;
      x = truncated;
    }
  }
  return out;
}

Tensor evalDropout(tg::DropoutOp op, const Tensor &input, const Tensor &seed,
                   const Tensor &step) {
  double rate = op.getRate().convertToDouble();
  auto rngSeed = static_cast<uint64_t>(static_cast<int64_t>(seed.data[0]));
  auto stepNumber = static_cast<uint64_t>(static_cast<int64_t>(step.data[0]));
  auto opId = static_cast<uint64_t>(op.getOpIdAttr().getInt());
  Tensor out = input;
  for (int64_t i = 0; i < out.numElements(); ++i)
    out.data[i] = tcc_dropout_keep(rngSeed, opId, stepNumber,
                                   static_cast<uint64_t>(i), rate)
                      ? out.data[i] / (1.0 - rate)
                      : 0.0;
  return out;
}

// grad * derivative(input), positionwise (same shapes).
template <typename Fn>
Tensor evalGradient(const Tensor &input, const Tensor &grad, Fn derivative) {
  Tensor out = grad;
  for (int64_t i = 0; i < out.numElements(); ++i)
    out.data[i] = grad.data[i] * derivative(input.data[i]);
  return out;
}

template <typename Fn>
std::optional<OpResults> unary(const Tensor &x, Fn fn) {
  return singleResult(evalUnary(x, fn));
}

template <typename Fn>
std::optional<OpResults> binary(Operation *op, ArrayRef<const Tensor *> in,
                                Fn fn) {
  return singleResult(
      evalBroadcastBinary(op->getResult(0), *in[0], *in[1], fn));
}

} // namespace

std::optional<OpResults> evaluateElementwiseOp(Operation *op,
                                               ArrayRef<const Tensor *> in) {
  using R = std::optional<OpResults>;
  auto b = [](bool v) { return v ? 1.0 : 0.0; };
  return llvm::TypeSwitch<Operation *, R>(op)
      .Case([&](tg::ConstantOp c) { return singleResult(evalConstant(c)); })
      .Case([&](tg::IotaOp i) { return singleResult(evalIota(i)); })
      // Unary math.
      .Case([&](tg::NegOp) { return unary(*in[0], [](double x) { return -x; }); })
      .Case([&](tg::ExpOp) { return unary(*in[0], [](double x) { return std::exp(x); }); })
      .Case([&](tg::LogOp) { return unary(*in[0], [](double x) { return std::log(x); }); })
      .Case([&](tg::SqrtOp) { return unary(*in[0], [](double x) { return std::sqrt(x); }); })
      .Case([&](tg::RsqrtOp) {
        return unary(*in[0], [](double x) { return 1.0 / std::sqrt(x); });
      })
      .Case([&](tg::TanhOp) { return unary(*in[0], [](double x) { return std::tanh(x); }); })
      .Case([&](tg::SigmoidOp) { return unary(*in[0], sigmoid); })
      .Case([&](tg::ReluOp) {
        return unary(*in[0], [](double x) { return x > 0.0 ? x : 0.0; });
      })
      .Case([&](tg::SiluOp) {
        return unary(*in[0], [](double x) { return x * sigmoid(x); });
      })
      .Case([&](tg::SinOp) { return unary(*in[0], [](double x) { return std::sin(x); }); })
      .Case([&](tg::CosOp) { return unary(*in[0], [](double x) { return std::cos(x); }); })
      .Case([&](tg::GeluOp g) {
        bool tanhForm = g.getApproximate() == "tanh";
        return unary(*in[0], [=](double x) { return gelu(x, tanhForm); });
      })
      .Case([&](tg::PowOp p) {
        double c = p.getExponent().convertToDouble();
        return unary(*in[0], [=](double x) { return std::pow(x, c); });
      })
      // Binary math with broadcasting.
      .Case([&](tg::AddOp) { return binary(op, in, [](double x, double y) { return x + y; }); })
      .Case([&](tg::SubOp) { return binary(op, in, [](double x, double y) { return x - y; }); })
      .Case([&](tg::MulOp) { return binary(op, in, [](double x, double y) { return x * y; }); })
      .Case([&](tg::DivOp) { return binary(op, in, [](double x, double y) { return x / y; }); })
      .Case([&](tg::MaxOp) { return binary(op, in, maxNaN); })
      .Case([&](tg::MinOp) { return binary(op, in, minNaN); })
      // Comparisons (IEEE: false with NaN except not_equal).
      .Case([&](tg::EqualOp) { return binary(op, in, [&](double x, double y) { return b(x == y); }); })
      .Case([&](tg::NotEqualOp) { return binary(op, in, [&](double x, double y) { return b(x != y); }); })
      .Case([&](tg::LessOp) { return binary(op, in, [&](double x, double y) { return b(x < y); }); })
      .Case([&](tg::LessEqualOp) { return binary(op, in, [&](double x, double y) { return b(x <= y); }); })
      .Case([&](tg::GreaterOp) { return binary(op, in, [&](double x, double y) { return b(x > y); }); })
      .Case([&](tg::GreaterEqualOp) { return binary(op, in, [&](double x, double y) { return b(x >= y); }); })
      .Case([&](tg::SelectOp s) {
        return singleResult(evalSelect(s, *in[0], *in[1], *in[2]));
      })
      .Case([&](tg::CastOp c) { return singleResult(evalCast(c, *in[0])); })
      .Case([&](tg::DropoutOp d) {
        return singleResult(evalDropout(d, *in[0], *in[1], *in[2]));
      })
      // Gradient helpers.
      .Case([&](tg::ReluGradOp) {
        Tensor out = *in[1];
        for (int64_t i = 0; i < out.numElements(); ++i)
          if (!(in[0]->data[i] > 0.0))
            out.data[i] = 0.0; // 0, even where grad is inf or NaN
        return singleResult(std::move(out));
      })
      .Case([&](tg::GeluGradOp g) {
        bool tanhForm = g.getApproximate() == "tanh";
        return singleResult(evalGradient(*in[0], *in[1], [=](double x) {
          return geluDerivative(x, tanhForm);
        }));
      })
      .Default([](Operation *) { return std::nullopt; });
}

} // namespace tcc::interp
