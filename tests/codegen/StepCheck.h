// The harness of the compiled-step tests (CompiledStepTest.cpp,
// HalfPrecisionStepTest.cpp): compile a model (through the tcc binary, or
// tg IR in process), run its eval and train entries on fresh random
// parameters, inputs and optimizer state, and compare everything they
// produce with the float64 reference interpreter. Header-only, in an
// anonymous namespace: each test file gets its own copy.
#ifndef TCC_TESTS_CODEGEN_STEPCHECK_H
#define TCC_TESTS_CODEGEN_STEPCHECK_H
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "compiler/codegen/cpu/CpuCodegen.h"
#include "compiler/driver/HostCompiler.h"
#include "interpreter/TgInterpreter.h"
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

  std::vector<Tensor> run(llvm::StringRef fn, const std::vector<Tensor> &args,
                          std::optional<uint64_t> randomRoundingSeed = std::nullopt,
                          bool randomlyRoundF32 = false, int productErrorSide = 0) {
    auto f = module->lookupSymbol<mlir::func::FuncOp>(fn);
    auto out =
        interp::interpret(f, args, randomRoundingSeed, randomlyRoundF32, productErrorSide);
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
[[maybe_unused]] std::unique_ptr<StepUnderTest> compileIR(const std::string &text,
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

// ||got - want||, inf when the sizes differ.
double distance(const std::vector<double> &got, const std::vector<double> &want) {
  if (got.size() != want.size())
    return std::numeric_limits<double>::infinity();
  double diff = 0;
  for (size_t i = 0; i < want.size(); ++i)
    diff += (got[i] - want[i]) * (got[i] - want[i]);
  return std::sqrt(diff);
}

double relativeError(const std::vector<double> &got, const std::vector<double> &want) {
  double norm = 0;
  for (double w : want)
    norm += w * w;
  return distance(got, want) / std::max(std::sqrt(norm), 1e-30);
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
  // For bf16/f16 models: reference runs whose 16-bit results round to a
  // random neighbour (interp::interpret). A compiled step rounds at other
  // points than the reference (fused ops round once), and a value computed
  // with cancellation (a sum of terms much larger than itself) moves far more
  // than `tolerance` when that happens. Each check therefore also allows
  // `roundingSpread` times the most any probe run moved the value from the
  // reference; a well-conditioned value keeps the plain tolerance.
  int roundingProbes = 0;
  double roundingSpread = 2;
  // The probes round f32 results to a random f32 neighbour too
  // (interp::interpret's randomlyRoundF32), for f32 steps: a step whose
  // first update moved the weights far (the tests' large learning rate)
  // computes some gradients with cancellation, where f32 kernels differ from
  // the float64 reference by far more than `tolerance`.
  bool probeF32 = false;
  // Two more probes, the products moved up and down by the bound on f32
  // accumulation's error (interp::interpret's productErrorSide): a
  // pre-activation drawn within that bound of relu's kink may land on the
  // other side in a compiled product, which flips relu' and moves its
  // layer's gradient far more than `tolerance` (session 40: seed
  // 2912139595903839394 of MlpMatchesReference, a1 = -4.0e-7 against a
  // bound of ~1e-5). One of the two runs crosses the kink as well, and the
  // spread allows for it; away from kinks they move results by ~K * 2^-24.
  bool productErrorProbes = true;
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
  // The reference, and the random-rounding probe runs of the same call.
  uint64_t probeSeed = rng();
  auto reference = [&](llvm::StringRef fn, const std::vector<Tensor> &in) {
    std::vector<std::vector<Tensor>> runs{s.run(fn, in)};
    for (int p = 0; p < o.roundingProbes; ++p)
      runs.push_back(s.run(fn, in, probeSeed++, o.probeF32));
    if (o.productErrorProbes)
      for (int side : {+1, -1})
        runs.push_back(s.run(fn, in, std::nullopt, false, side));
    return runs;
  };
  // The most `distance` (a metric of result r against the reference) reaches
  // over the probes, times roundingSpread: what rounding elsewhere may add.
  auto spread = [&](const std::vector<std::vector<Tensor>> &runs, size_t r,
                    const std::function<double(const Tensor &)> &distance) {
    double most = 0;
    for (size_t p = 1; p < runs.size(); ++p)
      most = std::max(most, distance(runs[p][r]));
    return o.roundingSpread * most;
  };
  std::vector<std::vector<Tensor>> evalRuns = reference(
      model::kForwardFunc, referenceArgs(s.func(model::kForwardFunc), b, d, 0, 0, rngSeed));
  const std::vector<Tensor> &evalRef = evalRuns[0];
  ASSERT_EQ(evalRef.size(), 1u + d.num_outputs);
  auto scalarDistance = [](const Tensor &ref) {
    return [&ref](const Tensor &t) { return std::abs(t.data[0] - ref.data[0]); };
  };
  auto relativeDistance = [](const Tensor &ref) {
    return [&ref](const Tensor &t) { return relativeError(t.data, ref.data); };
  };
  EXPECT_NEAR(loss, evalRef[0].data[0],
              o.tolerance * std::max(1.0, std::abs(evalRef[0].data[0])) +
                  spread(evalRuns, 0, scalarDistance(evalRef[0])));
  for (int i = 0; i < d.num_outputs; ++i)
    EXPECT_LT(relativeError(toDoubles(b.outputs[i], d.outputs[i].num_elements),
                            evalRef[1 + i].data),
              o.tolerance + spread(evalRuns, 1 + i, relativeDistance(evalRef[1 + i])))
        << "output " << d.outputs[i].name;

  // Train steps, each compared from the compiled state it starts in.
  mlir::func::FuncOp train = s.func(model::kTrainStepFunc);
  for (int step = 0; step < o.steps; ++step) {
    SCOPED_TRACE("train step " + std::to_string(step));
    const float lr = o.learningRate / (step + 1);
    std::vector<Tensor> before = referenceArgs(train, b, d, lr, step, rngSeed);
    std::vector<std::vector<Tensor>> runs = reference(model::kTrainStepFunc, before);
    const std::vector<Tensor> &want = runs[0];
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
        EXPECT_TRUE(std::isfinite(ref.data[0]))
            << "the reference loss is not finite: the test's values or learning rate "
               "leave the type's range, so the checks below compare non-finite values";
        EXPECT_NEAR(loss, ref.data[0], o.tolerance * std::max(1.0, std::abs(ref.data[0])) +
                                           spread(runs, r, scalarDistance(ref)));
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
        // The probes' updates against the reference's (the same `old`).
        double moved =
            spread(runs, r, [&](const Tensor &t) { return distance(t.data, ref.data); });
        EXPECT_LE(std::sqrt(diff),
                  o.tolerance * std::sqrt(norm) + 2 * std::sqrt(rounding) + moved)
            << "update of " << d.params[j].name;
      } else if (auto j = train.getResultAttrOfType<mlir::IntegerAttr>(r, model::kUpdatesOptStateAttr)) {
        int k = j.getInt();
        EXPECT_LT(relativeError(toDoubles(b.states[k], d.optimizer_state[k].num_elements),
                                ref.data),
                  o.tolerance + spread(runs, r, relativeDistance(ref)))
            << "optimizer state " << d.optimizer_state[k].name;
      } else if (auto t = train.getResultAttrOfType<mlir::StringAttr>(r, model::kTrainOutputAttr)) {
        int k = 0;
        while (k < d.num_train_outputs && t.getValue() != d.train_outputs[k].name)
          ++k;
        ASSERT_LT(k, d.num_train_outputs) << "train output " << t.str();
        EXPECT_LT(relativeError(toDoubles(b.trainOutputs[k], d.train_outputs[k].num_elements),
                                ref.data),
                  o.tolerance + spread(runs, r, relativeDistance(ref)))
            << "train output " << t.str();
      } else {
        ADD_FAILURE() << "result " << r << " of @train_step has no role the test knows";
      }
      ++checked;
    }
    EXPECT_EQ(checked, static_cast<int>(train.getNumResults()));
  }
}

// (checkModel, parse and compileIR: not every test file calls each.)
[[maybe_unused]] void checkModel(const model::Model &m, const std::string &name,
                                 CheckOptions o = {}) {
  auto s = compileModel(m, name);
  checkStep(*s, name, o);
}

[[maybe_unused]] model::Model parse(const char *text, const std::string &name) {
  absl::StatusOr<model::Model> m = ParseModelText(text, name);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *m : model::Model{};
}

} // namespace
} // namespace tcc

#endif // TCC_TESTS_CODEGEN_STEPCHECK_H
