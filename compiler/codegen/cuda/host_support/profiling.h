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
  // Train's launches first, then the others' (eval, the further entries).
  for (int train = 1; train >= 0; --train)
    for (EntryState *es : entry_states()) {
      const Entry *e = es->entry;
      if (!e || (e->profile_entry == 0) != (train == 1))
        continue;
      for (int32_t k = 0; k < e->num_kernels; ++k) {
        if (es->calls[k] == 0)
          continue;
        if (n < capacity)
          out[n] = tcc_launch_time{e->profile_entry,  k,
                                   es->kernel_names.empty() ? e->kernels[k]
                                                            : es->kernel_names[k],
                                   e->labels[k],
                                   e->costs[2 * k],   e->costs[2 * k + 1],
                                   es->milliseconds[k], es->calls[k]};
        ++n;
      }
    }
  return n;
}

inline int32_t device_gemm_choice(int32_t entry, int32_t launch, tcc_gemm_choice *out) {
  for (EntryState *es : entry_states()) {
    const Entry *e = es->entry;
    if (!e || e->profile_entry != entry || launch < 0 ||
        static_cast<size_t>(launch) >= es->gemm_choices.size() || !es->gemm_choices[launch])
      continue;
    const GemmChoice &c = *es->gemm_choices[launch];
    *out = tcc_gemm_choice{c.descriptor.c_str(), c.algorithm.c_str(),
                           gemm_source_name(c.source), c.best_ms, c.heuristic_ms};
    return 1;
  }
  return 0;
}

// Destroys every entry's captured graphs (tcc_device_api.release_graphs):
// an NCCL communicator they captured collectives of can then be destroyed.
inline int32_t device_release_graphs() {
  DeviceState &s = state();
  if (s.initialized)
    if (cudaError_t err = cudaStreamSynchronize(s.step_stream); err != cudaSuccess)
      return cuda_error(err, "cudaStreamSynchronize (before releasing the CUDA graphs)");
  for (EntryState *es : entry_states()) {
    for (CapturedGraph &g : es->graphs)
      cudaGraphExecDestroy(g.exec);
    es->graphs.clear();
  }
  return 0;
}

inline const tcc_device_api kDeviceApi = {
    sizeof(tcc_device_api), device_init,         device_alloc,
    device_release,         device_alloc_pinned, device_release_pinned,
    device_copy_to_device,  device_copy_to_host, device_fill_zero,
    device_upload_async,    device_wait_uploads, device_last_error,
    device_execution_note,  device_allocated_bytes,
    device_peak_allocated_bytes, device_copy_on_device,
    device_set_profiling,   device_profile_read,
    device_gemm_choice,     gemm_selection_note,
    device_release_graphs,
};

} // namespace tcc_cuda_host
