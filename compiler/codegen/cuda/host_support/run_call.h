// ---- running one call ----

#include "compiler/codegen/cuda/ControlBlockLayout.h"

// Everything the generated code knows about one entry point.
struct EntryState;

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
  // Before the first call (before any graph capture): builds the cuDNN
  // attention plans (attention.h); nullptr when the entry has none.
  int32_t (*prepare)(EntryState &state);
  // Bytes of the outputs a caller may leave NULL (eval's): allocated on the
  // first call that does (EntryState::output_scratch), not in the
  // workspace, so that a run that never asks eval for them does not hold
  // them (GPT-2: 3 GiB of f32 logits).
  uint64_t output_scratch_bytes;
  // 0: train, 1: eval, 2 + k: the descriptor's entries[k] (profiling), and
  // this entry's own input / output / state counts (train and eval: the
  // descriptor's inputs and outputs, no state).
  int32_t profile_entry;
  int32_t num_inputs, num_outputs, num_state;
};

struct GemmChoice; // gemm_search.h

// One captured call: the args pointers it was captured with, and its graph.
struct CapturedGraph {
  std::vector<const void *> key;
  cudaGraphExec_t exec = nullptr;
};
// Graphs kept per entry: one per set of buffers a caller cycles through
// (trun alternates two input sets, so that batch k+1 uploads while step k
// runs); beyond that the oldest is dropped.
constexpr size_t kGraphsPerEntry = 4;

// Per entry point: the pinned mirror and the captured graphs.
struct EntryState {
  char *control = nullptr; // pinned
  char *output_scratch = nullptr; // device, Entry::output_scratch_bytes
  std::vector<CapturedGraph> graphs; // most recently captured last
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
  // Entry::prepare ran; its line for trun ("attention: cuDNN ..."), and the
  // kernel names it changed (the profile's: empty, or one per launch).
  bool prepared = false;
  std::string prepare_note;
  std::vector<const char *> kernel_names;
  // Per kernel: the algorithm of a cuBLASLt product (device gemm_choice).
  std::vector<const GemmChoice *> gemm_choices;
  // The first call runs without a graph: its cuBLASLt plans are made then,
  // and an algorithm search times kernels, which a capture cannot.
  bool ran_directly = false;
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

// Before a launch that takes this call's hyper-parameters by value (the
// flash-attention launchers' dropout seed key and step): a captured graph
// would replay the captured call's values every call, so capture fails
// here and run_call launches the entry's kernels one by one instead.
inline int32_t refuse_graph_capture(cudaStream_t stream, int32_t kernel) {
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capturing) != cudaSuccess ||
      capturing == cudaStreamCaptureStatusNone)
    return 0;
  return set_error("%s takes the dropout seed and step by value (a graph would freeze them)",
                   where(kernel).c_str());
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

inline void args_key(const tcc_step_args *a, const tcc_step_descriptor &d, const Entry &e,
                     std::vector<const void *> &key) {
  key.clear();
  key.push_back(a->workspace);
  for (int32_t i = 0; i < d.num_params; ++i) key.push_back(a->params[i]);
  for (int32_t i = 0; i < d.num_optimizer_state; ++i)
    key.push_back(a->optimizer_state ? a->optimizer_state[i] : nullptr);
  for (int32_t i = 0; i < e.num_inputs; ++i) key.push_back(a->inputs[i]);
  for (int32_t i = 0; i < e.num_outputs; ++i)
    key.push_back(a->outputs ? a->outputs[i] : nullptr);
  for (int32_t i = 0; i < e.num_state; ++i) key.push_back(a->entry_state[i]);
  for (int32_t i = 0; i < d.num_buffers; ++i) key.push_back(a->buffers[i]);
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
  if (!es.prepared) {
    es.prepared = true;
    if (e.prepare)
      if (int32_t rc = e.prepare(es))
        return rc;
  }
  if (e.output_scratch_bytes && !es.output_scratch) {
    bool missing = !a->outputs;
    for (int32_t i = 0; i < e.num_outputs && !missing; ++i)
      missing = !a->outputs[i];
    // Before any graph capture of this call (no allocation while capturing).
    if (missing && !(es.output_scratch = static_cast<char *>(device_alloc(e.output_scratch_bytes))))
      return set_error("%s: the outputs the caller left NULL: %s", e.name, state().error.c_str());
  }
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
    for (int32_t i = 0; i < e.num_inputs && !reads; ++i)
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
  } else if (s.graphs && !es.graph_failed && !es.ran_directly) {
    es.graph_note = std::string("CUDA graph: ") + e.name +
                    " step captured from the second call on (the first ran kernel by "
                    "kernel while cuBLASLt plans were made)";
  } else if (s.graphs && !es.graph_failed) {
    std::vector<const void *> key;
    args_key(a, d, e, key);
    cudaGraphExec_t exec = nullptr;
    for (const CapturedGraph &g : es.graphs)
      if (g.key == key)
        exec = g.exec;
    if (!exec) {
      // Buffers not seen before: capture them (a recapture every call would
      // cost more host time than the graph saves).
      if (es.graphs.size() >= kGraphsPerEntry) {
        cudaGraphExecDestroy(es.graphs.front().exec);
        es.graphs.erase(es.graphs.begin());
      }
      cudaGraph_t graph = nullptr;
      cudaError_t err = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
      int32_t rc = err == cudaSuccess ? enqueue_call(e, es, a, stream) : 0;
      cudaError_t end = cudaStreamEndCapture(stream, &graph);
      if (err == cudaSuccess && rc == 0 && end == cudaSuccess)
        err = cudaGraphInstantiate(&exec, graph, 0);
      else if (err == cudaSuccess)
        err = end;
      if (graph)
        cudaGraphDestroy(graph);
      cudaGetLastError();
      if (err != cudaSuccess || rc != 0 || !exec) {
        // Launch errors are reported again by the direct run below.
        es.graph_failed = true;
        exec = nullptr;
        for (CapturedGraph &g : es.graphs)
          cudaGraphExecDestroy(g.exec);
        es.graphs.clear();
        es.graph_note = std::string("CUDA graph: off for ") + e.name + " (capture failed: " +
                        (err != cudaSuccess ? cudaGetErrorString(err) : s.error.c_str()) +
                        "); kernels launched one by one";
      } else {
        es.graphs.push_back({key, exec});
        ++es.captures;
        es.graph_note = std::string("CUDA graph: ") + e.name + " step captured (" +
                        std::to_string(e.num_kernels) + " kernels" +
                        (es.captures > 1
                             ? ", " + std::to_string(es.captures) + " captures for " +
                                   std::to_string(es.graphs.size()) + " sets of buffers"
                             : "") +
                        "), replayed each call";
      }
    }
    if (exec) {
      if (cudaError_t err = cudaGraphLaunch(exec, stream); err != cudaSuccess)
        return cuda_error(err, ("cudaGraphLaunch, " + where(-1)).c_str());
      launched = true;
    }
  } else if (!s.graphs) {
    es.graph_note = s.sync_each_kernel
                        ? "CUDA graph: off (TCC_CUDA_SYNC=1: synchronize after every kernel)"
                        : "CUDA graph: off (TCC_CUDA_GRAPHS=0)";
  }
  if (!launched) {
    if (int32_t rc = enqueue_call(e, es, a, stream); rc != 0)
      return rc;
    es.ran_directly = true;
  }
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
    if (!es.prepare_note.empty())
      s.note += "; " + es.prepare_note;
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

