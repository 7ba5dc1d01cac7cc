// ScalarOpInterface::buildScalar of every elementwise op against the
// reference interpreter: each op's scalar body (arith/math ops) is built into
// a function on scalars and evaluated by a small arith/math evaluator at
// every position of the op's result, on fresh random inputs; the values must
// equal the interpreter's (floats to 1e-12 relative, integers, booleans and
// dropout masks exactly). This is what lowering runs, so a body that
// disagrees with the interpreter fails here before any kernel is generated.
#include <cmath>
#include <cstdint>
#include <random>

#include <gtest/gtest.h>

#include "interpreter/TgInterpreter.h"
#include "dialects/tg/TgDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "llvm/ADT/TypeSwitch.h"
#include "tests/gradcheck/GradCheck.h"
#include "tests/gradcheck/GradCheckFixture.h"

using namespace mlir;
using namespace tcc;
using tcc::interp::Tensor;

namespace {

//===----------------------------------------------------------------------===//
// A tiny evaluator of scalar arith/math functions
//===----------------------------------------------------------------------===//

// A float is held as a double already rounded to its type; an integer as its
// bit pattern (low `width` bits).
struct Scalar {
  double f = 0.0;
  uint64_t bits = 0;
};

uint64_t mask(unsigned width) {
  return width >= 64 ? ~uint64_t{0} : (uint64_t{1} << width) - 1;
}

int64_t signedValue(uint64_t bits, unsigned width) {
  if (width >= 64)
    return static_cast<int64_t>(bits);
  uint64_t sign = uint64_t{1} << (width - 1);
  return static_cast<int64_t>((bits ^ sign) - sign) ;
}

double roundToType(double x, Type t) {
  if (t.isF64() || std::isnan(x))
    return x;
  if (t.isF32())
    return static_cast<float>(x);
  APFloat v(x);
  bool losesInfo = false;
  v.convert(cast<FloatType>(t).getFloatSemantics(),
            APFloat::rmNearestTiesToEven, &losesInfo);
  v.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &losesInfo);
  return v.convertToDouble();
}

// Interpreter values (doubles; integers exact) <-> Scalars of type t.
Scalar fromDouble(double x, Type t) {
  Scalar s;
  if (isa<FloatType>(t))
    s.f = roundToType(x, t);
  else
    s.bits = static_cast<uint64_t>(static_cast<int64_t>(x)) &
             mask(t.getIntOrFloatBitWidth());
  return s;
}

double toDouble(Scalar s, Type t) {
  if (isa<FloatType>(t))
    return s.f;
  if (t.isInteger(1))
    return static_cast<double>(s.bits);
  return static_cast<double>(signedValue(s.bits, t.getIntOrFloatBitWidth()));
}

class ScalarEvaluator {
public:
  FailureOr<std::vector<Scalar>> run(func::FuncOp f, ArrayRef<Scalar> args) {
    values_.clear();
    for (auto [arg, s] : llvm::zip(f.getArguments(), args))
      values_[arg] = s;
    for (Operation &op : f.getBody().front()) {
      if (auto ret = dyn_cast<func::ReturnOp>(op)) {
        std::vector<Scalar> out;
        for (Value v : ret.getOperands())
          out.push_back(values_.lookup(v));
        return out;
      }
      if (failed(evaluate(&op))) {
        ADD_FAILURE() << "the scalar evaluator does not know "
                      << op.getName().getStringRef().str();
        return failure();
      }
    }
    return failure();
  }

private:
  Scalar in(Operation *op, unsigned i) {
    return values_.lookup(op->getOperand(i));
  }
  Type inType(Operation *op, unsigned i) { return op->getOperand(i).getType(); }
  unsigned width(Type t) { return t.getIntOrFloatBitWidth(); }

  LogicalResult setFloat(Operation *op, double x) {
    values_[op->getResult(0)].f = roundToType(x, op->getResult(0).getType());
    return success();
  }
  LogicalResult setBits(Operation *op, uint64_t bits) {
    values_[op->getResult(0)].bits =
        bits & mask(width(op->getResult(0).getType()));
    return success();
  }
  template <typename Fn> LogicalResult unaryFloat(Operation *op, Fn fn) {
    return setFloat(op, fn(in(op, 0).f));
  }
  template <typename Fn> LogicalResult binaryFloat(Operation *op, Fn fn) {
    return setFloat(op, fn(in(op, 0).f, in(op, 1).f));
  }
  template <typename Fn> LogicalResult binaryInt(Operation *op, Fn fn) {
    return setBits(op, fn(in(op, 0).bits, in(op, 1).bits));
  }

  LogicalResult evaluate(Operation *op) {
    using namespace arith;
    auto nanOr = [](double a, double b, double r) {
      return std::isnan(a) || std::isnan(b) ? NAN : r;
    };
    return llvm::TypeSwitch<Operation *, LogicalResult>(op)
        .Case([&](arith::ConstantOp c) {
          if (auto f = dyn_cast<FloatAttr>(c.getValue()))
            return setFloat(op, f.getValueAsDouble());
          return setBits(op, cast<IntegerAttr>(c.getValue()).getValue().getZExtValue());
        })
        .Case([&](AddFOp) { return binaryFloat(op, [](double a, double b) { return a + b; }); })
        .Case([&](SubFOp) { return binaryFloat(op, [](double a, double b) { return a - b; }); })
        .Case([&](MulFOp) { return binaryFloat(op, [](double a, double b) { return a * b; }); })
        .Case([&](DivFOp) { return binaryFloat(op, [](double a, double b) { return a / b; }); })
        .Case([&](MaximumFOp) {
          return binaryFloat(op, [&](double a, double b) { return nanOr(a, b, std::max(a, b)); });
        })
        .Case([&](MinimumFOp) {
          return binaryFloat(op, [&](double a, double b) { return nanOr(a, b, std::min(a, b)); });
        })
        .Case([&](NegFOp) { return unaryFloat(op, [](double a) { return -a; }); })
        .Case([&](math::ExpOp) { return unaryFloat(op, [](double a) { return std::exp(a); }); })
        .Case([&](math::LogOp) { return unaryFloat(op, [](double a) { return std::log(a); }); })
        .Case([&](math::SqrtOp) { return unaryFloat(op, [](double a) { return std::sqrt(a); }); })
        .Case([&](math::RsqrtOp) { return unaryFloat(op, [](double a) { return 1.0 / std::sqrt(a); }); })
        .Case([&](math::TanhOp) { return unaryFloat(op, [](double a) { return std::tanh(a); }); })
        .Case([&](math::ErfOp) { return unaryFloat(op, [](double a) { return std::erf(a); }); })
        .Case([&](math::SinOp) { return unaryFloat(op, [](double a) { return std::sin(a); }); })
        .Case([&](math::CosOp) { return unaryFloat(op, [](double a) { return std::cos(a); }); })
        .Case([&](math::PowFOp) { return binaryFloat(op, [](double a, double b) { return std::pow(a, b); }); })
        .Case([&](CmpFOp c) {
          double a = in(op, 0).f, b = in(op, 1).f;
          bool r;
          switch (c.getPredicate()) {
          case CmpFPredicate::OEQ: r = a == b; break;
          case CmpFPredicate::UNE: r = !(a == b); break;
          case CmpFPredicate::OLT: r = a < b; break;
          case CmpFPredicate::OLE: r = a <= b; break;
          case CmpFPredicate::OGT: r = a > b; break;
          case CmpFPredicate::OGE: r = a >= b; break;
          default: return failure();
          }
          return setBits(op, r);
        })
        .Case([&](CmpIOp c) {
          unsigned w = width(inType(op, 0));
          uint64_t a = in(op, 0).bits, b = in(op, 1).bits;
          int64_t sa = signedValue(a, w), sb = signedValue(b, w);
          bool r = false; // every predicate is handled below
          switch (c.getPredicate()) {
          case CmpIPredicate::eq: r = a == b; break;
          case CmpIPredicate::ne: r = a != b; break;
          case CmpIPredicate::slt: r = sa < sb; break;
          case CmpIPredicate::sle: r = sa <= sb; break;
          case CmpIPredicate::sgt: r = sa > sb; break;
          case CmpIPredicate::sge: r = sa >= sb; break;
          case CmpIPredicate::ult: r = a < b; break;
          case CmpIPredicate::ule: r = a <= b; break;
          case CmpIPredicate::ugt: r = a > b; break;
          case CmpIPredicate::uge: r = a >= b; break;
          }
          return setBits(op, r);
        })
        .Case([&](arith::SelectOp) {
          values_[op->getResult(0)] = in(op, 0).bits ? in(op, 1) : in(op, 2);
          return success();
        })
        .Case<ExtFOp, TruncFOp>([&](Operation *) { return setFloat(op, in(op, 0).f); })
        .Case([&](SIToFPOp) {
          return setFloat(op, static_cast<double>(
                                  signedValue(in(op, 0).bits, width(inType(op, 0)))));
        })
        .Case([&](UIToFPOp) { return setFloat(op, static_cast<double>(in(op, 0).bits)); })
        .Case([&](FPToSIOp) {
          return setBits(op, static_cast<uint64_t>(
                                 static_cast<int64_t>(std::trunc(in(op, 0).f))));
        })
        .Case([&](ExtSIOp) {
          return setBits(op, static_cast<uint64_t>(
                                 signedValue(in(op, 0).bits, width(inType(op, 0)))));
        })
        .Case<ExtUIOp, TruncIOp>([&](Operation *) { return setBits(op, in(op, 0).bits); })
        .Case([&](AddIOp) { return binaryInt(op, [](uint64_t a, uint64_t b) { return a + b; }); })
        .Case([&](MulIOp) { return binaryInt(op, [](uint64_t a, uint64_t b) { return a * b; }); })
        .Case([&](XOrIOp) { return binaryInt(op, [](uint64_t a, uint64_t b) { return a ^ b; }); })
        .Case([&](ShRUIOp) { return binaryInt(op, [](uint64_t a, uint64_t b) { return a >> b; }); })
        .Case([&](DivUIOp) { return binaryInt(op, [](uint64_t a, uint64_t b) { return a / b; }); })
        .Case([&](RemUIOp) { return binaryInt(op, [](uint64_t a, uint64_t b) { return a % b; }); })
        .Default([](Operation *) { return failure(); });
  }

  llvm::DenseMap<Value, Scalar> values_;
};

//===----------------------------------------------------------------------===//
// The comparison
//===----------------------------------------------------------------------===//

// How float arguments are drawn.
enum class Floats { Any, Positive, SmallIntegers };

struct ScalarCase {
  std::string name;
  // @f(args...) holding one op under test (with ScalarOpInterface) whose
  // operands are arguments of @f; it returns that op's result.
  std::string source;
  Floats floats = Floats::Any;
};

void PrintTo(const ScalarCase &c, std::ostream *os) { *os << c.name; }

Tensor randomArgument(RankedTensorType type, Floats floats, std::mt19937_64 &rng) {
  Tensor t = Tensor::zeros(type.getShape());
  Type e = type.getElementType();
  std::uniform_real_distribution<double> any(-2.5, 2.5), positive(0.1, 3.0);
  std::uniform_int_distribution<int> small(-2, 2), bit(0, 1);
  std::uniform_int_distribution<int64_t> seeds(-(int64_t{1} << 52),
                                               int64_t{1} << 52);
  for (double &x : t.data) {
    if (isa<FloatType>(e))
      x = roundToType(floats == Floats::Positive ? positive(rng)
                      : floats == Floats::SmallIntegers
                          ? static_cast<double>(small(rng))
                          : any(rng),
                      e);
    else if (e.isInteger(1))
      x = bit(rng);
    else if (type.getRank() == 0 && e.isInteger(64))
      x = static_cast<double>(seeds(rng)); // rng_seed, step
    else
      x = static_cast<double>(small(rng) * 3);
  }
  return t;
}

class ScalarBodyTest : public gradcheck::GradCheckParamTest<ScalarCase> {};

TEST_P(ScalarBodyTest, AgreesWithTheInterpreter) {
  const ScalarCase &c = GetParam();
  OwningOpRef<ModuleOp> module = parse(c.source);
  ASSERT_TRUE(module) << diagnostics_;
  auto f = module->lookupSymbol<func::FuncOp>("f");
  ASSERT_TRUE(f);
  Operation *target = nullptr;
  f.walk([&](tg::ScalarOpInterface op) { target = op; });
  ASSERT_TRUE(target) << "no op with ScalarOpInterface in @f";

  std::mt19937_64 rng(seed());
  std::vector<Tensor> args;
  for (Type t : f.getArgumentTypes())
    args.push_back(randomArgument(cast<RankedTensorType>(t), c.floats, rng));
  auto expected = interp::interpret(f, args);
  ASSERT_TRUE(succeeded(expected)) << diagnostics_;

  // @scalar(operand scalars..., flat index) -> result scalars.
  FailureOr<func::FuncOp> scalarFn =
      gradcheck::buildScalarFunction(*module, target);
  ASSERT_TRUE(succeeded(scalarFn)) << diagnostics_;
  ArrayRef<Type> scalarTypes = scalarFn->getFunctionType().getInputs();
  ArrayRef<Type> resultTypes = scalarFn->getFunctionType().getResults();

  // Operand values broadcast to the result shape, position by position.
  auto resultType = cast<RankedTensorType>(target->getResult(0).getType());
  std::vector<Tensor> operandValues;
  for (Value v : target->getOperands()) {
    auto arg = dyn_cast<BlockArgument>(v);
    ASSERT_TRUE(arg) << "operands of the op under test must be arguments of @f";
    Tensor in = args[arg.getArgNumber()];
    // numpy broadcast, written out here so the test does not reuse the
    // interpreter's helper.
    Tensor out = Tensor::zeros(resultType.getShape());
    size_t lead = resultType.getRank() - in.shape.size();
    for (int64_t i = 0; i < out.numElements(); ++i) {
      int64_t rest = i, inFlat = 0, inStride = 1;
      for (int64_t d = resultType.getRank() - 1; d >= 0; --d) {
        int64_t index = rest % resultType.getDimSize(d);
        rest /= resultType.getDimSize(d);
        if (d >= static_cast<int64_t>(lead)) {
          int64_t size = in.shape[d - lead];
          inFlat += (size == 1 ? 0 : index) * inStride;
          inStride *= size;
        }
      }
      out.data[i] = in.data[inFlat];
    }
    operandValues.push_back(out);
  }

  ScalarEvaluator evaluator;
  const Tensor &want = (*expected)[0];
  for (int64_t i = 0; i < want.numElements(); ++i) {
    std::vector<Scalar> in;
    for (auto [values, t] : llvm::zip(operandValues, scalarTypes))
      in.push_back(fromDouble(values.data[i], t));
    in.push_back(Scalar{0.0, static_cast<uint64_t>(i)});
    auto got = evaluator.run(*scalarFn, in);
    ASSERT_TRUE(succeeded(got));
    double value = toDouble((*got)[0], resultTypes[0]);
    double reference = want.data[i];
    SCOPED_TRACE("position " + std::to_string(i));
    if (std::isnan(reference)) {
      EXPECT_TRUE(std::isnan(value)) << value;
    } else if (isa<FloatType>(resultTypes[0])) {
      // The dropout mask must agree exactly: zero where the interpreter
      // dropped, nonzero elsewhere (inputs are nonzero).
      if (isa<tg::DropoutOp>(target)) {
        EXPECT_EQ(value == 0.0, reference == 0.0) << value << " vs " << reference;
      }
      EXPECT_NEAR(value, reference, 1e-12 * (1.0 + std::abs(reference)));
    } else {
      EXPECT_EQ(value, reference);
    }
  }
}

std::string unaryOp(std::string op, std::string attrs = "") {
  return "func.func @f(%x: tensor<2x5xf64>) -> tensor<2x5xf64> {\n"
         "  %0 = tg." + op + " %x " + attrs + " : tensor<2x5xf64>\n"
         "  return %0 : tensor<2x5xf64>\n}";
}

std::string binaryOp(std::string op, std::string lhs, std::string rhs,
                     std::string result) {
  return "func.func @f(%a: " + lhs + ", %b: " + rhs + ") -> " + result +
         " {\n  %0 = tg." + op + " %a, %b : (" + lhs + ", " + rhs + ") -> " +
         result + "\n  return %0 : " + result + "\n}";
}

std::string castOp(std::string from, std::string to) {
  std::string a = "tensor<3x4x" + from + ">", r = "tensor<3x4x" + to + ">";
  return "func.func @f(%x: " + a + ") -> " + r + " {\n  %0 = tg.cast %x : " +
         a + " to " + r + "\n  return %0 : " + r + "\n}";
}

std::vector<ScalarCase> allCases() {
  std::vector<ScalarCase> cases;
  for (std::string op : {"neg", "exp", "tanh", "sigmoid", "relu", "silu", "gelu",
                         "sin", "cos"})
    cases.push_back({op, unaryOp(op)});
  for (std::string op : {"log", "sqrt", "rsqrt"})
    cases.push_back({op, unaryOp(op), Floats::Positive});
  cases.push_back({"gelu_tanh", unaryOp("gelu", "{approximate = \"tanh\"}")});
  cases.push_back({"pow_1", unaryOp("pow", "{exponent = 1.0 : f64}")});
  cases.push_back({"pow_2", unaryOp("pow", "{exponent = 2.0 : f64}")});
  cases.push_back({"pow_3", unaryOp("pow", "{exponent = 3.0 : f64}")});
  cases.push_back({"pow_0p5", unaryOp("pow", "{exponent = 0.5 : f64}"),
                   Floats::Positive});
  cases.push_back({"relu_at_ties", unaryOp("relu"), Floats::SmallIntegers});

  for (std::string op : {"add", "sub", "mul", "div", "max", "min"})
    cases.push_back({op, binaryOp(op, "tensor<2x5xf64>", "tensor<5xf64>",
                                  "tensor<2x5xf64>")});
  cases.push_back({"max_f32_ties", binaryOp("max", "tensor<4x1xf32>", "tensor<3xf32>",
                                            "tensor<4x3xf32>"),
                   Floats::SmallIntegers});
  for (std::string op : {"relu_grad", "gelu_grad", "gelu_grad_tanh"}) {
    std::string attrs = op == "gelu_grad_tanh" ? "{approximate = \"tanh\"}" : "";
    std::string mnemonic = op == "gelu_grad_tanh" ? "gelu_grad" : op;
    cases.push_back(
        {op, "func.func @f(%x: tensor<2x5xf64>, %g: tensor<2x5xf64>) -> "
             "tensor<2x5xf64> {\n  %0 = tg." + mnemonic + " %x, %g " + attrs +
                 " : tensor<2x5xf64>\n  return %0 : tensor<2x5xf64>\n}"});
  }
  cases.push_back({"relu_grad_at_ties",
                   "func.func @f(%x: tensor<2x5xf64>, %g: tensor<2x5xf64>) -> "
                   "tensor<2x5xf64> {\n  %0 = tg.relu_grad %x, %g : "
                   "tensor<2x5xf64>\n  return %0 : tensor<2x5xf64>\n}",
                   Floats::SmallIntegers});

  for (std::string op : {"equal", "not_equal", "less", "less_equal", "greater",
                         "greater_equal"})
    for (std::string t : {"f64", "f32", "i32", "i64", "i1"})
      cases.push_back({op + "_" + t,
                       binaryOp(op, "tensor<3x1x" + t + ">", "tensor<4x" + t + ">",
                                "tensor<3x4xi1>"),
                       Floats::SmallIntegers});

  cases.push_back(
      {"select_f64",
       "func.func @f(%c: tensor<3x1xi1>, %a: tensor<4xf64>, %b: tensor<f64>) -> tensor<3x4xf64> {\n"
       "  %0 = tg.select %c, %a, %b : (tensor<3x1xi1>, tensor<4xf64>, tensor<f64>) -> tensor<3x4xf64>\n"
       "  return %0 : tensor<3x4xf64>\n}"});
  cases.push_back(
      {"select_i64",
       "func.func @f(%c: tensor<3x4xi1>, %a: tensor<3x4xi64>, %b: tensor<4xi64>) -> tensor<3x4xi64> {\n"
       "  %0 = tg.select %c, %a, %b : (tensor<3x4xi1>, tensor<3x4xi64>, tensor<4xi64>) -> tensor<3x4xi64>\n"
       "  return %0 : tensor<3x4xi64>\n}"});

  const std::vector<std::string> types = {"f64", "f32", "bf16", "f16",
                                          "i32", "i64", "i1"};
  for (const std::string &from : types)
    for (const std::string &to : types)
      cases.push_back({"cast_" + from + "_to_" + to, castOp(from, to)});

  for (std::string t : {"i64", "i32", "f32", "f64"})
    for (int axis : {0, 1, 2})
      cases.push_back({"iota_axis" + std::to_string(axis) + "_" + t,
                       "func.func @f() -> tensor<2x3x4x" + t + "> {\n"
                       "  %0 = tg.iota {axis = " + std::to_string(axis) +
                           " : i64} : tensor<2x3x4x" + t + ">\n"
                       "  return %0 : tensor<2x3x4x" + t + ">\n}"});

  for (std::string rate : {"0.0", "0.3", "0.5", "0.9"})
    cases.push_back(
        {"dropout_rate_" + rate.substr(2),
         "func.func @f(%x: tensor<8x16xf64>, %seed: tensor<i64>, %step: tensor<i64>) -> tensor<8x16xf64> {\n"
         "  %0 = tg.dropout %x, %seed, %step {op_id = -3735928559 : i64, rate = " +
             rate + " : f64} : tensor<8x16xf64>\n"
         "  return %0 : tensor<8x16xf64>\n}",
         Floats::Positive});
  return cases;
}

std::string caseName(const ::testing::TestParamInfo<ScalarCase> &info) {
  return info.param.name;
}

INSTANTIATE_TEST_SUITE_P(TgElementwise, ScalarBodyTest,
                         ::testing::ValuesIn(allCases()), caseName);

} // namespace
