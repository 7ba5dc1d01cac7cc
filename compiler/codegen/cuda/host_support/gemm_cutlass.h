// ---- CUTLASS Hopper epilogue GEMMs as candidates (gemm.h's gemm_epilogue) ----
//
// When the step links the CUTLASS instances (the driver defines
// TCC_STEP_CUTLASS_SM90: target sm_90, CUTLASS headers found, a bf16
// product whose epilogue one of them computes), a product they can run is
// timed on its first call with each CUTLASS configuration and with the
// cuBLASLt algorithm gemm_search.h chose, on the call's own operands, the
// same way as that search (a warm-up, then kGemmTimedRuns calls each); a
// CUTLASS kernel replaces cuBLASLt only when at least 2% faster. The
// decision is kept per descriptor in the process and in the cache file
// under "<descriptor> cutlass-sm90[<configs>]" (a changed instance list is
// another key, so it is timed again): the entry's first algorithm word is
// the configuration + 1, 0 when cuBLASLt stays. Not timed (cuBLASLt stays):
// TCC_GEMM_SEARCH=0, TCC_GEMM_CUTLASS=0, a plan made while capturing, a GPU
// other than sm_90 (or no scratch memory for a D that is read).
#ifdef TCC_STEP_CUTLASS_SM90

// TCC_GEMM_CUTLASS: "0" no CUTLASS candidates; "force" the fastest CUTLASS
// configuration wherever one applies, cuBLASLt or not (tests and A/B runs;
// nothing written to the cache file); unset or anything else: by timing.
// (The instances are sm_90a code: another GPU never runs them.)
enum CutlassMode { kCutlassOff, kCutlassTimed, kCutlassForced };
inline CutlassMode cutlass_mode() {
  return static_cast<CutlassMode>(sm90_family_switch("TCC_GEMM_CUTLASS"));
}

inline std::string cutlass_cache_key(const std::string &descriptor) {
  std::string key = descriptor + " cutlass-sm90[";
  for (int c = 0; c < tcc_cutlass::kSm90Configs; ++c)
    key += (c ? "|" : "") + std::string(tcc_cutlass::sm90_config_name(c));
  return key + "]";
}

inline std::string cutlass_algorithm_name(int config) {
  return std::string("CUTLASS sm90 ") + tcc_cutlass::sm90_config_name(config);
}

// The choice for `descriptor` (cuBLASLt's `cublas` or a CUTLASS
// configuration), made once per process: from the cache file, else timed as
// above. `o` runs cuBLASLt's algorithm on the call's operands; `args` the
// CUTLASS instances on the same ones (D replaced by a scratch when o says D
// is read). Returns 0 or an error status; `chosen` is null when cuBLASLt stays.
inline int32_t select_cutlass_epilogue(const std::string &descriptor, const GemmOperands &o,
                                       const GemmChoice &cublas, tcc_cutlass::Sm90Epilogue e,
                                       tcc_cutlass::Sm90GemmArgs args, int32_t kernel,
                                       const GemmChoice *&chosen) {
  chosen = nullptr;
  GemmSelection &g = gemm_selection();
  configure_gemm_selection(g);
  CutlassMode mode = cutlass_mode();
  if (!g.search || mode == kCutlassOff)
    return 0;
  std::string key = cutlass_cache_key(descriptor) + (mode == kCutlassForced ? " forced" : "");
  if (auto it = g.cutlass_choices.find(key); it != g.cutlass_choices.end()) {
    chosen = it->second->cutlass_config >= 0 ? it->second.get() : nullptr;
    return 0;
  }
  auto choice = std::make_unique<GemmChoice>();
  choice->descriptor = descriptor;
  choice->algo = cublas.algo;
  bool decided = false;
  if (auto it = g.cache.entries.find(key);
      mode == kCutlassTimed && it != g.cache.entries.end()) {
    int64_t word = static_cast<int64_t>(it->second.algo[0]);
    if (word >= 0 && word <= tcc_cutlass::kSm90Configs) {
      choice->cutlass_config = static_cast<int>(word) - 1;
      choice->source = kGemmFromCache;
      choice->best_ms = it->second.best_ms;
      choice->heuristic_ms = it->second.heuristic_ms;
      decided = true;
    } else {
      gemm_cache_warning(g, "entry for " + key + " names no CUTLASS configuration; timed again");
    }
  }
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  cudaStreamIsCapturing(o.stream, &capturing);
  if (!decided && capturing == cudaStreamCaptureStatusNone) {
    auto t0 = std::chrono::steady_clock::now();
    void *scratch = nullptr;
    if (o.scratch_d_bytes && cudaMalloc(&scratch, o.scratch_d_bytes) != cudaSuccess) {
      cudaGetLastError();
      return 0; // no room to time safely: cuBLASLt
    }
    void *D = scratch ? scratch : o.D;
    args.D = D;
    args.workspace = o.workspace;
    args.workspace_bytes = o.workspace_bytes;
    args.stream = o.stream;
    // ms[0]: cuBLASLt's algorithm; ms[1 + c]: configuration c.
    std::vector<double> ms;
    const char *why = "";
    int32_t rc = 0;
    if (cudaError_t err = time_candidates(
            o.stream, 1 + tcc_cutlass::kSm90Configs, 1,
            [&](int i) -> bool {
              if (i == 0)
                return run_gemm_algo(o, cublas.algo, D) == CUBLAS_STATUS_SUCCESS;
              size_t need = 0;
              return tcc_cutlass::sm90_gemm_bf16(e, i - 1, args, &need, &why) == 0 &&
                     need <= o.workspace_bytes &&
                     tcc_cutlass::sm90_gemm_bf16(e, i - 1, args, nullptr, &why) == 0;
            },
            ms);
        err != cudaSuccess)
      rc = cuda_error(err, ("CUTLASS GEMM timing, " + where(kernel)).c_str());
    if (scratch)
      cudaFree(scratch);
    if (rc)
      return rc;
    g.search_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (int32_t mark = profile_mark(o.stream, -1)) // the timing is no launch's time
      return mark;
    if (ms[0] > 0) {
      int best = -1;
      for (int c = 0; c < tcc_cutlass::kSm90Configs; ++c)
        if (ms[1 + c] > 0 && (best < 0 || ms[1 + c] < ms[1 + best]))
          best = c;
      choice->cutlass_config =
          best >= 0 && (mode == kCutlassForced || ms[1 + best] < kGemmSearchMargin * ms[0])
              ? best
              : -1;
      choice->best_ms = choice->cutlass_config >= 0 ? ms[1 + best] : ms[0];
      choice->heuristic_ms = ms[0];
      choice->source = kGemmFromSearch;
      decided = true;
    }
    if (ms[0] > 0 && mode == kCutlassTimed) {
      GemmCacheEntry &entry = g.cache.entries[key];
      entry = GemmCacheEntry{};
      entry.algo[0] = static_cast<uint64_t>(choice->cutlass_config + 1);
      entry.best_ms = choice->best_ms;
      entry.heuristic_ms = choice->heuristic_ms;
      entry.description = choice->cutlass_config >= 0
                              ? cutlass_algorithm_name(choice->cutlass_config)
                              : std::string("cuBLASLt kept (") + cublas.algorithm + ")";
      save_gemm_cache(g);
    }
  }
  if (!decided)
    return 0; // nothing timed: cuBLASLt, decided again by the next plan
  if (choice->cutlass_config >= 0)
    choice->algorithm = cutlass_algorithm_name(choice->cutlass_config) + " (cuBLASLt's " +
                        cublas.algorithm + ")";
  else
    choice->algorithm = cublas.algorithm;
  chosen = choice->cutlass_config >= 0 ? choice.get() : nullptr;
  g.cutlass_choices.emplace(key, std::move(choice));
  return 0;
}

// Runs configuration `choice->cutlass_config` of epilogue `e`.
inline int32_t run_cutlass_epilogue(const GemmChoice &choice, tcc_cutlass::Sm90Epilogue e,
                                    const tcc_cutlass::Sm90GemmArgs &args, int32_t kernel) {
  const char *why = "";
  if (tcc_cutlass::sm90_gemm_bf16(e, choice.cutlass_config, args, nullptr, &why))
    return set_error("CUTLASS %s (%s): %s in %s", tcc_cutlass::sm90_epilogue_name(e),
                     tcc_cutlass::sm90_config_name(choice.cutlass_config), why,
                     where(kernel).c_str());
  return 0;
}

#endif // TCC_STEP_CUTLASS_SM90
