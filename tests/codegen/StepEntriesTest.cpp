// Further entry points of a step (functions marked tcc.entry; the
// descriptor's entries, step_abi.h tcc_step_entry): a tg module with
// @forward and two extra entries goes through the whole pipeline and the
// CPU code generator, and each entry is called through the descriptor and
// through trun's Trainer::CallEntry. Their results are compared with the
// float64 reference interpreter on the same functions.
#include "tests/codegen/StepCheck.h"

#include "compiler/codegen/cuda/CudaCodegen.h"
#include "compiler/driver/CudaCompiler.h"

#include "runtime/trun/step/StepDescriptor.h"
#include "runtime/trun/step/StepEntries.h"
#include "runtime/trun/train/Trainer.h"

#include <sstream>

namespace tcc {
namespace {

// @probe reads the descriptor's second parameter ("b") alone, an input of
// its own and a state tensor it accumulates its output into; @train_decay
// takes "w" and the learning rate and updates w in place (w - lr * w),
// reporting sum(w * w) as its loss.
constexpr const char *kEntriesModule = R"mlir(
module attributes {tg.model_name = "entries", tg.optimizer = {kind = "sgd", learning_rate = 0.5 : f64}} {
  func.func @forward(%w: tensor<3x2xf32> {tg.param = {name = "w", init = "normal", scale = 1.0 : f64, seed = 1 : i64, trainable = true}},
                     %b: tensor<2xf32> {tg.param = {name = "b", init = "normal", scale = 1.0 : f64, seed = 2 : i64, trainable = true}},
                     %x: tensor<4x3xf32> {tg.input = "x"}, %y: tensor<4xi32> {tg.input = "y"})
      -> (tensor<f32> {tg.loss = "loss"}, tensor<4x2xf32> {tg.output = "logits"}) {
    %0 = tg.matmul %x, %w : (tensor<4x3xf32>, tensor<3x2xf32>) -> tensor<4x2xf32>
    %1 = tg.add %0, %b : (tensor<4x2xf32>, tensor<2xf32>) -> tensor<4x2xf32>
    %2 = tg.softmax_cross_entropy %1, %y : (tensor<4x2xf32>, tensor<4xi32>) -> tensor<4xf32>
    %3 = tg.reduce_mean %2 {axes = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>
    return %3, %1 : tensor<f32>, tensor<4x2xf32>
  }
  func.func @probe(%b: tensor<2xf32> {tg.param = {name = "b", init = "normal", scale = 1.0 : f64, seed = 2 : i64, trainable = true}},
                   %z: tensor<5x2xf32> {tg.input = "z"},
                   %acc: tensor<5x2xf32> {tcc.entry_state = "acc"})
      -> (tensor<5x2xf32> {tg.output = "h"}, tensor<5x2xf32> {tcc.updates_entry_state = 0 : i64})
      attributes {tcc.entry = "probe"} {
    %0 = tg.mul %z, %b : (tensor<5x2xf32>, tensor<2xf32>) -> tensor<5x2xf32>
    %1 = tg.add %acc, %0 : (tensor<5x2xf32>, tensor<5x2xf32>) -> tensor<5x2xf32>
    return %0, %1 : tensor<5x2xf32>, tensor<5x2xf32>
  }
  func.func @train_decay(%w: tensor<3x2xf32> {tg.param = {name = "w", init = "normal", scale = 1.0 : f64, seed = 1 : i64, trainable = true}},
                         %lr: tensor<f32> {tg.hyper = "learning_rate"})
      -> (tensor<f32> {tg.loss = "loss"}, tensor<3x2xf32> {tg.updates_param = 0 : i64})
      attributes {tcc.entry = "train_decay"} {
    %0 = tg.mul %w, %w : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    %1 = tg.reduce_sum %0 {axes = array<i64: 0, 1>} : (tensor<3x2xf32>) -> tensor<f32>
    %2 = tg.mul %w, %lr : (tensor<3x2xf32>, tensor<f32>) -> tensor<3x2xf32>
    %3 = tg.sub %w, %2 : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    return %1, %3 : tensor<f32>, tensor<3x2xf32>
  }
}
)mlir";

std::vector<float> randomFloats(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (float &x : v)
    x = u(gen);
  return v;
}

interp::Tensor tensorOf(const tcc_tensor_desc &t, const float *data) {
  return interp::Tensor{std::vector<int64_t>(t.shape, t.shape + t.rank),
                        std::vector<double>(data, data + t.num_elements)};
}

void expectNear(const float *got, const interp::Tensor &want, const char *what) {
  for (size_t i = 0; i < want.data.size(); ++i)
    EXPECT_NEAR(got[i], want.data[i], 1e-5 * (1 + std::abs(want.data[i]))) << what << "[" << i << "]";
}

TEST(StepEntries, DescriptorListsAndRunsEntries) {
  auto s = compileIR(kEntriesModule, "entries");
  ASSERT_TRUE(s->ok());
  const tcc_step_descriptor &d = s->lib->descriptor();
  ASSERT_TRUE(trun::ValidateDescriptor(d, "entries").ok());
  ASSERT_EQ(trun::NumEntries(d), 2);
  const tcc_step_entry *probe = trun::FindEntry(d, "probe");
  const tcc_step_entry *decay = trun::FindEntry(d, "train_decay");
  ASSERT_TRUE(probe && decay);
  EXPECT_EQ(trun::EntryIndex(d, "train_decay"), 1);
  EXPECT_FALSE(trun::EntryTrains(*probe));
  EXPECT_TRUE(trun::EntryTrains(*decay));
  ASSERT_EQ(probe->num_inputs, 1);
  EXPECT_STREQ(probe->inputs[0].name, "z");
  ASSERT_EQ(probe->num_outputs, 1);
  EXPECT_STREQ(probe->outputs[0].name, "h");
  ASSERT_EQ(probe->num_state, 1);
  EXPECT_STREQ(probe->state[0].name, "acc");
  EXPECT_EQ(probe->state[0].num_elements, 10);
  EXPECT_GT(probe->flops_per_call, 0);
  std::ostringstream info;
  trun::PrintDescriptorInfo(d, info);
  EXPECT_NE(info.str().find("entries: 2"), std::string::npos) << info.str();
  EXPECT_NE(info.str().find("train_decay: 0 inputs, 0 outputs, 0 state tensors"),
            std::string::npos)
      << info.str();

  // Straight through the descriptor: params in descriptor order.
  std::vector<float> w = randomFloats(6, 1), b = randomFloats(2, 2), z = randomFloats(10, 3);
  std::vector<float> acc(10, 0.f), h(10, std::nanf(""));
  trun::AlignedBuffer ws(d.workspace_bytes);
  void *params[] = {w.data(), b.data()};
  const void *inputs[] = {z.data()};
  void *outputs[] = {h.data()};
  void *state[] = {acc.data()};
  float loss = std::nanf("");
  tcc_step_args args{};
  args.params = params;
  args.inputs = inputs;
  args.outputs = outputs;
  args.entry_state = state;
  args.workspace = ws.data();
  args.loss = &loss;
  auto ref = s->run("probe", {tensorOf(d.params[1], b.data()), tensorOf(probe->inputs[0], z.data()),
                              tensorOf(probe->state[0], acc.data())});
  ASSERT_EQ(ref.size(), 2u);
  ASSERT_EQ(probe->fn(&args), TCC_STATUS_OK);
  expectNear(h.data(), ref[0], "h");
  expectNear(acc.data(), ref[1], "acc");
  ASSERT_EQ(probe->fn(&args), TCC_STATUS_OK); // the state accumulates
  for (int i = 0; i < 10; ++i)
    EXPECT_NEAR(acc[i], 2 * ref[0].data[i], 1e-5);

  // A train entry updates its parameter in place and writes the loss.
  args.learning_rate = 0.25f;
  auto decayRef =
      s->run("train_decay", {tensorOf(d.params[0], w.data()), interp::Tensor::scalar(0.25)});
  ASSERT_EQ(decayRef.size(), 2u);
  ASSERT_EQ(decay->fn(&args), TCC_STATUS_OK);
  EXPECT_NEAR(loss, decayRef[0].data[0], 1e-5);
  expectNear(w.data(), decayRef[1], "w");
}

TEST(StepEntries, TrainerCallsEntries) {
  auto s = compileIR(kEntriesModule, "entries");
  ASSERT_TRUE(s->ok());
  const tcc_step_descriptor &d = s->lib->descriptor();
  auto trainer = trun::Trainer::Create(d, trun::StepBinding{}, /*seed=*/7);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  trun::Trainer &t = **trainer;
  std::vector<float> b(static_cast<const float *>(t.param(1)),
                       static_cast<const float *>(t.param(1)) + 2);
  std::vector<float> w(static_cast<const float *>(t.param(0)),
                       static_cast<const float *>(t.param(0)) + 6);
  std::vector<float> z = randomFloats(10, 4), h(10);
  auto ref = s->run("probe", {tensorOf(d.params[1], b.data()), tensorOf(d.entries[0].inputs[0], z.data()),
                              interp::Tensor::zeros({5, 2})});
  ASSERT_EQ(ref.size(), 2u);
  for (int call = 1; call <= 2; ++call) {
    ASSERT_TRUE(t.CallEntry(0, {z.data()}, {h.data()}, 0.f, "probe").ok());
    expectNear(h.data(), ref[0], "h");
  }
  EXPECT_EQ(t.steps_done(), 0); // probe does not train
  ASSERT_TRUE(t.ResetEntryState(0).ok());

  // train_decay at the schedule's rate: the step's constant 0.5 here.
  auto decayRef = s->run("train_decay", {tensorOf(d.params[0], w.data()), interp::Tensor::scalar(0.5)});
  ASSERT_TRUE(t.CallEntry(1, {}, {}, 0.5f, "decay").ok());
  EXPECT_EQ(t.steps_done(), 1);
  EXPECT_NEAR(t.last_loss(), decayRef[0].data[0], 1e-5);
  expectNear(static_cast<const float *>(t.param(0)), decayRef[1], "w");

  absl::Status bad = t.CallEntry(0, {}, {}, 0.f, "probe");
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("takes 1 inputs"), std::string::npos) << bad;
}

// The cuda generator emits the same entries: a host function and a
// tcc_cuda_host::Entry each (profile entry 2 + k, the entry's own input,
// output and state counts), and the descriptor's tcc_entries table. With
// TCC_TEST_NVCC=1 and nvcc found, the library is also compiled and linked
// (slow: off by default).
TEST(StepEntries, CudaEmitsEntries) {
  mlir::MLIRContext ctx;
  loadDialects(ctx);
  auto module = mlir::parseSourceString<mlir::ModuleOp>(kEntriesModule, &ctx);
  ASSERT_TRUE(module);
  mlir::PassManager pm(&ctx);
  buildPipeline(pm, Phase::Plan, PipelineOptions{.target = "cuda"});
  ASSERT_TRUE(mlir::succeeded(pm.run(*module)));
  mlir::FailureOr<GeneratedCudaStep> step = generateCudaStep(*module, CudaCodegenOptions{});
  ASSERT_TRUE(mlir::succeeded(step));
  const std::string &host = step->hostSource;
  EXPECT_NE(host.find("static int32_t tcc_entry_probe(const tcc_step_args *args)"),
            std::string::npos);
  EXPECT_NE(host.find("tcc_entry_probe_entry = {\"probe\","), std::string::npos);
  EXPECT_NE(host.find("static_cast<float *>(args->entry_state[0]); // entry state acc"),
            std::string::npos);
  // probe reads the descriptor's parameter 1 ("b").
  EXPECT_NE(host.find("static_cast<float *>(args->params[1]); // param b"), std::string::npos);
  EXPECT_NE(host.find("{\"train_decay\", tcc_entry_train_decay, 0, nullptr, 0, nullptr, 0, "
                      "nullptr,"),
            std::string::npos)
      << host;
  const char *nvccWanted = std::getenv("TCC_TEST_NVCC");
  std::optional<std::string> nvcc = findNvcc();
  if (!nvccWanted || std::string(nvccWanted) != "1" || !nvcc)
    return;
  CudaCompileOptions options;
  options.nvcc = *nvcc;
  options.useCache = false;
  CudaCompileStats stats;
  std::string error;
  EXPECT_TRUE(compileCudaLibrary(host, step->kernelUnits, "", "", false, workDir() + "/entries_cuda.so",
                                 options, stats, error))
      << error;
}

} // namespace
} // namespace tcc
