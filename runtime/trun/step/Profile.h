// trun --profile: the report of per-kernel times that a cuda step's device
// API collected (tcc_launch_time records): where a train step's time goes,
// by kind of kernel and by launch, against the bytes and FLOPs the compiler
// listed for each launch (the dumped kernels.txt).
#ifndef TCC_RUNTIME_TRUN_STEP_PROFILE_H
#define TCC_RUNTIME_TRUN_STEP_PROFILE_H

#include "tcc/step_abi.h"

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

namespace tcc::trun {

// "matmul (cuBLASLt)" for cublasLtMatmul, "matmul+epilogue (cuBLASLt)" for
// cublasLtMatmul+bias[+gelu...] (kern.gemm_epilogue); "elementwise" for tcc_kN_ew and
// tcc_kN_ew4; "reduction" for tcc_kN_reduce; "attention (cuDNN)" /
// "attention_grad (cuDNN)" for cudnn_sdpa_forward / _backward (attention.h);
// otherwise the generated
// kernel's family (tcc_k7_slice -> "slice"), or the name itself.
std::string KernelKind(const std::string &kernel);

// How a cuBLASLt product's algorithm was chosen (tcc_device_api's
// gemm_choice, copied).
struct GemmChoiceInfo {
  std::string descriptor, algorithm, source;
  double best_ms = 0, heuristic_ms = 0;
};
// By train launch index.
using GemmChoices = std::map<int32_t, GemmChoiceInfo>;

// Prints the report. `steps_left_out` train steps before the profiled ones
// (warm-up) are only mentioned; `top` slowest launches are listed. With
// `gemm` choices, the products' rows name their algorithm and a table sums
// the products by descriptor.
void PrintProfile(const std::vector<tcc_launch_time> &launches,
                  int64_t steps_left_out, std::ostream &out, int top = 15,
                  const GemmChoices &gemm = {});

// "algo 66 tile 128x256 ... (search: 0.412 ms, cuBLASLt's first answer 0.455 ms)".
std::string DescribeGemmChoice(const GemmChoiceInfo &choice);

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_STEP_PROFILE_H
