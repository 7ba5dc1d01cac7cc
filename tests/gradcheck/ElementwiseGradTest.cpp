// The gradient rule of every differentiable elementwise tg op
// (TgElementwiseOps.td), through the real tg-autodiff pass, against finite
// differences on the reference interpreter (float64, fresh random inputs; a
// failure prints the seed, TCC_GRADCHECK_SEED replays it).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ostream>

#include <gtest/gtest.h>

#include "interpreter/InterpreterSupport.h"
#include "interpreter/TgInterpreter.h"
#include "dialects/common/ModelAttrs.h"
#include "dialects/common/ShapeHelpers.h"
#include "dialects/tg/TgDialect.h"
#include "tests/gradcheck/GradCheck.h"
#include "tests/gradcheck/GradCheckFixture.h"

using namespace mlir;
using namespace tcc;
using namespace tcc::gradcheck;

namespace {

struct ElementwiseCase {
  std::string name; // gtest parameter name
  std::vector<ArgSpec> args;
  BodyBuilder body;
  GradCheckOptions options = {};
};

void PrintTo(const ElementwiseCase &c, std::ostream *os) { *os << c.name; }

std::string shapeName(const std::vector<int64_t> &shape) {
  if (shape.empty())
    return "scalar";
  std::string s;
  for (int64_t d : shape)
    s += (s.empty() ? "" : "x") + std::to_string(d);
  return s;
}

// A number as a gtest name: 2 -> "2", -1.5 -> "neg1p5".
std::string numberName(double x) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%g", std::abs(x));
  std::string s = (x < 0 ? "neg" : "") + std::string(buffer);
  std::replace(s.begin(), s.end(), '.', 'p');
  return s;
}

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

RankedTensorType broadcastType(ArrayRef<Value> values, Type elementType) {
  SmallVector<int64_t> shape;
  for (Value v : values)
    shape = *tcc::broadcastShapes(shape, typeOf(v).getShape());
  return RankedTensorType::get(shape, elementType);
}

template <typename OpTy> Value unary(OpBuilder &b, Location loc, Value x) {
  return OpTy::create(b, loc, x.getType(), x);
}

template <typename OpTy>
Value binary(OpBuilder &b, Location loc, Value l, Value r) {
  return OpTy::create(b, loc, broadcastType({l, r}, typeOf(l).getElementType()),
                      l, r);
}

template <typename OpTy>
Value compare(OpBuilder &b, Location loc, Value l, Value r) {
  return OpTy::create(b, loc, broadcastType({l, r}, b.getI1Type()), l, r);
}

Value splat(OpBuilder &b, Location loc, Type elementType, double value) {
  auto type = RankedTensorType::get({}, elementType);
  Attribute element = isa<FloatType>(elementType)
                          ? Attribute(b.getFloatAttr(elementType, value))
                          : Attribute(b.getIntegerAttr(
                                elementType, static_cast<int64_t>(value)));
  return tg::ConstantOp::create(b, loc, type,
                                DenseElementsAttr::get(type, element));
}

// x * x + 0.25 >= 0.26: the domain of log, sqrt, rsqrt and fractional powers.
Value positive(OpBuilder &b, Location loc, Value x) {
  return binary<tg::AddOp>(b, loc, binary<tg::MulOp>(b, loc, x, x),
                           splat(b, loc, b.getF64Type(), 0.25));
}

std::vector<ElementwiseCase> unaryCases() {
  using Builder = Value (*)(OpBuilder &, Location, Value);
  const std::vector<std::pair<std::string, Builder>> anyDomain = {
      {"neg", unary<tg::NegOp>},         {"exp", unary<tg::ExpOp>},
      {"tanh", unary<tg::TanhOp>},       {"sigmoid", unary<tg::SigmoidOp>},
      {"silu", unary<tg::SiluOp>},       {"sin", unary<tg::SinOp>},
      {"cos", unary<tg::CosOp>},
      {"gelu", unary<tg::GeluOp>}, // approximate = "none" (erf)
  };
  const std::vector<std::pair<std::string, Builder>> positiveDomain = {
      {"log", unary<tg::LogOp>},
      {"sqrt", unary<tg::SqrtOp>},
      {"rsqrt", unary<tg::RsqrtOp>},
  };
  std::vector<ElementwiseCase> cases;
  for (const auto &[name, build] : anyDomain)
    cases.push_back({name + "_3x4",
                     {ArgSpec::param({3, 4})},
                     [build = build](OpBuilder &b, Location loc,
                                     ArrayRef<Value> a) {
                       return build(b, loc, a[0]);
                     }});
  for (const auto &[name, build] : positiveDomain)
    cases.push_back({name + "_of_positive_3x4",
                     {ArgSpec::param({3, 4})},
                     [build = build](OpBuilder &b, Location loc,
                                     ArrayRef<Value> a) {
                       return build(b, loc, positive(b, loc, a[0]));
                     }});
  cases.push_back({"gelu_tanh_3x4",
                   {ArgSpec::param({3, 4})},
                   [](OpBuilder &b, Location loc, ArrayRef<Value> a) -> Value {
                     return tg::GeluOp::create(b, loc, a[0].getType(), a[0],
                                               b.getStringAttr("tanh"));
                   }});
  // pow: integer exponents on any sign, fractional ones on positives.
  for (double c : {2.0, 3.0, 1.0, -1.0})
    cases.push_back({"pow_" + numberName(c),
                     {ArgSpec::param({3, 4})},
                     [c](OpBuilder &b, Location loc, ArrayRef<Value> a) -> Value {
                       return tg::PowOp::create(b, loc, a[0].getType(), a[0],
                                                b.getF64FloatAttr(c));
                     }});
  for (double c : {0.5, -1.5, 2.5})
    cases.push_back({"pow_" + numberName(c) + "_of_positive",
                     {ArgSpec::param({3, 4})},
                     [c](OpBuilder &b, Location loc, ArrayRef<Value> a) -> Value {
                       Value x = positive(b, loc, a[0]);
                       return tg::PowOp::create(b, loc, x.getType(), x,
                                                b.getF64FloatAttr(c));
                     }});
  // x^0 = 1 does not depend on x: the gradient must be exactly zero.
  ElementwiseCase pow0{"pow_0_zero_gradient",
                       {ArgSpec::param({3, 4})},
                       [](OpBuilder &b, Location loc, ArrayRef<Value> a) -> Value {
                         return tg::PowOp::create(b, loc, a[0].getType(), a[0],
                                                  b.getF64FloatAttr(0.0));
                       }};
  pow0.options.zeroGradientParams = {0};
  cases.push_back(pow0);
  return cases;
}

// args[0] > args[1] at some position and < at another, after broadcasting.
bool eachSideWins(ArrayRef<Tensor> args) {
  auto shape = tcc::broadcastShapes(args[0].shape, args[1].shape);
  Tensor l = interp::broadcast(args[0], *shape);
  Tensor r = interp::broadcast(args[1], *shape);
  bool greater = false, less = false;
  for (size_t i = 0; i < l.data.size(); ++i) {
    greater |= l.data[i] > r.data[i];
    less |= l.data[i] < r.data[i];
  }
  return greater && less;
}

// sub, div, max, min over broadcast patterns (add and mul are in
// OpGradientTest).
std::vector<ElementwiseCase> binaryCases() {
  using Builder = Value (*)(OpBuilder &, Location, Value, Value);
  const std::vector<std::pair<std::string, Builder>> ops = {
      {"sub", binary<tg::SubOp>},
      {"div", binary<tg::DivOp>},
      {"max", binary<tg::MaxOp>},
      {"min", binary<tg::MinOp>},
  };
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>
      shapes = {{{3, 4}, {3, 4}},       {{3, 4}, {4}},
                {{}, {3, 4}},           {{3, 4}, {}},
                {{2, 3, 4}, {2, 1, 4}}, {{3, 1}, {1, 4}},
                {{2, 3, 4}, {3, 1}}};
  std::vector<ElementwiseCase> cases;
  for (const auto &[name, build] : ops)
    for (const auto &[lhs, rhs] : shapes) {
      ElementwiseCase c{name + "_" + shapeName(lhs) + "_and_" + shapeName(rhs),
                        {ArgSpec::param(lhs), ArgSpec::param(rhs)},
                        [build = build](OpBuilder &b, Location loc,
                                        ArrayRef<Value> a) {
                          return build(b, loc, a[0], a[1]);
                        }};
      // max/min: each side must win somewhere, or its gradient is zero by
      // construction and the check proves nothing.
      if (name == "max" || name == "min")
        c.options.acceptArguments = eachSideWins;
      cases.push_back(c);
    }
  // Only one side trainable.
  cases.push_back({"div_input_by_param",
                   {ArgSpec::input({3, 4}), ArgSpec::param({4})},
                   [](OpBuilder &b, Location loc, ArrayRef<Value> a) {
                     return binary<tg::DivOp>(b, loc, a[0], a[1]);
                   }});
  return cases;
}

std::vector<ElementwiseCase> selectCastDropoutCases() {
  std::vector<ElementwiseCase> cases;
  // select(x < 0, a, b) with a data-dependent condition and broadcasting.
  const std::vector<std::vector<std::vector<int64_t>>> selectShapes = {
      {{3, 4}, {3, 4}, {3, 4}},
      {{3, 4}, {4}, {}},
      {{3, 1}, {1, 4}, {3, 4}},
      {{2, 3, 4}, {3, 4}, {2, 1, 4}}};
  for (const auto &s : selectShapes) {
    ElementwiseCase c{"select_" + shapeName(s[0]) + "_" + shapeName(s[1]) + "_" +
             shapeName(s[2]),
         {ArgSpec::input(s[0]), ArgSpec::param(s[1]), ArgSpec::param(s[2])},
         [](OpBuilder &b, Location loc, ArrayRef<Value> a) -> Value {
           Value cond = compare<tg::LessOp>(
               b, loc, a[0], splat(b, loc, b.getF64Type(), 0.0));
           return tg::SelectOp::create(
               b, loc, broadcastType({cond, a[1], a[2]}, b.getF64Type()), cond,
               a[1], a[2]);
         }};
    // Both values must be selected somewhere (else one gradient is zero by
    // construction): the condition input needs both signs.
    c.options.acceptArguments = [](ArrayRef<Tensor> args) {
      bool negative = false, positive = false;
      for (double x : args[0].data)
        (x < 0 ? negative : positive) = true;
      return negative && positive;
    };
    cases.push_back(c);
  }
  // f64 -> f32 -> (product in f32) -> f64: each cast's gradient is cast
  // back. f32 rounding (~1e-7 relative) needs a larger finite-difference step.
  ElementwiseCase castCase{
      "cast_f64_f32_f64",
      {ArgSpec::param({3, 4}), ArgSpec::param({4})},
      [](OpBuilder &b, Location loc, ArrayRef<Value> a) -> Value {
        auto toF32 = [&](Value v) -> Value {
          return tg::CastOp::create(
              b, loc, RankedTensorType::get(typeOf(v).getShape(), b.getF32Type()),
              v);
        };
        Value product = binary<tg::MulOp>(b, loc, toF32(a[0]), toF32(a[1]));
        return tg::CastOp::create(
            b, loc,
            RankedTensorType::get(typeOf(product).getShape(), b.getF64Type()),
            product);
      }};
  castCase.options.epsilon = 1e-2;
  castCase.options.relativeTolerance = 1e-4;
  cases.push_back(castCase);
  // Dropout with a fixed key: the mask is the same in forward, backward and
  // every finite-difference evaluation.
  for (double rate : {0.0, 0.3, 0.5})
    cases.push_back(
        {"dropout_rate_" + numberName(rate) + "_4x8",
         {ArgSpec::param({4, 8})},
         [rate](OpBuilder &b, Location loc, ArrayRef<Value> a) -> Value {
           return tg::DropoutOp::create(
               b, loc, a[0].getType(), a[0], splat(b, loc, b.getI64Type(), 1234),
               splat(b, loc, b.getI64Type(), 7), b.getF64FloatAttr(rate),
               b.getI64IntegerAttr(99));
         }});
  // A chain, like a GPT MLP with a residual: x + gelu_tanh(x * w) / sqrt(v).
  cases.push_back(
      {"chain_gelu_div_sqrt",
       {ArgSpec::param({3, 4}), ArgSpec::param({4}), ArgSpec::param({3, 1})},
       [](OpBuilder &b, Location loc, ArrayRef<Value> a) -> Value {
         Value h = binary<tg::MulOp>(b, loc, a[0], a[1]);
         Value g = tg::GeluOp::create(b, loc, h.getType(), h,
                                      b.getStringAttr("tanh"));
         Value d = binary<tg::DivOp>(
             b, loc, g, unary<tg::SqrtOp>(b, loc, positive(b, loc, a[2])));
         return binary<tg::AddOp>(b, loc, a[0], d);
       }});
  return cases;
}

class ElementwiseGradTest : public GradCheckParamTest<ElementwiseCase> {};

TEST_P(ElementwiseGradTest, MatchesFiniteDifferences) {
  const ElementwiseCase &c = GetParam();
  OwningOpRef<ModuleOp> module = buildDifferentiated(c.args, c.body);
  ASSERT_TRUE(module);
  checkGradients(*module, c.options);
}

std::string caseName(const ::testing::TestParamInfo<ElementwiseCase> &info) {
  return info.param.name;
}

INSTANTIATE_TEST_SUITE_P(Unary, ElementwiseGradTest,
                         ::testing::ValuesIn(unaryCases()), caseName);
INSTANTIATE_TEST_SUITE_P(Binary, ElementwiseGradTest,
                         ::testing::ValuesIn(binaryCases()), caseName);
INSTANTIATE_TEST_SUITE_P(SelectCastDropout, ElementwiseGradTest,
                         ::testing::ValuesIn(selectCastDropoutCases()),
                         caseName);

//===----------------------------------------------------------------------===//
// Rules finite differences cannot see
//===----------------------------------------------------------------------===//

class ElementwiseGradRules : public GradCheckTest {
protected:
  // Builds @forward(p, q, cotangent) = sum(op(p, q) * cotangent), runs
  // autodiff and returns @train_step's gradients at the given values.
  std::vector<Tensor> gradientsAt(std::vector<int64_t> shape,
                                  Value (*build)(OpBuilder &, Location, Value,
                                                 Value),
                                  Tensor p, Tensor q, Tensor cotangent) {
    OwningOpRef<ModuleOp> module =
        buildDifferentiated({ArgSpec::param(shape), ArgSpec::param(shape)},
                            [&](OpBuilder &b, Location loc, ArrayRef<Value> a) {
                              return build(b, loc, a[0], a[1]);
                            });
    if (!module)
      return {};
    auto step = module->lookupSymbol<func::FuncOp>(model::kTrainStepFunc);
    auto results = interp::interpret(step, {p, q, cotangent});
    if (failed(results)) {
      ADD_FAILURE() << "interpreting @train_step failed:\n" << diagnostics_;
      return {};
    }
    return {(*results)[1], (*results)[2]};
  }
};

// At a tie, max and min split the gradient in halves (torch.maximum).
TEST_F(ElementwiseGradRules, MaxAndMinSplitTiesInHalves) {
  Tensor p{{3}, {1.0, 2.0, 3.0}}, q{{3}, {1.0, 5.0, -3.0}};
  Tensor g{{3}, {4.0, 8.0, 16.0}};
  auto maxGrads = gradientsAt({3}, binary<tg::MaxOp>, p, q, g);
  ASSERT_EQ(maxGrads.size(), 2u);
  EXPECT_EQ(maxGrads[0].data, (std::vector<double>{2.0, 0.0, 16.0}));
  EXPECT_EQ(maxGrads[1].data, (std::vector<double>{2.0, 8.0, 0.0}));
  auto minGrads = gradientsAt({3}, binary<tg::MinOp>, p, q, g);
  ASSERT_EQ(minGrads.size(), 2u);
  EXPECT_EQ(minGrads[0].data, (std::vector<double>{2.0, 8.0, 0.0}));
  EXPECT_EQ(minGrads[1].data, (std::vector<double>{2.0, 0.0, 16.0}));
}

// Integer and boolean operands get no gradient, and a float->int cast stops
// the gradient: autodiff succeeds and the parameter's gradient is zero.
TEST_F(ElementwiseGradRules, IntegerCastsAndConditionsGetNoGradient) {
  // w * cast(cast(w -> i32) -> f64) + (iota as f64): the i32 round trip is
  // piecewise constant, so d/dw = cast(cast(w)).
  OwningOpRef<ModuleOp> module = buildDifferentiated(
      {ArgSpec::param({3, 4})},
      [](OpBuilder &b, Location loc, ArrayRef<Value> a) -> Value {
        auto shape = typeOf(a[0]).getShape();
        Value asInt = tg::CastOp::create(
            b, loc, RankedTensorType::get(shape, b.getI32Type()), a[0]);
        Value back = tg::CastOp::create(
            b, loc, RankedTensorType::get(shape, b.getF64Type()), asInt);
        Value iota = tg::IotaOp::create(
            b, loc, RankedTensorType::get(shape, b.getF64Type()),
            b.getI64IntegerAttr(1));
        Value constant = splat(b, loc, b.getF64Type(), 3.0);
        return binary<tg::AddOp>(
            b, loc, binary<tg::MulOp>(b, loc, a[0], back),
            binary<tg::MulOp>(b, loc, iota, constant));
      });
  ASSERT_TRUE(module);
  // |w| in [0.1, 1.5): cast to i32 is 0 or +-1; where it is 0 the gradient
  // is 0, so require one element with |w| >= 1.
  GradCheckOptions options;
  options.acceptArguments = [](ArrayRef<Tensor> args) {
    for (double x : args[0].data)
      if (std::abs(x) >= 1.0)
        return true;
    return false;
  };
  checkGradients(*module, options);
}

} // namespace
