// The training-recipe passes as "same function before and after" checks on
// the float64 reference interpreter:
//  - tg-accumulate-micro-batches: K micro-batches of B give the loss and
//    gradients of one K*B batch (and @forward the same loss and logits);
//  - tg-clip-grad-norm: the reported norm and the scaled gradients, with the
//    threshold below and above the norm;
//  - tg-adamw-update / tg-sgd-update: several steps against a plain float64
//    transcription of torch.optim.AdamW / torch.optim.SGD, including bias
//    correction, weight decay, no_weight_decay and frozen parameters;
//  - tg-emit-gradients: the gradients, named, as train outputs;
//  - the whole recipe in pipeline order against the same references.
// Every test draws fresh random values; the seed is printed on failure
// (TCC_GRADCHECK_SEED replays it).
#include <cmath>
#include <map>
#include <optional>

#include <gtest/gtest.h>

#include "dialects/common/ModelAttrs.h"
#include "dialects/tg/TgDialect.h"
#include "frontend/importer/Importer.h"
#include "models/ModelBuilder.h"
#include "tests/gradcheck/GradCheck.h"
#include "tests/gradcheck/GradCheckFixture.h"
#include "tests/gradcheck/TrainingSteps.h"

using namespace mlir;
using namespace tcc;
using namespace tcc::gradcheck;

namespace {

//===----------------------------------------------------------------------===//
// Models
//===----------------------------------------------------------------------===//

// A small MLP in f64 (models/ModelBuilder), batch `batch`, with the given
// training recipe applied by `recipe`.
OwningOpRef<ModuleOp>
importMlp(MLIRContext &ctx, int64_t batch,
          const std::function<void(model::Model &)> &recipe = {}) {
  models::MlpOptions options;
  options.batch = batch;
  options.inputs = 5;
  options.hidden = {4};
  options.classes = 3;
  return importMlpF64(ctx, options, recipe);
}

// Marks parameter `index` of every function of `module` no_weight_decay.
void setNoWeightDecay(ModuleOp module, int64_t index) {
  Builder b(module.getContext());
  module.walk([&](func::FuncOp f) {
    int64_t p = 0;
    for (unsigned i = 0; i < f.getNumArguments(); ++i) {
      auto info = model::ParamInfo::fromAttr(f.getArgAttr(i, model::kParamAttr));
      if (!info)
        continue;
      if (p++ == index) {
        info->noWeightDecay = true;
        f.setArgAttr(i, model::kParamAttr, info->toAttr(b));
      }
    }
  });
}

// w (3, 4) trainable, f (4) frozen, b (4) trainable and exempt from weight
// decay, x (2, 3) data: loss = sum((x w) * f + b)^2-ish, nonlinear enough
// that the gradient changes from step to step.
OwningOpRef<ModuleOp> buildSmallModel(MLIRContext &ctx) {
  OwningOpRef<ModuleOp> module = buildForwardModule(
      ctx,
      {ArgSpec::param({3, 4}), ArgSpec::frozen({4}), ArgSpec::param({4}),
       ArgSpec::input({2, 3})},
      [](OpBuilder &b, Location loc, ArrayRef<Value> a) {
        Value h = matmul(b, loc, a[3], a[0], false, false); // (2, 4)
        Value y = add(b, loc, mul(b, loc, h, a[1]), a[2]);
        return mul(b, loc, y, y);
      });
  if (module)
    setNoWeightDecay(*module, 2);
  return module;
}

void setOptimizer(ModuleOp module, ArrayRef<NamedAttribute> fields) {
  Builder b(module.getContext());
  module->setAttr(model::kOptimizerAttr, b.getDictionaryAttr(fields));
}

//===----------------------------------------------------------------------===//
// References: PyTorch's optimizers, transcribed in float64
//===----------------------------------------------------------------------===//

struct AdamWConfig {
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weightDecay = 0.1;
};

// torch.optim.AdamW._single_tensor_adamw for one parameter (amsgrad off).
void referenceAdamW(Tensor &param, Tensor &m, Tensor &v, const Tensor &grad,
                    double lr, int64_t stepCount, double weightDecay,
                    const AdamWConfig &c) {
  double t = static_cast<double>(stepCount); // step_t += 1 happened already
  for (size_t i = 0; i < param.data.size(); ++i)
    param.data[i] *= 1 - lr * weightDecay;
  for (size_t i = 0; i < param.data.size(); ++i) {
    m.data[i] = m.data[i] * c.beta1 + grad.data[i] * (1 - c.beta1);
    v.data[i] = v.data[i] * c.beta2 + (1 - c.beta2) * grad.data[i] * grad.data[i];
  }
  double biasCorrection1 = 1 - std::pow(c.beta1, t);
  double biasCorrection2 = 1 - std::pow(c.beta2, t);
  double stepSize = lr / biasCorrection1;
  double biasCorrection2Sqrt = std::sqrt(biasCorrection2);
  for (size_t i = 0; i < param.data.size(); ++i) {
    double denom = std::sqrt(v.data[i]) / biasCorrection2Sqrt + c.eps;
    param.data[i] += -stepSize * m.data[i] / denom;
  }
}

// torch.optim.SGD._single_tensor_sgd for one parameter (dampening 0, no
// nesterov); `buffer` is empty before the first step, as in PyTorch.
void referenceSgd(Tensor &param, std::optional<Tensor> &buffer,
                  const Tensor &grad, double lr, double momentum,
                  double weightDecay) {
  Tensor d = grad;
  for (size_t i = 0; i < d.data.size(); ++i)
    d.data[i] += weightDecay * param.data[i];
  if (momentum != 0) {
    if (!buffer) {
      buffer = d;
    } else {
      for (size_t i = 0; i < d.data.size(); ++i)
        buffer->data[i] = buffer->data[i] * momentum + d.data[i];
    }
    d = *buffer;
  }
  for (size_t i = 0; i < d.data.size(); ++i)
    param.data[i] += -lr * d.data[i];
}

// The learning rates of the steps below: a warmup-like ramp, so a step that
// used the wrong learning rate would show.
double lrAt(int64_t step) { return 0.01 * (step + 1) / 2.0; }

// Each test has GradCheckTest's seed and context.
using AccumulateMicroBatches = GradCheckTest;
using AdamWUpdate = GradCheckTest;
using ClipGradNorm = GradCheckTest;
using EmitGradients = GradCheckTest;
using SgdUpdate = GradCheckTest;
using TrainingRecipe = GradCheckTest;

//===----------------------------------------------------------------------===//
// Optimizers
//===----------------------------------------------------------------------===//

TEST_F(AdamWUpdate, MatchesTorchAdamWForSeveralSteps) {
  OwningOpRef<ModuleOp> grads = buildSmallModel(context());
  OwningOpRef<ModuleOp> adam = buildSmallModel(context());
  ASSERT_TRUE(grads && adam);
  AdamWConfig c;
  Builder b(&context());
  setOptimizer(*adam, {b.getNamedAttr("kind", b.getStringAttr("adamw")),
                       b.getNamedAttr("learning_rate", b.getF64FloatAttr(0.01)),
                       b.getNamedAttr("beta1", b.getF64FloatAttr(c.beta1)),
                       b.getNamedAttr("beta2", b.getF64FloatAttr(c.beta2)),
                       b.getNamedAttr("eps", b.getF64FloatAttr(c.eps)),
                       b.getNamedAttr("weight_decay",
                                      b.getF64FloatAttr(c.weightDecay))});
  ASSERT_TRUE(succeeded(runRecipePasses(*grads, {RecipePass::Autodiff})));
  ASSERT_TRUE(succeeded(
      runRecipePasses(*adam, {RecipePass::Autodiff, RecipePass::AdamW})));

  std::mt19937_64 rng(seed());
  StepValues compiled = randomValues(trainStep(*grads), rng);
  const StepValues initial = compiled;
  StepValues reference = compiled;
  std::map<StateKey, Tensor> refState;
  for (int64_t step = 0; step < 5; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    compiled.step = step;
    compiled.learningRate = lrAt(step);
    StepResults gradients = runStep(trainStep(*grads), reference);
    StepResults updated = runStep(trainStep(*adam), compiled);
    // After step 0 the two sides' parameters come from two AdamW
    // implementations whose float64 operations differ in order: a few ulps
    // apart, so the losses are too (a seed gave 9 ulps; EXPECT_DOUBLE_EQ
    // allows 4).
    EXPECT_NEAR(updated.loss, gradients.loss, 1e-12 * std::max(1.0, std::fabs(gradients.loss)));

    // Parameter 1 is frozen: no update, no state.
    ASSERT_EQ(updated.updatedParams.size(), 2u);
    ASSERT_EQ(updated.updatedParams.count(1), 0u);
    ASSERT_EQ(updated.updatedState.size(), 4u);
    for (int64_t p : {0, 2}) {
      Tensor &m = refState.try_emplace({p, "adam_m"},
                                       Tensor::zeros(reference.params[p].shape))
                      .first->second;
      Tensor &v = refState.try_emplace({p, "adam_v"},
                                       Tensor::zeros(reference.params[p].shape))
                      .first->second;
      // Parameter 2 is no_weight_decay.
      referenceAdamW(reference.params[p], m, v, gradients.grads.at(p),
                     lrAt(step), step + 1, p == 2 ? 0.0 : c.weightDecay, c);
      expectClose(updated.updatedParams.at(p), reference.params[p], 1e-12,
                  "param " + std::to_string(p));
      expectClose(updated.updatedState.at({p, "adam_m"}), m, 1e-12, "adam_m");
      expectClose(updated.updatedState.at({p, "adam_v"}), v, 1e-12, "adam_v");
      compiled.params[p] = updated.updatedParams.at(p);
    }
    compiled.state = updated.updatedState;
  }
  // The frozen parameter is never written; the others moved.
  EXPECT_NE(compiled.params[0].data, initial.params[0].data);
  EXPECT_NE(compiled.params[2].data, initial.params[2].data);
  EXPECT_EQ(compiled.params[1].data, initial.params[1].data);
}

TEST_F(SgdUpdate, MomentumAndWeightDecayMatchTorchSgd) {
  for (double momentum : {0.0, 0.9}) {
    SCOPED_TRACE("momentum " + std::to_string(momentum));
    const double weightDecay = 0.05;
    OwningOpRef<ModuleOp> grads = buildSmallModel(context());
    OwningOpRef<ModuleOp> sgd = buildSmallModel(context());
    ASSERT_TRUE(grads && sgd);
    Builder b(&context());
    setOptimizer(*sgd,
                 {b.getNamedAttr("kind", b.getStringAttr("sgd")),
                  b.getNamedAttr("learning_rate", b.getF64FloatAttr(0.01)),
                  b.getNamedAttr("momentum", b.getF64FloatAttr(momentum)),
                  b.getNamedAttr("weight_decay", b.getF64FloatAttr(weightDecay))});
    ASSERT_TRUE(succeeded(runRecipePasses(*grads, {RecipePass::Autodiff})));
    ASSERT_TRUE(succeeded(
        runRecipePasses(*sgd, {RecipePass::Autodiff, RecipePass::Sgd})));

    std::mt19937_64 rng(seed());
    StepValues compiled = randomValues(trainStep(*grads), rng);
    StepValues reference = compiled;
    std::map<int64_t, std::optional<Tensor>> buffers;
    for (int64_t step = 0; step < 4; ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      compiled.learningRate = lrAt(step);
      StepResults gradients = runStep(trainStep(*grads), reference);
      StepResults updated = runStep(trainStep(*sgd), compiled);
      ASSERT_EQ(updated.updatedParams.count(1), 0u) << "frozen";
      ASSERT_EQ(updated.updatedState.size(), momentum == 0 ? 0u : 2u);
      for (int64_t p : {0, 2}) {
        referenceSgd(reference.params[p], buffers[p], gradients.grads.at(p),
                     lrAt(step), momentum, p == 2 ? 0.0 : weightDecay);
        expectClose(updated.updatedParams.at(p), reference.params[p], 1e-12,
                    "param " + std::to_string(p));
        if (momentum != 0)
          expectClose(updated.updatedState.at({p, "momentum"}), *buffers[p],
                      1e-12, "momentum buffer");
        compiled.params[p] = updated.updatedParams.at(p);
      }
      compiled.state = updated.updatedState;
    }
  }
}

//===----------------------------------------------------------------------===//
// Clipping
//===----------------------------------------------------------------------===//

TEST_F(ClipGradNorm, ScalesLikeTorchAboveAndBelowTheThreshold) {
  OwningOpRef<ModuleOp> grads = buildSmallModel(context());
  ASSERT_TRUE(grads);
  ASSERT_TRUE(succeeded(runRecipePasses(*grads, {RecipePass::Autodiff})));
  std::mt19937_64 rng(seed());
  StepValues values = randomValues(trainStep(*grads), rng);
  StepResults plain = runStep(trainStep(*grads), values);
  double norm = std::sqrt(sumOfSquares(plain.grads));
  ASSERT_GT(norm, 1e-3);

  // A threshold of half the norm clips; one of twice the norm does not.
  for (double maxNorm : {0.5 * norm, 2.0 * norm}) {
    SCOPED_TRACE("max_norm " + std::to_string(maxNorm) + ", norm " +
                 std::to_string(norm));
    OwningOpRef<ModuleOp> clipped = buildSmallModel(context());
    ASSERT_TRUE(clipped);
    Builder b(&context());
    (*clipped)->setAttr(model::kGradClipAttr, b.getF64FloatAttr(maxNorm));
    ASSERT_TRUE(succeeded(
        runRecipePasses(*clipped, {RecipePass::Autodiff, RecipePass::Clip})));
    StepResults out = runStep(trainStep(*clipped), values);
    EXPECT_DOUBLE_EQ(out.loss, plain.loss);
    ASSERT_EQ(out.trainOutputs.count("grad_norm"), 1u);
    EXPECT_NEAR(out.trainOutputs["grad_norm"].data[0], norm, 1e-12 * norm);
    double scale = std::min(maxNorm / (norm + 1e-6), 1.0);
    for (auto &[p, g] : plain.grads) {
      Tensor expected = g;
      for (double &x : expected.data)
        x *= scale;
      expectClose(out.grads.at(p), expected, 1e-12, "gradient");
    }
    double clippedNorm = std::sqrt(sumOfSquares(out.grads));
    if (maxNorm < norm)
      EXPECT_NEAR(clippedNorm, maxNorm, 1e-5 * maxNorm);
    else
      EXPECT_DOUBLE_EQ(clippedNorm, norm);
  }
}

//===----------------------------------------------------------------------===//
// Accumulation
//===----------------------------------------------------------------------===//

TEST_F(AccumulateMicroBatches, KMicroBatchesEqualOneBigBatch) {
  const int64_t k = 3, batch = 4;
  OwningOpRef<ModuleOp> big = importMlp(context(), k * batch);
  OwningOpRef<ModuleOp> micro =
      importMlp(context(), batch, [&](model::Model &m) {
        m.mutable_training()->set_micro_batches(k);
      });
  ASSERT_TRUE(big && micro);
  ASSERT_TRUE(succeeded(runRecipePasses(*big, {RecipePass::Autodiff})));
  ASSERT_TRUE(succeeded(
      runRecipePasses(*micro, {RecipePass::Autodiff, RecipePass::Accumulate})));

  // Both steps now take K*B rows.
  EXPECT_EQ(trainStep(*micro).getArgumentTypes(),
            trainStep(*big).getArgumentTypes());
  EXPECT_EQ(forwardFunc(*micro).getFunctionType(),
            forwardFunc(*big).getFunctionType());

  std::mt19937_64 rng(seed());
  StepValues values = randomValues(trainStep(*big), rng);
  StepResults expected = runStep(trainStep(*big), values);
  StepResults actual = runStep(trainStep(*micro), values);
  EXPECT_NEAR(actual.loss, expected.loss, 1e-12 * std::fabs(expected.loss));
  ASSERT_EQ(actual.grads.size(), expected.grads.size());
  for (auto &[p, g] : expected.grads)
    expectClose(actual.grads.at(p), g, 1e-12, "gradient " + std::to_string(p));

  StepResults evalExpected = runStep(forwardFunc(*big), values);
  StepResults evalActual = runStep(forwardFunc(*micro), values);
  EXPECT_NEAR(evalActual.loss, evalExpected.loss,
              1e-12 * std::fabs(evalExpected.loss));
  expectClose(evalActual.outputs.at("logits"), evalExpected.outputs.at("logits"),
              1e-12, "logits");

  // And each micro-batch really is a slice: the loss of micro-batch 0 alone
  // differs from the mean (the data differ between micro-batches).
  OwningOpRef<ModuleOp> single = importMlp(context(), batch);
  ASSERT_TRUE(single &&
              succeeded(runRecipePasses(*single, {RecipePass::Autodiff})));
  StepValues first = values;
  for (auto &[name, t] : first.inputs) {
    int64_t rowSize = t.numElements() / t.shape[0];
    t.shape[0] = batch;
    t.data.resize(batch * rowSize);
  }
  double firstLoss = runStep(trainStep(*single), first).loss;
  EXPECT_NE(firstLoss, expected.loss);
}

//===----------------------------------------------------------------------===//
// Gradients as outputs, and the whole recipe
//===----------------------------------------------------------------------===//

TEST_F(EmitGradients, ReturnsEachGradientByName) {
  OwningOpRef<ModuleOp> grads = importMlp(context(), 4);
  OwningOpRef<ModuleOp> emitted = importMlp(context(), 4);
  ASSERT_TRUE(grads && emitted);
  ASSERT_TRUE(succeeded(runRecipePasses(*grads, {RecipePass::Autodiff})));
  ASSERT_TRUE(succeeded(runRecipePasses(
      *emitted, {RecipePass::Autodiff, RecipePass::EmitGradients})));
  std::mt19937_64 rng(seed());
  StepValues values = randomValues(trainStep(*grads), rng);
  StepResults expected = runStep(trainStep(*grads), values);
  StepResults actual = runStep(trainStep(*emitted), values);
  EXPECT_TRUE(actual.grads.empty());
  EXPECT_TRUE(actual.updatedParams.empty());
  EXPECT_EQ(actual.loss, expected.loss);
  const char *names[] = {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"};
  ASSERT_EQ(actual.trainOutputs.size(), 4u);
  for (int64_t p = 0; p < 4; ++p)
    EXPECT_EQ(actual.trainOutputs.at(std::string("grad:") + names[p]).data,
              expected.grads.at(p).data)
        << names[p];
}

// autodiff -> accumulate -> clip -> AdamW, as the pipeline runs them, against
// big-batch gradients, torch's clipping and torch's AdamW.
TEST_F(TrainingRecipe, AccumulateClipAdamWInPipelineOrder) {
  const int64_t k = 2, batch = 3;
  AdamWConfig c;
  c.beta1 = 0.8;
  c.beta2 = 0.99;
  c.weightDecay = 0.01;
  OwningOpRef<ModuleOp> big = importMlp(context(), k * batch);
  OwningOpRef<ModuleOp> recipe =
      importMlp(context(), batch, [&](model::Model &m) {
        model::Optimizer::AdamW *o =
            m.mutable_training()->mutable_optimizer()->mutable_adamw();
        o->set_learning_rate(0.01);
        o->set_beta1(c.beta1);
        o->set_beta2(c.beta2);
        o->set_eps(c.eps);
        o->set_weight_decay(c.weightDecay);
        m.mutable_training()->set_micro_batches(k);
        m.mutable_training()->set_grad_clip(0.05);
        // Biases are exempt from weight decay.
        for (model::Parameter &p : *m.mutable_params())
          if (p.shape().dims_size() == 1)
            p.set_no_weight_decay(true);
      });
  ASSERT_TRUE(big && recipe);
  ASSERT_TRUE(succeeded(runRecipePasses(*big, {RecipePass::Autodiff})));
  ASSERT_TRUE(succeeded(runRecipePasses(
      *recipe, {RecipePass::Autodiff, RecipePass::Accumulate, RecipePass::Clip,
                RecipePass::Sgd, RecipePass::AdamW})));

  std::mt19937_64 rng(seed());
  StepValues compiled = randomValues(trainStep(*big), rng);
  StepValues reference = compiled;
  std::map<StateKey, Tensor> refState;
  bool clippedOnce = false;
  for (int64_t step = 0; step < 3; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    compiled.step = step;
    compiled.learningRate = lrAt(step);
    StepResults gradients = runStep(trainStep(*big), reference);
    StepResults updated = runStep(trainStep(*recipe), compiled);
    EXPECT_NEAR(updated.loss, gradients.loss, 1e-12 * std::fabs(gradients.loss));
    double norm = std::sqrt(sumOfSquares(gradients.grads));
    EXPECT_NEAR(updated.trainOutputs.at("grad_norm").data[0], norm, 1e-12 * norm);
    double scale = std::min(0.05 / (norm + 1e-6), 1.0);
    clippedOnce |= scale < 1;
    for (auto &[p, g] : gradients.grads) {
      Tensor clipped = g;
      for (double &x : clipped.data)
        x *= scale;
      Tensor &m = refState.try_emplace({p, "adam_m"}, Tensor::zeros(g.shape))
                      .first->second;
      Tensor &v = refState.try_emplace({p, "adam_v"}, Tensor::zeros(g.shape))
                      .first->second;
      bool isBias = g.shape.size() == 1;
      referenceAdamW(reference.params[p], m, v, clipped, lrAt(step), step + 1,
                     isBias ? 0.0 : c.weightDecay, c);
      expectClose(updated.updatedParams.at(p), reference.params[p], 1e-10,
                  "param " + std::to_string(p));
      compiled.params[p] = updated.updatedParams.at(p);
    }
    compiled.state = updated.updatedState;
  }
  EXPECT_TRUE(clippedOnce) << "the threshold should clip at least one step";
}

// ZeRO-1 at one rank (tg.shard_optimizer = 1; the interpreter is one rank):
// tg-all-reduce-gradients reduce-scatters every gradient, clipping sums the
// shards' squares through an all-reduce, AdamW updates each parameter's
// shard with flattened state and all-gathers it. The same function as the
// recipe without sharding: losses, norms, weights and (flattened) state
// over three steps. Across ranks: tests/e2e/data_parallel_cpu_test.py.
TEST_F(TrainingRecipe, ShardedOptimizerAtOneRankIsTheSameStep) {
  auto recipe = [](model::Model &m) {
    model::Optimizer::AdamW *o = m.mutable_training()->mutable_optimizer()->mutable_adamw();
    o->set_learning_rate(0.01);
    o->set_weight_decay(0.01);
    m.mutable_training()->set_grad_clip(0.05);
  };
  OwningOpRef<ModuleOp> plain = importMlp(context(), 4, recipe);
  OwningOpRef<ModuleOp> sharded = importMlp(context(), 4, recipe);
  ASSERT_TRUE(plain && sharded);
  Builder b(&context());
  (*sharded)->setAttr(model::kDataParallelAttr, b.getUnitAttr());
  (*sharded)->setAttr(model::kShardOptimizerAttr, b.getI64IntegerAttr(1));
  ASSERT_TRUE(succeeded(runRecipePasses(
      *plain, {RecipePass::Autodiff, RecipePass::Clip, RecipePass::AdamW})));
  ASSERT_TRUE(succeeded(runRecipePasses(*sharded, {RecipePass::Autodiff, RecipePass::AllReduce,
                                                   RecipePass::Clip, RecipePass::AdamW})));
  int64_t scattered = 0, gathered = 0;
  trainStep(*sharded).walk([&](Operation *op) {
    scattered += isa<tg::ReduceScatterOp>(op);
    gathered += isa<tg::AllGatherOp>(op);
  });
  EXPECT_EQ(scattered, 4); // two weights, two biases
  EXPECT_EQ(gathered, 4);

  std::mt19937_64 rng(seed());
  StepValues a = randomValues(trainStep(*plain), rng);
  StepValues z = a;
  for (int64_t step = 0; step < 3; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    a.step = z.step = step;
    a.learningRate = z.learningRate = lrAt(step);
    StepResults one = runStep(trainStep(*plain), a);
    StepResults two = runStep(trainStep(*sharded), z);
    EXPECT_NEAR(two.loss, one.loss, 1e-12 * std::fabs(one.loss));
    double norm = one.trainOutputs.at("grad_norm").data[0];
    EXPECT_NEAR(two.trainOutputs.at("grad_norm").data[0], norm, 1e-12 * norm);
    for (auto &[p, w] : one.updatedParams) {
      expectClose(two.updatedParams.at(p), w, 1e-12, "param " + std::to_string(p));
      a.params[p] = w;
      z.params[p] = two.updatedParams.at(p);
    }
    ASSERT_EQ(two.updatedState.size(), one.updatedState.size());
    for (auto &[key, state] : one.updatedState) {
      Tensor flat = two.updatedState.at(key);
      ASSERT_EQ(flat.shape.size(), 1u) << "sharded state is 1-D";
      flat.shape = state.shape;
      expectClose(flat, state, 1e-12, key.second + " of param " + std::to_string(key.first));
    }
    a.state = one.updatedState;
    z.state = two.updatedState;
  }
}

// Data parallelism under bf16 at one rank, on the float64 interpreter: the
// weight gradients computed in bf16 are all-reduced in bf16 and cast after
// (the default), or cast first and all-reduced in f32 with the late casts
// moved up (tg.reduce_gradients_in_f32); either way one rank's step is the
// plain bf16 step.
TEST_F(TrainingRecipe, DataParallelBf16GradientsAtOneRankIsTheSameStep) {
  auto recipe = [](model::Model &m) {
    m.mutable_training()->mutable_optimizer()->mutable_adamw()->set_learning_rate(0.01);
    m.mutable_training()->set_grad_clip(0.05);
  };
  // In f32: mixed precision starts from an f32 model.
  auto importF32 = [&] {
    models::MlpOptions options;
    options.batch = 4;
    options.inputs = 5;
    options.hidden = {4};
    options.classes = 3;
    model::Model m = models::buildMlp(options);
    recipe(m);
    return importModel(m, context());
  };
  OwningOpRef<ModuleOp> plain = importF32(), narrow = importF32(), wide = importF32();
  ASSERT_TRUE(plain && narrow && wide);
  Builder b(&context());
  (*narrow)->setAttr(model::kDataParallelAttr, b.getUnitAttr());
  (*wide)->setAttr(model::kDataParallelAttr, b.getUnitAttr());
  (*wide)->setAttr(model::kReduceGradientsInF32Attr, b.getUnitAttr());
  ASSERT_TRUE(succeeded(runRecipePasses(
      *plain, {RecipePass::AmpBf16, RecipePass::Autodiff, RecipePass::Clip, RecipePass::AdamW})));
  for (ModuleOp m : {*narrow, *wide})
    ASSERT_TRUE(succeeded(runRecipePasses(m, {RecipePass::AmpBf16, RecipePass::Autodiff,
                                              RecipePass::AllReduce, RecipePass::Clip,
                                              RecipePass::AdamW})));
  auto bf16Reductions = [](ModuleOp m) {
    int64_t n = 0;
    trainStep(m).walk([&](tg::AllReduceOp op) {
      n += getElementTypeOrSelf(op->getOperand(0).getType()).isBF16();
    });
    return n;
  };
  // Two weights and two biases: each is cast to bf16 once a step, so their
  // gradients are computed in bf16.
  EXPECT_EQ(bf16Reductions(*narrow), 4);
  EXPECT_EQ(bf16Reductions(*wide), 0);

  std::mt19937_64 rng(seed());
  StepValues a = randomValues(trainStep(*plain), rng);
  StepValues n = a, w = a;
  for (int64_t step = 0; step < 3; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    a.step = n.step = w.step = step;
    a.learningRate = n.learningRate = w.learningRate = lrAt(step);
    StepResults one = runStep(trainStep(*plain), a);
    for (StepValues *v : {&n, &w}) {
      StepResults dp = runStep(trainStep(v == &n ? *narrow : *wide), *v);
      EXPECT_NEAR(dp.loss, one.loss, 1e-12 * std::fabs(one.loss));
      for (auto &[p, param] : one.updatedParams)
        expectClose(dp.updatedParams.at(p), param, 1e-12, "param " + std::to_string(p));
      for (auto &[p, param] : dp.updatedParams)
        v->params[p] = param;
      v->state = dp.updatedState;
    }
    for (auto &[p, param] : one.updatedParams)
      a.params[p] = param;
    a.state = one.updatedState;
  }
}

// models::ModelBuilder's recipe helpers write what the importer turns into
// the module attributes the passes read.
TEST_F(TrainingRecipe, ModelBuilderRecipeReachesTheModuleAttributes) {
  models::ModelBuilder b("recipe");
  std::string w = b.param("w", {3}, model::Initializer::ONES);
  std::string bias = b.param("b", {3}, model::Initializer::ZEROS);
  std::string x = b.input("x", model::F32, {2, 3});
  std::string h = b.node("add", "h", {b.node("mul", "xw", {x, w}), bias});
  std::string loss = b.node("mean", "loss", {h});
  models::ModelBuilder::AdamW adam;
  adam.learningRate = 0.002;
  adam.beta2 = 0.95;
  adam.weightDecay = 0.1;
  b.adamw(loss, adam);
  b.warmupCosine(10, 100, 0.0002);
  b.gradClip(0.5);
  b.microBatches(3);
  b.noWeightDecay(bias);
  OwningOpRef<ModuleOp> module = importModel(b.model(), context());
  ASSERT_TRUE(module);

  auto opt = (*module)->getAttrOfType<DictionaryAttr>(model::kOptimizerAttr);
  ASSERT_TRUE(opt);
  EXPECT_EQ(opt.getAs<StringAttr>("kind").getValue(), "adamw");
  EXPECT_EQ(opt.getAs<FloatAttr>("learning_rate").getValueAsDouble(), 0.002);
  EXPECT_EQ(opt.getAs<FloatAttr>("beta1").getValueAsDouble(), 0.9);
  EXPECT_EQ(opt.getAs<FloatAttr>("beta2").getValueAsDouble(), 0.95);
  EXPECT_EQ(opt.getAs<FloatAttr>("eps").getValueAsDouble(), 1e-8);
  EXPECT_EQ(opt.getAs<FloatAttr>("weight_decay").getValueAsDouble(), 0.1);
  auto schedule = (*module)->getAttrOfType<DictionaryAttr>(model::kLrScheduleAttr);
  ASSERT_TRUE(schedule);
  EXPECT_EQ(schedule.getAs<StringAttr>("kind").getValue(), "warmup_cosine");
  EXPECT_EQ(schedule.getAs<IntegerAttr>("warmup_steps").getInt(), 10);
  EXPECT_EQ(schedule.getAs<IntegerAttr>("decay_steps").getInt(), 100);
  EXPECT_EQ(schedule.getAs<FloatAttr>("min_lr").getValueAsDouble(), 0.0002);
  EXPECT_EQ((*module)->getAttrOfType<FloatAttr>(model::kGradClipAttr).getValueAsDouble(), 0.5);
  EXPECT_EQ((*module)->getAttrOfType<IntegerAttr>(model::kMicroBatchesAttr).getInt(), 3);
  func::FuncOp forward = forwardFunc(*module);
  auto wInfo = model::ParamInfo::fromAttr(forward.getArgAttr(0, model::kParamAttr));
  auto bInfo = model::ParamInfo::fromAttr(forward.getArgAttr(1, model::kParamAttr));
  ASSERT_TRUE(wInfo && bInfo);
  EXPECT_FALSE(wInfo->noWeightDecay);
  EXPECT_TRUE(bInfo->noWeightDecay);

  // sgd(...) with momentum and weight decay, and a constant schedule.
  models::ModelBuilder s("sgd");
  std::string v = s.param("v", {2}, model::Initializer::ONES);
  s.sgd(s.node("sum", "l", {v}), 0.1, 0.9, 0.01);
  OwningOpRef<ModuleOp> sgd = importModel(s.model(), context());
  ASSERT_TRUE(sgd);
  auto sgdOpt = (*sgd)->getAttrOfType<DictionaryAttr>(model::kOptimizerAttr);
  EXPECT_EQ(sgdOpt.getAs<FloatAttr>("momentum").getValueAsDouble(), 0.9);
  EXPECT_EQ(sgdOpt.getAs<FloatAttr>("weight_decay").getValueAsDouble(), 0.01);
  EXPECT_FALSE((*sgd)->hasAttr(model::kLrScheduleAttr));
  EXPECT_FALSE((*sgd)->hasAttr(model::kGradClipAttr));
  EXPECT_FALSE((*sgd)->hasAttr(model::kMicroBatchesAttr));
}

} // namespace
