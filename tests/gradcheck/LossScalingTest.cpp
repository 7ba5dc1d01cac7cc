// Dynamic loss scaling (tg.loss_scaling: tg-autodiff's seed,
// tg-unscale-gradients, tg-update-loss-scale) on the float64 reference
// interpreter, in pipeline order with micro-batches, clipping and AdamW:
//  - same function: with a power-of-two scale and no overflow, losses,
//    gradient norms, parameters and moments equal the unscaled recipe's bit
//    for bit over several steps;
//  - overflow: an inf gradient skips the whole update (parameters and
//    moments unchanged) and halves the scale;
//  - growth after growth_interval good steps, but not to inf;
//  - AdamW counts only applied steps (PyTorch does not advance Adam's step
//    on a skipped one).
// Every test draws fresh random values; the seed is printed on failure
// (TCC_GRADCHECK_SEED replays it).
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "dialects/common/ModelAttrs.h"
#include "passes/training/LossScaling.h"
#include "tests/gradcheck/GradCheckFixture.h"
#include "tests/gradcheck/TrainingSteps.h"

using namespace mlir;
using namespace tcc;
using namespace tcc::gradcheck;

namespace {

using LossScaling = GradCheckTest;

const StateKey kScale{kStepState, model::kLossScaleState};
const StateKey kGood{kStepState, model::kLossScaleGoodStepsState};
const StateKey kSkips{kStepState, model::kLossScaleSkippedStepsState};

// An f64 MLP (5 -> 4 -> 3) trained with AdamW, clipping and two
// micro-batches of 3; with `scaling`, also dynamic loss scaling.
OwningOpRef<ModuleOp>
importRecipe(MLIRContext &ctx,
             std::optional<training::LossScalingConfig> scaling) {
  models::MlpOptions options;
  options.batch = 3;
  options.inputs = 5;
  options.hidden = {4};
  options.classes = 3;
  OwningOpRef<ModuleOp> module =
      importMlpF64(ctx, options, [](model::Model &m) {
        model::Optimizer::AdamW *o =
            m.mutable_training()->mutable_optimizer()->mutable_adamw();
        o->set_learning_rate(0.01);
        o->set_beta1(0.8);
        o->set_beta2(0.99);
        o->set_eps(1e-8);
        o->set_weight_decay(0.01);
        m.mutable_training()->set_micro_batches(2);
        m.mutable_training()->set_grad_clip(0.05);
      });
  if (!module)
    return module;
  if (scaling) {
    Builder b(&ctx);
    (*module)->setAttr(model::kLossScalingAttr, scaling->toAttr(b));
  }
  // Pipeline order (compiler/pipeline/Pipeline.cpp).
  if (failed(runRecipePasses(
          *module, {RecipePass::Autodiff, RecipePass::Accumulate,
                    RecipePass::UnscaleGradients, RecipePass::Clip,
                    RecipePass::Sgd, RecipePass::AdamW,
                    RecipePass::UpdateLossScale})))
    return nullptr;
  return module;
}

training::LossScalingConfig config(double initScale, int64_t interval) {
  training::LossScalingConfig c;
  c.initScale = initScale;
  c.growthInterval = interval;
  return c;
}

double scalar(const StepResults &r, const std::string &output) {
  return r.trainOutputs.at(output).data.at(0);
}

double stateAfter(const StepResults &r, const StateKey &key) {
  return r.updatedState.at(key).data.at(0);
}

// Feeds a step's updated parameters and state into the next step.
void advance(StepValues &values, const StepResults &r) {
  for (auto &[p, t] : r.updatedParams)
    values.params[p] = t;
  for (auto &[key, t] : r.updatedState)
    values.state[key] = t;
}

void expectSameTensor(const Tensor &actual, const Tensor &expected,
                      const std::string &what) {
  ASSERT_EQ(actual.shape, expected.shape) << what;
  for (size_t i = 0; i < actual.data.size(); ++i)
    ASSERT_EQ(actual.data[i], expected.data[i]) << what << ", element " << i;
}

TEST_F(LossScaling, PowerOfTwoScaleGivesTheUnscaledStepBitForBit) {
  OwningOpRef<ModuleOp> plain = importRecipe(context(), std::nullopt);
  OwningOpRef<ModuleOp> scaled = importRecipe(context(), config(4096, 1000));
  ASSERT_TRUE(plain && scaled);
  std::mt19937_64 rng(seed());
  StepValues plainValues = randomValues(trainStep(*plain), rng);
  StepValues scaledValues = plainValues;
  for (int64_t step = 0; step < 3; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    plainValues.step = scaledValues.step = step;
    plainValues.learningRate = scaledValues.learningRate = 0.01;
    StepResults expected = runStep(trainStep(*plain), plainValues);
    StepResults actual = runStep(trainStep(*scaled), scaledValues);
    EXPECT_EQ(actual.loss, expected.loss); // the loss is not scaled
    EXPECT_EQ(scalar(actual, "grad_norm"), scalar(expected, "grad_norm"));
    EXPECT_EQ(scalar(actual, "loss_scale"), 4096);
    EXPECT_EQ(scalar(actual, "skipped"), 0);
    EXPECT_EQ(scalar(actual, "skipped_steps"), 0);
    EXPECT_EQ(stateAfter(actual, kScale), 4096);
    EXPECT_EQ(stateAfter(actual, kGood), step + 1);
    for (auto &[p, t] : expected.updatedParams)
      expectSameTensor(actual.updatedParams.at(p), t, "param " + std::to_string(p));
    for (auto &[key, t] : expected.updatedState)
      expectSameTensor(actual.updatedState.at(key), t,
                       "state " + key.second + " of param " +
                           std::to_string(key.first));
    advance(plainValues, expected);
    advance(scaledValues, actual);
  }
}

TEST_F(LossScaling, OverflowSkipsTheUpdateAndHalvesTheScale) {
  OwningOpRef<ModuleOp> scaled = importRecipe(context(), config(65536, 2000));
  ASSERT_TRUE(scaled);
  std::mt19937_64 rng(seed());
  StepValues values = randomValues(trainStep(*scaled), rng);
  // Moments from earlier steps, and a scale that makes the gradients inf:
  // 1e308 times gradients of inputs ~1e6 exceeds the f64 range.
  // Whatever the random values: positive inputs and weights keep every
  // hidden unit active (~1e6), and rows 0 and 1 get the same input and
  // different labels, so at most one of them is labelled with its
  // (saturated, one-hot) prediction and the logits' gradient is nonzero.
  const int64_t features = 5, classes = 3;
  for (auto &[name, x] : values.inputs) {
    if (name == "label") {
      x.data[1] = std::fmod(x.data[0] + 1, classes);
      continue;
    }
    for (int64_t f = 0; f < features; ++f)
      x.data[features + f] = x.data[f];
    for (double &v : x.data)
      v = std::fabs(v) * 1e6;
  }
  for (Tensor &param : values.params)
    for (double &v : param.data)
      v = std::fabs(v);
  for (size_t p = 0; p < values.params.size(); ++p)
    for (const char *moment : {"adam_m", "adam_v"}) {
      Tensor t = values.params[p];
      for (double &v : t.data)
        v = std::fabs(v) * 0.01;
      values.state[{static_cast<int64_t>(p), moment}] = t;
    }
  values.state[kScale] = Tensor::scalar(1e308);
  values.state[kGood] = Tensor::scalar(17);
  values.state[kSkips] = Tensor::scalar(2);
  values.step = 9;
  values.learningRate = 0.01;
  StepResults r = runStep(trainStep(*scaled), values);
  EXPECT_TRUE(std::isfinite(r.loss));
  EXPECT_FALSE(std::isfinite(scalar(r, "grad_norm")));
  EXPECT_EQ(scalar(r, "skipped"), 1);
  EXPECT_EQ(scalar(r, "loss_scale"), 1e308);
  EXPECT_EQ(scalar(r, "skipped_steps"), 3);
  EXPECT_EQ(stateAfter(r, kScale), 0.5e308);
  EXPECT_EQ(stateAfter(r, kGood), 0);
  EXPECT_EQ(stateAfter(r, kSkips), 3);
  for (auto &[p, t] : r.updatedParams)
    expectSameTensor(t, values.params[p], "param " + std::to_string(p));
  for (auto &[key, t] : r.updatedState)
    if (key.first != kStepState)
      expectSameTensor(t, values.state.at(key), key.second);
}

TEST_F(LossScaling, ScaleGrowsAfterIntervalGoodStepsUnlessItWouldOverflow) {
  OwningOpRef<ModuleOp> scaled = importRecipe(context(), config(8, 3));
  ASSERT_TRUE(scaled);
  std::mt19937_64 rng(seed());
  StepValues values = randomValues(trainStep(*scaled), rng);
  const double scales[] = {8, 8, 16, 16, 16, 32};
  const double goods[] = {1, 2, 0, 1, 2, 0};
  for (int64_t step = 0; step < 6; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    values.step = step;
    values.learningRate = 0.01;
    StepResults r = runStep(trainStep(*scaled), values);
    EXPECT_EQ(scalar(r, "skipped"), 0);
    EXPECT_EQ(stateAfter(r, kScale), scales[step]);
    EXPECT_EQ(stateAfter(r, kGood), goods[step]);
    advance(values, r);
  }
  // Growing 1e308 would give inf: the scale stays (the counter restarts).
  // Small inputs and weights keep the scaled gradients finite: every
  // backward value is then far below 1e308 / 1e308 = 1 times the seed
  // (with random weights of size ~1, W^T g could pass 1.8 and overflow).
  for (auto &[name, x] : values.inputs)
    if (name != "label")
      for (double &v : x.data)
        v *= 1e-3;
  for (Tensor &param : values.params)
    for (double &v : param.data)
      v *= 1e-3;
  values.state[kScale] = Tensor::scalar(1e308);
  values.state[kGood] = Tensor::scalar(2);
  StepResults r = runStep(trainStep(*scaled), values);
  EXPECT_EQ(scalar(r, "skipped"), 0);
  EXPECT_EQ(stateAfter(r, kScale), 1e308);
  EXPECT_EQ(stateAfter(r, kGood), 0);
}

TEST_F(LossScaling, AdamWCountsOnlyAppliedSteps) {
  // Step 5 after 3 skipped updates is AdamW's step 2 (t = 3): the same
  // update as step 2 of the unscaled recipe.
  OwningOpRef<ModuleOp> plain = importRecipe(context(), std::nullopt);
  OwningOpRef<ModuleOp> scaled = importRecipe(context(), config(1024, 2000));
  ASSERT_TRUE(plain && scaled);
  std::mt19937_64 rng(seed());
  StepValues plainValues = randomValues(trainStep(*plain), rng);
  for (size_t p = 0; p < plainValues.params.size(); ++p)
    for (const char *moment : {"adam_m", "adam_v"}) {
      Tensor t = plainValues.params[p];
      for (double &v : t.data)
        v = std::fabs(v) * 0.01;
      plainValues.state[{static_cast<int64_t>(p), moment}] = t;
    }
  plainValues.learningRate = 0.01;
  StepValues scaledValues = plainValues;
  plainValues.step = 2;
  scaledValues.step = 5;
  scaledValues.state[kSkips] = Tensor::scalar(3);
  StepResults expected = runStep(trainStep(*plain), plainValues);
  StepResults actual = runStep(trainStep(*scaled), scaledValues);
  for (auto &[p, t] : expected.updatedParams)
    expectSameTensor(actual.updatedParams.at(p), t, "param " + std::to_string(p));
  // And without the correction the update would differ.
  scaledValues.state[kSkips] = Tensor::scalar(0);
  StepResults uncorrected = runStep(trainStep(*scaled), scaledValues);
  EXPECT_NE(uncorrected.updatedParams.at(0).data,
            expected.updatedParams.at(0).data);
}

} // namespace
