// The Trainer on GPU steps (target "cuda"), with fixture steps built for the
// fake GPU of fixtures/fake_device.h (CI has no GPU): the same math as the
// CPU builds on host memory trun allocates through the fake, which refuses
// host pointers where the ABI wants device memory, stale inputs, and pinned
// sources reused before their upload completed, and counts what it saw.
#include "runtime/trun/train/Trainer.h"

#include "runtime/trun/data/BatchLoader.h"
#include "runtime/trun/step/StepLibrary.h"
#include "tests/runtime/TestData.h"
#include "tests/runtime/fixtures/fake_device_stats.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

#include <dlfcn.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <sstream>

namespace tcc::trun {
namespace {

// The fake's counters in the already loaded fixture library at `path`.
tcc_fake_device_stats FakeStats(const char *path) {
  tcc_fake_device_stats stats{};
  void *handle = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  EXPECT_NE(handle, nullptr) << path << " is not loaded";
  if (!handle)
    return stats;
  auto get = reinterpret_cast<tcc_fake_device_get_stats_fn>(
      dlsym(handle, TCC_FAKE_DEVICE_STATS_SYMBOL));
  EXPECT_NE(get, nullptr);
  if (get)
    get(&stats);
  dlclose(handle); // drops the reference taken here only
  return stats;
}

// Sets an environment variable for one scope.
class ScopedEnv {
public:
  ScopedEnv(const char *name, const std::string &value) : name_(name) {
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() { unsetenv(name_); }

private:
  const char *name_;
};

// Token batches from a formula (ids below `vocab`): batch n, row r,
// position t holds (7n + 3r + t*t + n*t) mod vocab, targets the same one
// position on. Never ends; `bad_at` >= 0 puts id 300 into that batch.
class FormulaTokens : public BatchSource {
public:
  explicit FormulaTokens(int64_t vocab = 256, int64_t bad_at = -1)
      : vocab_(vocab), bad_at_(bad_at) {}
  bool Next(HostBatch &batch) override {
    const int64_t n = next_++, T = batch.values_per_sample;
    int32_t *tokens = batch.data.as<int32_t>();     // (B, T)
    int32_t *targets = batch.targets.as<int32_t>(); // (B, T)
    for (int64_t r = 0; r < batch.batch_size; ++r)
      for (int64_t t = 0; t < T; ++t) {
        auto id = [&](int64_t p) {
          return static_cast<int32_t>((7 * n + 3 * r + p * p + n * p) % vocab_);
        };
        tokens[r * T + t] = id(t);
        targets[r * T + t] = id(t + 1);
      }
    if (n == bad_at_)
      tokens[0] = 300;
    batch.real_rows = batch.batch_size;
    return true;
  }
  int64_t position() const override { return next_; }
  void SeekTo(int64_t batches) override { next_ = batches; }

private:
  int64_t vocab_, bad_at_;
  int64_t next_ = 0;
};

// The first `count` batches of FormulaTokens, for evaluation.
class FirstBatches : public BatchSource {
public:
  explicit FirstBatches(int64_t count) : count_(count) {}
  bool Next(HostBatch &batch) override {
    if (tokens_.position() >= count_)
      return false;
    return tokens_.Next(batch);
  }
  int64_t position() const override { return tokens_.position(); }
  void SeekTo(int64_t batches) override { tokens_.SeekTo(batches); }

private:
  int64_t count_;
  FormulaTokens tokens_;
};

// One opened fixture step with its binding and trainer.
struct Fixture {
  std::unique_ptr<StepLibrary> library;
  StepBinding binding;
  std::unique_ptr<Trainer> trainer; // released before the library

  const tcc_step_descriptor &d() const { return library->descriptor(); }
};

absl::StatusOr<Fixture> Open(const char *path, int32_t gpu = 0) {
  Fixture f;
  absl::StatusOr<std::unique_ptr<StepLibrary>> library =
      StepLibrary::Open(path);
  if (!library.ok())
    return library.status();
  f.library = std::move(*library);
  absl::StatusOr<StepBinding> binding = BindStep(f.d());
  if (!binding.ok())
    return binding.status();
  f.binding = *binding;
  absl::StatusOr<std::unique_ptr<Trainer>> trainer =
      Trainer::Create(f.d(), f.binding, /*seed=*/3, gpu);
  if (!trainer.ok())
    return trainer.status();
  f.trainer = std::move(*trainer);
  return f;
}

struct Trained {
  std::vector<float> losses; // per step, in order
  TrainSummary summary;
  int64_t taken = 0; // loader.taken() afterwards
  std::string log;
};

// Trains `steps` more steps on FormulaTokens (continuing the data), with
// the loader's slots pinned for a GPU step; `after_step` runs after each.
absl::StatusOr<Trained>
TrainSteps(Fixture &f, int64_t steps, OnNan on_nan = OnNan::kStop,
           std::function<absl::Status(int64_t)> after_step = nullptr,
           int64_t bad_at = -1, const std::atomic<bool> *stop = nullptr) {
  FormulaTokens source(256, bad_at);
  source.SeekTo(f.trainer->steps_done());
  BatchLoader loader(source, f.binding, 3, f.trainer->pinned_memory());
  std::ostringstream log;
  int64_t total = f.trainer->steps_done() + steps;
  ProgressReporter progress(log, /*live=*/false, total, f.trainer->steps_done(),
                            /*log_every=*/0, "tokens");
  Trained trained;
  TrainConfig config;
  config.steps = total;
  config.learning_rate = 2.0f;
  config.on_nan = on_nan;
  config.progress = &progress;
  config.unit = "tokens";
  config.items_per_step = 128;
  config.stop_requested = stop;
  config.after_step = [&](int64_t done) -> absl::Status {
    trained.losses.push_back(f.trainer->last_loss());
    return after_step ? after_step(done) : absl::OkStatus();
  };
  absl::StatusOr<TrainSummary> summary = f.trainer->Train(loader, config);
  progress.Finish();
  if (!summary.ok())
    return summary.status();
  trained.summary = *summary;
  trained.taken = loader.taken();
  trained.log = log.str();
  return trained;
}

// Bitwise equality of the parameters of two trainers of the same step.
void ExpectSameParams(const Fixture &a, const Fixture &b) {
  std::vector<const void *> pa = a.trainer->params(), pb = b.trainer->params();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i)
    EXPECT_EQ(std::memcmp(pa[i], pb[i], a.d().params[i].size_bytes), 0)
        << "param " << a.d().params[i].name;
}

// Bitwise equality (a NaN equals a NaN).
void ExpectSameLosses(const std::vector<float> &a,
                      const std::vector<float> &b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(std::memcmp(&a[i], &b[i], sizeof(float)), 0)
        << "step " << i + 1 << ": " << a[i] << " vs " << b[i];
}

TEST(GpuTrainerTest, LossesAndWeightsEqualTheCpuStepBitForBit) {
  absl::StatusOr<Fixture> cpu = Open(TRUN_TEST_BIGRAM_STEP);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  absl::StatusOr<Fixture> gpu = Open(TRUN_TEST_BIGRAM_CUDA_STEP);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  tcc_fake_device_stats start = FakeStats(TRUN_TEST_BIGRAM_CUDA_STEP);
  EXPECT_EQ(start.initialized, 1);
  EXPECT_EQ(start.ordinal, 0);

  // Two Train calls with an edit of the weights in between: the GPU trainer
  // must download, take the edit and upload it again.
  std::vector<float> cpu_losses, gpu_losses;
  for (int64_t steps : {10, 15}) {
    absl::StatusOr<Trained> c = TrainSteps(*cpu, steps);
    ASSERT_TRUE(c.ok()) << c.status();
    absl::StatusOr<Trained> g = TrainSteps(*gpu, steps);
    ASSERT_TRUE(g.ok()) << g.status();
    cpu_losses.insert(cpu_losses.end(), c->losses.begin(), c->losses.end());
    gpu_losses.insert(gpu_losses.end(), g->losses.begin(), g->losses.end());
    // The peeked batch is not taken: the data cursor counts trained steps.
    EXPECT_EQ(g->taken, steps);
    EXPECT_EQ(c->taken, steps);
    for (Fixture *f : {&*cpu, &*gpu}) {
      float *table = static_cast<float *>(f->trainer->mutable_params()[0]);
      for (int i = 0; i < 256 * 256; i += 3)
        table[i] *= 0.5f;
    }
  }
  ExpectSameLosses(gpu_losses, cpu_losses);
  ExpectSameParams(*gpu, *cpu);
  EXPECT_EQ(gpu->trainer->steps_done(), 25);

  tcc_fake_device_stats s = FakeStats(TRUN_TEST_BIGRAM_CUDA_STEP);
  EXPECT_EQ(s.errors, 0) << s.first_error;
  EXPECT_EQ(s.train_calls - start.train_calls, 25);
  // Every batch went up from a pinned loader slot with upload_async (two
  // inputs each), and every step but the last of each Train call ran
  // while the next batch's upload was pending.
  EXPECT_EQ(s.uploads - start.uploads, 2 * 25);
  EXPECT_EQ(s.pinned_uploads - start.pinned_uploads, 2 * 25);
  EXPECT_EQ(s.overlapped_train_calls - start.overlapped_train_calls, 23);
  EXPECT_EQ(s.pending, 0) << "Train returned with uploads in flight";
  EXPECT_EQ(s.pinned_blocks, 0) << "the loaders' pinned slots leaked";
}

// A stop after step 3 leaves batch 4 peeked and uploaded but not taken:
// the cursor says 3, Train waits for that upload before the loader goes,
// and a new loader from the cursor continues exactly.
TEST(GpuTrainerTest, AStopLeavesThePeekedBatchUntaken) {
  absl::StatusOr<Fixture> cpu = Open(TRUN_TEST_BIGRAM_STEP);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  absl::StatusOr<Fixture> gpu = Open(TRUN_TEST_BIGRAM_CUDA_STEP);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  absl::StatusOr<Trained> whole = TrainSteps(*cpu, 8);
  ASSERT_TRUE(whole.ok()) << whole.status();

  std::atomic<bool> stop{false};
  absl::StatusOr<Trained> first = TrainSteps(
      *gpu, 8, OnNan::kStop,
      [&](int64_t done) {
        stop.store(done == 3);
        return absl::OkStatus();
      },
      -1, &stop);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->summary.interrupted);
  EXPECT_EQ(first->taken, 3);
  EXPECT_EQ(FakeStats(TRUN_TEST_BIGRAM_CUDA_STEP).pending, 0);
  absl::StatusOr<Trained> rest = TrainSteps(*gpu, 5);
  ASSERT_TRUE(rest.ok()) << rest.status();
  std::vector<float> losses = first->losses;
  losses.insert(losses.end(), rest->losses.begin(), rest->losses.end());
  ExpectSameLosses(losses, whole->losses);
  ExpectSameParams(*gpu, *cpu);
  tcc_fake_device_stats s = FakeStats(TRUN_TEST_BIGRAM_CUDA_STEP);
  EXPECT_EQ(s.errors, 0) << s.first_error;
}

TEST(GpuTrainerTest, EvaluationDuringTrainingMatchesTheCpu) {
  absl::StatusOr<Fixture> cpu = Open(TRUN_TEST_BIGRAM_STEP);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  absl::StatusOr<Fixture> gpu = Open(TRUN_TEST_BIGRAM_CUDA_STEP);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  tcc_fake_device_stats start = FakeStats(TRUN_TEST_BIGRAM_CUDA_STEP);
  // Validation after steps 1, 4, 7, ...: it runs while the next training
  // batch's upload is queued and must not overwrite that input set.
  auto run = [](Fixture &f, std::vector<double> &val) {
    return TrainSteps(f, 12, OnNan::kStop, [&](int64_t done) -> absl::Status {
      if (done % 3 != 1)
        return absl::OkStatus();
      FirstBatches batches(4);
      absl::StatusOr<EvalResult> result = f.trainer->Evaluate(batches);
      if (!result.ok())
        return result.status();
      EXPECT_EQ(result->samples, 4 * 8);
      val.push_back(result->mean_loss);
      return absl::OkStatus();
    });
  };
  std::vector<double> cpu_val, gpu_val;
  absl::StatusOr<Trained> c = run(*cpu, cpu_val);
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<Trained> g = run(*gpu, gpu_val);
  ASSERT_TRUE(g.ok()) << g.status();
  ExpectSameLosses(g->losses, c->losses);
  ASSERT_EQ(gpu_val.size(), 4u);
  EXPECT_EQ(gpu_val, cpu_val);
  tcc_fake_device_stats s = FakeStats(TRUN_TEST_BIGRAM_CUDA_STEP);
  EXPECT_EQ(s.errors, 0) << s.first_error;
  EXPECT_EQ(s.eval_calls - start.eval_calls, 16);
  // A token model's evaluation needs no logits: nothing is downloaded
  // (and the weights stay on the device).
  EXPECT_EQ(s.to_host_copies, start.to_host_copies);
}

TEST(GpuTrainerTest, ImageAccuracyAndLossMatchTheCpu) {
  testing::SyntheticSplit train_split =
      testing::MakeSyntheticSplit(600, 28, 28, 1);
  testing::SyntheticSplit test_split =
      testing::MakeSyntheticSplit(250, 28, 28, 2);
  LabeledImages train, test;
  for (auto [split, set] :
       {std::pair{&train_split, &train}, std::pair{&test_split, &test}}) {
    set->count = split->count;
    set->rows = 28;
    set->cols = 28;
    set->pixels = split->pixels;
    set->labels = split->labels;
  }
  PixelNormalizer normalizer = PixelNormalizer::FromTrainingImages(train);
  std::vector<EvalResult> results;
  for (const char *path : {TRUN_TEST_LINEAR_STEP, TRUN_TEST_LINEAR_CUDA_STEP}) {
    absl::StatusOr<Fixture> f = Open(path);
    ASSERT_TRUE(f.ok()) << f.status();
    ShuffledBatches batches(train, normalizer, f->binding.batch_size, 0);
    BatchLoader loader(batches, f->binding, 4, f->trainer->pinned_memory());
    TrainConfig config;
    config.steps = 12;
    config.learning_rate = 0.1f;
    ASSERT_TRUE(f->trainer->Train(loader, config).ok());
    SequentialBatches test_batches(test, normalizer, f->binding.batch_size);
    absl::StatusOr<EvalResult> result = f->trainer->Evaluate(test_batches);
    ASSERT_TRUE(result.ok()) << result.status();
    results.push_back(*result);
  }
  EXPECT_EQ(results[1].samples, 250);
  EXPECT_TRUE(results[1].has_accuracy);
  EXPECT_EQ(results[1].correct, results[0].correct);
  EXPECT_EQ(results[1].mean_loss, results[0].mean_loss);
  EXPECT_GT(results[1].accuracy(), 0.5);
  tcc_fake_device_stats s = FakeStats(TRUN_TEST_LINEAR_CUDA_STEP);
  EXPECT_EQ(s.errors, 0) << s.first_error;
  // The logits of each of the 3 test batches came down for the accuracy.
  EXPECT_GE(s.to_host_copies, 3);
}

TEST(GpuTrainerTest, OnNanSkipRestoresTheDeviceWeights) {
  absl::StatusOr<Fixture> cpu = Open(TRUN_TEST_BIGRAM_NAN_STEP);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  absl::StatusOr<Fixture> gpu = Open(TRUN_TEST_BIGRAM_CUDA_NAN_STEP);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  // Steps 6, 21, 22 and 23 (1-based) diverge and are undone.
  absl::StatusOr<Trained> c = TrainSteps(*cpu, 23, OnNan::kSkip);
  ASSERT_TRUE(c.ok()) << c.status();
  const char *lib = TRUN_TEST_BIGRAM_CUDA_NAN_STEP;
  tcc_fake_device_stats start = FakeStats(lib);
  absl::StatusOr<Trained> g = TrainSteps(*gpu, 23, OnNan::kSkip);
  ASSERT_TRUE(g.ok()) << g.status();
  // The copy stays on the GPU: per step one device copy of each of the two
  // parameters, and per undone step one back; nothing is downloaded.
  tcc_fake_device_stats during = FakeStats(lib);
  EXPECT_EQ(during.on_device_copies - start.on_device_copies, 23 * 2 + 4 * 2);
  EXPECT_EQ(during.to_host_copies, start.to_host_copies);
  EXPECT_EQ(g->summary.skipped, 4);
  EXPECT_EQ(c->summary.skipped, 4);
  ExpectSameLosses(g->losses, c->losses);
  ExpectSameParams(*gpu, *cpu);
  const float *bias = static_cast<const float *>(gpu->trainer->param(1));
  EXPECT_TRUE(std::isfinite(bias[0])) << "the NaN update was not undone";
  EXPECT_NE(g->log.find("warning: step 'bigram': non-finite loss at train "
                        "step 6 (loss nan); update undone"),
            std::string::npos)
      << g->log;
  tcc_fake_device_stats s = FakeStats(lib);
  EXPECT_EQ(s.errors, 0) << s.first_error;
}

TEST(GpuTrainerTest, ParamsAreDownloadedOnlyWhenTheDeviceCopyIsNewer) {
  absl::StatusOr<Fixture> gpu = Open(TRUN_TEST_BIGRAM_CUDA_STEP);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  const char *lib = TRUN_TEST_BIGRAM_CUDA_STEP;
  Trainer &t = *gpu->trainer;
  int64_t downloads = FakeStats(lib).to_host_copies;
  int64_t uploads = FakeStats(lib).to_device_copies;
  t.params(); // initialized on the host: nothing to download
  EXPECT_EQ(FakeStats(lib).to_host_copies, downloads);
  ASSERT_TRUE(TrainSteps(*gpu, 2).ok());
  // The first train call uploaded both parameters.
  EXPECT_EQ(FakeStats(lib).to_device_copies, uploads + 2);
  t.params();
  t.param(1);
  t.optimizer_state(); // bigram: none
  EXPECT_EQ(FakeStats(lib).to_host_copies, downloads + 2) << "downloaded once";
  // A host edit is uploaded by the next call, once.
  static_cast<float *>(t.mutable_param(1))[7] = 4.0f;
  FirstBatches batches(2);
  ASSERT_TRUE(t.Evaluate(batches).ok());
  EXPECT_EQ(FakeStats(lib).to_device_copies, uploads + 2 + 2 + 2 * 2)
      << "params again, then each eval batch's two inputs";
  EXPECT_EQ(FakeStats(lib).to_host_copies, downloads + 2);
  // Eval does not change the weights: still nothing to download.
  EXPECT_EQ(static_cast<const float *>(t.param(1))[7], 4.0f);
  EXPECT_EQ(FakeStats(lib).to_host_copies, downloads + 2);
  EXPECT_TRUE(t.SyncToHost().ok());
  EXPECT_EQ(FakeStats(lib).errors, 0) << FakeStats(lib).first_error;
}

TEST(GpuTrainerTest, ArenasPerCategoryAndTheirRelease) {
  const char *lib = TRUN_TEST_BIGRAM_CUDA_STEP;
  {
    absl::StatusOr<Fixture> gpu = Open(lib);
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    // parameters, workspace and inputs (two sets); the bigram's SGD has no
    // optimizer state; the eval outputs wait for the first eval.
    EXPECT_EQ(FakeStats(lib).device_blocks, 3);
    std::optional<GpuMemory> memory = gpu->trainer->gpu_memory();
    ASSERT_TRUE(memory.has_value());
    uint64_t expected = (256 * 256 + 256) * 4 // table, bias (aligned)
                        + 128 * 256 * 4       // workspace
                        + 2 * 2 * 128 * 4;    // 2 sets of tokens, targets
    EXPECT_EQ(memory->allocated_bytes, expected);
    ASSERT_TRUE(TrainSteps(*gpu, 2).ok());
    EXPECT_EQ(gpu->trainer->gpu_memory()->allocated_bytes, expected)
        << "training alone never allocates the eval outputs";
    FirstBatches batches(1);
    ASSERT_TRUE(gpu->trainer->Evaluate(batches).ok());
    EXPECT_EQ(FakeStats(lib).device_blocks, 4);
    expected += 128 * 256 * 4; // logits
    memory = gpu->trainer->gpu_memory();
    EXPECT_EQ(memory->allocated_bytes, expected);
    EXPECT_GE(memory->peak_allocated_bytes, expected);
    gpu->trainer.reset();
    EXPECT_EQ(FakeStats(lib).device_blocks, 0) << "arenas not released";
    EXPECT_EQ(FakeStats(lib).allocated_bytes, 0u);
  }
  absl::StatusOr<Fixture> cpu = Open(TRUN_TEST_BIGRAM_STEP);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_FALSE(cpu->trainer->gpu_memory().has_value());
  EXPECT_EQ(cpu->trainer->pinned_memory(), nullptr);
}

TEST(GpuTrainerTest, AllocationFailureNamesTheCategory) {
  const char *lib = TRUN_TEST_BIGRAM_CUDA_STEP;
  {
    ScopedEnv env("TRUN_FAKE_GPU_BYTES", "1000");
    absl::StatusOr<Fixture> gpu = Open(lib);
    ASSERT_FALSE(gpu.ok());
    EXPECT_EQ(gpu.status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_EQ(gpu.status().message(),
              "step 'bigram': cannot allocate 263168 bytes of GPU memory for "
              "the parameters: fake device: out of memory: 263168 bytes "
              "requested, 0 of 1000 in use");
  }
  {
    // The parameters fit, the workspace does not; the parameters' arena is
    // released again.
    ScopedEnv env("TRUN_FAKE_GPU_BYTES", "300000");
    absl::StatusOr<Fixture> gpu = Open(lib);
    ASSERT_FALSE(gpu.ok());
    EXPECT_EQ(gpu.status().message(),
              "step 'bigram': cannot allocate 131072 bytes of GPU memory for "
              "the workspace: fake device: out of memory: 131072 bytes "
              "requested, 263168 of 300000 in use");
  }
  EXPECT_EQ(FakeStats(lib).device_blocks, 0);
}

// Before a data-parallel run ends its NCCL communicator, trun releases
// the step's CUDA graphs (ncclCommDestroy waits for the graphs holding its
// collectives); the fake counts the calls.
TEST(GpuTrainerTest, ReleaseGraphsCallsTheDevice) {
  absl::StatusOr<Fixture> gpu = Open(TRUN_TEST_BIGRAM_CUDA_STEP, 0);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  int64_t before = FakeStats(TRUN_TEST_BIGRAM_CUDA_STEP).release_graphs_calls;
  ASSERT_TRUE(gpu->trainer->ReleaseGraphs().ok());
  EXPECT_EQ(FakeStats(TRUN_TEST_BIGRAM_CUDA_STEP).release_graphs_calls, before + 1);
}

TEST(GpuTrainerTest, SelectsTheGpuAndNamesABadOne) {
  absl::StatusOr<Fixture> gpu = Open(TRUN_TEST_BIGRAM_CUDA_STEP, 1);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_EQ(FakeStats(TRUN_TEST_BIGRAM_CUDA_STEP).ordinal, 1);
  absl::StatusOr<Fixture> bad = Open(TRUN_TEST_BIGRAM_CUDA_STEP, 5);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "step 'bigram': selecting GPU 5 failed: fake device: no GPU 5 "
            "(the fake has 2)");
}

TEST(GpuTrainerTest, DeviceNotesArePrintedOnceAfterTheFirstAndSecondStep) {
  absl::StatusOr<Fixture> gpu = Open(TRUN_TEST_BIGRAM_CUDA_STEP, 1);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  absl::StatusOr<Trained> first = TrainSteps(*gpu, 3);
  ASSERT_TRUE(first.ok()) << first.status();
  // The GEMM note after the first call, the execution note after the
  // second (the one that captures the CUDA graph).
  EXPECT_EQ(first->log, "gpu: GEMM algorithms: 1 shapes searched (up to 16 candidates "
                        "each, 0.01 s), 0 from the cache (fake)\n"
                        "gpu: fake device: GPU 1, host memory, eager copies\n");
  absl::StatusOr<Trained> second = TrainSteps(*gpu, 3);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->log, "") << "printed again";
  // A one-step run prints both after its only call.
  absl::StatusOr<Fixture> once = Open(TRUN_TEST_BIGRAM_CUDA_STEP, 1);
  ASSERT_TRUE(once.ok()) << once.status();
  absl::StatusOr<Trained> single = TrainSteps(*once, 1);
  ASSERT_TRUE(single.ok()) << single.status();
  EXPECT_NE(single->log.find("gpu: GEMM algorithms"), std::string::npos) << single->log;
  EXPECT_NE(single->log.find("gpu: fake device"), std::string::npos) << single->log;
  // A CPU step has no note.
  absl::StatusOr<Fixture> cpu = Open(TRUN_TEST_BIGRAM_STEP);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  absl::StatusOr<Trained> on_cpu = TrainSteps(*cpu, 3);
  ASSERT_TRUE(on_cpu.ok()) << on_cpu.status();
  EXPECT_EQ(on_cpu->log, "");
}

TEST(GpuTrainerTest, StepFailureCarriesTheDevicesLastError) {
  absl::StatusOr<Fixture> gpu = Open(TRUN_TEST_BIGRAM_CUDA_STEP);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  // Batch 2 has a token id the step refuses.
  absl::StatusOr<Trained> trained =
      TrainSteps(*gpu, 5, OnNan::kStop, nullptr, /*bad_at=*/2);
  ASSERT_FALSE(trained.ok());
  EXPECT_EQ(trained.status().message(),
            "step 'bigram': train step 3 failed: returned 1 "
            "(TCC_STATUS_BAD_ARGS): train step 2 returned 1");
  EXPECT_EQ(gpu->trainer->steps_done(), 2);
  // Its queued upload was still waited for.
  EXPECT_EQ(FakeStats(TRUN_TEST_BIGRAM_CUDA_STEP).pending, 0);
}

TEST(GpuTrainerTest, BatchBuffersArePinnedThroughTheDeviceApi) {
  absl::StatusOr<Fixture> gpu = Open(TRUN_TEST_BIGRAM_CUDA_STEP);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  const tcc_device_api *api = gpu->trainer->pinned_memory();
  ASSERT_NE(api, nullptr);
  int64_t before = FakeStats(TRUN_TEST_BIGRAM_CUDA_STEP).pinned_blocks;
  {
    HostBatch batch(gpu->binding, api);
    EXPECT_TRUE(batch.data.ok() && batch.data.pinned());
    EXPECT_TRUE(batch.targets.ok() && batch.targets.pinned());
    EXPECT_EQ(batch.data.size(), 128u * 4);
    EXPECT_EQ(batch.data.as<int32_t>()[127], 0) << "not zero-filled";
    FormulaTokens source;
    BatchLoader loader(source, gpu->binding, 3, api);
    EXPECT_EQ(FakeStats(TRUN_TEST_BIGRAM_CUDA_STEP).pinned_blocks,
              before + 2 + 3 * 2);
  }
  EXPECT_EQ(FakeStats(TRUN_TEST_BIGRAM_CUDA_STEP).pinned_blocks, before);
  HostBatch plain(gpu->binding);
  EXPECT_TRUE(plain.data.ok());
  EXPECT_FALSE(plain.data.pinned());
}

// The fake itself must be able to fail, or the tests above prove nothing.
TEST(GpuTrainerTest, TheFakeRefusesHostPointersStaleInputsAndReusedSources) {
  absl::StatusOr<Fixture> gpu = Open(TRUN_TEST_BIGRAM_CUDA_STEP);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  const tcc_step_descriptor &d = gpu->d();
  const tcc_device_api &api = *d.device;
  int64_t errors = FakeStats(TRUN_TEST_BIGRAM_CUDA_STEP).errors;

  // Host memory where the ABI wants device memory.
  std::vector<float> table(256 * 256), bias(256), workspace(128 * 256);
  std::vector<int32_t> tokens(128), targets(128);
  void *params[2] = {table.data(), bias.data()};
  const void *inputs[2] = {tokens.data(), targets.data()};
  float loss = 0;
  tcc_step_args args{};
  args.params = params;
  args.inputs = inputs;
  args.workspace = workspace.data();
  args.loss = &loss;
  EXPECT_EQ(d.train(&args), TCC_STATUS_BAD_ARGS);
  EXPECT_NE(std::string(api.last_error()).find("param 'table' at"),
            std::string::npos)
      << api.last_error();

  // Device memory, but an input read twice without a new upload.
  void *dev_params[2] = {api.alloc(256 * 256 * 4), api.alloc(256 * 4)};
  void *dev_inputs[2] = {api.alloc(128 * 4), api.alloc(128 * 4)};
  void *dev_workspace = api.alloc(128 * 256 * 4);
  args.params = dev_params;
  args.inputs = const_cast<const void **>(dev_inputs);
  args.workspace = dev_workspace;
  HostBatch staging(gpu->binding, &api);
  const void *sources[2] = {staging.data.data(), staging.targets.data()};
  uint64_t bytes[2] = {128 * 4, 128 * 4};
  ASSERT_EQ(api.upload_async(2, dev_inputs, sources, bytes), TCC_STATUS_OK);
  EXPECT_EQ(d.train(&args), TCC_STATUS_OK) << api.last_error();
  EXPECT_EQ(d.train(&args), TCC_STATUS_BAD_ARGS);
  EXPECT_NE(std::string(api.last_error())
                .find("was not uploaded since a call "
                      "last read it"),
            std::string::npos)
      << api.last_error();

  // A pinned source changed while its upload is pending.
  ASSERT_EQ(api.upload_async(2, dev_inputs, sources, bytes), TCC_STATUS_OK);
  staging.data.as<int32_t>()[0] = 9;
  EXPECT_NE(api.wait_uploads(), TCC_STATUS_OK);
  EXPECT_NE(std::string(api.last_error())
                .find("changed before the upload "
                      "completed"),
            std::string::npos)
      << api.last_error();
  staging.data.as<int32_t>()[0] = 0; // as queued: the wait completes
  EXPECT_EQ(api.wait_uploads(), TCC_STATUS_OK);

  // A write into a pending destination.
  ASSERT_EQ(api.upload_async(2, dev_inputs, sources, bytes), TCC_STATUS_OK);
  EXPECT_EQ(api.to_device(dev_inputs[0], tokens.data(), 128 * 4),
            TCC_STATUS_BAD_ARGS);
  EXPECT_EQ(api.wait_uploads(), TCC_STATUS_OK);

  for (void *p : {dev_params[0], dev_params[1], dev_inputs[0], dev_inputs[1],
                  dev_workspace})
    api.release(p);
  EXPECT_EQ(FakeStats(TRUN_TEST_BIGRAM_CUDA_STEP).errors, errors + 4);
}

} // namespace
} // namespace tcc::trun
