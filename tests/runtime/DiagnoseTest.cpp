// trun --diagnose: the report and the fit decision on machines described by
// hand (no GPU is needed to test the logic), and the real probe of this
// machine through the CLI.
#include "runtime/trun/step/Diagnose.h"

#include "tests/runtime/TestData.h"

#include <gtest/gtest.h>

#include <sstream>

namespace tcc::trun {
namespace {

using testing::FakeStep;

constexpr int64_t kMiB = 1 << 20;

MachineInfo HostOnly(int64_t available) {
  MachineInfo m;
  m.host_total_bytes = 2 * available;
  m.host_available_bytes = available;
  m.driver_error = "libcuda.so.1 not found: no NVIDIA driver";
  return m;
}

MachineInfo WithGpu(int64_t gpu_free) {
  MachineInfo m = HostOnly(64 * kMiB);
  m.has_driver = true;
  m.driver_error.clear();
  m.driver_version = 13000;
  GpuInfo gpu;
  gpu.name = "NVIDIA H100 80GB HBM3";
  gpu.compute_major = 9;
  gpu.multiprocessors = 132;
  gpu.total_bytes = 80 * 1024 * kMiB;
  gpu.free_bytes = gpu_free;
  m.gpus.push_back(gpu);
  return m;
}

TEST(DiagnoseTest, StepBytesCountsEveryBufferTrunAllocates) {
  FakeStep step(2, 2, 3); // w (2,3) f32, b (3) f32; image (2,2), label (2)
  step.descriptor.workspace_bytes = 1000;
  // params 24 + 12, inputs 16 + 8, outputs: logits (2,3) 24, workspace.
  EXPECT_EQ(StepBytes(step.descriptor), 24 + 12 + 16 + 8 + 24 + 1000);
}

TEST(DiagnoseTest, CpuStepFitsOrNotAgainstAvailableHostMemory) {
  FakeStep step(2, 2, 3);
  step.descriptor.workspace_bytes = 10 * kMiB;
  std::ostringstream out;
  EXPECT_TRUE(PrintDiagnosis(HostOnly(20 * kMiB), &step.descriptor, out));
  EXPECT_NE(out.str().find("gpu: none (libcuda.so.1 not found: no NVIDIA "
                           "driver)"),
            std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("step 'fake' (target cpu): needs 10.0 MiB"),
            std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("available host memory 20.0 MiB: fits"),
            std::string::npos)
      << out.str();
  std::ostringstream small;
  EXPECT_FALSE(PrintDiagnosis(HostOnly(5 * kMiB), &step.descriptor, small));
  EXPECT_NE(small.str().find("does NOT fit"), std::string::npos)
      << small.str();
}

TEST(DiagnoseTest, CudaStepNeedsAGpuWithEnoughFreeMemory) {
  FakeStep step(2, 2, 3);
  step.descriptor.target = "cuda";
  step.descriptor.arch = "sm_90";
  step.descriptor.workspace_bytes = 3 * 1024 * kMiB;
  std::ostringstream none;
  EXPECT_FALSE(PrintDiagnosis(HostOnly(1024 * kMiB), &step.descriptor, none));
  EXPECT_NE(none.str().find("needs a GPU; none is usable here"),
            std::string::npos)
      << none.str();
  std::ostringstream big;
  EXPECT_TRUE(
      PrintDiagnosis(WithGpu(79 * 1024 * kMiB), &step.descriptor, big));
  EXPECT_NE(big.str().find("nvidia driver: CUDA 13.0, 1 GPU(s)"),
            std::string::npos)
      << big.str();
  EXPECT_NE(big.str().find("gpu 0: NVIDIA H100 80GB HBM3, compute capability "
                           "9.0 (sm_90), 132 SMs, 80.00 GiB total, 79.00 GiB "
                           "free"),
            std::string::npos)
      << big.str();
  std::ostringstream full;
  EXPECT_FALSE(PrintDiagnosis(WithGpu(2 * 1024 * kMiB), &step.descriptor,
                              full));
  EXPECT_NE(full.str().find("free on gpu 0 2.00 GiB: does NOT fit"),
            std::string::npos)
      << full.str();
}

TEST(DiagnoseTest, ArchitectureRunsNativelyOrThroughPtxOnNewerGpus) {
  std::string why;
  EXPECT_TRUE(ArchRunsOn("sm_90", 9, 0, why));
  EXPECT_EQ(why, "runs natively");
  EXPECT_TRUE(ArchRunsOn("sm_80", 9, 0, why));
  EXPECT_NE(why.find("runs through the embedded PTX"), std::string::npos) << why;
  EXPECT_NE(why.find("--arch sm_90"), std::string::npos) << why;
  EXPECT_TRUE(ArchRunsOn("sm_90", 12, 0, why));
  EXPECT_FALSE(ArchRunsOn("sm_90", 8, 0, why));
  EXPECT_EQ(why, "does NOT run (a GPU older than the code; recompile with "
                 "tcc compile --arch sm_80)");
  EXPECT_TRUE(ArchRunsOn("sm_90a", 9, 0, why));
  EXPECT_FALSE(ArchRunsOn("sm_90a", 10, 0, why));
  EXPECT_NE(why.find("sm_90a code runs only on sm_90"), std::string::npos)
      << why;
  EXPECT_TRUE(ArchRunsOn("sm_100", 10, 0, why));
  EXPECT_FALSE(ArchRunsOn("sm_100", 9, 0, why));
  EXPECT_TRUE(ArchRunsOn("gfx90a", 9, 0, why)) << "unknown: not refused";
  EXPECT_EQ(why, "unknown architecture, cannot tell");
}

TEST(DiagnoseTest, CudaStepIsCheckedOnTheChosenGpu) {
  FakeStep step(2, 2, 3);
  step.descriptor.target = "cuda";
  step.descriptor.arch = "sm_90";
  MachineInfo two = WithGpu(79 * 1024 * kMiB);
  GpuInfo a100;
  a100.index = 1;
  a100.name = "NVIDIA A100-SXM4-80GB";
  a100.compute_major = 8;
  a100.total_bytes = 80 * 1024 * kMiB;
  a100.free_bytes = 79 * 1024 * kMiB;
  two.gpus.push_back(a100);
  std::ostringstream first;
  EXPECT_TRUE(PrintDiagnosis(two, &step.descriptor, first, 0)) << first.str();
  EXPECT_NE(first.str().find("built for sm_90; gpu 0 is sm_90: runs natively"),
            std::string::npos)
      << first.str();
  EXPECT_NE(first.str().find("free on gpu 0 79.00 GiB: fits"), std::string::npos)
      << first.str();
  std::ostringstream second;
  EXPECT_FALSE(PrintDiagnosis(two, &step.descriptor, second, 1));
  EXPECT_NE(second.str().find("gpu 1 is sm_80: does NOT run"), std::string::npos)
      << second.str();
  EXPECT_EQ(second.str().find("fits"), std::string::npos) << second.str();
  std::ostringstream missing;
  EXPECT_FALSE(PrintDiagnosis(two, &step.descriptor, missing, 2));
  EXPECT_NE(missing.str().find("no gpu 2 here (gpus 0..1)"), std::string::npos)
      << missing.str();
}

TEST(DiagnoseTest, ProbeOfThisMachineReadsHostMemory) {
  MachineInfo m = ProbeMachine();
  EXPECT_GT(m.host_total_bytes, 0);
  EXPECT_GT(m.host_available_bytes, 0);
  EXPECT_LE(m.host_available_bytes, m.host_total_bytes);
  // Either a driver with its GPUs, or a reason why there is none.
  EXPECT_TRUE(m.has_driver || !m.driver_error.empty());
}

} // namespace
} // namespace tcc::trun
