// tcc CUDA host support — pasted by the CUDA code generator into the host
// translation unit of every generated step (step_host.cpp, compiled by the
// host C++ compiler and linked with the CUDA runtime and cuBLASLt). It holds
// what does not depend on the model:
//   - the tcc_device_api trun allocates and copies through (step_abi.h),
//   - running one train/eval call: hyper-parameters in, the step's kernels
//     on its own stream (as a captured CUDA graph when possible), loss and
//     status out, every CUDA/cuBLAS error named with the kernel and step,
//   - matrix products through cuBLASLt, one cached plan per call site.
// The kernels themselves live in the generated .cu units (cuda_prelude.cuh).
#ifndef TCC_STEP_ARCH // defined by the generated host unit, e.g. "sm_90"
#error "TCC_STEP_ARCH must name the architecture the kernels were built for"
#endif

#include <cuda_runtime_api.h>
#include <cublasLt.h>

#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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


// ---- running one call ----

#include "compiler/codegen/cuda/ControlBlockLayout.h"

// Everything the generated code knows about one entry point.
struct Entry {
  const char *name;           // "train" or "eval"
  const char *const *labels;  // per kernel: "fc1: kern.gemm (gemm_3)"
  const char *const *kernels; // per kernel: "tcc_k3_ew", "cublasLtMatmul"
  const double *costs;        // per kernel: FLOPs, bytes (2 numbers)
  int32_t num_kernels;
  uint64_t control_offset;    // in the workspace
  uint64_t control_bytes;     // header + train outputs
  // Writes hyper-parameters into the pinned control mirror.
  void (*hyper)(const tcc_step_args *args, char *control);
  // Enqueues every kernel on `stream`; returns a tcc_status (launch errors
  // are named through after_launch / check_cublas).
  int32_t (*body)(const tcc_step_args *args, cudaStream_t stream, char *ws);
  // Copies loss and train outputs from the pinned control mirror to args.
  void (*finish)(const tcc_step_args *args, const char *control);
};

// Per entry point: the pinned mirror and the captured graph.
struct EntryState {
  char *control = nullptr; // pinned
  cudaGraphExec_t graph = nullptr;
  std::vector<const void *> key; // the args pointers the graph was captured with
  bool graph_failed = false;
  std::string graph_note;
  int64_t captures = 0;
  const tcc_step_args *current = nullptr; // for error messages
  const Entry *entry = nullptr;
  // Profiling: the events of the call in flight (after each launch, with
  // its kernel index; `start` before the first), and the sums per kernel.
  cudaEvent_t start = nullptr;
  std::vector<std::pair<int32_t, cudaEvent_t>> marks;
  std::vector<double> milliseconds;
  std::vector<int64_t> calls;
};

// Entry points that have run (profile_read reports them).
inline std::vector<EntryState *> &entry_states() {
  static std::vector<EntryState *> all;
  return all;
}

// The call being run (kernels report errors through it).
inline EntryState *&current_call() {
  static thread_local EntryState *c = nullptr;
  return c;
}

inline std::string where(int32_t kernel) {
  EntryState *c = current_call();
  if (!c || !c->entry)
    return "?";
  std::string w = std::string(c->entry->name) + " step " +
                  std::to_string(c->current ? c->current->step + 1 : 0);
  if (kernel >= 0 && kernel < c->entry->num_kernels)
    w = std::string("kernel ") + c->entry->labels[kernel] + ", " + w;
  return w;
}

inline cudaEvent_t timing_event() {
  DeviceState &s = state();
  if (!s.timing_events.empty()) {
    cudaEvent_t e = s.timing_events.back();
    s.timing_events.pop_back();
    return e;
  }
  cudaEvent_t e = nullptr;
  return cudaEventCreate(&e) == cudaSuccess ? e : nullptr;
}

// Profiling: an event after launch `kernel` (also after each product of a
// per-batch loop: their times add up).
inline int32_t profile_mark(cudaStream_t stream, int32_t kernel) {
  EntryState *c = current_call();
  if (!state().profiling || !c)
    return 0;
  cudaEvent_t e = timing_event();
  if (!e)
    return set_error("cudaEventCreate (profiling) failed");
  if (cudaError_t err = cudaEventRecord(e, stream); err != cudaSuccess)
    return cuda_error(err, "cudaEventRecord (profiling)");
  c->marks.push_back({kernel, e});
  return 0;
}

inline void release_marks(EntryState &es) {
  for (auto [kernel, event] : es.marks)
    state().timing_events.push_back(event);
  es.marks.clear();
}

// After each launch (cheap: no synchronization unless TCC_CUDA_SYNC=1).
inline int32_t after_launch(cudaStream_t stream, int32_t kernel) {
  if (int32_t rc = profile_mark(stream, kernel))
    return rc;
  cudaError_t e = cudaPeekAtLastError();
  if (e == cudaSuccess && state().sync_each_kernel) {
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    cudaStreamIsCapturing(stream, &capturing);
    if (capturing == cudaStreamCaptureStatusNone)
      e = cudaStreamSynchronize(stream);
  }
  if (e != cudaSuccess) {
    cudaGetLastError();
    return cuda_error(e, where(kernel).c_str());
  }
  return 0;
}

// A zero fill of `bytes` at `dst` (kern.fill with 0).
inline int32_t memset_zero(cudaStream_t stream, void *dst, uint64_t bytes, int32_t kernel) {
  if (cudaError_t e = cudaMemsetAsync(dst, 0, bytes, stream); e != cudaSuccess)
    return cuda_error(e, where(kernel).c_str());
  return after_launch(stream, kernel);
}

// cuBLASLt status of call site `kernel`.
inline int32_t check_cublas(cublasStatus_t s, int32_t kernel) {
  if (s == CUBLAS_STATUS_SUCCESS)
    return 0;
  return set_error("cuBLASLt: %s in %s", cublas_status_name(s), where(kernel).c_str());
}

inline void args_key(const tcc_step_args *a, const tcc_step_descriptor &d,
                     std::vector<const void *> &key) {
  key.clear();
  key.push_back(a->workspace);
  for (int32_t i = 0; i < d.num_params; ++i) key.push_back(a->params[i]);
  for (int32_t i = 0; i < d.num_optimizer_state; ++i)
    key.push_back(a->optimizer_state ? a->optimizer_state[i] : nullptr);
  for (int32_t i = 0; i < d.num_inputs; ++i) key.push_back(a->inputs[i]);
  for (int32_t i = 0; i < d.num_outputs; ++i)
    key.push_back(a->outputs ? a->outputs[i] : nullptr);
}

// Host-to-device copy of the control header, the kernels, and the copy of
// the control block back: what a graph captures.
inline int32_t enqueue_call(const Entry &e, EntryState &es, const tcc_step_args *a,
                            cudaStream_t s) {
  char *ws = static_cast<char *>(a->workspace);
  if (cudaError_t err = cudaMemcpyAsync(ws + e.control_offset, es.control,
                                        kControlHeaderBytes, cudaMemcpyHostToDevice, s);
      err != cudaSuccess)
    return cuda_error(err, ("control block upload, " + where(-1)).c_str());
  if (int32_t rc = e.body(a, s, ws); rc != 0)
    return rc;
  if (cudaError_t err = cudaMemcpyAsync(es.control, ws + e.control_offset,
                                        e.control_bytes, cudaMemcpyDeviceToHost, s);
      err != cudaSuccess)
    return cuda_error(err, ("control block read-back, " + where(-1)).c_str());
  return 0;
}

inline int32_t run_call(const Entry &e, EntryState &es, const tcc_step_descriptor &d,
                        const tcc_step_args *a) {
  DeviceState &s = state();
  if (!s.initialized)
    return set_error("%s: the device API was not initialized (call device->init first)",
                     e.name);
  es.entry = &e;
  es.current = a;
  current_call() = &es;
  if (!es.control) {
    if (cudaError_t err = cudaMallocHost(reinterpret_cast<void **>(&es.control),
                                         e.control_bytes);
        err != cudaSuccess)
      return cuda_error(err, "cudaMallocHost (control block)");
  }
  std::memset(es.control, 0, kControlHeaderBytes);
  e.hyper(a, es.control);
  cudaStream_t stream = s.step_stream;
  // The uploads of the batch this call reads (not the next one's, queued
  // meanwhile into the other input buffers).
  for (const DeviceState::Upload &u : s.uploads) {
    bool reads = false;
    for (int32_t i = 0; i < d.num_inputs && !reads; ++i)
      for (const void *p : u.destinations)
        reads |= p == a->inputs[i];
    if (reads)
      if (cudaError_t err = cudaStreamWaitEvent(stream, u.done, 0); err != cudaSuccess)
        return cuda_error(err, "cudaStreamWaitEvent (uploads)");
  }
  bool launched = false;
  if (es.milliseconds.size() != static_cast<size_t>(e.num_kernels)) {
    es.milliseconds.assign(e.num_kernels, 0.0);
    es.calls.assign(e.num_kernels, 0);
    entry_states().push_back(&es);
  }
  release_marks(es); // of a call that failed before its times were read
  if (s.profiling) {
    if (!es.start && cudaEventCreate(&es.start) != cudaSuccess)
      return set_error("cudaEventCreate (profiling) failed");
    if (cudaError_t err = cudaEventRecord(es.start, stream); err != cudaSuccess)
      return cuda_error(err, "cudaEventRecord (profiling)");
  } else if (s.graphs && !es.graph_failed) {
    std::vector<const void *> key;
    args_key(a, d, key);
    if (!es.graph || key != es.key) {
      if (es.graph) {
        cudaGraphExecDestroy(es.graph);
        es.graph = nullptr;
      }
      cudaGraph_t graph = nullptr;
      cudaError_t err = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
      int32_t rc = err == cudaSuccess ? enqueue_call(e, es, a, stream) : 0;
      cudaError_t end = cudaStreamEndCapture(stream, &graph);
      if (err == cudaSuccess && rc == 0 && end == cudaSuccess)
        err = cudaGraphInstantiate(&es.graph, graph, 0);
      else if (err == cudaSuccess)
        err = end;
      if (graph)
        cudaGraphDestroy(graph);
      cudaGetLastError();
      if (err != cudaSuccess || rc != 0 || !es.graph) {
        // Launch errors are reported again by the direct run below.
        es.graph_failed = true;
        es.graph = nullptr;
        es.graph_note = std::string("CUDA graph: off for ") + e.name + " (capture failed: " +
                        (err != cudaSuccess ? cudaGetErrorString(err) : s.error.c_str()) +
                        "); kernels launched one by one";
      } else {
        es.key = key;
        ++es.captures;
        es.graph_note = std::string("CUDA graph: ") + e.name + " step captured (" +
                        std::to_string(e.num_kernels) + " kernels" +
                        (es.captures > 1 ? ", re-captured: buffers moved" : "") +
                        "), replayed each call";
      }
    }
    if (es.graph) {
      if (cudaError_t err = cudaGraphLaunch(es.graph, stream); err != cudaSuccess)
        return cuda_error(err, ("cudaGraphLaunch, " + where(-1)).c_str());
      launched = true;
    }
  } else if (!s.graphs) {
    es.graph_note = s.sync_each_kernel
                        ? "CUDA graph: off (TCC_CUDA_SYNC=1: synchronize after every kernel)"
                        : "CUDA graph: off (TCC_CUDA_GRAPHS=0)";
  }
  if (!launched)
    if (int32_t rc = enqueue_call(e, es, a, stream); rc != 0)
      return rc;
  if (cudaError_t err = cudaStreamSynchronize(stream); err != cudaSuccess) {
    cudaGetLastError();
    return set_error("CUDA error %s (%s) in %s%s", cudaGetErrorName(err),
                     cudaGetErrorString(err), where(-1).c_str(),
                     s.sync_each_kernel ? ""
                                        : " (kernels run asynchronously; rerun with "
                                          "TCC_CUDA_SYNC=1 to name the failing kernel)");
  }
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.note = s.profiling ? "CUDA graph: off while profiling (an event after every launch)"
                         : es.graph_note;
  }
  if (!es.marks.empty()) {
    // Each launch's time: from the event before it (the previous launch's,
    // or the start) to its own. A kernel counts one call per call.
    cudaEvent_t previous = es.start;
    std::vector<bool> seen(e.num_kernels, false);
    for (auto [kernel, event] : es.marks) {
      float ms = 0;
      cudaError_t timed = cudaEventElapsedTime(&ms, previous, event);
      if (timed != cudaSuccess) {
        cudaGetLastError(); // not a kernel's error: keep it from the next check
        release_marks(es);
        return cuda_error(timed, ("cudaEventElapsedTime (profiling), " + where(kernel)).c_str());
      }
      if (kernel >= 0 && kernel < e.num_kernels) {
        es.milliseconds[kernel] += ms;
        if (!seen[kernel])
          ++es.calls[kernel];
        seen[kernel] = true;
      }
      previous = event;
    }
    release_marks(es);
  }
  int32_t status;
  std::memcpy(&status, es.control, sizeof(status));
  if (status != 0) {
    set_error("an index out of range (token id or label) in %s", where(status - 1).c_str());
    return 1; // TCC_STATUS_BAD_ARGS
  }
  e.finish(a, es.control);
  return 0;
}

// ---- matrix products (cuBLASLt) ----

enum GemmType { kGemmF32 = 0, kGemmF64 = 1, kGemmBF16 = 2, kGemmF16 = 3 };

// One call site's descriptors and algorithm, made on its first call.
struct GemmPlan {
  bool ready = false;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo;
};

// Row-major out[batch](m x n) = alpha * op(A)(m x k) op(B)(k x n) + beta * out,
// computed as the column-major product out^T = op(B)^T op(A)^T. Batch
// strides in elements (each operand contiguous within a matrix).
inline int32_t gemm(GemmPlan &p, cudaStream_t s, int32_t kernel, GemmType type,
                    bool tf32, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                    int64_t batch, int64_t stride_a, int64_t stride_b, int64_t stride_c,
                    double alpha, double beta, const void *A, const void *B, void *C,
                    void *workspace, size_t workspace_bytes) {
  cudaDataType_t dt = type == kGemmF64    ? CUDA_R_64F
                      : type == kGemmBF16 ? CUDA_R_16BF
                      : type == kGemmF16  ? CUDA_R_16F
                                          : CUDA_R_32F;
  bool f64 = type == kGemmF64;
  if (!p.ready) {
    cublasComputeType_t compute =
        f64 ? CUBLAS_COMPUTE_64F
            : (type == kGemmF32 && tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F);
    cudaDataType_t scale = f64 ? CUDA_R_64F : CUDA_R_32F;
    if (int32_t rc = check_cublas(cublasLtMatmulDescCreate(&p.op, compute, scale), kernel))
      return rc;
    cublasOperation_t opA = tb ? CUBLAS_OP_T : CUBLAS_OP_N; // cuBLAS "A" is our B
    cublasOperation_t opB = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &opA, sizeof(opA));
    cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &opB, sizeof(opB));
    uint64_t rowsA = tb ? k : n, colsA = tb ? n : k;
    uint64_t rowsB = ta ? m : k, colsB = ta ? k : m;
    if (int32_t rc = check_cublas(
            cublasLtMatrixLayoutCreate(&p.a, dt, rowsA, colsA, rowsA), kernel))
      return rc;
    if (int32_t rc = check_cublas(
            cublasLtMatrixLayoutCreate(&p.b, dt, rowsB, colsB, rowsB), kernel))
      return rc;
    if (int32_t rc = check_cublas(cublasLtMatrixLayoutCreate(&p.c, dt, n, m, n), kernel))
      return rc;
    if (batch > 1) {
      int32_t count = static_cast<int32_t>(batch);
      cublasLtMatrixLayout_t layouts[3] = {p.a, p.b, p.c};
      int64_t strides[3] = {stride_b, stride_a, stride_c};
      for (int i = 0; i < 3; ++i) {
        cublasLtMatrixLayoutSetAttribute(layouts[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                         &count, sizeof(count));
        cublasLtMatrixLayoutSetAttribute(layouts[i],
                                         CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                         &strides[i], sizeof(strides[i]));
      }
    }
    cublasLtMatmulPreference_t pref = nullptr;
    if (int32_t rc = check_cublas(cublasLtMatmulPreferenceCreate(&pref), kernel))
      return rc;
    uint64_t ws = workspace_bytes;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                         &ws, sizeof(ws));
    cublasLtMatmulHeuristicResult_t result;
    int found = 0;
    cublasStatus_t h = cublasLtMatmulAlgoGetHeuristic(state().lt, p.op, p.a, p.b, p.c,
                                                      p.c, pref, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (h != CUBLAS_STATUS_SUCCESS || found == 0)
      return set_error("cuBLASLt: no algorithm for a %lldx%lldx%lld product (batch %lld): "
                       "%s in %s",
                       static_cast<long long>(m), static_cast<long long>(n),
                       static_cast<long long>(k), static_cast<long long>(batch),
                       cublas_status_name(h), where(kernel).c_str());
    p.algo = result.algo;
    p.ready = true;
  }
  float alpha32 = static_cast<float>(alpha), beta32 = static_cast<float>(beta);
  const void *pa = f64 ? static_cast<const void *>(&alpha) : &alpha32;
  const void *pb = f64 ? static_cast<const void *>(&beta) : &beta32;
  if (int32_t rc = check_cublas(cublasLtMatmul(state().lt, p.op, pa, B, p.a, A, p.b, pb, C, p.c, C,
                                     p.c, &p.algo, workspace, workspace_bytes, s),
                      kernel))
    return rc;
  return profile_mark(s, kernel);
}

// ---- profiling (tcc_device_api) ----

inline int32_t device_set_profiling(int32_t on) {
  DeviceState &s = state();
  s.profiling = on != 0;
  if (s.profiling)
    for (EntryState *es : entry_states()) {
      std::fill(es->milliseconds.begin(), es->milliseconds.end(), 0.0);
      std::fill(es->calls.begin(), es->calls.end(), 0);
    }
  return 0;
}

inline int32_t device_profile_read(tcc_launch_time *out, int32_t capacity) {
  int32_t n = 0;
  for (int train = 1; train >= 0; --train)
    for (EntryState *es : entry_states()) {
      const Entry *e = es->entry;
      if (!e || (std::strcmp(e->name, "train") == 0) != (train == 1))
        continue;
      for (int32_t k = 0; k < e->num_kernels; ++k) {
        if (es->calls[k] == 0)
          continue;
        if (n < capacity)
          out[n] = tcc_launch_time{train ? 0 : 1,     k,
                                   e->kernels[k],     e->labels[k],
                                   e->costs[2 * k],   e->costs[2 * k + 1],
                                   es->milliseconds[k], es->calls[k]};
        ++n;
      }
    }
  return n;
}

inline const tcc_device_api kDeviceApi = {
    sizeof(tcc_device_api), device_init,         device_alloc,
    device_release,         device_alloc_pinned, device_release_pinned,
    device_copy_to_device,  device_copy_to_host, device_fill_zero,
    device_upload_async,    device_wait_uploads, device_last_error,
    device_execution_note,  device_allocated_bytes,
    device_peak_allocated_bytes, device_copy_on_device,
    device_set_profiling,   device_profile_read,
};

} // namespace tcc_cuda_host
