#include "tests/gradcheck/TrainingSteps.h"

#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>

#include "dialects/tg/TgDialect.h"
#include "dialects/common/ModelAttrs.h"
#include "frontend/importer/Importer.h"
#include "mlir/Pass/PassManager.h"
#include "passes/Passes.h"

using namespace mlir;

namespace tcc::gradcheck {

LogicalResult runRecipePasses(ModuleOp module,
                              std::initializer_list<RecipePass> passes) {
  PassManager pm(module.getContext());
  for (RecipePass p : passes) {
    switch (p) {
    case RecipePass::Autodiff:
      pm.addPass(createTgAutodiff());
      break;
    case RecipePass::Accumulate:
      pm.addPass(createTgAccumulateMicroBatches());
      break;
    case RecipePass::Clip:
      pm.addPass(createTgClipGradNorm());
      break;
    case RecipePass::Sgd:
      pm.addPass(createTgSgdUpdate());
      break;
    case RecipePass::AdamW:
      pm.addPass(createTgAdamWUpdate());
      break;
    case RecipePass::EmitGradients:
      pm.addPass(createTgEmitGradients());
      break;
    case RecipePass::UnscaleGradients:
      pm.addPass(createTgUnscaleGradients());
      break;
    case RecipePass::UpdateLossScale:
      pm.addPass(createTgUpdateLossScale());
      break;
    case RecipePass::AllReduce:
      pm.addPass(createTgAllReduceGradients());
      break;
    case RecipePass::AmpBf16:
      pm.addPass(createTgAmp(TgAmpOptions{"bf16"}));
      break;
    }
  }
  return pm.run(module);
}

func::FuncOp trainStep(ModuleOp m) {
  return m.lookupSymbol<func::FuncOp>(model::kTrainStepFunc);
}
func::FuncOp forwardFunc(ModuleOp m) {
  return m.lookupSymbol<func::FuncOp>(model::kForwardFunc);
}

// Binds `values` to `f`'s arguments by their attributes, interprets `f`
// and sorts its results by their attributes.
StepResults runStep(func::FuncOp f, const StepValues &values) {
  StepResults out;
  std::vector<Tensor> args;
  std::vector<StateKey> stateArgs; // index among tg.opt_state arguments
  int64_t param = 0;
  for (unsigned i = 0; i < f.getNumArguments(); ++i) {
    auto type = cast<RankedTensorType>(f.getArgument(i).getType());
    if (f.getArgAttr(i, model::kParamAttr)) {
      args.push_back(values.params.at(param++));
    } else if (auto in = f.getArgAttrOfType<StringAttr>(i, model::kInputAttr)) {
      args.push_back(values.inputs.at(in.str()));
    } else if (auto h = f.getArgAttrOfType<StringAttr>(i, model::kHyperAttr)) {
      if (h.getValue() == model::kLearningRateHyper)
        args.push_back(Tensor::scalar(values.learningRate));
      else if (h.getValue() == model::kStepHyper)
        args.push_back(Tensor::scalar(static_cast<double>(values.step)));
      else
        ADD_FAILURE() << "unexpected hyper-parameter " << h.str();
    } else if (auto s =
                   f.getArgAttrOfType<DictionaryAttr>(i, model::kOptStateAttr)) {
      auto param = s.getAs<IntegerAttr>("param");
      StateKey key{param ? param.getInt() : kStepState,
                   s.getAs<StringAttr>("name").str()};
      stateArgs.push_back(key);
      Tensor start = Tensor::zeros(type.getShape());
      if (auto init = s.getAs<FloatAttr>("init_value"))
        start.data.assign(start.data.size(), init.getValueAsDouble());
      auto it = values.state.find(key);
      args.push_back(it != values.state.end() ? it->second : start);
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
    if (f.getResultAttr(r, model::kLossAttr))
      out.loss = t.data.at(0);
    else if (auto g = f.getResultAttrOfType<IntegerAttr>(r, model::kGradOfAttr))
      out.grads[g.getInt()] = t;
    else if (auto p =
                 f.getResultAttrOfType<IntegerAttr>(r, model::kUpdatesParamAttr))
      out.updatedParams[p.getInt()] = t;
    else if (auto s = f.getResultAttrOfType<IntegerAttr>(
                 r, model::kUpdatesOptStateAttr))
      out.updatedState[stateArgs.at(s.getInt())] = t;
    else if (auto o =
                 f.getResultAttrOfType<StringAttr>(r, model::kTrainOutputAttr))
      out.trainOutputs[o.str()] = t;
    else if (auto o = f.getResultAttrOfType<StringAttr>(r, model::kOutputAttr))
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

// Random parameters and inputs for `f` (a @forward or @train_step).
StepValues randomValues(func::FuncOp f, std::mt19937_64 &rng) {
  std::vector<Tensor> random = randomArguments(f, rng, /*numClasses=*/3);
  StepValues v;
  for (unsigned i = 0; i < f.getNumArguments(); ++i) {
    if (f.getArgAttr(i, model::kParamAttr))
      v.params.push_back(random[i]);
    else if (auto in = f.getArgAttrOfType<StringAttr>(i, model::kInputAttr))
      v.inputs[in.str()] = random[i];
  }
  return v;
}

OwningOpRef<ModuleOp>
importMlpF64(MLIRContext &ctx, const models::MlpOptions &options,
             const std::function<void(model::Model &)> &recipe) {
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

} // namespace tcc::gradcheck
