// The whole pipeline against the float64 reference: a model is compiled by
// the real `tcc` into a step.so, run on fresh random parameters and inputs,
// and its loss, eval outputs and SGD-updated parameters are compared with
// the reference interpreter running the same model's tg functions.
//
// This is the check of every CPU kernel family (gemm in all four transpose
// combinations, broadcasting elementwise, reductions, views, fills, softmax
// cross-entropy and its gradient, sgd_update): workspace and outputs are
// poisoned with NaN first, so a kernel that reads memory nobody wrote fails.
#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "compiler/interpreter/TgInterpreter.h"
#include "compiler/pipeline/Pipeline.h"
#include "dialects/tg/TgDialect.h"
#include "dialects/tg/TgModelAttrs.h"
#include "frontend/importer/Importer.h"
#include "frontend/io/ModelFile.h"
#include "gtest/gtest.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "models/ModelBuilder.h"
#include "runtime/trun/AlignedBuffer.h"
#include "runtime/trun/StepLibrary.h"

namespace tcc {
namespace {

using interp::Tensor;

// Covers what the MLP does not: both transpose flags in the forward pass
// (so the backward pass needs all four gemm variants), mul with a broadcast
// parameter, reshape views, a keep_dims mean broadcast back, fan-out, sum.
constexpr const char *kTransposeModel = R"pb(
schema_version: 1
name: "transposes"
params { name: "p" dtype: F32 shape { dims: 7 dims: 3 } init { kind: NORMAL scale: 0.5 seed: 1 } }
params { name: "q" dtype: F32 shape { dims: 3 dims: 4 } init { kind: NORMAL scale: 0.5 seed: 2 } }
params { name: "s" dtype: F32 shape { dims: 4 } init { kind: UNIFORM scale: 1 seed: 3 } }
inputs { name: "x" dtype: F32 shape { dims: 5 dims: 7 } }
inputs { name: "y" dtype: I32 shape { dims: 5 } }
nodes { name: "h" op: "matmul" inputs: "p" inputs: "x" outputs: "h"
        attrs { key: "transpose_a" value { b: true } } attrs { key: "transpose_b" value { b: true } } }
nodes { name: "z" op: "matmul" inputs: "h" inputs: "q" outputs: "z"
        attrs { key: "transpose_a" value { b: true } } }
nodes { name: "zs" op: "mul" inputs: "z" inputs: "s" outputs: "zs" }
nodes { name: "flat" op: "reshape" inputs: "zs" outputs: "flat" attrs { key: "shape" value { ints { values: 20 } } } }
nodes { name: "back" op: "reshape" inputs: "flat" outputs: "back" attrs { key: "shape" value { ints { values: 5 values: 4 } } } }
nodes { name: "r" op: "relu" inputs: "back" outputs: "r" }
nodes { name: "sum" op: "add" inputs: "r" inputs: "zs" outputs: "sum" }
nodes { name: "m" op: "mean" inputs: "sum" outputs: "m"
        attrs { key: "axes" value { ints { values: 1 } } } attrs { key: "keep_dims" value { b: true } } }
nodes { name: "logits" op: "add" inputs: "sum" inputs: "m" outputs: "logits" }
nodes { name: "xent" op: "softmax_cross_entropy" inputs: "logits" inputs: "y" outputs: "xent" }
nodes { name: "loss" op: "sum" inputs: "xent" outputs: "loss" }
outputs { name: "logits" value: "logits" }
training { loss: "loss" optimizer { sgd { learning_rate: 0.25 } } }
)pb";

std::string compileWithTcc(const model::Model &m, const std::string &name) {
  std::string dir = ::testing::TempDir();
  std::string model = dir + "/" + name + ".pbtxt", lib = dir + "/" + name + ".so";
  EXPECT_TRUE(WriteModelFile(m, model).ok());
  std::string cmd = std::string(TCC_BINARY) + " compile " + model + " -o " + lib;
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return lib;
}

// Reference results: @forward and @train_step (after tg-sgd-update) of the
// same model, evaluated by the interpreter in float64.
struct Reference {
  mlir::MLIRContext ctx;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  explicit Reference(const model::Model &m) {
    module = importModel(m, ctx);
    mlir::PassManager pm(&ctx);
    buildPipeline(pm, Phase::Training);
    if (module && mlir::failed(pm.run(*module)))
      module = nullptr;
  }
  std::vector<Tensor> run(llvm::StringRef fn, const std::vector<Tensor> &args) {
    auto f = module->lookupSymbol<mlir::func::FuncOp>(fn);
    auto out = interp::interpret(f, args);
    EXPECT_TRUE(mlir::succeeded(out));
    return mlir::succeeded(out) ? *out : std::vector<Tensor>{};
  }
};

double relativeError(const std::vector<double> &got, const std::vector<double> &want) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
  }
  return std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30);
}

std::vector<double> toDoubles(const float *p, int64_t n) {
  return std::vector<double>(p, p + n);
}

void checkModel(const model::Model &m, const std::string &name, int classes) {
  unsigned seed = std::random_device{}();
  SCOPED_TRACE("model " + name + ", seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);

  auto lib = trun::StepLibrary::Open(compileWithTcc(m, name));
  ASSERT_TRUE(lib.ok()) << lib.status();
  const tcc_step_descriptor &d = (*lib)->descriptor();
  Reference ref(m);
  ASSERT_TRUE(ref.module);

  // Fresh random parameters and inputs (f32 everywhere but integer labels).
  std::vector<trun::AlignedBuffer> params, inputs;
  std::vector<Tensor> refArgs;
  auto addTensor = [&](const tcc_tensor_desc &t, std::vector<trun::AlignedBuffer> &into) {
    into.emplace_back(t.size_bytes);
    Tensor ref{std::vector<int64_t>(t.shape, t.shape + t.rank), {}};
    for (int64_t i = 0; i < t.num_elements; ++i) {
      if (t.dtype == TCC_DTYPE_I32) {
        int32_t label = static_cast<int32_t>(rng() % classes);
        into.back().as<int32_t>()[i] = label;
        ref.data.push_back(label);
      } else {
        float v = normal(rng);
        into.back().as<float>()[i] = v;
        ref.data.push_back(v); // the reference starts from the same f32 values
      }
    }
    refArgs.push_back(ref);
  };
  for (int i = 0; i < d.num_params; ++i)
    addTensor(d.params[i], params);
  for (int i = 0; i < d.num_inputs; ++i)
    addTensor(d.inputs[i], inputs);

  const float kNaN = std::numeric_limits<float>::quiet_NaN();
  trun::AlignedBuffer workspace(d.workspace_bytes);
  auto poison = [&](trun::AlignedBuffer &b) {
    for (size_t i = 0; i < b.size() / sizeof(float); ++i)
      b.as<float>()[i] = kNaN;
  };
  std::vector<void *> paramPtrs;
  std::vector<const void *> inputPtrs;
  for (auto &b : params)
    paramPtrs.push_back(b.data());
  for (auto &b : inputs)
    inputPtrs.push_back(b.data());

  // Eval: loss and every output.
  std::vector<trun::AlignedBuffer> outputs;
  std::vector<void *> outputPtrs;
  for (int i = 0; i < d.num_outputs; ++i) {
    outputs.emplace_back(d.outputs[i].size_bytes);
    poison(outputs.back());
    outputPtrs.push_back(outputs.back().data());
  }
  poison(workspace);
  float loss = kNaN;
  tcc_step_args args{};
  args.params = paramPtrs.data();
  args.inputs = inputPtrs.data();
  args.outputs = outputPtrs.data();
  args.workspace = workspace.data();
  args.loss = &loss;
  ASSERT_EQ(d.eval(&args), TCC_STATUS_OK);
  std::vector<Tensor> evalRef = ref.run(tg::kForwardFunc, refArgs);
  ASSERT_EQ(evalRef.size(), 1u + d.num_outputs);
  EXPECT_NEAR(loss, evalRef[0].data[0], 1e-4 * std::max(1.0, std::abs(evalRef[0].data[0])));
  for (int i = 0; i < d.num_outputs; ++i)
    EXPECT_LT(relativeError(toDoubles(outputs[i].as<float>(), d.outputs[i].num_elements),
                            evalRef[1 + i].data),
              1e-5)
        << "output " << d.outputs[i].name;

  // Train: one SGD step; compare the parameter *changes* (lr * grad).
  const float lr = 0.125f;
  std::vector<Tensor> trainArgs = refArgs;
  trainArgs.push_back(Tensor::scalar(lr));
  std::vector<Tensor> trainRef = ref.run(tg::kTrainStepFunc, trainArgs);
  ASSERT_EQ(trainRef.size(), 1u + d.num_params);
  poison(workspace);
  loss = kNaN;
  args.outputs = nullptr;
  args.learning_rate = lr;
  ASSERT_EQ(d.train(&args), TCC_STATUS_OK);
  EXPECT_NEAR(loss, trainRef[0].data[0], 1e-4 * std::max(1.0, std::abs(trainRef[0].data[0])));
  for (int i = 0; i < d.num_params; ++i) {
    std::vector<double> got, want;
    for (int64_t k = 0; k < d.params[i].num_elements; ++k) {
      got.push_back(params[i].as<float>()[k] - refArgs[i].data[k]);
      want.push_back(trainRef[1 + i].data[k] - refArgs[i].data[k]);
    }
    EXPECT_LT(relativeError(got, want), 1e-4) << "update of " << d.params[i].name;
  }
}

TEST(CompiledStep, MlpMatchesReference) {
  models::MlpOptions o;
  o.batch = 5; // sizes that divide nothing
  o.inputs = 13;
  o.hidden = {11, 7};
  o.classes = 3;
  checkModel(models::buildMlp(o), "mlp_5_13_11_7_3", o.classes);
}

TEST(CompiledStep, LinearModelMatchesReference) {
  models::MlpOptions o;
  o.batch = 1;
  o.inputs = 9;
  o.hidden = {};
  o.classes = 6;
  checkModel(models::buildMlp(o), "linear_1_9_6", o.classes);
}

TEST(CompiledStep, TransposesViewsAndBroadcastsMatchReference) {
  absl::StatusOr<model::Model> m = ParseModelText(kTransposeModel, "transposes");
  ASSERT_TRUE(m.ok()) << m.status();
  checkModel(*m, "transposes", 4);
}

TEST(CompiledStep, LabelOutOfRangeFailsTheStep) {
  models::MlpOptions o;
  o.batch = 2;
  o.inputs = 3;
  o.hidden = {};
  o.classes = 2;
  auto lib = trun::StepLibrary::Open(compileWithTcc(models::buildMlp(o), "badlabel"));
  ASSERT_TRUE(lib.ok()) << lib.status();
  const tcc_step_descriptor &d = (*lib)->descriptor();
  std::vector<trun::AlignedBuffer> params;
  std::vector<void *> paramPtrs;
  for (int i = 0; i < d.num_params; ++i) {
    params.emplace_back(d.params[i].size_bytes);
    paramPtrs.push_back(params.back().data());
  }
  trun::AlignedBuffer x(d.inputs[0].size_bytes), y(d.inputs[1].size_bytes),
      ws(d.workspace_bytes);
  y.as<int32_t>()[1] = 2; // classes are 0 and 1
  const void *inputs[] = {x.data(), y.data()};
  float loss = 0;
  tcc_step_args args{};
  args.params = paramPtrs.data();
  args.inputs = inputs;
  args.workspace = ws.data();
  args.loss = &loss;
  args.learning_rate = 0.1f;
  EXPECT_EQ(d.train(&args), TCC_STATUS_BAD_ARGS);
  EXPECT_EQ(d.eval(&args), TCC_STATUS_BAD_ARGS);
}

} // namespace
} // namespace tcc
