// trun on GPU steps (target "cuda") run as a user would, with the fixture
// steps built for the fake GPU (fixtures/fake_device.h; CI has no GPU):
// the same runs as with the CPU builds must print the same losses and write
// the same files, and the fake must end with no error, nothing allocated
// and no upload pending (it writes what it saw to $TRUN_FAKE_REPORT when
// trun unloads it).
#include "runtime/trun/data/TokenShards.h"
#include "runtime/trun/data/Vocab.h"

#include "tests/runtime/fixtures/TrunCli.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

namespace tcc::trun {
namespace {

using testing::CliResult;
using testing::RunTrun;
using testing::Slurp;
using testing::StepLosses;
using testing::TempDir;
// Validation losses are compared between runs as printed, digit for digit.
using testing::ValLossTexts;


// The text after the "sample: ..." line, to the end.
std::string SampleText(const std::string &out) {
  size_t at = out.find("\nsample: ");
  if (at == std::string::npos)
    return "";
  size_t text = out.find('\n', at + 1);
  return text == std::string::npos ? "" : out.substr(text + 1);
}

size_t Count(const std::string &text, const std::string &part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos;
       at = text.find(part, at + 1))
    ++n;
  return n;
}

class TrunGpuCliTest : public testing::TrunCliFixture {
protected:
  void SetUp() override {
    // Token shards of a repeated text, as in TrunTokenCliTest.
    WriteTokenShards(/*with_vocab=*/false);
    if (HasFatalFailure())
      return;
    // Images in the Fashion-MNIST layout for the linear classifier.
    WriteImageSplits(images_.path());
    setenv("TRUN_FAKE_REPORT", report_.c_str(), 1);
  }
  void TearDown() override { unsetenv("TRUN_FAKE_REPORT"); }

  // What the fake saw in the last run: key=value pairs of its report.
  std::map<std::string, std::string> Report() const {
    std::map<std::string, std::string> fields;
    std::istringstream in(Slurp(report_));
    std::string first_line, first_error;
    std::getline(in, first_line);
    std::getline(in, first_error);
    std::istringstream words(first_line);
    for (std::string word; words >> word;) {
      size_t equals = word.find('=');
      if (equals != std::string::npos)
        fields[word.substr(0, equals)] = word.substr(equals + 1);
    }
    fields["first_error"] = first_error;
    return fields;
  }
  // Everything released, nothing pending, no misuse seen.
  void ExpectCleanFake() const {
    std::map<std::string, std::string> r = Report();
    EXPECT_EQ(r["initialized"], "1") << Slurp(report_);
    EXPECT_EQ(r["errors"], "0") << r["first_error"];
    EXPECT_EQ(r["device_blocks"], "0") << "device memory leaked";
    EXPECT_EQ(r["pinned_blocks"], "0") << "pinned memory leaked";
    EXPECT_EQ(r["pending"], "0") << "uploads in flight at the end";
  }

  std::string Tokens(const std::string &step) const {
    return step + " --data " + train_ + " --val " + val_;
  }

  TempDir images_;
  std::string report_ = dir_.File("fake_report.txt");
  const std::string cpu_ = TRUN_TEST_BIGRAM_STEP,
                    gpu_ = TRUN_TEST_BIGRAM_CUDA_STEP;
};

TEST_F(TrunGpuCliTest, TokenRunMatchesTheCpuBitForBit) {
  auto run = [&](const std::string &step, const std::string &tag) {
    return RunTrun(Tokens(step) +
                   " --steps 30 --eval-every 10 --eval-batches 2 --seed 5 "
                   "--log-every 10 --metrics " +
                   dir_.File(tag + ".jsonl") + " --save-weights " +
                   dir_.File(tag + ".safetensors") + " --save-train-outputs " +
                   dir_.File(tag + "_out.st") +
                   " --sample 40 --temperature 0.8");
  };
  CliResult cpu = run(cpu_, "cpu");
  ASSERT_EQ(cpu.exit_code, 0) << cpu.err;
  CliResult gpu = run(gpu_, "gpu");
  ASSERT_EQ(gpu.exit_code, 0) << gpu.err;
  EXPECT_EQ(gpu.err, "");
  ExpectCleanFake();
  std::map<std::string, std::string> report = Report();
  // Two inputs per step went up with upload_async; all steps but the last
  // ran while the next batch's upload was queued.
  EXPECT_EQ(report["uploads"], "60");
  // From the loader's pinned staging buffers.
  EXPECT_EQ(report["pinned_uploads"], "60");
  EXPECT_EQ(report["overlapped_train_calls"], "29");
  EXPECT_EQ(report["train_calls"], "30");

  std::map<int64_t, std::string> cpu_losses =
                                     StepLosses(dir_.File("cpu.jsonl")),
                                 gpu_losses =
                                     StepLosses(dir_.File("gpu.jsonl"));
  EXPECT_EQ(gpu_losses.size(), 30u);
  EXPECT_EQ(gpu_losses, cpu_losses);
  // The metrics' end event carries the GPU memory.
  std::string metrics = Slurp(dir_.File("gpu.jsonl"));
  EXPECT_NE(metrics.find("\"gpu_peak_bytes\":\""), std::string::npos) << metrics;
  EXPECT_EQ(Slurp(dir_.File("cpu.jsonl")).find("gpu_peak_bytes"), std::string::npos);
  EXPECT_EQ(ValLossTexts(gpu.out).size(), 3u) << gpu.out;
  EXPECT_EQ(ValLossTexts(gpu.out), ValLossTexts(cpu.out));
  // The weights (downloaded) and the last loss, byte for byte.
  EXPECT_EQ(Slurp(dir_.File("gpu.safetensors")),
            Slurp(dir_.File("cpu.safetensors")));
  EXPECT_EQ(Slurp(dir_.File("gpu_out.st")), Slurp(dir_.File("cpu_out.st")));
  // The same text; the GPU run then reports its memory.
  EXPECT_FALSE(SampleText(cpu.out).empty()) << cpu.out;
  // (The run also evaluated, with output buffers: the peak exceeds the
  // training plan.)
  EXPECT_EQ(SampleText(gpu.out), SampleText(cpu.out) + "gpu memory: 0.5 MiB "
                                                       "allocated, peak 0.5 "
                                                       "MiB (planned 0.4 MiB)\n");

  EXPECT_NE(cpu.out.find("\ntarget: cpu (x86_64)\n"), std::string::npos)
      << cpu.out;
  EXPECT_NE(gpu.out.find("\ntarget: cuda (fake), GPU 0\n"), std::string::npos)
      << gpu.out;
  EXPECT_EQ(Count(gpu.out, "gpu: fake device: GPU 0, host memory, eager "
                           "copies\n"),
            1u)
      << gpu.out;
  EXPECT_EQ(cpu.out.find("gpu"), std::string::npos) << cpu.out;
}

TEST_F(TrunGpuCliTest, CheckpointAndResumeAreExact) {
  std::string base = " --eval-every 10 --eval-batches 2 --seed 5";
  CliResult whole = RunTrun(Tokens(gpu_) + base + " --steps 30 --metrics " +
                            dir_.File("whole.jsonl") + " --save-weights " +
                            dir_.File("whole.safetensors"));
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  // In two pieces: 12 steps (checkpoints at 10 and 12), then --resume.
  std::string ckpt = dir_.File("ckpt");
  CliResult first =
      RunTrun(Tokens(gpu_) + base + " --steps 12 --ckpt-dir " + ckpt +
              " --ckpt-every 10 --metrics " + dir_.File("pieces.jsonl"));
  ASSERT_EQ(first.exit_code, 0) << first.err;
  ExpectCleanFake();
  CliResult second =
      RunTrun(Tokens(gpu_) + base + " --steps 30 --ckpt-dir " + ckpt +
              " --resume --metrics " + dir_.File("pieces.jsonl") +
              " --save-weights " + dir_.File("pieces.safetensors"));
  ASSERT_EQ(second.exit_code, 0) << second.err;
  ExpectCleanFake();
  EXPECT_NE(second.out.find("resumed from " + ckpt + "/step_000000012"),
            std::string::npos)
      << second.out;
  std::map<int64_t, std::string> a = StepLosses(dir_.File("whole.jsonl")),
                                 b = StepLosses(dir_.File("pieces.jsonl"));
  EXPECT_EQ(a.size(), 30u);
  EXPECT_EQ(a, b);
  EXPECT_EQ(Slurp(dir_.File("whole.safetensors")),
            Slurp(dir_.File("pieces.safetensors")));
  // The checkpoint holds the downloaded weights: a CPU run resumes from
  // the GPU's step 12 and ends where the GPU did.
  std::string cpu_ckpt = dir_.File("cpu_ckpt");
  std::filesystem::create_directories(cpu_ckpt);
  std::filesystem::copy(ckpt + "/step_000000012", cpu_ckpt + "/step_000000012",
                        std::filesystem::copy_options::recursive);
  CliResult on_cpu =
      RunTrun(Tokens(cpu_) + base + " --steps 30 --ckpt-dir " + cpu_ckpt +
              " --resume --save-weights " + dir_.File("cpu.safetensors"));
  ASSERT_EQ(on_cpu.exit_code, 0) << on_cpu.err;
  EXPECT_EQ(Slurp(dir_.File("cpu.safetensors")),
            Slurp(dir_.File("whole.safetensors")));
}

TEST_F(TrunGpuCliTest, InitFromLoadsTheWeightsOntoTheGpu) {
  std::string weights = dir_.File("w.safetensors");
  ASSERT_EQ(
      RunTrun(Tokens(cpu_) + " --steps 20 --save-weights " + weights).exit_code,
      0);
  CliResult cpu = RunTrun(cpu_ + " --val " + val_ + " --init-from " + weights);
  CliResult gpu = RunTrun(gpu_ + " --val " + val_ + " --init-from " + weights);
  ASSERT_EQ(gpu.exit_code, 0) << gpu.err;
  ExpectCleanFake();
  ASSERT_EQ(ValLossTexts(gpu.out).size(), 1u) << gpu.out;
  EXPECT_EQ(ValLossTexts(gpu.out), ValLossTexts(cpu.out));
  EXPECT_EQ(Report()["train_calls"], "0");
}

TEST_F(TrunGpuCliTest, OnNanSkipMatchesTheCpu) {
  std::string args = " --data " + train_ + " --steps 15 --on-nan skip";
  CliResult cpu = RunTrun(std::string(TRUN_TEST_BIGRAM_NAN_STEP) + args +
                          " --save-weights " + dir_.File("cpu.safetensors"));
  ASSERT_EQ(cpu.exit_code, 0) << cpu.err;
  CliResult gpu = RunTrun(std::string(TRUN_TEST_BIGRAM_CUDA_NAN_STEP) + args +
                          " --save-weights " + dir_.File("gpu.safetensors"));
  ASSERT_EQ(gpu.exit_code, 0) << gpu.err;
  ExpectCleanFake();
  EXPECT_NE(gpu.out.find("warning: step 'bigram': non-finite loss at train "
                         "step 6 (loss nan); update undone (--on-nan skip)"),
            std::string::npos)
      << gpu.out;
  EXPECT_NE(gpu.out.find("1 skipped (non-finite)"), std::string::npos);
  EXPECT_EQ(Slurp(dir_.File("gpu.safetensors")),
            Slurp(dir_.File("cpu.safetensors")));
  // --on-nan stop names the step as on the CPU.
  CliResult stop = RunTrun(std::string(TRUN_TEST_BIGRAM_CUDA_NAN_STEP) +
                           " --data " + train_ + " --steps 10");
  EXPECT_EQ(stop.exit_code, 1);
  EXPECT_EQ(stop.err, "trun: error: step 'bigram': non-finite loss at train "
                      "step 6 (loss nan) (no --ckpt-dir: nothing was "
                      "checkpointed)\n");
  ExpectCleanFake();
}

TEST_F(TrunGpuCliTest, ImageClassifierMatchesTheCpu) {
  std::string args = " --data " + images_.path() + " --epochs 2 --seed 1";
  CliResult cpu = RunTrun(std::string(TRUN_TEST_LINEAR_STEP) + args +
                          " --save-weights " + dir_.File("cpu.safetensors"));
  ASSERT_EQ(cpu.exit_code, 0) << cpu.err;
  CliResult gpu = RunTrun(std::string(TRUN_TEST_LINEAR_CUDA_STEP) + args +
                          " --save-weights " + dir_.File("gpu.safetensors"));
  ASSERT_EQ(gpu.exit_code, 0) << gpu.err;
  ExpectCleanFake();
  std::regex result(
      R"(test accuracy: [0-9.]+ \(\d+/250\)\ntest loss: [0-9.]+\n)");
  std::smatch c, g;
  ASSERT_TRUE(std::regex_search(cpu.out, c, result)) << cpu.out;
  ASSERT_TRUE(std::regex_search(gpu.out, g, result)) << gpu.out;
  EXPECT_EQ(g.str(), c.str());
  EXPECT_EQ(Slurp(dir_.File("gpu.safetensors")),
            Slurp(dir_.File("cpu.safetensors")));
}

TEST_F(TrunGpuCliTest, GpuFlagSelectsTheGpuAndIsAnErrorOnCpuSteps) {
  CliResult second = RunTrun(Tokens(gpu_) + " --steps 3 --gpu 1");
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_NE(second.out.find("target: cuda (fake), GPU 1\n"), std::string::npos)
      << second.out;
  EXPECT_NE(second.out.find("gpu: fake device: GPU 1,"), std::string::npos)
      << second.out;
  EXPECT_EQ(Report()["ordinal"], "1");
  ExpectCleanFake();

  CliResult cpu = RunTrun(Tokens(cpu_) + " --steps 3 --gpu 1");
  EXPECT_EQ(cpu.exit_code, 1);
  EXPECT_EQ(cpu.err,
            "trun: error: --gpu applies to cuda steps; this step is cpu\n");

  // --threads is the cpu step's: named under the target line, refused
  // for a cuda step.
  CliResult threads = RunTrun(Tokens(cpu_) + " --steps 3 --threads 2");
  ASSERT_EQ(threads.exit_code, 0) << threads.err;
  EXPECT_NE(threads.out.find("\ntarget: cpu (x86_64)\nthreads: 2 (--threads), "),
            std::string::npos)
      << threads.out;
  CliResult cuda = RunTrun(Tokens(gpu_) + " --steps 3 --threads 2");
  EXPECT_EQ(cuda.exit_code, 1);
  EXPECT_EQ(cuda.err,
            "trun: error: --threads applies to cpu steps; this step is cuda\n");

  CliResult missing = RunTrun(Tokens(gpu_) + " --steps 3 --gpu 7");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_EQ(missing.err, "trun: error: step 'bigram': selecting GPU 7 failed: "
                         "fake device: no GPU 7 (the fake has 2)\n");
}

TEST_F(TrunGpuCliTest, OutOfGpuMemoryNamesTheCategory) {
  setenv("TRUN_FAKE_GPU_BYTES", "300000", 1);
  CliResult r = RunTrun(Tokens(gpu_) + " --steps 3");
  unsetenv("TRUN_FAKE_GPU_BYTES");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "trun: error: step 'bigram': cannot allocate 131072 bytes "
                   "of GPU memory for the workspace: fake device: out of "
                   "memory: 131072 bytes requested, 263168 of 300000 in use\n");
  std::map<std::string, std::string> report = Report();
  EXPECT_EQ(report["device_blocks"], "0") << "the parameters' arena leaked";
  EXPECT_EQ(report["errors"], "1") << report["first_error"];
}

TEST_F(TrunGpuCliTest, DiagnoseChecksTheGpuThatGpuNames) {
  CliResult cpu = RunTrun(cpu_ + " --diagnose --gpu 1");
  EXPECT_EQ(cpu.exit_code, 1);
  EXPECT_EQ(cpu.err,
            "trun: error: --gpu applies to cuda steps; this step is cpu\n");
  // The probe is of this machine: CI's has no GPU (a GPU machine's answer
  // depends on its GPUs, so only the no-driver case is pinned down).
  CliResult gpu = RunTrun(gpu_ + " --diagnose --gpu 1");
  if (gpu.out.find("nvidia driver:") == std::string::npos) {
    EXPECT_EQ(gpu.exit_code, 1);
    EXPECT_NE(gpu.out.find("step 'bigram' (target cuda): needs a GPU; none "
                           "is usable here"),
              std::string::npos)
        << gpu.out;
    EXPECT_EQ(gpu.err,
              "trun: error: step 'bigram' cannot run here (see above)\n");
  }
}

TEST_F(TrunGpuCliTest, ProfilePrintsWhereTheStepTimeGoes) {
  // The fake device reports a 0.5 ms product and a 0.25 ms elementwise
  // kernel per train call (fake_device.h); the first step is left out.
  CliResult r = RunTrun(Tokens(gpu_) + " --steps 5 --profile");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("profile: 4 train steps timed kernel by kernel (no CUDA "
                       "graph while profiling); the first 1 left out (warm-up)\n"
                       "  train step: 0.75 ms in 2 launches"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("  matmul (cuBLASLt)             1       0.50  66.7%        "
                       "2      4.0\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("fake.act: kern.elementwise (tcc_k0_ew)"), std::string::npos)
      << r.out;
  // The product's algorithm (the fake's gemm_choice): in its launch row,
  // in the table by descriptor, and the first step's GEMM note.
  EXPECT_NE(r.out.find("fake.fc: kern.gemm (cublasLtMatmul) [algo 7 tile 64x64 stages#3 "
                       "splitK 1 swizzle 0 reduction 0 cluster#0 (search: 0.500 ms, "
                       "cuBLASLt's first answer 0.600 ms)]"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("  cuBLASLt products      launches    ms/step      %     GB/s  "
                       "TFLOP/s  descriptor: algorithm (source)\n"
                       "                                1       0.50  66.7%        2      "
                       "4.0  f32->f32 64x64x64 NN none beta0 align256 ws33554432 32F: algo 7"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("gpu: GEMM algorithms: 1 shapes searched"), std::string::npos)
      << r.out;
  ExpectCleanFake();

  // The same numbers as records in the metrics file.
  std::string metrics = dir_.File("profile.jsonl");
  CliResult recorded =
      RunTrun(Tokens(gpu_) + " --steps 3 --profile --metrics " + metrics);
  ASSERT_EQ(recorded.exit_code, 0) << recorded.err;
  std::string lines = Slurp(metrics);
  EXPECT_NE(lines.find("{\"kind\":\"profile\",\"step\":3,\"entry\":\"train\","
                       "\"launch\":0,\"kernel\":\"cublasLtMatmul\",\"label\":"
                       "\"fake.fc: kern.gemm (cublasLtMatmul)\",\"ms_per_call\":0.5,"
                       "\"calls\":2,\"flops\":2000000000.0,\"bytes\":1000000.0,"),
            std::string::npos)
      << lines;
  EXPECT_NE(lines.find("\"kernel\":\"tcc_k0_ew\""), std::string::npos) << lines;

  CliResult one = RunTrun(Tokens(gpu_) + " --steps 1 --profile");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_NE(one.out.find("profile: 1 train step timed kernel by kernel (no CUDA "
                         "graph while profiling)\n"),
            std::string::npos)
      << one.out;

  CliResult cpu = RunTrun(Tokens(cpu_) + " --steps 1 --profile");
  EXPECT_EQ(cpu.exit_code, 1);
  EXPECT_EQ(cpu.err, "trun: error: --profile applies to cuda steps; this step "
                     "is cpu: compile it with tcc compile --profile, and it "
                     "prints its kernels' times at exit\n");
}

TEST_F(TrunGpuCliTest, InfoNamesTheTarget) {
  CliResult r = RunTrun(gpu_ + " --info");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("target: cuda (fake), precision f32\n"),
            std::string::npos)
      << r.out;
}

} // namespace
} // namespace tcc::trun
