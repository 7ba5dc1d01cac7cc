// tcc CUDA host support — pasted by the CUDA code generator into the host
// translation unit of every generated step (step_host.cpp, compiled by the
// host C++ compiler and linked with the CUDA runtime and cuBLASLt). It holds
// what does not depend on the model:
//   - the tcc_device_api trun allocates and copies through (step_abi.h),
//   - running one train/eval call: hyper-parameters in, the step's kernels
//     on its own stream (as a captured CUDA graph when possible), loss and
//     status out, every CUDA/cuBLAS error named with the kernel and step,
//   - matrix products through cuBLASLt, one cached plan per call site, the
//     algorithm of each distinct product timed once and kept in a cache file.
// The kernels themselves live in the generated .cu units (cuda_prelude.cuh).
#ifndef TCC_STEP_ARCH // defined by the generated host unit, e.g. "sm_90"
#error "TCC_STEP_ARCH must name the architecture the kernels were built for"
#endif

#include <cuda_runtime_api.h>
#include <cublasLt.h>

#include <sys/stat.h> // gemm_cache.h: mkdir
#include <unistd.h>   // gemm_cache.h: getpid

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace tcc_cuda_host {

// Process-wide state of the device API (one GPU per process).
struct DeviceState {
  bool initialized = false;
  int ordinal = -1;
  cudaStream_t step_stream = nullptr; // every kernel of a call
  cudaStream_t copy_stream = nullptr; // upload_async
  // Queued batch uploads: each upload_async call records an event; a call
  // waits only for the uploads into buffers it reads (so the copy of batch
  // k+1 overlaps step k). wait_uploads clears them.
  struct Upload {
    std::vector<const void *> destinations;
    cudaEvent_t done = nullptr;
  };
  std::vector<Upload> uploads;
  std::vector<cudaEvent_t> free_events;
  cublasLtHandle_t lt = nullptr;
  std::mutex mutex; // allocations and messages
  std::unordered_map<void *, uint64_t> allocations;
  uint64_t allocated = 0, peak = 0;
  std::string error, note;
  // TCC_CUDA_SYNC=1: no graph, a synchronize after every kernel, so an
  // error names the kernel that caused it (like CUDA_LAUNCH_BLOCKING).
  bool sync_each_kernel = false;
  // TCC_CUDA_GRAPHS=0: launch kernels one by one every call.
  bool graphs = true;
  // set_profiling(1): no graph, an event after every launch (EntryState),
  // from a pool of its own (the upload events do not time).
  bool profiling = false;
  std::vector<cudaEvent_t> timing_events;
};

inline DeviceState &state() {
  static DeviceState s;
  return s;
}

inline int32_t set_error(const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  std::lock_guard<std::mutex> lock(state().mutex);
  state().error = buf;
  return 2; // TCC_STATUS_RUNTIME_ERROR
}

inline int32_t cuda_error(cudaError_t e, const char *what) {
  return set_error("CUDA error %s (%s) in %s", cudaGetErrorName(e),
                   cudaGetErrorString(e), what);
}

inline const char *cublas_status_name(cublasStatus_t s) {
  switch (s) {
  case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
  case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
  case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
  case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
  case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
  case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
  case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
  default: return "cuBLAS error";
  }
}

