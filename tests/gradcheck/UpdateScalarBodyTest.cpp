// The scalar bodies of the optimizer update ops (tg.adamw_update,
// tg.momentum_update, tg.sgd_update; what the generated kernels compute per
// element) against the reference interpreter, in f64 and f32, with and
// without weight decay. Fresh random operands; the seed is printed on
// failure (TCC_GRADCHECK_SEED replays it).
#include <cmath>
#include <optional>
#include <random>

#include <gtest/gtest.h>

#include "dialects/tg/TgDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "tests/gradcheck/GradCheck.h"
#include "tests/gradcheck/GradCheckFixture.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace tcc;
using namespace tcc::gradcheck;

namespace {

// Rounds to the float type `t` (f32 or f64), as the kernels do after each op.
double roundTo(double x, Type t) {
  return t.isF32() ? static_cast<double>(static_cast<float>(x)) : x;
}

// Evaluates a function of scalar arith/math ops (the ops the update bodies
// use), rounding every float result to its type. Integers are held exactly.
FailureOr<std::vector<double>> evalScalarBody(func::FuncOp f,
                                              ArrayRef<double> args) {
  llvm::DenseMap<Value, double> values;
  for (auto [arg, x] : llvm::zip(f.getArguments(), args))
    values[arg] = x;
  for (Operation &op : f.getBody().front()) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      std::vector<double> out;
      for (Value v : ret.getOperands())
        out.push_back(values.lookup(v));
      return out;
    }
    auto in = [&](int i) { return values.lookup(op.getOperand(i)); };
    std::optional<double> r =
        llvm::TypeSwitch<Operation *, std::optional<double>>(&op)
            .Case([&](arith::ConstantOp c) -> std::optional<double> {
              if (auto f = dyn_cast<FloatAttr>(c.getValue()))
                return f.getValueAsDouble();
              return std::nullopt;
            })
            .Case([&](arith::AddFOp) { return in(0) + in(1); })
            .Case([&](arith::SubFOp) { return in(0) - in(1); })
            .Case([&](arith::MulFOp) { return in(0) * in(1); })
            .Case([&](arith::DivFOp) { return in(0) / in(1); })
            .Case<arith::ExtFOp, arith::TruncFOp, arith::SIToFPOp>(
                [&](Operation *) { return in(0); })
            .Case([&](math::SqrtOp) { return std::sqrt(in(0)); })
            .Case([&](math::PowFOp) { return std::pow(in(0), in(1)); })
            .Default([](Operation *) { return std::nullopt; });
    if (!r)
      return op.emitOpError("not handled by the test's scalar evaluator");
    values[op.getResult(0)] = roundTo(*r, op.getResult(0).getType());
  }
  return failure();
}

struct UpdateCase {
  std::string name;
  std::string source; // @f(...) returning the results of one update op
};

void PrintTo(const UpdateCase &c, std::ostream *os) { *os << c.name; }

class UpdateScalarBodyTest : public GradCheckParamTest<UpdateCase> {};

// Each result of the op's scalar body, at every position, against the
// reference interpreter on fresh random operands: exact up to rounding in f64,
// to f32 rounding in f32.
TEST_P(UpdateScalarBodyTest, AgreesWithTheInterpreter) {
  const UpdateCase &c = GetParam();
  OwningOpRef<ModuleOp> module = parse(c.source);
  ASSERT_TRUE(module);
  auto f = module->lookupSymbol<func::FuncOp>("f");
  Operation *target = &f.getBody().front().front();

  std::mt19937_64 rng(seed());
  std::uniform_real_distribution<double> any(-1.5, 1.5), positive(0.01, 2.0),
      lr(1e-4, 0.1);
  std::uniform_int_distribution<int64_t> step(0, 50);
  std::vector<Tensor> args;
  for (BlockArgument arg : f.getArguments()) {
    auto type = cast<RankedTensorType>(arg.getType());
    Tensor t = Tensor::zeros(type.getShape());
    for (double &x : t.data) {
      if (isa<IntegerType>(type.getElementType()))
        x = static_cast<double>(step(rng));
      else if (type.getRank() == 0)
        x = roundTo(lr(rng), type.getElementType());
      else // the second moment (argument "v") must be >= 0
        x = roundTo(arg.getArgNumber() == 3 ? positive(rng) : any(rng),
                    type.getElementType());
    }
    args.push_back(std::move(t));
  }
  auto expected = interp::interpret(f, args);
  ASSERT_TRUE(succeeded(expected));

  FailureOr<func::FuncOp> scalarFn = buildScalarFunction(*module, target);
  ASSERT_TRUE(succeeded(scalarFn));
  ArrayRef<Type> resultTypes = scalarFn->getFunctionType().getResults();

  double tol = resultTypes[0].isF32() ? 2e-6 : 1e-13;
  int64_t n = (*expected)[0].numElements();
  for (int64_t i = 0; i < n; ++i) {
    std::vector<double> in;
    for (Value v : target->getOperands()) {
      const Tensor &t = args[cast<BlockArgument>(v).getArgNumber()];
      in.push_back(t.data[t.data.size() == 1 ? 0 : i]); // scalars broadcast
    }
    in.push_back(static_cast<double>(i));
    auto got = evalScalarBody(*scalarFn, in);
    ASSERT_TRUE(succeeded(got));
    for (size_t r = 0; r < got->size(); ++r) {
      double want = (*expected)[r].data[i];
      EXPECT_NEAR((*got)[r], want, tol * (1.0 + std::fabs(want)))
          << "result " << r << ", position " << i;
    }
  }
}

std::vector<UpdateCase> updateCases() {
  std::vector<UpdateCase> cases;
  for (std::string t : {"f64", "f32"}) {
    std::string p = "tensor<2x3x" + t + ">";
    for (std::string wd : {"0.0", "0.1"}) {
      std::string suffix = "_" + t + (wd == "0.0" ? "" : "_decay");
      cases.push_back(
          {"adamw" + suffix,
           "func.func @f(%p: " + p + ", %g: " + p + ", %m: " + p +
               ", %v: " + p + ", %lr: tensor<f32>, %s: tensor<i64>) -> (" + p +
               ", " + p + ", " + p +
               ") {\n  %0:3 = tg.adamw_update %p, %g, %m, %v, %lr, %s "
               "{beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-8 : f64, "
               "weight_decay = " +
               wd + " : f64} : " + p +
               ", tensor<f32>\n  return %0#0, %0#1, %0#2 : " + p + ", " + p +
               ", " + p + "\n}"});
      cases.push_back({"momentum" + suffix,
                       "func.func @f(%p: " + p + ", %g: " + p + ", %buf: " + p +
                           ", %lr: tensor<f32>) -> (" + p + ", " + p +
                           ") {\n  %0:2 = tg.momentum_update %p, %g, %buf, %lr "
                           "{momentum = 0.9 : f64, weight_decay = " +
                           wd + " : f64} : " + p +
                           ", tensor<f32>\n  return %0#0, %0#1 : " + p + ", " +
                           p + "\n}"});
      cases.push_back(
          {"sgd" + suffix,
           "func.func @f(%p: " + p + ", %g: " + p + ", %lr: tensor<f32>) -> " +
               p +
               " {\n  %0 = tg.sgd_update %p, %g, %lr {weight_decay = " + wd +
               " : f64} : " + p + ", tensor<f32>\n  return %0 : " + p + "\n}"});
    }
  }
  return cases;
}

std::string updateCaseName(const ::testing::TestParamInfo<UpdateCase> &info) {
  return info.param.name;
}

INSTANTIATE_TEST_SUITE_P(TgOptimizer, UpdateScalarBodyTest,
                         ::testing::ValuesIn(updateCases()), updateCaseName);

} // namespace
