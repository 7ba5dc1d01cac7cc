// ---- tcc_device_api ----

// Whether the kernels, built for TCC_STEP_ARCH (sm_XY with its PTX, or
// sm_XYa), run on GPU `ordinal`: natively on XY, through the PTX on a newer
// GPU, not at all on an older one (nor sm_XYa anywhere but XY). Checked at
// init so that a mismatch is one clear error, not a failed first launch.
inline int32_t check_arch(int ordinal) {
  const char *arch = TCC_STEP_ARCH;
  int built = std::atoi(arch + 3);
  bool specific = arch[std::strlen(arch) - 1] == 'a';
  int major = 0, minor = 0;
  if (cudaError_t e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, ordinal);
      e != cudaSuccess)
    return cuda_error(e, "cudaDeviceGetAttribute (compute capability)");
  if (cudaError_t e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, ordinal);
      e != cudaSuccess)
    return cuda_error(e, "cudaDeviceGetAttribute (compute capability)");
  int have = major * 10 + minor;
  if (have == built || (have > built && !specific))
    return 0;
  char name[256] = "?";
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, ordinal) == cudaSuccess)
    std::snprintf(name, sizeof name, "%s", prop.name);
  return set_error("the step was built for %s, which does not run on GPU %d (%s, sm_%d): "
                   "recompile with tcc compile --arch sm_%d",
                   arch, ordinal, name, have, have);
}

// The switch of a kernel family timed against a library's (TCC_GEMM_CUTLASS,
// TCC_ATTENTION_SM90): 0 off ("0", or a GPU other than compute capability
// 9.0, which cannot run sm_90a code), 2 forced ("force": wherever it can
// run, untimed), else 1 timed.
inline int sm90_family_switch(const char *variable) {
  static const bool hopper = [] {
    int device = 0;
    cudaDeviceProp prop;
    return cudaGetDevice(&device) == cudaSuccess &&
           cudaGetDeviceProperties(&prop, device) == cudaSuccess && prop.major == 9 &&
           prop.minor == 0;
  }();
  const char *v = std::getenv(variable);
  if (!hopper || (v && std::strcmp(v, "0") == 0))
    return 0;
  return v && std::strcmp(v, "force") == 0 ? 2 : 1;
}

inline int32_t device_init(int32_t ordinal) {
  DeviceState &s = state();
  if (s.initialized)
    return s.ordinal == ordinal
               ? 0
               : set_error("device API: already initialized for GPU %d", s.ordinal);
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess)
    return cuda_error(e, "cudaGetDeviceCount (is there an NVIDIA GPU and driver?)");
  if (ordinal < 0 || ordinal >= count)
    return set_error("device API: GPU %d requested, %d visible", ordinal, count);
  if (int32_t rc = check_arch(ordinal))
    return rc;
  if (cudaError_t e = cudaSetDevice(ordinal); e != cudaSuccess)
    return cuda_error(e, "cudaSetDevice");
  if (cudaError_t e = cudaStreamCreateWithFlags(&s.step_stream, cudaStreamNonBlocking);
      e != cudaSuccess)
    return cuda_error(e, "cudaStreamCreate (step stream)");
  if (cudaError_t e = cudaStreamCreateWithFlags(&s.copy_stream, cudaStreamNonBlocking);
      e != cudaSuccess)
    return cuda_error(e, "cudaStreamCreate (copy stream)");
  if (cublasStatus_t b = cublasLtCreate(&s.lt); b != CUBLAS_STATUS_SUCCESS)
    return set_error("cuBLASLt: cublasLtCreate failed: %s", cublas_status_name(b));
  const char *sync = std::getenv("TCC_CUDA_SYNC");
  s.sync_each_kernel = sync && std::strcmp(sync, "0") != 0;
  const char *graphs = std::getenv("TCC_CUDA_GRAPHS");
  s.graphs = !(graphs && std::strcmp(graphs, "0") == 0) && !s.sync_each_kernel;
  s.ordinal = ordinal;
  s.initialized = true;
  return 0;
}

inline void *device_alloc(uint64_t bytes) {
  void *p = nullptr;
  if (cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1); e != cudaSuccess) {
    size_t free_b = 0, total_b = 0;
    cudaGetLastError(); // clear the sticky-free error
    cudaMemGetInfo(&free_b, &total_b);
    set_error("cudaMalloc of %llu bytes failed: %s (%.2f GiB free of %.2f GiB)",
              static_cast<unsigned long long>(bytes), cudaGetErrorString(e),
              free_b / 1073741824.0, total_b / 1073741824.0);
    return nullptr;
  }
  DeviceState &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.allocations[p] = bytes;
  s.allocated += bytes;
  if (s.allocated > s.peak)
    s.peak = s.allocated;
  return p;
}

inline void device_release(void *p) {
  if (!p)
    return;
  cudaFree(p);
  DeviceState &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.allocations.find(p);
  if (it != s.allocations.end()) {
    s.allocated -= it->second;
    s.allocations.erase(it);
  }
}

inline void *device_alloc_pinned(uint64_t bytes) {
  void *p = nullptr;
  if (cudaError_t e = cudaMallocHost(&p, bytes ? bytes : 1); e != cudaSuccess) {
    cuda_error(e, "cudaMallocHost (pinned staging)");
    return nullptr;
  }
  return p;
}

inline void device_release_pinned(void *p) {
  if (p)
    cudaFreeHost(p);
}

// A copy on the step stream (ordered with the calls); `wait`: return only
// when it is done (host memory is read or written).
inline int32_t copy_on_step_stream(void *dst, const void *src, uint64_t bytes,
                                   cudaMemcpyKind kind, const char *what, bool wait) {
  DeviceState &s = state();
  if (cudaError_t e = cudaMemcpyAsync(dst, src, bytes, kind, s.step_stream); e != cudaSuccess)
    return cuda_error(e, what);
  if (wait)
    if (cudaError_t e = cudaStreamSynchronize(s.step_stream); e != cudaSuccess)
      return cuda_error(e, what);
  return 0;
}

inline int32_t device_copy_to_device(void *dst, const void *src, uint64_t bytes) {
  return copy_on_step_stream(dst, src, bytes, cudaMemcpyHostToDevice, "copy to the device",
                             true);
}

inline int32_t device_copy_to_host(void *dst, const void *src, uint64_t bytes) {
  return copy_on_step_stream(dst, src, bytes, cudaMemcpyDeviceToHost, "copy to the host",
                             true);
}

// Nothing waits for it: the stream orders it with the calls.
inline int32_t device_copy_on_device(void *dst, const void *src, uint64_t bytes) {
  return copy_on_step_stream(dst, src, bytes, cudaMemcpyDeviceToDevice, "copy on the device",
                             false);
}

inline int32_t device_fill_zero(void *dst, uint64_t bytes) {
  DeviceState &s = state();
  if (cudaError_t e = cudaMemsetAsync(dst, 0, bytes, s.step_stream); e != cudaSuccess)
    return cuda_error(e, "cudaMemsetAsync");
  if (cudaError_t e = cudaStreamSynchronize(s.step_stream); e != cudaSuccess)
    return cuda_error(e, "cudaMemsetAsync");
  return 0;
}

inline int32_t device_upload_async(int32_t count, void *const *dst,
                                   const void *const *src, const uint64_t *bytes) {
  DeviceState &s = state();
  DeviceState::Upload upload;
  for (int32_t i = 0; i < count; ++i) {
    if (cudaError_t e = cudaMemcpyAsync(dst[i], src[i], bytes[i],
                                        cudaMemcpyHostToDevice, s.copy_stream);
        e != cudaSuccess)
      return cuda_error(e, "upload_async (batch copy on the copy stream)");
    upload.destinations.push_back(dst[i]);
  }
  if (!s.free_events.empty()) {
    upload.done = s.free_events.back();
    s.free_events.pop_back();
  } else if (cudaError_t e = cudaEventCreateWithFlags(&upload.done, cudaEventDisableTiming);
             e != cudaSuccess) {
    return cuda_error(e, "cudaEventCreate (uploads)");
  }
  if (cudaError_t e = cudaEventRecord(upload.done, s.copy_stream); e != cudaSuccess) {
    s.free_events.push_back(upload.done);
    return cuda_error(e, "cudaEventRecord (uploads)");
  }
  s.uploads.push_back(std::move(upload));
  return 0;
}

inline int32_t device_wait_uploads() {
  DeviceState &s = state();
  if (cudaError_t e = cudaStreamSynchronize(s.copy_stream); e != cudaSuccess)
    return cuda_error(e, "waiting for the batch uploads");
  for (DeviceState::Upload &u : s.uploads)
    s.free_events.push_back(u.done);
  s.uploads.clear();
  return 0;
}

inline const char *device_last_error() { return state().error.c_str(); }
inline const char *device_execution_note() { return state().note.c_str(); }
inline uint64_t device_allocated_bytes() { return state().allocated; }
inline uint64_t device_peak_allocated_bytes() { return state().peak; }


