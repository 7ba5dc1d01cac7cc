// kern-fuse-horizontal on the CPU: a train step whose optimizer updates,
// gradient-norm sums and weight casts are multi-tensor kernels computes
// exactly (bit for bit) what the same step with one kernel per tensor
// computes, over several steps: AdamW with clipping (tiny GPT, fp32 and
// bf16), SGD with momentum and clipping, plain SGD.
#include "StepCheck.h"

namespace tcc {
namespace {

struct Compiled {
  std::unique_ptr<trun::StepLibrary> lib;
  int multiElementwise = 0, multiSum = 0; // kernels in @train_step
};

Compiled compileStep(const model::Model &m, const std::string &name, bool fuseHorizontal,
                     bool bf16) {
  Compiled c;
  mlir::MLIRContext ctx;
  loadDialects(ctx);
  loadImporterDialects(ctx);
  mlir::OwningOpRef<mlir::ModuleOp> module = importModel(m, ctx);
  EXPECT_TRUE(module);
  if (!module)
    return c;
  mlir::PassManager pm(&ctx);
  PipelineOptions options;
  options.fuseHorizontal = fuseHorizontal;
  if (bf16)
    options.precision = "bf16";
  buildPipeline(pm, Phase::Plan, options);
  EXPECT_TRUE(mlir::succeeded(pm.run(*module)));
  auto train = module->lookupSymbol<mlir::func::FuncOp>(model::kTrainStepFunc);
  EXPECT_TRUE(train);
  if (!train)
    return c;
  train.walk([&](kern::MultiElementwiseOp) { ++c.multiElementwise; });
  train.walk([&](kern::MultiSumOp) { ++c.multiSum; });
  mlir::FailureOr<GeneratedStep> step = generateCpuStep(*module);
  EXPECT_TRUE(mlir::succeeded(step));
  if (mlir::failed(step))
    return c;
  std::string lib = workDir() + "/" + name + (fuseHorizontal ? "_multi" : "_single") + ".so";
  std::string error;
  EXPECT_TRUE(compileSharedLibrary(step->source, lib, HostCompileOptions{}, error)) << error;
  auto opened = trun::StepLibrary::Open(lib);
  EXPECT_TRUE(opened.ok()) << opened.status();
  if (opened.ok())
    c.lib = std::move(*opened);
  return c;
}

// Everything a few train steps write, as bytes, from random parameters,
// state and inputs drawn from `seed`.
std::vector<std::string> runSteps(const trun::StepLibrary &lib, uint64_t seed, int vocab) {
  const tcc_step_descriptor &d = lib.descriptor();
  ZeroedStepArgs z(d, 0.05f);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  auto fill = [&](trun::AlignedBuffer &b, const tcc_tensor_desc &t, bool nonNegative) {
    for (int64_t i = 0; i < t.num_elements; ++i) {
      if (t.dtype == TCC_DTYPE_I32)
        b.as<int32_t>()[i] = static_cast<int32_t>(rng() % vocab);
      else
        b.as<float>()[i] = nonNegative ? std::abs(normal(rng)) : normal(rng);
    }
  };
  for (int i = 0; i < d.num_params; ++i)
    fill(z.params[i], d.params[i], false);
  for (int i = 0; i < d.num_optimizer_state; ++i)
    fill(z.states[i], d.optimizer_state[i],
         llvm::StringRef(d.optimizer_state[i].name).ends_with("adam_v"));
  for (int i = 0; i < d.num_inputs; ++i)
    fill(z.inputs[i], d.inputs[i], false);
  std::vector<trun::AlignedBuffer> trainOutputs;
  std::vector<void *> trainOutputPtrs;
  for (int i = 0; i < d.num_train_outputs; ++i)
    trainOutputPtrs.push_back(trainOutputs.emplace_back(d.train_outputs[i].size_bytes).data());
  z.args.train_outputs = trainOutputPtrs.data();
  std::vector<std::string> written;
  auto bytes = [](const trun::AlignedBuffer &b) {
    return std::string(static_cast<const char *>(b.data()), b.size());
  };
  for (int step = 0; step < 3; ++step) {
    z.args.step = step;
    z.args.learning_rate = 0.05f / (step + 1);
    EXPECT_EQ(d.train(&z.args), TCC_STATUS_OK);
    written.push_back(std::string(reinterpret_cast<const char *>(&z.loss), sizeof(float)));
    for (const auto &b : z.params)
      written.push_back(bytes(b));
    for (const auto &b : z.states)
      written.push_back(bytes(b));
    for (const auto &b : trainOutputs)
      written.push_back(bytes(b));
  }
  return written;
}

void expectSameSteps(const model::Model &m, const std::string &name, int vocab,
                     bool bf16 = false) {
  Compiled multi = compileStep(m, name, true, bf16);
  Compiled single = compileStep(m, name, false, bf16);
  ASSERT_TRUE(multi.lib && single.lib);
  // The grouping happened (or this test would compare a step with itself).
  EXPECT_GE(multi.multiElementwise, 1) << name;
  EXPECT_EQ(single.multiElementwise + single.multiSum, 0) << name;
  uint64_t seed = std::random_device{}();
  SCOPED_TRACE(name + ", seed " + std::to_string(seed));
  std::vector<std::string> a = runSteps(*multi.lib, seed, vocab);
  std::vector<std::string> b = runSteps(*single.lib, seed, vocab);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_TRUE(a[i] == b[i]) << "written buffer " << i << " differs";
}

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

TEST(MultiTensorStep, AdamWWithClippingIsBitIdentical) {
  Compiled c = compileStep(models::buildGpt(tinyGpt()), "mt_gpt_probe", true, false);
  EXPECT_GE(c.multiSum, 1) << "the gradient norm's sums are one kernel";
  expectSameSteps(models::buildGpt(tinyGpt()), "mt_gpt", 13);
}

TEST(MultiTensorStep, Bf16AdamWWithWeightCastsIsBitIdentical) {
  expectSameSteps(models::buildGpt(tinyGpt()), "mt_gpt_bf16", 13, /*bf16=*/true);
}

// Odd sizes (1, 3, 5x7, 7): members of one group with different shapes.
constexpr const char *kSgdModel = R"pb(
schema_version: 1
name: "sgd"
params { name: "w1" dtype: F32 shape { dims: 5 dims: 7 } init { kind: NORMAL scale: 0.5 seed: 1 } }
params { name: "b1" dtype: F32 shape { dims: 7 } init { kind: NORMAL scale: 0.5 seed: 2 } }
params { name: "w2" dtype: F32 shape { dims: 7 dims: 3 } init { kind: NORMAL scale: 0.5 seed: 3 } }
params { name: "b2" dtype: F32 shape { dims: 3 } init { kind: NORMAL scale: 0.5 seed: 4 } }
params { name: "s" dtype: F32 shape { dims: 1 } init { kind: ONES } }
inputs { name: "x" dtype: F32 shape { dims: 6 dims: 5 } }
inputs { name: "y" dtype: I32 shape { dims: 6 } }
nodes { name: "h" op: "matmul" inputs: "x" inputs: "w1" outputs: "h" }
nodes { name: "hb" op: "add" inputs: "h" inputs: "b1" outputs: "hb" }
nodes { name: "hr" op: "relu" inputs: "hb" outputs: "hr" }
nodes { name: "o" op: "matmul" inputs: "hr" inputs: "w2" outputs: "o" }
nodes { name: "ob" op: "add" inputs: "o" inputs: "b2" outputs: "ob" }
nodes { name: "os" op: "mul" inputs: "ob" inputs: "s" outputs: "os" }
nodes { name: "loss" op: "cross_entropy" inputs: "os" inputs: "y" outputs: "loss" }
outputs { name: "logits" value: "os" }
training { loss: "loss" optimizer { sgd { learning_rate: 0.1 @MOMENTUM@ } } @CLIP@ }
)pb";

model::Model sgdModel(bool momentum, bool clip) {
  std::string text = kSgdModel;
  text.replace(text.find("@MOMENTUM@"), 10, momentum ? "momentum: 0.9 weight_decay: 0.01" : "");
  text.replace(text.find("@CLIP@"), 6, clip ? "grad_clip: 0.3" : "");
  return parse(text.c_str(), "sgd");
}

TEST(MultiTensorStep, SgdWithMomentumAndClippingIsBitIdentical) {
  expectSameSteps(sgdModel(true, true), "mt_sgd_momentum", 3);
}

TEST(MultiTensorStep, PlainSgdIsBitIdentical) {
  expectSameSteps(sgdModel(false, false), "mt_sgd", 3);
}

} // namespace
} // namespace tcc
