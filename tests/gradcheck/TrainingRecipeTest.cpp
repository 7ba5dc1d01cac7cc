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
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/TypeSwitch.h"
#include "models/ModelBuilder.h"
#include "passes/Passes.h"
#include "tests/gradcheck/GradCheck.h"

using namespace mlir;
using namespace tcc;
using namespace tcc::gradcheck;

namespace {

//===----------------------------------------------------------------------===//
// Running steps
//===----------------------------------------------------------------------===//

enum class Pass { Autodiff, Accumulate, Clip, Sgd, AdamW, EmitGradients };

LogicalResult runPasses(ModuleOp module, std::initializer_list<Pass> passes) {
  PassManager pm(module.getContext());
  for (Pass p : passes) {
    switch (p) {
    case Pass::Autodiff: pm.addPass(createTgAutodiff()); break;
    case Pass::Accumulate: pm.addPass(createTgAccumulateMicroBatches()); break;
    case Pass::Clip: pm.addPass(createTgClipGradNorm()); break;
    case Pass::Sgd: pm.addPass(createTgSgdUpdate()); break;
    case Pass::AdamW: pm.addPass(createTgAdamWUpdate()); break;
    case Pass::EmitGradients: pm.addPass(createTgEmitGradients()); break;
    }
  }
  return pm.run(module);
}

func::FuncOp trainStep(ModuleOp m) {
  return m.lookupSymbol<func::FuncOp>(tg::kTrainStepFunc);
}
func::FuncOp forwardFunc(ModuleOp m) {
  return m.lookupSymbol<func::FuncOp>(tg::kForwardFunc);
}

// Optimizer state of parameter `param` called `name` ("adam_m", ...).
using StateKey = std::pair<int64_t, std::string>;

// Everything a train step reads and writes, by role rather than position.
struct StepValues {
  std::vector<Tensor> params;              // by parameter index
  std::map<std::string, Tensor> inputs;    // by input name
  double learningRate = 0;
  int64_t step = 0;
  std::map<StateKey, Tensor> state;        // missing state starts at zeros
};

struct StepResults {
  double loss = 0;
  std::map<int64_t, Tensor> grads;            // tg.grad_of
  std::map<int64_t, Tensor> updatedParams;    // tg.updates_param
  std::map<StateKey, Tensor> updatedState;    // tg.updates_opt_state
  std::map<std::string, Tensor> trainOutputs; // tg.train_output
  std::map<std::string, Tensor> outputs;      // tg.output
};

// Binds `values` to `f`'s arguments by their attributes, interprets `f`
// and sorts its results by their attributes.
StepResults runStep(func::FuncOp f, const StepValues &values) {
  StepResults out;
  std::vector<Tensor> args;
  std::vector<StateKey> stateArgs; // index among tg.opt_state arguments
  int64_t param = 0;
  for (unsigned i = 0; i < f.getNumArguments(); ++i) {
    auto type = cast<RankedTensorType>(f.getArgument(i).getType());
    if (f.getArgAttr(i, tg::kParamAttr)) {
      args.push_back(values.params.at(param++));
    } else if (auto in = f.getArgAttrOfType<StringAttr>(i, tg::kInputAttr)) {
      args.push_back(values.inputs.at(in.str()));
    } else if (auto h = f.getArgAttrOfType<StringAttr>(i, tg::kHyperAttr)) {
      if (h.getValue() == tg::kLearningRateHyper)
        args.push_back(Tensor::scalar(values.learningRate));
      else if (h.getValue() == tg::kStepHyper)
        args.push_back(Tensor::scalar(static_cast<double>(values.step)));
      else
        ADD_FAILURE() << "unexpected hyper-parameter " << h.str();
    } else if (auto s = f.getArgAttrOfType<DictionaryAttr>(i, tg::kOptStateAttr)) {
      StateKey key{s.getAs<IntegerAttr>("param").getInt(),
                   s.getAs<StringAttr>("name").str()};
      stateArgs.push_back(key);
      auto it = values.state.find(key);
      args.push_back(it != values.state.end() ? it->second
                                              : Tensor::zeros(type.getShape()));
    } else {
      ADD_FAILURE() << "argument " << i << " has no role";
    }
  }
  auto results = interp::interpret(f, args);
  if (failed(results)) {
    ADD_FAILURE() << "interpreting @" << f.getSymName().str() << " failed";
    return out;
  }
  for (unsigned r = 0; r < f.getNumResults(); ++r) {
    Tensor &t = (*results)[r];
    if (f.getResultAttr(r, tg::kLossAttr))
      out.loss = t.data.at(0);
    else if (auto g = f.getResultAttrOfType<IntegerAttr>(r, tg::kGradOfAttr))
      out.grads[g.getInt()] = t;
    else if (auto p = f.getResultAttrOfType<IntegerAttr>(r, tg::kUpdatesParamAttr))
      out.updatedParams[p.getInt()] = t;
    else if (auto s = f.getResultAttrOfType<IntegerAttr>(r, tg::kUpdatesOptStateAttr))
      out.updatedState[stateArgs.at(s.getInt())] = t;
    else if (auto o = f.getResultAttrOfType<StringAttr>(r, tg::kTrainOutputAttr))
      out.trainOutputs[o.str()] = t;
    else if (auto o = f.getResultAttrOfType<StringAttr>(r, tg::kOutputAttr))
      out.outputs[o.str()] = t;
    else
      ADD_FAILURE() << "result " << r << " has no role";
  }
  return out;
}

// |a - b| <= tol * max(1, |b|) elementwise, with the first mismatch shown.
void expectClose(const Tensor &actual, const Tensor &expected, double tol,
                 const std::string &what) {
  ASSERT_EQ(actual.shape, expected.shape) << what;
  for (size_t i = 0; i < actual.data.size(); ++i) {
    double scale = std::max(1.0, std::fabs(expected.data[i]));
    ASSERT_LE(std::fabs(actual.data[i] - expected.data[i]), tol * scale)
        << what << ", element " << i << ": " << actual.data[i] << " vs "
        << expected.data[i];
  }
}

double sumOfSquares(const std::map<int64_t, Tensor> &grads) {
  double s = 0;
  for (auto &[p, g] : grads)
    for (double x : g.data)
      s += x * x;
  return s;
}

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
  model::Model mlp = models::buildMlp(options);
  for (model::Parameter &p : *mlp.mutable_params())
    p.set_dtype(model::F64);
  for (model::Input &in : *mlp.mutable_inputs())
    if (in.dtype() == model::F32)
      in.set_dtype(model::F64);
  if (recipe)
    recipe(mlp);
  return importModel(mlp, ctx);
}

// Random parameters and inputs for `f` (a @forward or @train_step).
StepValues randomValues(func::FuncOp f, std::mt19937_64 &rng) {
  std::vector<Tensor> random = randomArguments(f, rng, /*numClasses=*/3);
  StepValues v;
  for (unsigned i = 0; i < f.getNumArguments(); ++i) {
    if (f.getArgAttr(i, tg::kParamAttr))
      v.params.push_back(random[i]);
    else if (auto in = f.getArgAttrOfType<StringAttr>(i, tg::kInputAttr))
      v.inputs[in.str()] = random[i];
  }
  return v;
}

// Marks parameter `index` of every function of `module` no_weight_decay.
void setNoWeightDecay(ModuleOp module, int64_t index) {
  Builder b(module.getContext());
  module.walk([&](func::FuncOp f) {
    int64_t p = 0;
    for (unsigned i = 0; i < f.getNumArguments(); ++i) {
      auto info = tg::ParamInfo::fromAttr(f.getArgAttr(i, tg::kParamAttr));
      if (!info)
        continue;
      if (p++ == index) {
        info->noWeightDecay = true;
        f.setArgAttr(i, tg::kParamAttr, info->toAttr(b));
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
  module->setAttr(tg::kOptimizerAttr, b.getDictionaryAttr(fields));
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

//===----------------------------------------------------------------------===//
// Optimizers
//===----------------------------------------------------------------------===//

TEST(AdamWUpdate, MatchesTorchAdamWForSeveralSteps) {
  uint64_t seed = testSeed();
  SCOPED_TRACE(seedMessage(seed));
  auto ctx = makeContext();
  OwningOpRef<ModuleOp> grads = buildSmallModel(*ctx);
  OwningOpRef<ModuleOp> adam = buildSmallModel(*ctx);
  ASSERT_TRUE(grads && adam);
  AdamWConfig c;
  Builder b(ctx.get());
  setOptimizer(*adam, {b.getNamedAttr("kind", b.getStringAttr("adamw")),
                       b.getNamedAttr("learning_rate", b.getF64FloatAttr(0.01)),
                       b.getNamedAttr("beta1", b.getF64FloatAttr(c.beta1)),
                       b.getNamedAttr("beta2", b.getF64FloatAttr(c.beta2)),
                       b.getNamedAttr("eps", b.getF64FloatAttr(c.eps)),
                       b.getNamedAttr("weight_decay",
                                      b.getF64FloatAttr(c.weightDecay))});
  ASSERT_TRUE(succeeded(runPasses(*grads, {Pass::Autodiff})));
  ASSERT_TRUE(succeeded(runPasses(*adam, {Pass::Autodiff, Pass::AdamW})));

  std::mt19937_64 rng(seed);
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
    EXPECT_DOUBLE_EQ(updated.loss, gradients.loss);

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

TEST(SgdUpdate, MomentumAndWeightDecayMatchTorchSgd) {
  uint64_t seed = testSeed();
  SCOPED_TRACE(seedMessage(seed));
  auto ctx = makeContext();
  for (double momentum : {0.0, 0.9}) {
    SCOPED_TRACE("momentum " + std::to_string(momentum));
    const double weightDecay = 0.05;
    OwningOpRef<ModuleOp> grads = buildSmallModel(*ctx);
    OwningOpRef<ModuleOp> sgd = buildSmallModel(*ctx);
    ASSERT_TRUE(grads && sgd);
    Builder b(ctx.get());
    setOptimizer(*sgd,
                 {b.getNamedAttr("kind", b.getStringAttr("sgd")),
                  b.getNamedAttr("learning_rate", b.getF64FloatAttr(0.01)),
                  b.getNamedAttr("momentum", b.getF64FloatAttr(momentum)),
                  b.getNamedAttr("weight_decay", b.getF64FloatAttr(weightDecay))});
    ASSERT_TRUE(succeeded(runPasses(*grads, {Pass::Autodiff})));
    ASSERT_TRUE(succeeded(runPasses(*sgd, {Pass::Autodiff, Pass::Sgd})));

    std::mt19937_64 rng(seed);
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

TEST(ClipGradNorm, ScalesLikeTorchAboveAndBelowTheThreshold) {
  uint64_t seed = testSeed();
  SCOPED_TRACE(seedMessage(seed));
  auto ctx = makeContext();
  OwningOpRef<ModuleOp> grads = buildSmallModel(*ctx);
  ASSERT_TRUE(grads);
  ASSERT_TRUE(succeeded(runPasses(*grads, {Pass::Autodiff})));
  std::mt19937_64 rng(seed);
  StepValues values = randomValues(trainStep(*grads), rng);
  StepResults plain = runStep(trainStep(*grads), values);
  double norm = std::sqrt(sumOfSquares(plain.grads));
  ASSERT_GT(norm, 1e-3);

  // A threshold of half the norm clips; one of twice the norm does not.
  for (double maxNorm : {0.5 * norm, 2.0 * norm}) {
    SCOPED_TRACE("max_norm " + std::to_string(maxNorm) + ", norm " +
                 std::to_string(norm));
    OwningOpRef<ModuleOp> clipped = buildSmallModel(*ctx);
    ASSERT_TRUE(clipped);
    Builder b(ctx.get());
    (*clipped)->setAttr(tg::kGradClipAttr, b.getF64FloatAttr(maxNorm));
    ASSERT_TRUE(succeeded(runPasses(*clipped, {Pass::Autodiff, Pass::Clip})));
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

TEST(AccumulateMicroBatches, KMicroBatchesEqualOneBigBatch) {
  uint64_t seed = testSeed();
  SCOPED_TRACE(seedMessage(seed));
  auto ctx = makeContext();
  const int64_t k = 3, batch = 4;
  OwningOpRef<ModuleOp> big = importMlp(*ctx, k * batch);
  OwningOpRef<ModuleOp> micro = importMlp(*ctx, batch, [&](model::Model &m) {
    m.mutable_training()->set_micro_batches(k);
  });
  ASSERT_TRUE(big && micro);
  ASSERT_TRUE(succeeded(runPasses(*big, {Pass::Autodiff})));
  ASSERT_TRUE(succeeded(runPasses(*micro, {Pass::Autodiff, Pass::Accumulate})));

  // Both steps now take K*B rows.
  EXPECT_EQ(trainStep(*micro).getArgumentTypes(),
            trainStep(*big).getArgumentTypes());
  EXPECT_EQ(forwardFunc(*micro).getFunctionType(),
            forwardFunc(*big).getFunctionType());

  std::mt19937_64 rng(seed);
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
  OwningOpRef<ModuleOp> single = importMlp(*ctx, batch);
  ASSERT_TRUE(single && succeeded(runPasses(*single, {Pass::Autodiff})));
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

TEST(EmitGradients, ReturnsEachGradientByName) {
  uint64_t seed = testSeed();
  SCOPED_TRACE(seedMessage(seed));
  auto ctx = makeContext();
  OwningOpRef<ModuleOp> grads = importMlp(*ctx, 4);
  OwningOpRef<ModuleOp> emitted = importMlp(*ctx, 4);
  ASSERT_TRUE(grads && emitted);
  ASSERT_TRUE(succeeded(runPasses(*grads, {Pass::Autodiff})));
  ASSERT_TRUE(
      succeeded(runPasses(*emitted, {Pass::Autodiff, Pass::EmitGradients})));
  std::mt19937_64 rng(seed);
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
TEST(TrainingRecipe, AccumulateClipAdamWInPipelineOrder) {
  uint64_t seed = testSeed();
  SCOPED_TRACE(seedMessage(seed));
  auto ctx = makeContext();
  const int64_t k = 2, batch = 3;
  AdamWConfig c;
  c.beta1 = 0.8;
  c.beta2 = 0.99;
  c.weightDecay = 0.01;
  OwningOpRef<ModuleOp> big = importMlp(*ctx, k * batch);
  OwningOpRef<ModuleOp> recipe = importMlp(*ctx, batch, [&](model::Model &m) {
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
  ASSERT_TRUE(succeeded(runPasses(*big, {Pass::Autodiff})));
  ASSERT_TRUE(succeeded(runPasses(*recipe, {Pass::Autodiff, Pass::Accumulate,
                                            Pass::Clip, Pass::Sgd,
                                            Pass::AdamW})));

  std::mt19937_64 rng(seed);
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

// models::ModelBuilder's recipe helpers write what the importer turns into
// the module attributes the passes read.
TEST(TrainingRecipe, ModelBuilderRecipeReachesTheModuleAttributes) {
  auto ctx = makeContext();
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
  OwningOpRef<ModuleOp> module = importModel(b.model(), *ctx);
  ASSERT_TRUE(module);

  auto opt = (*module)->getAttrOfType<DictionaryAttr>(tg::kOptimizerAttr);
  ASSERT_TRUE(opt);
  EXPECT_EQ(opt.getAs<StringAttr>("kind").getValue(), "adamw");
  EXPECT_EQ(opt.getAs<FloatAttr>("learning_rate").getValueAsDouble(), 0.002);
  EXPECT_EQ(opt.getAs<FloatAttr>("beta1").getValueAsDouble(), 0.9);
  EXPECT_EQ(opt.getAs<FloatAttr>("beta2").getValueAsDouble(), 0.95);
  EXPECT_EQ(opt.getAs<FloatAttr>("eps").getValueAsDouble(), 1e-8);
  EXPECT_EQ(opt.getAs<FloatAttr>("weight_decay").getValueAsDouble(), 0.1);
  auto schedule = (*module)->getAttrOfType<DictionaryAttr>(tg::kLrScheduleAttr);
  ASSERT_TRUE(schedule);
  EXPECT_EQ(schedule.getAs<StringAttr>("kind").getValue(), "warmup_cosine");
  EXPECT_EQ(schedule.getAs<IntegerAttr>("warmup_steps").getInt(), 10);
  EXPECT_EQ(schedule.getAs<IntegerAttr>("decay_steps").getInt(), 100);
  EXPECT_EQ(schedule.getAs<FloatAttr>("min_lr").getValueAsDouble(), 0.0002);
  EXPECT_EQ((*module)->getAttrOfType<FloatAttr>(tg::kGradClipAttr).getValueAsDouble(), 0.5);
  EXPECT_EQ((*module)->getAttrOfType<IntegerAttr>(tg::kMicroBatchesAttr).getInt(), 3);
  func::FuncOp forward = forwardFunc(*module);
  auto wInfo = tg::ParamInfo::fromAttr(forward.getArgAttr(0, tg::kParamAttr));
  auto bInfo = tg::ParamInfo::fromAttr(forward.getArgAttr(1, tg::kParamAttr));
  ASSERT_TRUE(wInfo && bInfo);
  EXPECT_FALSE(wInfo->noWeightDecay);
  EXPECT_TRUE(bInfo->noWeightDecay);

  // sgd(...) with momentum and weight decay, and a constant schedule.
  models::ModelBuilder s("sgd");
  std::string v = s.param("v", {2}, model::Initializer::ONES);
  s.sgd(s.node("sum", "l", {v}), 0.1, 0.9, 0.01);
  OwningOpRef<ModuleOp> sgd = importModel(s.model(), *ctx);
  ASSERT_TRUE(sgd);
  auto sgdOpt = (*sgd)->getAttrOfType<DictionaryAttr>(tg::kOptimizerAttr);
  EXPECT_EQ(sgdOpt.getAs<FloatAttr>("momentum").getValueAsDouble(), 0.9);
  EXPECT_EQ(sgdOpt.getAs<FloatAttr>("weight_decay").getValueAsDouble(), 0.01);
  EXPECT_FALSE((*sgd)->hasAttr(tg::kLrScheduleAttr));
  EXPECT_FALSE((*sgd)->hasAttr(tg::kGradClipAttr));
  EXPECT_FALSE((*sgd)->hasAttr(tg::kMicroBatchesAttr));
}

//===----------------------------------------------------------------------===//
// Scalar bodies of the update ops (what the generated kernels compute)
//===----------------------------------------------------------------------===//

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

class UpdateScalarBodyTest : public ::testing::TestWithParam<UpdateCase> {};

// Each result of the op's scalar body, at every position, against the
// reference interpreter on fresh random operands: exact up to rounding in f64,
// to f32 rounding in f32.
TEST_P(UpdateScalarBodyTest, AgreesWithTheInterpreter) {
  const UpdateCase &c = GetParam();
  uint64_t seed = testSeed();
  SCOPED_TRACE(seedMessage(seed));
  auto ctx = makeContext();
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(c.source, ctx.get());
  ASSERT_TRUE(module);
  auto f = module->lookupSymbol<func::FuncOp>("f");
  auto target = cast<tg::ScalarOpInterface>(&f.getBody().front().front());

  std::mt19937_64 rng(seed);
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

  OpBuilder b(ctx.get());
  SmallVector<Type> scalarTypes, resultTypes;
  for (Value v : target->getOperands())
    scalarTypes.push_back(cast<RankedTensorType>(v.getType()).getElementType());
  scalarTypes.push_back(b.getI64Type());
  for (Value r : target->getResults())
    resultTypes.push_back(cast<RankedTensorType>(r.getType()).getElementType());
  auto scalarFn = func::FuncOp::create(target->getLoc(), "scalar",
                                       b.getFunctionType(scalarTypes, resultTypes));
  module->push_back(scalarFn);
  Block *entry = scalarFn.addEntryBlock();
  b.setInsertionPointToStart(entry);
  SmallVector<Value> results;
  ASSERT_TRUE(succeeded(target.buildScalar(b, target->getLoc(),
                                           entry->getArguments().drop_back(),
                                           entry->getArguments().back(),
                                           results)));
  ASSERT_EQ(results.size(), target->getNumResults());
  func::ReturnOp::create(b, target->getLoc(), results);
  ASSERT_TRUE(succeeded(verify(scalarFn)));

  double tol = resultTypes[0].isF32() ? 2e-6 : 1e-13;
  int64_t n = (*expected)[0].numElements();
  for (int64_t i = 0; i < n; ++i) {
    std::vector<double> in;
    for (Value v : target->getOperands()) {
      const Tensor &t = args[cast<BlockArgument>(v).getArgNumber()];
      in.push_back(t.data[t.data.size() == 1 ? 0 : i]); // scalars broadcast
    }
    in.push_back(static_cast<double>(i));
    auto got = evalScalarBody(scalarFn, in);
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
           "func.func @f(%p: " + p + ", %g: " + p + ", %m: " + p + ", %v: " + p +
               ", %lr: tensor<f32>, %s: tensor<i64>) -> (" + p + ", " + p + ", " +
               p + ") {\n  %0:3 = tg.adamw_update %p, %g, %m, %v, %lr, %s "
               "{beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-8 : f64, "
               "weight_decay = " + wd + " : f64} : " + p +
               ", tensor<f32>\n  return %0#0, %0#1, %0#2 : " + p + ", " + p +
               ", " + p + "\n}"});
      cases.push_back(
          {"momentum" + suffix,
           "func.func @f(%p: " + p + ", %g: " + p + ", %buf: " + p +
               ", %lr: tensor<f32>) -> (" + p + ", " + p +
               ") {\n  %0:2 = tg.momentum_update %p, %g, %buf, %lr "
               "{momentum = 0.9 : f64, weight_decay = " + wd + " : f64} : " + p +
               ", tensor<f32>\n  return %0#0, %0#1 : " + p + ", " + p + "\n}"});
      cases.push_back(
          {"sgd" + suffix,
           "func.func @f(%p: " + p + ", %g: " + p + ", %lr: tensor<f32>) -> " + p +
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
