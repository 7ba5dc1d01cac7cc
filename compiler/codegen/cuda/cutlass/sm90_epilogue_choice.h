// Which CUTLASS Hopper epilogue instance (gemm_sm90_epilogues.h) can
// compute a cuBLASLt epilogue product: one test, read by the code
// generator on the static shape (whether a step links the CUTLASS unit,
// GemmKernels.cpp) and by the step's host code at run time (which products
// time CUTLASS against cuBLASLt, host_support/gemm.h cutlass_epilogue_for,
// which adds the pointers' 16-byte alignment). Plain C++: pasted before
// gemm_sm90_epilogues.h into the host support and the CUTLASS unit.
#ifndef TCC_CUTLASS_SM90_EPILOGUE_CHOICE_H
#define TCC_CUTLASS_SM90_EPILOGUE_CHOICE_H

#include <cstdint>

namespace tcc_cutlass {

enum Sm90Epilogue { kSm90GeluAuxBias = 0, kSm90DGelu = 1, kSm90BiasResidualF32 = 2 };
constexpr int kSm90Epilogues = 3;

// A product's epilogue as the choice sees it.
enum class Sm90Product {
  kGeluAuxBias,  // bias, tanh GELU, the pre-activation saved (aux)
  kDGelu,        // the GELU derivative at a saved pre-activation
  kBias,         // bias (plus the residual, when there is one)
  kOther,        // anything else (no CUTLASS instance)
};
enum class Sm90Type { kBF16, kF32, kOther };

// The instance for a row-major product of `in` A and B into `out` D, A
// transposed when `ta`, B when `tb`, with a residual (C) or not; -1 when
// none computes it. bf16 A and B, n and k multiples of 8; GELU_AUX_BIAS
// with plain operands and DGELU with a transposed B, bf16 D, no residual;
// BIAS with an f32 residual and D, plain operands.
constexpr int sm90_epilogue_for(Sm90Product product, Sm90Type in, Sm90Type out, bool ta,
                                bool tb, int64_t n, int64_t k, bool residual) {
  if (in != Sm90Type::kBF16 || n % 8 != 0 || k % 8 != 0)
    return -1;
  if (product == Sm90Product::kGeluAuxBias && out == Sm90Type::kBF16 && !residual && !ta && !tb)
    return kSm90GeluAuxBias;
  if (product == Sm90Product::kDGelu && out == Sm90Type::kBF16 && !residual && !ta && tb)
    return kSm90DGelu;
  if (product == Sm90Product::kBias && out == Sm90Type::kF32 && residual && !ta && !tb)
    return kSm90BiasResidualF32;
  return -1;
}

} // namespace tcc_cutlass

#endif // TCC_CUTLASS_SM90_EPILOGUE_CHOICE_H
