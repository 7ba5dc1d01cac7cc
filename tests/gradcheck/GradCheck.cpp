#include "tests/gradcheck/GradCheck.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <gtest/gtest.h>

#include "dialects/common/ModelAttrs.h"
#include "dialects/common/ShapeHelpers.h"
#include "dialects/tg/TgDialect.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "passes/Passes.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace tcc::gradcheck {

std::unique_ptr<MLIRContext> makeContext() {
  auto ctx = std::make_unique<MLIRContext>();
  ctx->loadDialect<tg::TgDialect, func::FuncDialect>();
  return ctx;
}

uint64_t testSeed() {
  if (const char *fixed = std::getenv("TCC_GRADCHECK_SEED"))
    return std::strtoull(fixed, nullptr, 10);
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) | device();
}

std::string seedMessage(uint64_t seed) {
  return "seed " + std::to_string(seed) +
         " (rerun with TCC_GRADCHECK_SEED=" + std::to_string(seed) + ")";
}

//===----------------------------------------------------------------------===//
// Building test functions
//===----------------------------------------------------------------------===//

RankedTensorType f64Tensor(MLIRContext *ctx, ArrayRef<int64_t> shape) {
  return RankedTensorType::get(shape, Float64Type::get(ctx));
}

static ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

Value matmul(OpBuilder &b, Location loc, Value lhs, Value rhs,
             bool transposeLhs, bool transposeRhs) {
  int64_t m = shapeOf(lhs)[transposeLhs ? 1 : 0];
  int64_t n = shapeOf(rhs)[transposeRhs ? 0 : 1];
  return tg::MatmulOp::create(b, loc, f64Tensor(b.getContext(), {m, n}), lhs,
                              rhs, b.getBoolAttr(transposeLhs),
                              b.getBoolAttr(transposeRhs));
}

// The broadcast result type; an incompatible pair is a bug in the test, and
// the verifier reports it.
static RankedTensorType broadcastType(Value lhs, Value rhs) {
  auto shape = tcc::broadcastShapes(shapeOf(lhs), shapeOf(rhs));
  return f64Tensor(lhs.getContext(),
                   shape ? ArrayRef<int64_t>(*shape) : shapeOf(lhs));
}

Value add(OpBuilder &b, Location loc, Value lhs, Value rhs) {
  return tg::AddOp::create(b, loc, broadcastType(lhs, rhs), lhs, rhs);
}

Value mul(OpBuilder &b, Location loc, Value lhs, Value rhs) {
  return tg::MulOp::create(b, loc, broadcastType(lhs, rhs), lhs, rhs);
}

Value reduceSum(OpBuilder &b, Location loc, Value x, ArrayRef<int64_t> axes,
                bool keepDims) {
  auto type =
      f64Tensor(b.getContext(), tcc::reducedShape(shapeOf(x), axes, keepDims));
  return tg::ReduceSumOp::create(b, loc, type, x, b.getDenseI64ArrayAttr(axes),
                                 b.getBoolAttr(keepDims));
}

Value reduceMean(OpBuilder &b, Location loc, Value x, ArrayRef<int64_t> axes,
                 bool keepDims) {
  auto type =
      f64Tensor(b.getContext(), tcc::reducedShape(shapeOf(x), axes, keepDims));
  return tg::ReduceMeanOp::create(b, loc, type, x, b.getDenseI64ArrayAttr(axes),
                                  b.getBoolAttr(keepDims));
}

OwningOpRef<ModuleOp> buildForwardModule(MLIRContext &ctx,
                                         ArrayRef<ArgSpec> args,
                                         const BodyBuilder &body) {
  OpBuilder b(&ctx);
  Location loc = NameLoc::get(b.getStringAttr("gradcheck"));
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);

  SmallVector<Type> types;
  SmallVector<DictionaryAttr> attrs;
  for (auto [i, spec] : llvm::enumerate(args)) {
    std::string name = "arg" + std::to_string(i);
    if (spec.kind == ArgSpec::Kind::Labels) {
      types.push_back(RankedTensorType::get(spec.shape, b.getI32Type()));
    } else {
      types.push_back(f64Tensor(&ctx, spec.shape));
    }
    if (spec.kind == ArgSpec::Kind::Param ||
        spec.kind == ArgSpec::Kind::FrozenParam) {
      model::ParamInfo info;
      info.name = name;
      info.trainable = spec.kind == ArgSpec::Kind::Param;
      attrs.push_back(
          b.getDictionaryAttr(b.getNamedAttr(model::kParamAttr, info.toAttr(b))));
    } else {
      attrs.push_back(b.getDictionaryAttr(
          b.getNamedAttr(model::kInputAttr, b.getStringAttr(name))));
    }
  }

  auto forward =
      func::FuncOp::create(loc, model::kForwardFunc, b.getFunctionType(types, {}));
  module->push_back(forward);
  forward.setAllArgAttrs(attrs);
  Block *entry = forward.addEntryBlock();
  b.setInsertionPointToStart(entry);

  SmallVector<Value> argValues(entry->getArguments().begin(),
                               entry->getArguments().end());
  Value value = body(b, loc, argValues);
  auto valueType = cast<RankedTensorType>(value.getType());
  if (failed(forward.insertArgument(
          entry->getNumArguments(), valueType,
          b.getDictionaryAttr(
              b.getNamedAttr(model::kInputAttr, b.getStringAttr("cotangent"))),
          loc)))
    return nullptr;
  Value cotangent = entry->getArgument(entry->getNumArguments() - 1);
  Value loss = tg::MulOp::create(b, loc, valueType, value, cotangent);
  if (valueType.getRank() > 0) {
    SmallVector<int64_t> allAxes;
    for (int64_t d = 0; d < valueType.getRank(); ++d)
      allAxes.push_back(d);
    loss = reduceSum(b, loc, loss, allAxes, /*keepDims=*/false);
  }
  func::ReturnOp::create(b, loc, loss);
  forward.setType(
      b.getFunctionType(forward.getArgumentTypes(), {loss.getType()}));
  forward.setResultAttr(0, model::kLossAttr, b.getStringAttr("loss"));

  if (failed(verify(*module)))
    return nullptr;
  return module;
}

//===----------------------------------------------------------------------===//
// Running and checking
//===----------------------------------------------------------------------===//

LogicalResult runTrainingPasses(ModuleOp module, bool withSgd) {
  PassManager pm(module.getContext());
  pm.addPass(createTgAutodiff());
  if (withSgd)
    pm.addPass(createTgSgdUpdate());
  return pm.run(module);
}

LogicalResult runDecompose(ModuleOp module, bool withCse) {
  PassManager pm(module.getContext());
  pm.addPass(createTgDecompose());
  if (withCse)
    pm.addPass(createCSEPass());
  return pm.run(module);
}

int64_t countOps(ModuleOp module, StringRef opName) {
  int64_t n = 0;
  module.walk([&](Operation *op) { n += op->getName().getStringRef() == opName; });
  return n;
}

FailureOr<func::FuncOp> buildScalarFunction(ModuleOp module,
                                            Operation *target) {
  auto scalarOp = dyn_cast<tg::ScalarOpInterface>(target);
  if (!scalarOp) {
    ADD_FAILURE() << "the op under test has no ScalarOpInterface";
    return failure();
  }
  OpBuilder b(module.getContext());
  SmallVector<Type> scalarTypes, resultTypes;
  for (Value v : target->getOperands())
    scalarTypes.push_back(cast<RankedTensorType>(v.getType()).getElementType());
  scalarTypes.push_back(b.getI64Type());
  for (Value r : target->getResults())
    resultTypes.push_back(cast<RankedTensorType>(r.getType()).getElementType());
  auto scalarFn = func::FuncOp::create(
      target->getLoc(), "scalar", b.getFunctionType(scalarTypes, resultTypes));
  module.push_back(scalarFn);
  Block *entry = scalarFn.addEntryBlock();
  b.setInsertionPointToStart(entry);
  SmallVector<Value> results;
  if (failed(scalarOp.buildScalar(b, target->getLoc(),
                                  entry->getArguments().drop_back(),
                                  entry->getArguments().back(), results))) {
    ADD_FAILURE() << "buildScalar failed";
    return failure();
  }
  if (results.size() != target->getNumResults()) {
    ADD_FAILURE() << "buildScalar made " << results.size()
                  << " results for an op with " << target->getNumResults();
    return failure();
  }
  func::ReturnOp::create(b, target->getLoc(), results);
  if (failed(verify(scalarFn))) {
    ADD_FAILURE() << "@scalar does not verify";
    return failure();
  }
  return scalarFn;
}

double maxRelativeDifference(const Tensor &a, const Tensor &b) {
  double worst = 0.0;
  for (size_t i = 0; i < a.data.size(); ++i) {
    double x = a.data[i], y = b.data[i];
    if (x == y) // also equal infinities
      continue;
    worst = std::max(worst, std::abs(x - y) / std::max(1.0, std::abs(x)));
  }
  return worst;
}

void expectSameFunctions(ModuleOp before, ModuleOp after, uint64_t seed, int64_t numClasses,
                         const std::function<bool(ArrayRef<Tensor>)> &acceptArguments) {
  std::mt19937_64 rng(seed);
  for (StringRef name : {model::kForwardFunc, model::kTrainStepFunc}) {
    SCOPED_TRACE(name.str());
    auto a = before.lookupSymbol<func::FuncOp>(name);
    auto b = after.lookupSymbol<func::FuncOp>(name);
    ASSERT_TRUE(a && b);
    ASSERT_EQ(a.getFunctionType(), b.getFunctionType());
    std::vector<Tensor> args = randomArguments(a, rng, numClasses);
    for (int i = 0; acceptArguments && !acceptArguments(args) && i < 100; ++i)
      args = randomArguments(a, rng, numClasses);
    auto expected = interp::interpret(a, args);
    auto actual = interp::interpret(b, args);
    ASSERT_TRUE(succeeded(expected) && succeeded(actual));
    ASSERT_EQ(expected->size(), actual->size());
    for (size_t r = 0; r < expected->size(); ++r) {
      EXPECT_EQ((*expected)[r].shape, (*actual)[r].shape);
      EXPECT_LE(maxRelativeDifference((*expected)[r], (*actual)[r]), 1e-12)
          << "result #" << r;
    }
  }
}

std::vector<Tensor> randomArguments(func::FuncOp f, std::mt19937_64 &rng,
                                    int64_t numClasses) {
  std::uniform_real_distribution<double> magnitude(0.1, 1.5);
  std::bernoulli_distribution negative(0.5);
  std::uniform_int_distribution<int64_t> label(0, numClasses - 1);
  std::vector<Tensor> args;
  for (Type type : f.getArgumentTypes()) {
    auto tensorType = cast<RankedTensorType>(type);
    Tensor t = Tensor::zeros(tensorType.getShape());
    bool isInteger = isa<IntegerType>(tensorType.getElementType());
    for (double &x : t.data)
      x = isInteger ? static_cast<double>(label(rng))
                    : (negative(rng) ? -1.0 : 1.0) * magnitude(rng);
    args.push_back(std::move(t));
  }
  return args;
}

std::vector<unsigned> paramArgumentNumbers(func::FuncOp f) {
  std::vector<unsigned> numbers;
  for (unsigned i = 0; i < f.getNumArguments(); ++i)
    if (f.getArgAttr(i, model::kParamAttr))
      numbers.push_back(i);
  return numbers;
}

static std::string str(const Tensor &t) {
  std::string s = "[";
  for (size_t i = 0; i < t.data.size(); ++i) {
    char buffer[32];
    std::snprintf(buffer, sizeof(buffer), "%s%.10g", i ? ", " : "", t.data[i]);
    s += buffer;
  }
  return s + "]";
}

static double distance(const Tensor &a, const Tensor &b) {
  double sum = 0.0;
  for (size_t i = 0; i < a.data.size(); ++i)
    sum += (a.data[i] - b.data[i]) * (a.data[i] - b.data[i]);
  return std::sqrt(sum);
}

static double norm(const Tensor &t) {
  return distance(t, Tensor::zeros(t.shape));
}

static std::optional<unsigned> lossResultNumber(func::FuncOp f) {
  for (unsigned i = 0; i < f.getNumResults(); ++i)
    if (f.getResultAttr(i, model::kLossAttr))
      return i;
  return std::nullopt;
}

std::vector<ParamGradient> checkGradients(ModuleOp module, uint64_t seed,
                                          const GradCheckOptions &options) {
  std::vector<ParamGradient> checked;
  auto forward = module.lookupSymbol<func::FuncOp>(model::kForwardFunc);
  auto step = module.lookupSymbol<func::FuncOp>(model::kTrainStepFunc);
  if (!forward || !step) {
    ADD_FAILURE() << "the module needs @forward and @train_step";
    return checked;
  }
  std::optional<unsigned> lossResult = lossResultNumber(forward);
  if (!lossResult) {
    ADD_FAILURE() << "@forward has no result marked " << model::kLossAttr.str();
    return checked;
  }
  EXPECT_TRUE(step.getResultAttr(0, model::kLossAttr))
      << "@train_step must return the loss first";

  std::mt19937_64 rng(seed);
  std::vector<Tensor> args = randomArguments(forward, rng, options.numClasses);
  for (int attempt = 1;
       options.acceptArguments && !options.acceptArguments(args); ++attempt) {
    if (attempt == 100) {
      ADD_FAILURE() << "no acceptable random arguments in 100 draws";
      return checked;
    }
    args = randomArguments(forward, rng, options.numClasses);
  }

  FailureOr<std::vector<Tensor>> stepResults = interp::interpret(step, args);
  if (failed(stepResults)) {
    ADD_FAILURE() << "interpreting @train_step failed (diagnostic above)";
    return checked;
  }
  auto forwardLoss = [&]() {
    FailureOr<std::vector<Tensor>> results = interp::interpret(forward, args);
    if (failed(results)) {
      ADD_FAILURE() << "interpreting @forward failed (diagnostic above)";
      return std::nan("");
    }
    return (*results)[*lossResult].data[0];
  };
  EXPECT_DOUBLE_EQ((*stepResults)[0].data[0], forwardLoss())
      << "@train_step and @forward compute different losses";

  // The gradients returned must be those of the trainable parameters, in
  // parameter order: none for frozen ones, one (maybe zero) for unused ones.
  std::vector<unsigned> paramArgs = paramArgumentNumbers(forward);
  std::vector<int64_t> trainable, returned;
  for (auto [index, argNumber] : llvm::enumerate(paramArgs))
    if (model::ParamInfo::fromAttr(forward.getArgAttr(argNumber, model::kParamAttr))
            ->trainable)
      trainable.push_back(index);
  for (unsigned r = 1; r < step.getNumResults(); ++r) {
    auto gradOf = step.getResultAttrOfType<IntegerAttr>(r, model::kGradOfAttr);
    returned.push_back(gradOf ? gradOf.getInt() : -1);
  }
  EXPECT_EQ(returned, trainable)
      << "parameters @train_step returns gradients for (tg.grad_of; -1 = "
         "missing) vs the trainable parameters";

  for (auto [r, paramIndex] : llvm::enumerate(returned)) {
    if (paramIndex < 0 || paramIndex >= static_cast<int64_t>(paramArgs.size()))
      continue;
    unsigned argNumber = paramArgs[paramIndex];
    ParamGradient g{
        paramIndex,
        model::ParamInfo::fromAttr(forward.getArgAttr(argNumber, model::kParamAttr))
            ->name,
        (*stepResults)[r + 1], Tensor::zeros(args[argNumber].shape)};
    SCOPED_TRACE("parameter '" + g.name + "' (index " +
                 std::to_string(paramIndex) + ")");
    if (g.analytic.shape != args[argNumber].shape) {
      ADD_FAILURE() << "gradient shape differs from the parameter's";
      continue;
    }

    // Central differences; dividing by the step actually taken, not by
    // 2 * epsilon, removes the rounding of x +- epsilon.
    for (size_t j = 0; j < g.numeric.data.size(); ++j) {
      double x = args[argNumber].data[j];
      double xPlus = x + options.epsilon, xMinus = x - options.epsilon;
      args[argNumber].data[j] = xPlus;
      double lossPlus = forwardLoss();
      args[argNumber].data[j] = xMinus;
      double lossMinus = forwardLoss();
      args[argNumber].data[j] = x;
      g.numeric.data[j] = (lossPlus - lossMinus) / (xPlus - xMinus);
    }

    double error = distance(g.analytic, g.numeric);
    double reference = norm(g.numeric);
    if (options.zeroGradientParams.count(paramIndex)) {
      EXPECT_EQ(norm(g.analytic), 0.0)
          << "expected a zero gradient, got " << str(g.analytic);
      EXPECT_EQ(reference, 0.0) << "the loss depends on this parameter";
    } else {
      // A wrong rule is off by far more than the tolerance; this only rules
      // out a gradient that is zero by construction (e.g. every relu input
      // negative), where a rule returning zeros would pass.
      EXPECT_GT(reference, 1e-6)
          << "the loss does not depend on this parameter: the check would "
             "prove nothing";
      EXPECT_LE(error, options.relativeTolerance * reference +
                           options.absoluteTolerance)
          << "autodiff " << str(g.analytic) << "\n  finite differences "
          << str(g.numeric) << "\n  |difference| = " << error
          << ", |finite differences| = " << reference;
    }
    checked.push_back(std::move(g));
  }

  if (::testing::Test::HasFailure()) {
    std::string ir;
    llvm::raw_string_ostream os(ir);
    module.print(os);
    std::fprintf(stderr, "module under check:\n%s\n", ir.c_str());
  }
  return checked;
}

} // namespace tcc::gradcheck
