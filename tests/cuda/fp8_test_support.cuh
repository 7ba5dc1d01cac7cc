// What the device tests of the fused FP8 casts share (norm_fp8_test,
// norm_grad_fp8_test, fp8_rope_cast_test): fail (a FAIL line, counted in
// gFailures), sameBytes, scaleDifference (a fused cast's scale and
// statistics against the unfused one's), ScaleBlock (the Fp8TensorScale
// and amax partials a launcher writes, kFp8ScaleBytes), Format<F8> (half an
// ulp and the smallest subnormal, for the float64 bounds), decode (a
// byte's value) and timeMs (a launch's mean time over `reps`, after 5
// warm-up launches). Include after the CUDA prelude and device_buffer.cuh.
#ifndef TCC_TESTS_CUDA_FP8_TEST_SUPPORT_CUH
#define TCC_TESTS_CUDA_FP8_TEST_SUPPORT_CUH

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tests/cuda/cuda_check.cuh"
#include "tests/cuda/device_buffer.cuh"

namespace tcc_cuda_test {

inline int gFailures = 0;

inline void fail(const std::string &what, const std::string &why) {
  std::printf("FAIL %s: %s\n", what.c_str(), why.c_str());
  ++gFailures;
}

template <class T> bool sameBytes(const std::vector<T> &a, const std::vector<T> &b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// "" when the fused cast's scale, its inverse, amax and counts are the
// unfused cast's, else both sides.
inline std::string scaleDifference(const tcc_cuda::Fp8TensorScale &got,
                                   const tcc_cuda::Fp8TensorScale &want) {
  if (got.scale == want.scale && got.scale_inv == want.scale_inv &&
      got.stats.amax_bits == want.stats.amax_bits &&
      got.stats.overflows == want.stats.overflows &&
      got.stats.underflows == want.stats.underflows)
    return "";
  char why[256];
  std::snprintf(why, sizeof why,
                "scale %g / %g, amax %g / %g, saturated %llu / %llu, flushed %llu / %llu "
                "(fused / unfused)",
                got.scale, want.scale, __builtin_bit_cast(float, got.stats.amax_bits),
                __builtin_bit_cast(float, want.stats.amax_bits), got.stats.overflows,
                want.stats.overflows, got.stats.underflows, want.stats.underflows);
  return why;
}

struct ScaleBlock {
  DeviceBuffer<uint8_t> q{tcc_cuda::kFp8ScaleBytes};
  tcc_cuda::Fp8TensorScale *p() { return reinterpret_cast<tcc_cuda::Fp8TensorScale *>(q.p); }
  tcc_cuda::Fp8TensorScale get() const {
    tcc_cuda::Fp8TensorScale s;
    CUDA_CHECK(cudaMemcpy(&s, q.p, sizeof(s), cudaMemcpyDeviceToHost));
    return s;
  }
};

template <class F8> struct Format;
template <> struct Format<tcc_cuda::e4m3> {
  static constexpr double kHalfUlp = 1.0 / 16, kSmallest = 1.0 / 512; // 2^-9
  static const char *name() { return "e4m3"; }
};
template <> struct Format<tcc_cuda::e5m2> {
  static constexpr double kHalfUlp = 1.0 / 8, kSmallest = 1.0 / 65536; // 2^-16
  static const char *name() { return "e5m2"; }
};

template <class F8> double decode(uint8_t b) { return tcc_cuda::Fp8Format<F8>::to_float(b); }

template <class F> float timeMs(F &&launch, int reps = 50) {
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  for (int i = 0; i < 5; ++i)
    launch();
  CUDA_CHECK(cudaEventRecord(start));
  for (int i = 0; i < reps; ++i)
    launch();
  CUDA_CHECK(cudaEventRecord(stop));
  CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms / reps;
}

} // namespace tcc_cuda_test

#endif
