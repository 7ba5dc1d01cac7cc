// CUDA_CHECK(call): a failed CUDA call ends the device test, naming the
// call, its file and line, and the CUDA error. Shared by every standalone
// device test in tests/cuda.
#ifndef TCC_TESTS_CUDA_CUDA_CHECK_CUH
#define TCC_TESTS_CUDA_CUDA_CHECK_CUH

#include <cstdio>
#include <cstdlib>

#define CUDA_CHECK(call)                                                              \
  do {                                                                                \
    cudaError_t err_ = (call);                                                        \
    if (err_ != cudaSuccess) {                                                        \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,       \
                   cudaGetErrorString(err_));                                         \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

#endif
