// The whole pipeline against the float64 reference: a model is compiled by
// the real `tcc` into a step.so (or, for tg IR the importer cannot express,
// by the same pipeline in process), run on fresh random parameters, inputs
// and optimizer state, and its loss, eval outputs, train outputs, updated
// parameters and updated optimizer state are compared with the reference
// interpreter running the same model's tg functions.
//
// This is the check of every CPU kernel family: gemm (all transpose
// combinations, batched, broadcast batch, shared rank-2 rhs), generic
// elementwise bodies (every op of the vocabulary, broadcasting, fused
// chains, i1 masks, bf16/f16 casts, counter-based dropout), reductions
// (sum, mean, max over leading, middle and trailing axes), transpose,
// slice, concat, gather / scatter_add (repeated ids), dense and splat
// constants, softmax cross-entropy, and the in-place SGD / momentum / AdamW
// updates with clipping. Workspace, outputs and train outputs are poisoned
// with NaN first, so a kernel that reads memory nobody wrote fails. Sizes
// divide no vector width.
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "compiler/codegen/cpu/CpuCodegen.h"
#include "compiler/driver/HostCompiler.h"
#include "compiler/interpreter/TgInterpreter.h"
#include "compiler/pipeline/Pipeline.h"
#include "dialects/common/ModelAttrs.h"
#include "dialects/kern/KernDialect.h"
#include "dialects/tg/TgDialect.h"
#include "frontend/importer/Importer.h"
#include "frontend/io/ModelFile.h"
#include "gtest/gtest.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FileSystem.h"
#include <unistd.h>
#include "models/Gpt.h"
#include "models/ModelBuilder.h"
#include "runtime/trun/base/AlignedBuffer.h"
#include "runtime/trun/step/StepLibrary.h"

namespace tcc {
namespace {

using interp::Tensor;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// A directory of this process's own: other test binaries use the same
// temporary directory and sometimes the same model names.
std::string workDir() {
  static const std::string dir = [] {
    std::string d = ::testing::TempDir() + "/tcc-codegen-" + std::to_string(getpid());
    llvm::sys::fs::create_directories(d);
    return d;
  }();
  return dir;
}

// Compiles once per process and name (tests share the tiny GPT).
std::string compileWithTcc(const model::Model &m, const std::string &name) {
  static std::map<std::string, std::string> compiled; // name -> model text
  std::string dir = workDir();
  std::string model = dir + "/" + name + ".pbtxt", lib = dir + "/" + name + ".so";
  std::string text = m.DebugString();
  auto it = compiled.find(name);
  if (it != compiled.end() && it->second == text)
    return lib;
  compiled[name] = text;
  EXPECT_TRUE(WriteModelFile(m, model).ok());
  std::string cmd = std::string(TCC_BINARY) + " compile --target cpu " + model + " -o " + lib;
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return lib;
}

void loadDialects(mlir::MLIRContext &ctx) {
  ctx.loadDialect<tg::TgDialect, kern::KernDialect, mlir::func::FuncDialect>();
}

// The model under test: the compiled library and the reference module
// (@forward and @train_step after the training passes, on tensors).
struct StepUnderTest {
  std::unique_ptr<trun::StepLibrary> lib;
  mlir::MLIRContext ctx;
  mlir::OwningOpRef<mlir::ModuleOp> module;

  bool ok() const { return lib && module; }

  std::vector<Tensor> run(llvm::StringRef fn, const std::vector<Tensor> &args) {
    auto f = module->lookupSymbol<mlir::func::FuncOp>(fn);
    auto out = interp::interpret(f, args);
    EXPECT_TRUE(mlir::succeeded(out));
    return mlir::succeeded(out) ? *out : std::vector<Tensor>{};
  }
  mlir::func::FuncOp func(llvm::StringRef fn) {
    return module->lookupSymbol<mlir::func::FuncOp>(fn);
  }
};

void buildReference(StepUnderTest &s) {
  mlir::PassManager pm(&s.ctx);
  buildPipeline(pm, Phase::Training);
  if (s.module && mlir::failed(pm.run(*s.module)))
    s.module = nullptr;
}

// From a model file, through the tcc binary.
std::unique_ptr<StepUnderTest> compileModel(const model::Model &m,
                                            const std::string &name) {
  auto s = std::make_unique<StepUnderTest>();
  loadDialects(s->ctx);
  auto lib = trun::StepLibrary::Open(compileWithTcc(m, name));
  EXPECT_TRUE(lib.ok()) << lib.status();
  if (lib.ok())
    s->lib = std::move(*lib);
  s->module = importModel(m, s->ctx);
  buildReference(*s);
  return s;
}

// From tg IR text (what the importer cannot write, e.g. non-splat
// constants), through the same pipeline and host compiler, in process.
std::unique_ptr<StepUnderTest> compileIR(const std::string &text,
                                         const std::string &name) {
  auto s = std::make_unique<StepUnderTest>();
  loadDialects(s->ctx);
  std::string lib = workDir() + "/" + name + ".so";
  {
    mlir::MLIRContext ctx;
    loadDialects(ctx);
    auto module = mlir::parseSourceString<mlir::ModuleOp>(text, &ctx);
    EXPECT_TRUE(module);
    if (!module)
      return s;
    mlir::PassManager pm(&ctx);
    buildPipeline(pm, Phase::Plan);
    EXPECT_TRUE(mlir::succeeded(pm.run(*module)));
    mlir::FailureOr<GeneratedStep> step = generateCpuStep(*module);
    EXPECT_TRUE(mlir::succeeded(step));
    if (mlir::failed(step))
      return s;
    std::string error;
    EXPECT_TRUE(compileSharedLibrary(step->source, lib, HostCompileOptions{}, error))
        << error;
  }
  auto opened = trun::StepLibrary::Open(lib);
  EXPECT_TRUE(opened.ok()) << opened.status();
  if (opened.ok())
    s->lib = std::move(*opened);
  s->module = mlir::parseSourceString<mlir::ModuleOp>(text, &s->ctx);
  buildReference(*s);
  return s;
}

double relativeError(const std::vector<double> &got, const std::vector<double> &want) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
  }
  if (got.size() != want.size())
    return std::numeric_limits<double>::infinity();
  return std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30);
}

std::vector<double> toDoubles(const trun::AlignedBuffer &b, int64_t n) {
  const float *p = b.as<float>();
  return std::vector<double>(p, p + n);
}

void poison(trun::AlignedBuffer &b) {
  for (size_t i = 0; i < b.size() / sizeof(float); ++i)
    b.as<float>()[i] = kNaN;
}

// Host-side state of one model: every buffer the step reads or writes.
struct Buffers {
  std::vector<trun::AlignedBuffer> params, states, inputs, outputs, trainOutputs;
  trun::AlignedBuffer workspace;
  std::vector<void *> paramPtrs, statePtrs, outputPtrs, trainOutputPtrs;
  std::vector<const void *> inputPtrs;
};

// Zero-filled buffers for every parameter, optimizer state tensor and input
// of `d`, and args bound to them (no eval outputs, no train outputs).
struct ZeroedStepArgs {
  ZeroedStepArgs(const tcc_step_descriptor &d, float learningRate) : workspace(d.workspace_bytes) {
    for (int i = 0; i < d.num_params; ++i)
      paramPtrs.push_back(params.emplace_back(d.params[i].size_bytes).data());
    for (int i = 0; i < d.num_optimizer_state; ++i)
      statePtrs.push_back(states.emplace_back(d.optimizer_state[i].size_bytes).data());
    for (int i = 0; i < d.num_inputs; ++i)
      inputPtrs.push_back(inputs.emplace_back(d.inputs[i].size_bytes).data());
    args.params = paramPtrs.data();
    args.optimizer_state = statePtrs.data();
    args.inputs = inputPtrs.data();
    args.workspace = workspace.data();
    args.loss = &loss;
    args.learning_rate = learningRate;
  }
  ZeroedStepArgs(const ZeroedStepArgs &) = delete; // args points into it

  std::vector<trun::AlignedBuffer> params, states, inputs;
  trun::AlignedBuffer workspace;
  std::vector<void *> paramPtrs, statePtrs;
  std::vector<const void *> inputPtrs;
  float loss = kNaN;
  tcc_step_args args{};
};

// What a test varies besides the model.
struct CheckOptions {
  int steps = 2;                       // train steps checked one after another
  std::map<std::string, int> intRange; // integer input -> values in [0, n)
  int defaultIntRange = 2;
  // Ids repeated on purpose (embedding gradients must accumulate).
  bool repeatIds = true;
  double tolerance = 1e-4;
  float learningRate = 0.125f; // of the first step; halved every step
  // Standard deviation of the random float parameters and inputs.
  float valueScale = 1.0f;
};

// Arguments of `fn` in the reference: each argument's tensor, by its role.
std::vector<Tensor> referenceArgs(mlir::func::FuncOp fn, const Buffers &b,
                                  const tcc_step_descriptor &d, float lr,
                                  int64_t step, uint64_t seed) {
  std::vector<Tensor> args;
  int param = 0, state = 0, input = 0;
  auto fromBuffer = [](const trun::AlignedBuffer &buf, const tcc_tensor_desc &t) {
    Tensor r{std::vector<int64_t>(t.shape, t.shape + t.rank), {}};
    for (int64_t i = 0; i < t.num_elements; ++i) {
      switch (t.dtype) {
      case TCC_DTYPE_I32: r.data.push_back(buf.as<int32_t>()[i]); break;
      case TCC_DTYPE_I64: r.data.push_back(static_cast<double>(buf.as<int64_t>()[i])); break;
      default: r.data.push_back(buf.as<float>()[i]); break;
      }
    }
    return r;
  };
  for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
    if (fn.getArgAttr(i, model::kParamAttr)) {
      args.push_back(fromBuffer(b.params[param], d.params[param]));
      ++param;
    } else if (fn.getArgAttr(i, model::kOptStateAttr)) {
      args.push_back(fromBuffer(b.states[state], d.optimizer_state[state]));
      ++state;
    } else if (fn.getArgAttr(i, model::kInputAttr)) {
      args.push_back(fromBuffer(b.inputs[input], d.inputs[input]));
      ++input;
    } else if (auto h = fn.getArgAttrOfType<mlir::StringAttr>(i, model::kHyperAttr)) {
      if (h.getValue() == model::kLearningRateHyper)
        args.push_back(Tensor::scalar(lr));
      else if (h.getValue() == model::kStepHyper)
        args.push_back(Tensor::scalar(static_cast<double>(step)));
      else
        args.push_back(Tensor::scalar(static_cast<double>(static_cast<int64_t>(seed))));
    } else {
      ADD_FAILURE() << "argument " << i << " of @" << fn.getSymName().str()
                    << " has no role the test knows";
      args.push_back(Tensor{});
    }
  }
  return args;
}

void checkStep(StepUnderTest &s, const std::string &name, const CheckOptions &o) {
  ASSERT_TRUE(s.ok()) << name;
  uint64_t seed = std::random_device{}();
  seed = (seed << 32) ^ std::random_device{}();
  if (const char *replay = std::getenv("TCC_TEST_SEED")) // rerun a failure
    seed = std::strtoull(replay, nullptr, 10);
  SCOPED_TRACE("model " + name + ", seed " + std::to_string(seed) +
               " (rerun with TCC_TEST_SEED=" + std::to_string(seed) + ")");
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  const tcc_step_descriptor &d = s.lib->descriptor();
  Buffers b;

  // Fresh random parameters, optimizer state (the second moment of Adam is
  // non-negative) and inputs.
  auto randomTensor = [&](const tcc_tensor_desc &t, std::vector<trun::AlignedBuffer> &into,
                          bool nonNegative) {
    into.emplace_back(t.size_bytes);
    int range = o.intRange.count(t.name) ? o.intRange.at(t.name) : o.defaultIntRange;
    for (int64_t i = 0; i < t.num_elements; ++i) {
      // Repeated ids: every other id copies an earlier one.
      int64_t id = (o.repeatIds && i % 2 == 1) ? (rng() % i) : i;
      if (t.dtype == TCC_DTYPE_I32)
        into.back().as<int32_t>()[i] =
            id != i ? into.back().as<int32_t>()[id] : static_cast<int32_t>(rng() % range);
      else if (t.dtype == TCC_DTYPE_I64)
        into.back().as<int64_t>()[i] =
            id != i ? into.back().as<int64_t>()[id] : static_cast<int64_t>(rng() % range);
      else
        into.back().as<float>()[i] =
            o.valueScale * (nonNegative ? std::abs(normal(rng)) : normal(rng));
    }
  };
  for (int i = 0; i < d.num_params; ++i)
    randomTensor(d.params[i], b.params, false);
  for (int i = 0; i < d.num_optimizer_state; ++i)
    randomTensor(d.optimizer_state[i], b.states,
                 llvm::StringRef(d.optimizer_state[i].name).ends_with("adam_v"));
  for (int i = 0; i < d.num_inputs; ++i)
    randomTensor(d.inputs[i], b.inputs, false);
  for (auto &x : b.params) b.paramPtrs.push_back(x.data());
  for (auto &x : b.states) b.statePtrs.push_back(x.data());
  for (auto &x : b.inputs) b.inputPtrs.push_back(x.data());
  for (int i = 0; i < d.num_outputs; ++i) {
    b.outputs.emplace_back(d.outputs[i].size_bytes);
    b.outputPtrs.push_back(b.outputs.back().data());
  }
  for (int i = 0; i < d.num_train_outputs; ++i) {
    b.trainOutputs.emplace_back(d.train_outputs[i].size_bytes);
    b.trainOutputPtrs.push_back(b.trainOutputs.back().data());
  }
  b.workspace = trun::AlignedBuffer(d.workspace_bytes);
  // Below 2^53: the interpreter holds integers as doubles.
  uint64_t rngSeed = rng() >> 11;

  // Eval: loss and every output.
  for (auto &x : b.outputs) poison(x);
  poison(b.workspace);
  float loss = kNaN;
  tcc_step_args args{};
  args.params = b.paramPtrs.data();
  args.optimizer_state = b.statePtrs.data();
  args.inputs = b.inputPtrs.data();
  args.outputs = b.outputPtrs.data();
  args.workspace = b.workspace.data();
  args.loss = &loss;
  args.rng_seed = rngSeed;
  ASSERT_EQ(d.eval(&args), TCC_STATUS_OK);
  std::vector<Tensor> evalRef = s.run(
      model::kForwardFunc, referenceArgs(s.func(model::kForwardFunc), b, d, 0, 0, rngSeed));
  ASSERT_EQ(evalRef.size(), 1u + d.num_outputs);
  EXPECT_NEAR(loss, evalRef[0].data[0], o.tolerance * std::max(1.0, std::abs(evalRef[0].data[0])));
  for (int i = 0; i < d.num_outputs; ++i)
    EXPECT_LT(relativeError(toDoubles(b.outputs[i], d.outputs[i].num_elements),
                            evalRef[1 + i].data),
              o.tolerance)
        << "output " << d.outputs[i].name;

  // Train steps, each compared from the compiled state it starts in.
  mlir::func::FuncOp train = s.func(model::kTrainStepFunc);
  for (int step = 0; step < o.steps; ++step) {
    SCOPED_TRACE("train step " + std::to_string(step));
    const float lr = o.learningRate / (step + 1);
    std::vector<Tensor> before = referenceArgs(train, b, d, lr, step, rngSeed);
    std::vector<Tensor> want = s.run(model::kTrainStepFunc, before);
    ASSERT_EQ(want.size(), train.getNumResults());
    poison(b.workspace);
    for (auto &x : b.trainOutputs) poison(x);
    loss = kNaN;
    args.outputs = nullptr;
    args.train_outputs = b.trainOutputPtrs.data();
    args.learning_rate = lr;
    args.step = step;
    ASSERT_EQ(d.train(&args), TCC_STATUS_OK);
    // Where each parameter argument of @train_step sits in `before`.
    std::vector<int> paramArg;
    for (unsigned i = 0; i < train.getNumArguments(); ++i)
      if (train.getArgAttr(i, model::kParamAttr))
        paramArg.push_back(i);
    int checked = 0;
    for (unsigned r = 0; r < train.getNumResults(); ++r) {
      const Tensor &ref = want[r];
      if (train.getResultAttr(r, model::kLossAttr)) {
        EXPECT_NEAR(loss, ref.data[0], o.tolerance * std::max(1.0, std::abs(ref.data[0])));
      } else if (auto p = train.getResultAttrOfType<mlir::IntegerAttr>(r, model::kUpdatesParamAttr)) {
        // The parameter *change*: lr * update, the part that is computed.
        int j = p.getInt();
        const Tensor &old = before[paramArg[j]];
        std::vector<double> got, delta;
        for (int64_t k = 0; k < d.params[j].num_elements; ++k) {
          got.push_back(b.params[j].as<float>()[k] - old.data[k]);
          delta.push_back(ref.data[k] - old.data[k]);
        }
        // The change is measured on f32 parameters, so it carries their
        // rounding (half an ulp of the new value) besides kernel error.
        double diff = 0, norm = 0, rounding = 0;
        for (size_t k = 0; k < got.size(); ++k) {
          diff += (got[k] - delta[k]) * (got[k] - delta[k]);
          norm += delta[k] * delta[k];
          rounding += std::pow(std::ldexp(std::abs(ref.data[k]), -24), 2);
        }
        EXPECT_LE(std::sqrt(diff), o.tolerance * std::sqrt(norm) + 2 * std::sqrt(rounding))
            << "update of " << d.params[j].name;
      } else if (auto j = train.getResultAttrOfType<mlir::IntegerAttr>(r, model::kUpdatesOptStateAttr)) {
        int k = j.getInt();
        EXPECT_LT(relativeError(toDoubles(b.states[k], d.optimizer_state[k].num_elements),
                                ref.data),
                  o.tolerance)
            << "optimizer state " << d.optimizer_state[k].name;
      } else if (auto t = train.getResultAttrOfType<mlir::StringAttr>(r, model::kTrainOutputAttr)) {
        int k = 0;
        while (k < d.num_train_outputs && t.getValue() != d.train_outputs[k].name)
          ++k;
        ASSERT_LT(k, d.num_train_outputs) << "train output " << t.str();
        EXPECT_LT(relativeError(toDoubles(b.trainOutputs[k], d.train_outputs[k].num_elements),
                                ref.data),
                  o.tolerance)
            << "train output " << t.str();
      } else {
        ADD_FAILURE() << "result " << r << " of @train_step has no role the test knows";
      }
      ++checked;
    }
    EXPECT_EQ(checked, static_cast<int>(train.getNumResults()));
  }
}

void checkModel(const model::Model &m, const std::string &name, CheckOptions o = {}) {
  auto s = compileModel(m, name);
  checkStep(*s, name, o);
}

model::Model parse(const char *text, const std::string &name) {
  absl::StatusOr<model::Model> m = ParseModelText(text, name);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *m : model::Model{};
}

//===----------------------------------------------------------------------===//
// MLP-class models (gemm, broadcasting elementwise, reductions, views, SGD)
//===----------------------------------------------------------------------===//

// Both transpose flags in the forward pass (so the backward pass needs all
// four gemm variants), mul with a broadcast parameter, reshape views, a
// keep_dims mean broadcast back, fan-out, sum.
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

TEST(CompiledStep, MlpMatchesReference) {
  models::MlpOptions o;
  o.batch = 5; // sizes that divide nothing
  o.inputs = 13;
  o.hidden = {11, 7};
  o.classes = 3;
  checkModel(models::buildMlp(o), "mlp_5_13_11_7_3", {.defaultIntRange = 3});
}

TEST(CompiledStep, LargeMlpUsesThreadsAndMatchesReference) {
  // Big enough for the OpenMP loops and the split gemm.
  models::MlpOptions o;
  o.batch = 67;
  o.inputs = 301;
  o.hidden = {519};
  o.classes = 10;
  checkModel(models::buildMlp(o), "mlp_67_301_519_10", {.defaultIntRange = 10});
}

TEST(CompiledStep, LinearModelMatchesReference) {
  models::MlpOptions o;
  o.batch = 1;
  o.inputs = 9;
  o.hidden = {};
  o.classes = 6;
  checkModel(models::buildMlp(o), "linear_1_9_6", {.defaultIntRange = 6});
}

TEST(CompiledStep, TransposesViewsAndBroadcastsMatchReference) {
  checkModel(parse(kTransposeModel, "transposes"), "transposes", {.defaultIntRange = 4});
}

//===----------------------------------------------------------------------===//
// Every elementwise op of the vocabulary (generic lowering, fusion)
//===----------------------------------------------------------------------===//

// Values stay in the ops' domains: log/sqrt/rsqrt/pow of exp(.) or of
// sigmoid(.); every result reaches the loss through a random-looking mix.
constexpr const char *kElementwiseModel = R"pb(
schema_version: 1
name: "elementwise"
params { name: "p" dtype: F32 shape { dims: 5 dims: 7 } init { kind: NORMAL scale: 1 seed: 1 } }
params { name: "q" dtype: F32 shape { dims: 7 } init { kind: NORMAL scale: 1 seed: 2 } }
params { name: "c" dtype: F32 shape { dims: 3 dims: 1 dims: 7 } init { kind: NORMAL scale: 1 seed: 3 } }
inputs { name: "x" dtype: F32 shape { dims: 3 dims: 5 dims: 7 } }
nodes { name: "a" op: "add" inputs: "x" inputs: "p" outputs: "a" }
nodes { name: "b" op: "sub" inputs: "a" inputs: "q" outputs: "b" }
nodes { name: "e" op: "exp" inputs: "b" outputs: "e" }
nodes { name: "lg" op: "log" inputs: "e" outputs: "lg" }
nodes { name: "sq" op: "sqrt" inputs: "e" outputs: "sq" }
nodes { name: "rs" op: "rsqrt" inputs: "e" outputs: "rs" }
nodes { name: "pw" op: "pow" inputs: "e" outputs: "pw" attrs { key: "exponent" value { f: 1.7 } } }
nodes { name: "th" op: "tanh" inputs: "b" outputs: "th" }
nodes { name: "sg" op: "sigmoid" inputs: "a" outputs: "sg" }
nodes { name: "rl" op: "relu" inputs: "a" outputs: "rl" }
nodes { name: "sl" op: "silu" inputs: "b" outputs: "sl" }
nodes { name: "ge" op: "gelu" inputs: "a" outputs: "ge" }
nodes { name: "gt" op: "gelu" inputs: "b" outputs: "gt" attrs { key: "approximate" value { s: "tanh" } } }
nodes { name: "sn" op: "sin" inputs: "a" outputs: "sn" }
nodes { name: "cs" op: "cos" inputs: "b" outputs: "cs" }
nodes { name: "ng" op: "neg" inputs: "c" outputs: "ng" }
nodes { name: "dv" op: "div" inputs: "sn" inputs: "e" outputs: "dv" }
nodes { name: "mx" op: "max" inputs: "a" inputs: "ng" outputs: "mx" }
nodes { name: "mn" op: "min" inputs: "b" inputs: "c" outputs: "mn" }
nodes { name: "ls" op: "less" inputs: "a" inputs: "c" outputs: "ls" }
nodes { name: "gq" op: "greater_equal" inputs: "b" inputs: "q" outputs: "gq" }
nodes { name: "w1" op: "where" inputs: "ls" inputs: "th" inputs: "sg" outputs: "w1" }
nodes { name: "w2" op: "select" inputs: "gq" inputs: "dv" inputs: "mn" outputs: "w2" }
nodes { name: "lf" op: "cast" inputs: "ls" outputs: "lf" attrs { key: "dtype" value { s: "f32" } } }
nodes { name: "h16" op: "cast" inputs: "sl" outputs: "h16" attrs { key: "dtype" value { s: "f16" } } }
nodes { name: "f16" op: "cast" inputs: "h16" outputs: "f16" attrs { key: "dtype" value { s: "f32" } } }
nodes { name: "hb" op: "cast" inputs: "ge" outputs: "hb" attrs { key: "dtype" value { s: "bf16" } } }
nodes { name: "fb" op: "cast" inputs: "hb" outputs: "fb" attrs { key: "dtype" value { s: "f32" } } }
nodes { name: "ip" op: "cast" inputs: "b" outputs: "ip" attrs { key: "dtype" value { s: "i32" } } }
nodes { name: "fp" op: "cast" inputs: "ip" outputs: "fp" attrs { key: "dtype" value { s: "f32" } } }
nodes { name: "t1" op: "mul" inputs: "lg" inputs: "sq" outputs: "t1" }
nodes { name: "t2" op: "add" inputs: "t1" inputs: "rs" outputs: "t2" }
nodes { name: "t3" op: "mul" inputs: "t2" inputs: "pw" outputs: "t3" }
nodes { name: "t4" op: "add" inputs: "t3" inputs: "rl" outputs: "t4" }
nodes { name: "t5" op: "mul" inputs: "t4" inputs: "w1" outputs: "t5" }
nodes { name: "t6" op: "add" inputs: "t5" inputs: "w2" outputs: "t6" }
nodes { name: "t7" op: "mul" inputs: "t6" inputs: "cs" outputs: "t7" }
nodes { name: "t8" op: "add" inputs: "t7" inputs: "mx" outputs: "t8" }
nodes { name: "t9" op: "mul" inputs: "t8" inputs: "lf" outputs: "t9" }
nodes { name: "t10" op: "add" inputs: "t9" inputs: "f16" outputs: "t10" }
nodes { name: "t11" op: "add" inputs: "t10" inputs: "fb" outputs: "t11" }
nodes { name: "t11b" op: "add" inputs: "t11" inputs: "fp" outputs: "t11b" }
nodes { name: "t12" op: "mul" inputs: "t11b" inputs: "gt" outputs: "t12" }
nodes { name: "loss" op: "mean" inputs: "t12" outputs: "loss" }
outputs { name: "y" value: "t12" }
outputs { name: "mask" value: "lf" }
training { loss: "loss" optimizer { sgd { learning_rate: 0.1 } } }
)pb";

TEST(CompiledStep, ElementwiseOpsMatchReference) {
  // The f16/bf16 round trips change values by up to 2^-8 relative: they
  // carry a gradient of 1 (straight through), and their values are
  // rounded identically on both sides.
  // Values of scale 0.35 (b = x + p - q of std 0.6): the loss grows like
  // b·exp(2.2 b) (log(e)·sqrt(e)·e^1.7), so with unit values a rare b near 6
  // gave a step-1 gradient near 1e6 that moved a parameter to about -100,
  // where step 2's exp(b) underflows to 0 in float (log -> -inf, NaN) while
  // the float64 reference does not (seen once in CI: seed
  // 16928520469415145447). Every op still sees both signs and both
  // branches of each comparison.
  checkModel(parse(kElementwiseModel, "elementwise"), "elementwise",
             {.learningRate = 1e-3f, .valueScale = 0.35f});
}

// One op at a time: y = op(a [, b]) with a = x + p (broadcast parameter),
// b = q (another broadcast), loss = sum(y * cot) for a random cotangent, so
// each op's scalar body and gradient is checked on its own.
struct OneOp {
  const char *name, *op;
  int arity;          // 1 or 2
  bool positive;      // the op needs a > 0: a = exp(x + p)
  const char *attrs;  // extra node attributes
};

model::Model oneOpModel(const OneOp &t) {
  std::string text = R"pb(
schema_version: 1
name: "one_op"
params { name: "p" dtype: F32 shape { dims: 5 dims: 7 } init { kind: NORMAL scale: 1 seed: 1 } }
params { name: "q" dtype: F32 shape { dims: 3 dims: 1 dims: 7 } init { kind: NORMAL scale: 1 seed: 2 } }
inputs { name: "x" dtype: F32 shape { dims: 3 dims: 5 dims: 7 } }
inputs { name: "cot" dtype: F32 shape { dims: 3 dims: 5 dims: 7 } }
nodes { name: "s" op: "add" inputs: "x" inputs: "p" outputs: "s" }
)pb";
  text += t.positive ? "nodes { name: \"a\" op: \"exp\" inputs: \"s\" outputs: \"a\" }\n"
                     : "nodes { name: \"a\" op: \"neg\" inputs: \"s\" outputs: \"a\" }\n";
  text += std::string("nodes { name: \"y\" op: \"") + t.op + "\" inputs: \"a\" " +
          (t.arity == 2 ? "inputs: \"q\" " : "") + "outputs: \"y\" " + t.attrs + " }\n";
  text += R"pb(
nodes { name: "yc" op: "mul" inputs: "y" inputs: "cot" outputs: "yc" }
nodes { name: "loss" op: "sum" inputs: "yc" outputs: "loss" }
outputs { name: "y" value: "y" }
training { loss: "loss" optimizer { sgd { learning_rate: 0.01 } } }
)pb";
  return parse(text.c_str(), t.name);
}

class ElementwiseOpTest : public ::testing::TestWithParam<OneOp> {};

TEST_P(ElementwiseOpTest, MatchesReference) {
  checkModel(oneOpModel(GetParam()), std::string("op_") + GetParam().name,
             {.steps = 1, .learningRate = 1e-2f});
}

INSTANTIATE_TEST_SUITE_P(
    CompiledStep, ElementwiseOpTest,
    ::testing::Values(
        OneOp{"neg", "neg", 1, false, ""}, OneOp{"exp", "exp", 1, false, ""},
        OneOp{"log", "log", 1, true, ""}, OneOp{"sqrt", "sqrt", 1, true, ""},
        OneOp{"rsqrt", "rsqrt", 1, true, ""}, OneOp{"tanh", "tanh", 1, false, ""},
        OneOp{"sigmoid", "sigmoid", 1, false, ""}, OneOp{"relu", "relu", 1, false, ""},
        OneOp{"silu", "silu", 1, false, ""}, OneOp{"gelu", "gelu", 1, false, ""},
        OneOp{"gelu_tanh", "gelu", 1, false,
              "attrs { key: \"approximate\" value { s: \"tanh\" } }"},
        OneOp{"sin", "sin", 1, false, ""}, OneOp{"cos", "cos", 1, false, ""},
        OneOp{"pow", "pow", 1, true, "attrs { key: \"exponent\" value { f: 1.7 } }"},
        OneOp{"add", "add", 2, false, ""}, OneOp{"sub", "sub", 2, false, ""},
        OneOp{"mul", "mul", 2, false, ""}, OneOp{"div", "div", 2, true, ""},
        OneOp{"max", "max", 2, false, ""}, OneOp{"min", "min", 2, false, ""}),
    [](const ::testing::TestParamInfo<OneOp> &info) { return std::string(info.param.name); });

// A step with enough elements for the OpenMP loops and vectorized exp/tanh.
constexpr const char *kWideElementwiseModel = R"pb(
schema_version: 1
name: "wide"
params { name: "p" dtype: F32 shape { dims: 129 dims: 517 } init { kind: NORMAL scale: 1 seed: 1 } }
params { name: "q" dtype: F32 shape { dims: 517 } init { kind: NORMAL scale: 1 seed: 2 } }
inputs { name: "x" dtype: F32 shape { dims: 3 dims: 129 dims: 517 } }
nodes { name: "a" op: "add" inputs: "x" inputs: "p" outputs: "a" }
nodes { name: "b" op: "mul" inputs: "a" inputs: "q" outputs: "b" }
nodes { name: "g" op: "gelu" inputs: "b" outputs: "g" attrs { key: "approximate" value { s: "tanh" } } }
nodes { name: "e" op: "tanh" inputs: "g" outputs: "e" }
nodes { name: "s" op: "softmax" inputs: "b" outputs: "s" attrs { key: "axis" value { i: 1 } } }
nodes { name: "t" op: "mul" inputs: "e" inputs: "s" outputs: "t" }
nodes { name: "ex" op: "exp" inputs: "t" outputs: "ex" }
nodes { name: "loss" op: "mean" inputs: "ex" outputs: "loss" }
outputs { name: "t" value: "t" }
training { loss: "loss" optimizer { sgd { learning_rate: 0.001 } } }
)pb";

TEST(CompiledStep, WideElementwiseUsesThreadsAndMatchesReference) {
  checkModel(parse(kWideElementwiseModel, "wide"), "wide", {.learningRate = 10.0f});
}

//===----------------------------------------------------------------------===//
// Structural primitives and the NN ops decomposed into them
//===----------------------------------------------------------------------===//

constexpr const char *kStructuralModel = R"pb(
schema_version: 1
name: "structural"
params { name: "emb" dtype: F32 shape { dims: 11 dims: 6 } init { kind: NORMAL scale: 1 seed: 1 } }
params { name: "wq" dtype: F32 shape { dims: 6 dims: 6 } init { kind: NORMAL scale: 0.5 seed: 2 } }
params { name: "wk" dtype: F32 shape { dims: 2 dims: 6 dims: 3 } init { kind: NORMAL scale: 0.5 seed: 3 } }
params { name: "g" dtype: F32 shape { dims: 6 } init { kind: ONES } }
params { name: "bb" dtype: F32 shape { dims: 6 } init { kind: ZEROS } }
params { name: "r" dtype: F32 shape { dims: 3 } init { kind: ONES } }
inputs { name: "ids" dtype: I32 shape { dims: 3 dims: 5 } }
inputs { name: "targets" dtype: I64 shape { dims: 3 dims: 5 } }
nodes { name: "x" op: "embedding" inputs: "emb" inputs: "ids" outputs: "x" }
nodes { name: "ln" op: "layer_norm" inputs: "x" inputs: "g" inputs: "bb" outputs: "ln" }
nodes { name: "q" op: "matmul" inputs: "ln" inputs: "wq" outputs: "q" }
nodes { name: "q4" op: "reshape" inputs: "q" outputs: "q4" attrs { key: "shape" value { ints { values: 3 values: 5 values: 2 values: 3 } } } }
nodes { name: "qt" op: "transpose" inputs: "q4" outputs: "qt" attrs { key: "perm" value { ints { values: 0 values: 2 values: 1 values: 3 } } } }
nodes { name: "lnt" op: "reshape" inputs: "ln" outputs: "lnt" attrs { key: "shape" value { ints { values: 3 values: 1 values: 5 values: 6 } } } }
nodes { name: "k" op: "matmul" inputs: "lnt" inputs: "wk" outputs: "k" }
nodes { name: "s" op: "matmul" inputs: "qt" inputs: "k" outputs: "s" attrs { key: "transpose_b" value { b: true } } }
nodes { name: "m" op: "causal_mask" inputs: "s" outputs: "m" }
nodes { name: "p" op: "softmax" inputs: "m" outputs: "p" }
nodes { name: "o" op: "matmul" inputs: "p" inputs: "k" outputs: "o" }
nodes { name: "rn" op: "rms_norm" inputs: "o" inputs: "r" outputs: "rn" }
nodes { name: "parts" op: "split" inputs: "rn" outputs: "h0" outputs: "h1"
        attrs { key: "axis" value { i: 1 } } attrs { key: "sizes" value { ints { values: 1 values: 1 } } } }
nodes { name: "cat" op: "concat" inputs: "h1" inputs: "h0" outputs: "cat" attrs { key: "axis" value { i: -1 } } }
nodes { name: "ct" op: "transpose" inputs: "cat" outputs: "ct" attrs { key: "perm" value { ints { values: 0 values: 2 values: 1 values: 3 } } } }
nodes { name: "c2" op: "reshape" inputs: "ct" outputs: "c2" attrs { key: "shape" value { ints { values: 3 values: 5 values: -1 } } } }
nodes { name: "sl" op: "slice" inputs: "c2" outputs: "sl"
        attrs { key: "starts" value { ints { values: 1 } } } attrs { key: "ends" value { ints { values: 6 } } }
        attrs { key: "axes" value { ints { values: -1 } } } }
nodes { name: "mx" op: "max" inputs: "sl" outputs: "mx" attrs { key: "axes" value { ints { values: 0 } } } attrs { key: "keep_dims" value { b: true } } }
nodes { name: "ls" op: "log_softmax" inputs: "sl" outputs: "ls" attrs { key: "axis" value { i: 1 } } }
nodes { name: "z" op: "add" inputs: "ls" inputs: "mx" outputs: "z" }
nodes { name: "bc" op: "broadcast_to" inputs: "r" outputs: "bc" attrs { key: "shape" value { ints { values: 5 values: 3 } } } }
nodes { name: "bs" op: "sum" inputs: "bc" outputs: "bs" attrs { key: "axes" value { ints { values: 1 } } } }
nodes { name: "bm" op: "mean" inputs: "bs" outputs: "bm" }
nodes { name: "zz" op: "mul" inputs: "z" inputs: "bm" outputs: "zz" }
nodes { name: "xe" op: "cross_entropy" inputs: "zz" inputs: "targets" outputs: "xe"
        attrs { key: "ignore_index" value { i: 4 } } }
outputs { name: "z" value: "zz" }
outputs { name: "attn" value: "p" }
training { loss: "xe" optimizer { sgd { learning_rate: 0.1 } } }
)pb";

TEST(CompiledStep, StructuralOpsMatchReference) {
  // Ids repeat (embedding gradients accumulate); targets 4 are ignored.
  checkModel(parse(kStructuralModel, "structural"), "structural",
             {.intRange = {{"ids", 11}, {"targets", 5}}});
}

// Non-splat constants (static arrays in the source), an i1 constant mask,
// an iota, and reduce max over a leading axis — written as tg IR.
constexpr const char *kConstantsIR = R"mlir(
module attributes {tg.model_name = "constants", tg.optimizer = {kind = "sgd", learning_rate = 1.0e-1 : f64}} {
  func.func @forward(%w: tensor<2x3xf32> {tg.param = {name = "w", init = "normal", scale = 1.0 : f64, seed = 1 : i64, trainable = true}},
                     %x: tensor<4x2x3xf32> {tg.input = "x"})
      -> (tensor<f32> {tg.loss = "loss"}, tensor<4x2x3xf32> {tg.output = "y"}) {
    %k = tg.constant dense<[[1.5, -2.0, 0.25], [3.0, 0.5, -1.0]]> : tensor<2x3xf32>
    %m = tg.constant dense<[true, false, true]> : tensor<3xi1>
    %i = tg.iota {axis = 0 : i64} : tensor<4x2x3xf32>
    %0 = tg.mul %x, %k : (tensor<4x2x3xf32>, tensor<2x3xf32>) -> tensor<4x2x3xf32>
    %1 = tg.add %0, %w : (tensor<4x2x3xf32>, tensor<2x3xf32>) -> tensor<4x2x3xf32>
    %2 = tg.select %m, %1, %i : (tensor<3xi1>, tensor<4x2x3xf32>, tensor<4x2x3xf32>) -> tensor<4x2x3xf32>
    %3 = tg.reduce_max %2 {axes = array<i64: 0>} : (tensor<4x2x3xf32>) -> tensor<2x3xf32>
    %4 = tg.mul %3, %3 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    %5 = tg.reduce_sum %4 {axes = array<i64: 0, 1>} : (tensor<2x3xf32>) -> tensor<f32>
    return %5, %2 : tensor<f32>, tensor<4x2x3xf32>
  }
}
)mlir";

// Dropout masks are a function of (rng_seed, step, op_id, position) the
// compiled code and the interpreter must compute bit for bit; op ids of any
// sign (micro-batch copies mix theirs), a rate that is no power of two.
constexpr const char *kDropoutIR = R"mlir(
module attributes {tg.model_name = "dropout", tg.optimizer = {kind = "sgd", learning_rate = 1.0e-1 : f64}} {
  func.func @forward(%w: tensor<5x33xf32> {tg.param = {name = "w", init = "normal", scale = 1.0 : f64, seed = 1 : i64, trainable = true}},
                     %x: tensor<3x5x33xf32> {tg.input = "x"},
                     %seed: tensor<i64> {tg.hyper = "rng_seed"}, %step: tensor<i64> {tg.hyper = "step"})
      -> (tensor<f32> {tg.loss = "loss"}) {
    %0 = tg.mul %x, %w : (tensor<3x5x33xf32>, tensor<5x33xf32>) -> tensor<3x5x33xf32>
    %1 = tg.dropout %0, %seed, %step {rate = 0.3 : f64, op_id = -8070450532247928832 : i64} : tensor<3x5x33xf32>
    %2 = tg.dropout %1, %seed, %step {rate = 0.55 : f64, op_id = 1234567 : i64} : tensor<3x5x33xf32>
    %3 = tg.mul %2, %2 : (tensor<3x5x33xf32>, tensor<3x5x33xf32>) -> tensor<3x5x33xf32>
    %4 = tg.reduce_sum %3 {axes = array<i64: 0, 1, 2>} : (tensor<3x5x33xf32>) -> tensor<f32>
    return %4 : tensor<f32>
  }
}
)mlir";

TEST(CompiledStep, DropoutMatchesReference) {
  auto s = compileIR(kDropoutIR, "dropout");
  checkStep(*s, "dropout", {});
}

TEST(CompiledStep, DenseConstantsFromIRMatchReference) {
  auto s = compileIR(kConstantsIR, "constants");
  checkStep(*s, "constants", {});
}

//===----------------------------------------------------------------------===//
// Optimizers, clipping, dropout: the ABI v2 roles
//===----------------------------------------------------------------------===//

models::GptOptions tinyGpt() {
  models::GptOptions g;
  g.vocab = 13;
  g.context = 7;
  g.layers = 2;
  g.width = 12;
  g.heads = 3;
  g.batch = 3;
  g.gradClip = 0.5; // small: clipping is active
  g.weightDecay = 0.1;
  return g;
}

TEST(CompiledStep, TinyGptWithAdamWAndClippingMatchesReference) {
  models::GptOptions g = tinyGpt();
  checkModel(models::buildGpt(g), "gpt_tiny", {.intRange = {{"tokens", 13}, {"targets", 13}}});
}

TEST(CompiledStep, TinyGptVariantsMatchReference) {
  // rms_norm, SwiGLU, rotary positions, untied head, no biases, dropout
  // (rng_seed and step arguments), two micro-batches.
  models::GptOptions g = tinyGpt();
  g.norm = models::GptOptions::Norm::Rms;
  g.mlp = models::GptOptions::Mlp::SwiGlu;
  g.positions = models::GptOptions::Positions::Rope;
  g.context = 8;
  g.tiedEmbeddings = false;
  g.bias = false;
  g.dropout = 0.25;
  g.microBatches = 2;
  g.gradClip = 0;
  checkModel(models::buildGpt(g), "gpt_variants",
             {.intRange = {{"tokens", 13}, {"targets", 13}}});
}

constexpr const char *kMomentumModel = R"pb(
schema_version: 1
name: "momentum"
params { name: "w" dtype: F32 shape { dims: 9 dims: 4 } init { kind: NORMAL scale: 0.5 seed: 1 } }
params { name: "b" dtype: F32 shape { dims: 4 } init { kind: ZEROS } }
params { name: "frozen" dtype: F32 shape { dims: 4 } init { kind: ONES } frozen: true }
inputs { name: "x" dtype: F32 shape { dims: 6 dims: 9 } }
inputs { name: "y" dtype: I32 shape { dims: 6 } }
nodes { name: "h" op: "matmul" inputs: "x" inputs: "w" outputs: "h" }
nodes { name: "hb" op: "add" inputs: "h" inputs: "b" outputs: "hb" }
nodes { name: "hf" op: "mul" inputs: "hb" inputs: "frozen" outputs: "hf" }
nodes { name: "loss" op: "cross_entropy" inputs: "hf" inputs: "y" outputs: "loss" }
outputs { name: "logits" value: "hf" }
training { loss: "loss" optimizer { sgd { learning_rate: 0.1 momentum: 0.9 weight_decay: 0.01 } }
           grad_clip: 0.3 }
)pb";

TEST(CompiledStep, MomentumSgdWithClippingMatchesReference) {
  checkModel(parse(kMomentumModel, "momentum"), "momentum", {.defaultIntRange = 4});
}

TEST(CompiledStep, DescriptorListsOptimizerStateScheduleAndTrainOutputs) {
  models::GptOptions g = tinyGpt();
  g.warmupSteps = 3;
  g.decaySteps = 20;
  g.minLearningRate = 1e-4;
  g.microBatches = 2;
  auto lib = trun::StepLibrary::Open(compileWithTcc(models::buildGpt(g), "gpt_descriptor"));
  ASSERT_TRUE(lib.ok()) << lib.status();
  const tcc_step_descriptor &d = (*lib)->descriptor();
  EXPECT_STREQ(d.optimizer, "adamw");
  EXPECT_EQ(d.lr_schedule.kind, TCC_LR_WARMUP_COSINE);
  EXPECT_EQ(d.lr_schedule.warmup_steps, 3);
  EXPECT_EQ(d.lr_schedule.decay_steps, 20);
  EXPECT_DOUBLE_EQ(d.lr_schedule.min_lr, 1e-4);
  EXPECT_DOUBLE_EQ(d.lr_schedule.base_lr, g.learningRate);
  EXPECT_EQ(d.micro_batches, 2);
  // Two moments per trainable parameter, named after it, zeros, same shape.
  ASSERT_EQ(d.num_optimizer_state, 2 * d.num_params);
  for (int i = 0; i < d.num_params; ++i) {
    const tcc_tensor_desc &m = d.optimizer_state[2 * i];
    EXPECT_EQ(std::string(m.name), std::string(d.params[i].name) + ".adam_m");
    EXPECT_EQ(std::string(d.optimizer_state[2 * i + 1].name),
              std::string(d.params[i].name) + ".adam_v");
    EXPECT_EQ(m.init_kind, TCC_INIT_ZEROS);
    EXPECT_EQ(m.num_elements, d.params[i].num_elements);
    EXPECT_EQ(m.dtype, d.params[i].dtype);
  }
  ASSERT_EQ(d.num_train_outputs, 1);
  EXPECT_STREQ(d.train_outputs[0].name, "grad_norm");
  EXPECT_EQ(d.train_outputs[0].rank, 0);
}

TEST(CompiledStep, TrainOutputsMayBeNull) {
  // The caller does not want grad_norm: the step must still run (scratch).
  auto lib = trun::StepLibrary::Open(compileWithTcc(models::buildGpt(tinyGpt()), "gpt_tiny"));
  ASSERT_TRUE(lib.ok()) << lib.status();
  const tcc_step_descriptor &d = (*lib)->descriptor();
  ZeroedStepArgs step(d, 1e-3f);
  EXPECT_EQ(d.train(&step.args), TCC_STATUS_OK);
  EXPECT_TRUE(std::isfinite(step.loss));
}

//===----------------------------------------------------------------------===//
// Bad batches
//===----------------------------------------------------------------------===//

TEST(CompiledStep, LabelOutOfRangeFailsTheStep) {
  models::MlpOptions o;
  o.batch = 2;
  o.inputs = 3;
  o.hidden = {};
  o.classes = 2;
  auto lib = trun::StepLibrary::Open(compileWithTcc(models::buildMlp(o), "badlabel"));
  ASSERT_TRUE(lib.ok()) << lib.status();
  const tcc_step_descriptor &d = (*lib)->descriptor();
  ZeroedStepArgs step(d, 0.1f);
  step.inputs[1].as<int32_t>()[1] = 2; // classes are 0 and 1
  EXPECT_EQ(d.train(&step.args), TCC_STATUS_BAD_ARGS);
  EXPECT_EQ(d.eval(&step.args), TCC_STATUS_BAD_ARGS);
}

TEST(CompiledStep, TokenIdOutOfRangeFailsTheStep) {
  // The embedding lookup (forward) and its scatter_add (backward) check
  // every id before touching memory.
  auto lib = trun::StepLibrary::Open(compileWithTcc(models::buildGpt(tinyGpt()), "gpt_tiny"));
  ASSERT_TRUE(lib.ok()) << lib.status();
  const tcc_step_descriptor &d = (*lib)->descriptor();
  ZeroedStepArgs step(d, 1e-3f);
  for (int32_t bad : {13, -1}) {
    step.inputs[0].as<int32_t>()[4] = bad; // vocab is 13
    EXPECT_EQ(d.eval(&step.args), TCC_STATUS_BAD_ARGS) << bad;
    EXPECT_EQ(d.train(&step.args), TCC_STATUS_BAD_ARGS) << bad;
  }
}

} // namespace
} // namespace tcc
