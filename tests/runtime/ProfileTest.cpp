// trun --profile's report, from launch records written by hand (the device
// API's timing itself runs on a GPU: tests/gpu/run.sh).
#include "runtime/trun/dist/CommProfile.h"
#include "runtime/trun/step/Profile.h"

#include <gtest/gtest.h>

#include <sstream>

namespace tcc::trun {
namespace {

tcc_launch_time Launch(int32_t entry, int32_t launch, const char *kernel,
                       const char *label, double flops, double bytes,
                       double ms_per_call, int64_t calls) {
  return {entry, launch, kernel, label, flops, bytes, ms_per_call * calls, calls};
}

TEST(ProfileTest, KernelKindsFromKernelNames) {
  EXPECT_EQ(KernelKind("cublasLtMatmul"), "matmul (cuBLASLt)");
  EXPECT_EQ(KernelKind("cublasLtMatmul+bias+gelu_aux"), "matmul+epilogue (cuBLASLt)");
  EXPECT_EQ(KernelKind("cudnn_sdpa_forward"), "attention (cuDNN)");
  EXPECT_EQ(KernelKind("cudnn_sdpa_backward"), "attention_grad (cuDNN)");
  EXPECT_EQ(KernelKind("tcc_k3_ew"), "elementwise");
  EXPECT_EQ(KernelKind("tcc_k12_ew4"), "elementwise");
  EXPECT_EQ(KernelKind("tcc_k15_reduce"), "reduction");
  EXPECT_EQ(KernelKind("tcc_k7_slice"), "slice");
  EXPECT_EQ(KernelKind("tcc_k0_gather"), "gather");
  EXPECT_EQ(KernelKind("cudaMemsetAsync"), "cudaMemsetAsync");
  EXPECT_EQ(KernelKind("tcc_kx_ew"), "tcc_kx_ew") << "not a generated name";
}

TEST(ProfileTest, ReportsPerStepTimesByKindAndTheSlowestLaunches) {
  // 4 steps: a product (2 GFLOP, 3 ms), two elementwise launches (3 GB in
  // 2 ms; 1 GB in 0.5 ms), a reduction that ran in only 2 of the steps.
  std::vector<tcc_launch_time> launches = {
      Launch(0, 0, "cublasLtMatmul", "fc: kern.gemm (cublasLtMatmul)", 2e9,
             1e6, 3.0, 4),
      Launch(0, 1, "tcc_k0_ew", "act: kern.elementwise (tcc_k0_ew)", 1e6,
             3e9, 2.0, 4),
      Launch(0, 2, "tcc_k1_ew4", "add: kern.elementwise (tcc_k1_ew4)", 0,
             1e9, 0.5, 4),
      Launch(0, 3, "tcc_k2_reduce", "loss: kern.reduce (tcc_k2_reduce)", 1e6,
             1e6, 4.0, 2),
      Launch(1, 0, "cublasLtMatmul", "fc: kern.gemm (cublasLtMatmul)", 2e9,
             1e6, 3.0, 3),
  };
  std::ostringstream out;
  PrintProfile(launches, 1, out, /*top=*/2);
  std::string text = out.str();
  EXPECT_NE(text.find("profile: 4 train steps timed kernel by kernel (no CUDA "
                      "graph while profiling); the first 1 left out (warm-up)"),
            std::string::npos)
      << text;
  // Per step: 3 + 2 + 0.5 + 4 (averaged over the steps that ran it).
  EXPECT_NE(text.find("train step: 9.50 ms in 4 launches"), std::string::npos)
      << text;
  // Kinds, slowest first: reduction 4, matmul 3, elementwise 2.5.
  size_t reduction = text.find("  reduction "), matmul = text.find("  matmul (cuBLASLt) "),
         elementwise = text.find("  elementwise ");
  ASSERT_NE(reduction, std::string::npos) << text;
  ASSERT_NE(matmul, std::string::npos) << text;
  ASSERT_NE(elementwise, std::string::npos) << text;
  EXPECT_LT(reduction, matmul);
  EXPECT_LT(matmul, elementwise);
  std::string matmulLine = text.substr(matmul, text.find('\n', matmul) - matmul);
  EXPECT_NE(matmulLine.find("1       3.00  31.6%        0      0.7"), std::string::npos)
      << matmulLine << " (1 launch, 3 of 9.5 ms, 1 MB -> 0 GB/s, 2 GFLOP in 3 ms)";
  std::string ewLine = text.substr(elementwise, text.find('\n', elementwise) - elementwise);
  EXPECT_NE(ewLine.find("2       2.50  26.3%     1600"), std::string::npos)
      << ewLine << " (4 GB in 2.5 ms)";
  // The two slowest launches, with their numbers and labels.
  size_t slowest = text.find("slowest launches");
  ASSERT_NE(slowest, std::string::npos) << text;
  std::string list = text.substr(slowest);
  EXPECT_NE(list.find("reduction                     3      4.000  42.1%        0      0.0  "
                      "loss: kern.reduce (tcc_k2_reduce)"),
            std::string::npos)
      << list;
  EXPECT_NE(list.find("matmul (cuBLASLt)             0      3.000  31.6%        0      0.7  "
                      "fc: kern.gemm (cublasLtMatmul)"), std::string::npos)
      << list;
  EXPECT_EQ(list.find("act: kern.elementwise"), std::string::npos) << "top 2 only";
  EXPECT_NE(text.find("eval: 3 calls, 3.00 ms per call in 1 launches"), std::string::npos)
      << text;
}

TEST(ProfileTest, ProductsShowTheirAlgorithmAndSumByDescriptor) {
  // Two launches of one product (1 ms each), one of another (0.5 ms), an
  // elementwise kernel; the eval product's choice is not looked up.
  std::vector<tcc_launch_time> launches = {
      Launch(0, 0, "cublasLtMatmul+bias", "fc1: kern.gemm_epilogue (cublasLtMatmul+bias)",
             1e12, 1e9, 1.0, 2),
      Launch(0, 1, "tcc_k0_ew", "act: kern.elementwise (tcc_k0_ew)", 0, 1e9, 0.25, 2),
      Launch(0, 2, "cublasLtMatmul+bias", "fc2: kern.gemm_epilogue (cublasLtMatmul+bias)",
             1e12, 1e9, 1.0, 2),
      Launch(0, 3, "cublasLtMatmul", "proj: kern.gemm (cublasLtMatmul)", 1e11, 1e8, 0.5, 2),
  };
  GemmChoices gemm;
  gemm[0] = {"bf16->bf16 64x64x64 NN bias", "algo 66 tile 128x256", "search", 0.9, 1.1};
  gemm[2] = gemm[0];
  gemm[3] = {"bf16->bf16 8x8x8 TN none", "algo 21 tile 64x64", "heuristic", 0, 0};
  std::ostringstream out;
  PrintProfile(launches, 0, out, /*top=*/3, gemm);
  std::string text = out.str();
  size_t table = text.find("  cuBLASLt products      launches    ms/step      %     GB/s  "
                           "TFLOP/s  descriptor: algorithm (source)\n");
  ASSERT_NE(table, std::string::npos) << text;
  std::string rows = text.substr(table, text.find("slowest launches") - table);
  // 2 launches, 2 of 2.75 ms, 2 GB and 2 TFLOP in 2 ms; slowest first.
  size_t first = rows.find("       2       2.00  72.7%     1000   1000.0  bf16->bf16 64x64x64 "
                           "NN bias: algo 66 tile 128x256 (search: 0.900 ms, cuBLASLt's first "
                           "answer 1.100 ms)\n");
  size_t second = rows.find("       1       0.50  18.2%      200    200.0  bf16->bf16 8x8x8 TN "
                            "none: algo 21 tile 64x64 (heuristic)\n");
  EXPECT_NE(first, std::string::npos) << rows;
  EXPECT_NE(second, std::string::npos) << rows;
  EXPECT_LT(first, second);
  EXPECT_EQ(rows.find("act"), std::string::npos) << "only products";
  // Launch rows name the algorithm; other kernels' rows do not change.
  EXPECT_NE(text.find("fc2: kern.gemm_epilogue (cublasLtMatmul+bias) [algo 66 tile 128x256 "
                      "(search: 0.900 ms, cuBLASLt's first answer 1.100 ms)]\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("proj: kern.gemm (cublasLtMatmul) [algo 21 tile 64x64 (heuristic)]\n"),
            std::string::npos)
      << text;
  // Without choices (an older step) there is no table.
  std::ostringstream plain;
  PrintProfile(launches, 0, plain, 3);
  EXPECT_EQ(plain.str().find("cuBLASLt products"), std::string::npos) << plain.str();
  EXPECT_NE(plain.str().find("proj: kern.gemm (cublasLtMatmul)\n"), std::string::npos)
      << plain.str();
}

TEST(ProfileTest, NoTrainStepTimed) {
  std::ostringstream out;
  PrintProfile({}, 0, out);
  EXPECT_EQ(out.str(), "profile: no train step was timed\n");
}

// trun --profile on N ranks: the communication table, from sums written by
// hand (the events themselves are read on GPUs: tests/gpu/dp_checks.sh).
TEST(ProfileTest, CommunicationPerStepAndRank) {
  // Rank 0: 4 steps of 30 ms, 14 collectives of 497.9 MB a step, the
  // communication stream busy 2 ms a step, the step stream waiting 0.4 ms.
  CommProfile zero{4, 120, 56, 4 * 497.9e6, 8, 1.6};
  CommProfile one{4, 122, 56, 4 * 497.9e6, 8.4, 3.0};
  // Every rank's sums travel as bytes (RankGroup::AllGather).
  CommProfile back = CommProfile::Deserialize(one.Serialize());
  EXPECT_EQ(back.steps, 4);
  EXPECT_EQ(back.step_ms, 122);
  EXPECT_EQ(back.exposed_ms, 3.0);
  std::ostringstream out;
  PrintCommProfile({zero, back, CommProfile{}}, "NCCL 2.28.3", out);
  const std::string text = out.str();
  EXPECT_NE(text.find("communication per step (NCCL 2.28.3, 3 ranks; means over each rank's 4 "
                      "profiled steps"),
            std::string::npos)
      << text;
  // rank, calls, MB, step, compute = step - exposed, comm, exposed,
  // overlapped = comm - exposed.
  EXPECT_NE(text.find("     0       14      497.9      30.00      29.60       2.00       0.40"
                      "       1.60\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("     1       14      497.9      30.50      29.75       2.10       0.75"
                      "       1.35\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("     2  no profiled step"), std::string::npos) << text;
}

// An epilogue product the step ran on CUTLASS (host_support/gemm_cutlass.h)
// keeps its cuBLASLt kernel name: its kind and timing come from the choice.
TEST(ProfileTest, ProductsRunOnCutlassAreCountedAsCutlass) {
  std::vector<tcc_launch_time> launches = {
      Launch(0, 0, "cublasLtMatmul+bias+gelu_aux",
             "fc1: kern.gemm_epilogue (cublasLtMatmul+bias+gelu_aux)", 1e12, 1e9, 1.0, 2),
      Launch(0, 1, "cublasLtMatmul+dgelu", "fc1.grad: kern.gemm_dgelu (cublasLtMatmul+dgelu)",
             1e12, 1e9, 1.5, 2),
  };
  GemmChoices gemm;
  gemm[0] = {"bf16->bf16 64x64x64 NN gelu_aux_bias", "CUTLASS sm90 pingpong 128x128x64 c2x1",
             "search", 0.8, 1.0};
  gemm[1] = {"bf16->bf16 64x64x64 NT dgelu", "algo 39 tile 128x128", "cache", 1.4, 1.5};
  std::ostringstream out;
  PrintProfile(launches, 0, out, /*top=*/2, gemm);
  std::string text = out.str();
  EXPECT_NE(text.find("  matmul+epilogue (CUTLASS)        1       1.00"), std::string::npos)
      << text;
  EXPECT_NE(text.find("  matmul+epilogue (cuBLASLt)        1       1.50"), std::string::npos)
      << text;
  EXPECT_NE(text.find("[CUTLASS sm90 pingpong 128x128x64 c2x1 (search: 0.800 ms, cuBLASLt's "
                      "1.000 ms)]"),
            std::string::npos)
      << text;
}

} // namespace
} // namespace tcc::trun
