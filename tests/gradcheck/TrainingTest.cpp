// Whole training functions on the reference interpreter: which parameters get
// gradients, the MLP's loss gradients, and tg-sgd-update applying exactly
// param - lr * grad.
#include <cmath>

#include <gtest/gtest.h>

#include "dialects/common/ModelAttrs.h"
#include "dialects/tg/TgDialect.h"
#include "tests/gradcheck/GradCheck.h"
#include "tests/gradcheck/GradCheckFixture.h"
#include "tests/gradcheck/TrainingSteps.h"

using namespace mlir;
using namespace tcc;
using namespace tcc::gradcheck;

namespace {

std::vector<int64_t> gradOfAttrs(func::FuncOp step) {
  std::vector<int64_t> params;
  for (unsigned r = 0; r < step.getNumResults(); ++r)
    if (auto p = step.getResultAttrOfType<IntegerAttr>(r, model::kGradOfAttr))
      params.push_back(p.getInt());
  return params;
}

// w (trainable) and f (frozen) both feed the loss; u (trainable) does not.
using ParamGradients = GradCheckTest;

TEST_F(ParamGradients, FrozenGetsNoneAndUnusedGetsZeros) {
  OwningOpRef<ModuleOp> module =
      buildDifferentiated({ArgSpec::param({3, 4}), ArgSpec::frozen({3, 4}),
                           ArgSpec::param({2, 2}), ArgSpec::input({3, 4})},
                          [](OpBuilder &b, Location loc, ArrayRef<Value> a) {
                            return mul(b, loc, mul(b, loc, a[0], a[1]), a[3]);
                          });
  ASSERT_TRUE(module);

  auto step = module->lookupSymbol<func::FuncOp>(model::kTrainStepFunc);
  ASSERT_TRUE(step);
  EXPECT_EQ(step.getNumResults(), 3u) << "loss, d/dw, d/du";
  EXPECT_EQ(gradOfAttrs(step), (std::vector<int64_t>{0, 2}))
      << "parameter 1 is frozen: no gradient result";

  GradCheckOptions options;
  options.zeroGradientParams = {2};
  std::vector<ParamGradient> checked = checkGradients(*module, options);
  ASSERT_EQ(checked.size(), 2u);
  EXPECT_EQ(checked[1].paramIndex, 2);
  EXPECT_EQ(checked[1].analytic.shape, (std::vector<int64_t>{2, 2}));
}

// The MLP of models/ with small sizes, its parameters and image in f64.
OwningOpRef<ModuleOp> importSmallMlpF64(MLIRContext &ctx) {
  models::MlpOptions options;
  options.batch = 4;
  options.inputs = 6;
  options.hidden = {5};
  options.classes = 3;
  return importMlpF64(ctx, options);
}

// Argument number of the parameter or input called `name`.
std::optional<unsigned> argumentNamed(func::FuncOp f, StringRef name) {
  for (unsigned i = 0; i < f.getNumArguments(); ++i) {
    auto info = model::ParamInfo::fromAttr(f.getArgAttr(i, model::kParamAttr));
    auto input = f.getArgAttrOfType<StringAttr>(i, model::kInputAttr);
    if ((info && info->name == name) || (input && input.getValue() == name))
      return i;
  }
  return std::nullopt;
}

using MlpGradients = GradCheckTest;

TEST_F(MlpGradients, AllParametersMatchFiniteDifferences) {
  OwningOpRef<ModuleOp> module = importSmallMlpF64(context());
  ASSERT_TRUE(module);
  ASSERT_TRUE(differentiate(*module));

  auto forward = module->lookupSymbol<func::FuncOp>(model::kForwardFunc);
  std::optional<unsigned> image = argumentNamed(forward, "image");
  std::optional<unsigned> weight = argumentNamed(forward, "fc1.weight");
  std::optional<unsigned> bias = argumentNamed(forward, "fc1.bias");
  ASSERT_TRUE(image && weight && bias);

  // Finite differences across relu's kink measure the jump, not the slope:
  // keep every hidden pre-activation image x fc1.weight + fc1.bias well away
  // from 0 (a step moves it by at most 1.5e-6), and some of them positive
  // (else fc1's gradient is zero by construction).
  GradCheckOptions options;
  options.numClasses = 3;
  options.acceptArguments = [&](ArrayRef<Tensor> args) {
    const Tensor &x = args[*image], &w = args[*weight], &bs = args[*bias];
    int64_t batch = x.shape[0], inputs = x.shape[1], hidden = w.shape[1];
    bool anyActive = false;
    for (int64_t n = 0; n < batch; ++n)
      for (int64_t j = 0; j < hidden; ++j) {
        double h = bs.data[j];
        for (int64_t i = 0; i < inputs; ++i)
          h += x.data[n * inputs + i] * w.data[i * hidden + j];
        if (std::fabs(h) < 1e-4)
          return false;
        anyActive |= h > 0;
      }
    return anyActive;
  };
  std::vector<ParamGradient> checked = checkGradients(*module, options);
  std::vector<std::string> names;
  for (const ParamGradient &g : checked)
    names.push_back(g.name);
  EXPECT_EQ(names, (std::vector<std::string>{"fc1.weight", "fc1.bias",
                                             "fc2.weight", "fc2.bias"}));
}

// tg-sgd-update must turn each gradient result into param - lr * grad and
// leave the loss and @forward as they were.
using SgdUpdate = GradCheckTest;

TEST_F(SgdUpdate, UpdatedParamsAreParamMinusLrTimesGrad) {
  OwningOpRef<ModuleOp> gradientsOnly = importSmallMlpF64(context());
  OwningOpRef<ModuleOp> withSgd = importSmallMlpF64(context());
  ASSERT_TRUE(gradientsOnly && withSgd);

  auto forwardBefore = withSgd->lookupSymbol<func::FuncOp>(model::kForwardFunc);
  std::mt19937_64 rng(seed());
  std::vector<Tensor> args = randomArguments(forwardBefore, rng, 3);
  auto forwardResultsBefore = interp::interpret(forwardBefore, args);
  ASSERT_TRUE(succeeded(forwardResultsBefore));

  ASSERT_TRUE(differentiate(*gradientsOnly));
  ASSERT_TRUE(differentiate(*withSgd, /*withSgd=*/true));
  auto gradStep = gradientsOnly->lookupSymbol<func::FuncOp>(model::kTrainStepFunc);
  auto sgdStep = withSgd->lookupSymbol<func::FuncOp>(model::kTrainStepFunc);
  ASSERT_EQ(sgdStep.getNumArguments(), gradStep.getNumArguments() + 1)
      << "tg-sgd-update appends the learning rate";

  // @forward is untouched by both passes.
  auto forwardAfter = withSgd->lookupSymbol<func::FuncOp>(model::kForwardFunc);
  auto forwardResultsAfter = interp::interpret(forwardAfter, args);
  ASSERT_TRUE(succeeded(forwardResultsAfter));
  ASSERT_EQ(forwardResultsAfter->size(), forwardResultsBefore->size());
  for (size_t r = 0; r < forwardResultsAfter->size(); ++r)
    EXPECT_EQ((*forwardResultsAfter)[r].data, (*forwardResultsBefore)[r].data)
        << "@forward result " << r;

  auto grads = interp::interpret(gradStep, args);
  ASSERT_TRUE(succeeded(grads));
  const double learningRate = 0.125; // exact in the f32 argument
  std::vector<Tensor> sgdArgs = args;
  sgdArgs.push_back(Tensor::scalar(learningRate));
  auto updated = interp::interpret(sgdStep, sgdArgs);
  ASSERT_TRUE(succeeded(updated));

  ASSERT_EQ(updated->size(), grads->size());
  EXPECT_EQ((*updated)[0].data, (*grads)[0].data) << "the loss";
  EXPECT_EQ((*updated)[0].data, (*forwardResultsBefore)[0].data) << "the loss";
  std::vector<unsigned> paramArgs = paramArgumentNumbers(gradStep);
  for (unsigned r = 1; r < updated->size(); ++r) {
    auto gradOf = gradStep.getResultAttrOfType<IntegerAttr>(r, model::kGradOfAttr);
    auto updates =
        sgdStep.getResultAttrOfType<IntegerAttr>(r, model::kUpdatesParamAttr);
    ASSERT_TRUE(gradOf && updates);
    ASSERT_EQ(updates.getInt(), gradOf.getInt());
    const Tensor &param = args[paramArgs.at(gradOf.getInt())];
    const Tensor &grad = (*grads)[r];
    const Tensor &next = (*updated)[r];
    ASSERT_EQ(next.shape, param.shape);
    double gradNorm = 0.0;
    for (size_t i = 0; i < param.data.size(); ++i) {
      EXPECT_DOUBLE_EQ(next.data[i],
                       param.data[i] - learningRate * grad.data[i])
          << "result " << r << ", element " << i;
      gradNorm += std::fabs(grad.data[i]);
    }
    EXPECT_GT(gradNorm, 0.0) << "a zero gradient would not show the update";
  }
}

} // namespace
