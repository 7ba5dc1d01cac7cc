// trun --profile: the report of per-kernel times that a cuda step's device
// API collected (tcc_launch_time records): where a train step's time goes,
// by kind of kernel and by launch, against the bytes and FLOPs the compiler
// listed for each launch (the dumped kernels.txt).
#ifndef TCC_RUNTIME_TRUN_STEP_PROFILE_H
#define TCC_RUNTIME_TRUN_STEP_PROFILE_H

#include "tcc/step_abi.h"

#include <cstdint>
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

// Prints the report. `steps_left_out` train steps before the profiled ones
// (warm-up) are only mentioned; `top` slowest launches are listed.
void PrintProfile(const std::vector<tcc_launch_time> &launches,
                  int64_t steps_left_out, std::ostream &out, int top = 15);

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_STEP_PROFILE_H
