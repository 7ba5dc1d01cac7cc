// ---- cuBLASLt algorithm selection (gemm.h's plans) ----
//
// Each distinct product (types, shape, layouts, epilogue, alignment,
// workspace: its descriptor) gets its algorithm once per process:
//   - from the cache file (gemm_cache.h) when it has one for this GPU model
//     and cuBLASLt version and cuBLASLt still accepts it;
//   - else by a short search on the first call's own operands: cuBLASLt's
//     first kGemmCandidates heuristic answers, each timed kGemmTimedRuns
//     times; the fastest wins (cuBLASLt's first answer unless another is
//     clearly faster), and goes into the cache file;
//   - else (TCC_GEMM_SEARCH=0, or a plan made while a CUDA graph is being
//     captured, when nothing can be timed) cuBLASLt's first answer.
// run_call runs each entry's first call without a graph so that its plans
// are made, and searched, outside any capture.
//
// The search never changes the step's state: it writes only the product's
// own outputs (D, and aux for GELU_AUX_BIAS), which the real call writes
// again right after; when D is also read (beta != 0: C is D or a residual;
// DGELU's aux) it times into a scratch D instead.

constexpr int kGemmCandidates = 16;
constexpr int kGemmTimedRuns = 5;
// Another candidate replaces cuBLASLt's first answer only when it is at
// least 2% faster: closer than that is timing noise.
constexpr double kGemmSearchMargin = 0.98;

enum GemmChoiceSource { kGemmFromHeuristic = 0, kGemmFromSearch = 1, kGemmFromCache = 2 };

inline const char *gemm_source_name(GemmChoiceSource s) {
  return s == kGemmFromSearch ? "search" : s == kGemmFromCache ? "cache" : "heuristic";
}

struct GemmChoice {
  cublasLtMatmulAlgo_t algo;
  GemmChoiceSource source = kGemmFromHeuristic;
  std::string descriptor; // the cache key, e.g. "bf16->bf16 16384x2304x768 NN bias ..."
  std::string algorithm;  // "algo 66 tile 128x256 stages#13 splitK 1 ..."
  double best_ms = 0, heuristic_ms = 0; // search or cache: per call
  // gemm_cutlass.h's choices only: the CUTLASS configuration that runs the
  // product (-1: cuBLASLt's algo); heuristic_ms is then cuBLASLt's time.
  int cutlass_config = -1;
};

// The process's choices and what the cache file held.
struct GemmSelection {
  bool configured = false;
  bool search = true; // TCC_GEMM_SEARCH != 0
  std::string gpu, version, cache_path;
  GemmCache cache;
  std::string cache_problem; // why the file was ignored or not written
  std::unordered_map<std::string, std::unique_ptr<GemmChoice>> choices; // by descriptor
  // gemm_cutlass.h: CUTLASS or cuBLASLt, by its cache key
  std::unordered_map<std::string, std::unique_ptr<GemmChoice>> cutlass_choices;
  int searched = 0, cached = 0, heuristic = 0;
  double search_seconds = 0;
  std::string note;
};

inline GemmSelection &gemm_selection() {
  static GemmSelection g;
  return g;
}

inline void gemm_cache_warning(GemmSelection &g, const std::string &what) {
  g.cache_problem = what;
  std::fprintf(stderr, "tcc: warning: GEMM algorithm cache %s: %s\n", g.cache_path.c_str(),
               what.c_str());
}

// On first use: the switches, this GPU and cuBLASLt, and the cache file.
inline void configure_gemm_selection(GemmSelection &g) {
  if (g.configured)
    return;
  g.configured = true;
  const char *search = std::getenv("TCC_GEMM_SEARCH");
  g.search = !(search && std::strcmp(search, "0") == 0);
  int device = 0;
  cudaDeviceProp prop;
  g.gpu = cudaGetDevice(&device) == cudaSuccess &&
                  cudaGetDeviceProperties(&prop, device) == cudaSuccess
              ? prop.name
              : "unknown GPU";
  g.version = std::to_string(cublasLtGetVersion());
  if (!g.search)
    return; // no search: cuBLASLt's first answer, no file read or written
  g.cache_path = gemm_cache_path(g.gpu, g.version);
  g.cache.gpu = g.gpu;
  g.cache.version = g.version;
  if (g.cache_path.empty())
    return;
  std::string text, why;
  bool missing = false;
  if (!read_gemm_cache_file(g.cache_path, text, missing, why)) {
    if (!missing)
      gemm_cache_warning(g, "ignored (" + why + ")");
    return;
  }
  GemmCache parsed;
  if (!parse_gemm_cache(text, g.gpu, g.version, parsed, why)) {
    gemm_cache_warning(g, "ignored, its shapes are searched again (" + why + ")");
    return;
  }
  g.cache = std::move(parsed);
}

// "fp32->bf16 16384x768x3072 NN bias+residual beta1 align256 ws33554432 32F":
// what the algorithm depends on (and the cache key).
inline std::string gemm_descriptor(const char *in, const char *out, const char *compute,
                                   bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                                   int64_t batch, int64_t stride_a, int64_t stride_b,
                                   int64_t stride_c, const char *epilogue, bool beta,
                                   uint64_t alignment, uint64_t workspace_bytes) {
  char buf[320];
  std::snprintf(buf, sizeof buf, "%s->%s %lldx%lldx%lld", in, out, static_cast<long long>(m),
                static_cast<long long>(n), static_cast<long long>(k));
  std::string d = buf;
  if (batch > 1) {
    std::snprintf(buf, sizeof buf, " x%lld strides %lld,%lld,%lld",
                  static_cast<long long>(batch), static_cast<long long>(stride_a),
                  static_cast<long long>(stride_b), static_cast<long long>(stride_c));
    d += buf;
  }
  std::snprintf(buf, sizeof buf, " %c%c %s beta%d align%llu ws%llu %s", ta ? 'T' : 'N',
                tb ? 'T' : 'N', epilogue, beta ? 1 : 0,
                static_cast<unsigned long long>(alignment),
                static_cast<unsigned long long>(workspace_bytes), compute);
  return d + buf;
}

// cublasLtMatmulTile_t's names up to 256x32 (newer ids print as numbers).
inline std::string gemm_tile_name(int id) {
  static const char *const names[] = {
      "undefined", "8x8",    "8x16",    "16x8",    "8x32",    "16x16",   "32x8",
      "8x64",      "16x32",  "32x16",   "64x8",    "32x32",   "32x64",   "64x32",
      "32x128",    "64x64",  "128x32",  "64x128",  "128x64",  "64x256",  "128x128",
      "256x64",    "64x512", "128x256", "256x128", "512x64",  "64x96",   "96x64",
      "96x128",    "128x160", "160x128", "192x128", "128x192", "128x96", "32x256",
      "256x32"};
  if (id >= 0 && id < static_cast<int>(sizeof names / sizeof names[0]))
    return names[id];
  return "#" + std::to_string(id);
}

// One configuration attribute of `algo` (-1 if cuBLASLt does not say):
// they are 16- or 32-bit, and cuBLASLt wants the exact size.
inline int64_t gemm_algo_attribute(const cublasLtMatmulAlgo_t &algo,
                                   cublasLtMatmulAlgoConfigAttributes_t attr) {
  size_t size = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, nullptr, 0, &size) !=
          CUBLAS_STATUS_SUCCESS ||
      (size != 2 && size != 4 && size != 8))
    return -1;
  unsigned char bytes[8] = {};
  size_t written = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, bytes, size, &written) !=
      CUBLAS_STATUS_SUCCESS)
    return -1;
  if (size == 2) {
    uint16_t v;
    std::memcpy(&v, bytes, 2);
    return v;
  }
  if (size == 4) {
    int32_t v;
    std::memcpy(&v, bytes, 4);
    return v;
  }
  int64_t v;
  std::memcpy(&v, bytes, 8);
  return v;
}

// "algo 66 tile 128x256 stages#13 splitK 1 swizzle 0 reduction 0 cluster#2".
inline std::string describe_gemm_algo(const cublasLtMatmulAlgo_t &algo) {
  auto get = [&](cublasLtMatmulAlgoConfigAttributes_t attr) {
    return static_cast<long long>(gemm_algo_attribute(algo, attr));
  };
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "algo %lld tile %s stages#%lld splitK %lld swizzle %lld reduction %lld "
                "cluster#%lld",
                get(CUBLASLT_ALGO_CONFIG_ID),
                gemm_tile_name(static_cast<int>(get(CUBLASLT_ALGO_CONFIG_TILE_ID))).c_str(),
                get(CUBLASLT_ALGO_CONFIG_STAGES_ID), get(CUBLASLT_ALGO_CONFIG_SPLITK_NUM),
                get(CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING),
                get(CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME),
                get(CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID));
  return buf;
}

// Whether a search may take `algo` for a product with a 16-bit (or wider)
// output: a split-K candidate that adds its partial products in the output
// type (reduction in place or in the output type) rounds every partial sum
// to 16 bits, and on the H200 (cuBLASLt 13.1) such candidates of small
// 16-bit DGELU products were off by up to 40x gemm_epilogue_test's
// tolerance. Split-K is taken only with fp32 partial sums.
inline bool gemm_algo_keeps_precision(const cublasLtMatmulAlgo_t &algo, bool output16) {
  if (!output16)
    return true;
  int64_t splits = gemm_algo_attribute(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM);
  if (splits == 1 || splits == 0)
    return true;
  return splits > 1 && gemm_algo_attribute(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME) ==
                           CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
}

// One product as cuBLASLt runs it (cuBLAS's A is our B), for timing.
struct GemmOperands {
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t a, b, c; // D's layout is C's
  const void *alpha, *beta;
  const void *A, *B, *C;
  void *D;
  size_t scratch_d_bytes; // > 0: D is read (beta != 0 or DGELU's aux): time into scratch
  bool output16;          // D is bf16 / f16 (gemm_algo_keeps_precision)
  void *workspace;
  size_t workspace_bytes;
  cudaStream_t stream;
};

inline cublasStatus_t run_gemm_algo(const GemmOperands &o, const cublasLtMatmulAlgo_t &algo,
                                    void *D) {
  return cublasLtMatmul(state().lt, o.op, o.alpha, o.A, o.a, o.B, o.b, o.beta, o.C, o.c, D,
                        o.c, &algo, o.workspace, o.workspace_bytes, o.stream);
}

// Milliseconds per call of `call` (true when it launched) over
// kGemmTimedRuns calls on `stream` between the events `start` and `stop`;
// -1 when a call failed or nothing could be timed. The caller warms up.
template <class Call>
double time_gemm_runs(cudaStream_t stream, cudaEvent_t start, cudaEvent_t stop, Call &&call) {
  bool launched = cudaEventRecord(start, stream) == cudaSuccess;
  for (int r = 0; r < kGemmTimedRuns && launched; ++r)
    launched = call();
  float elapsed = 0;
  if (launched && cudaEventRecord(stop, stream) == cudaSuccess &&
      cudaEventSynchronize(stop) == cudaSuccess &&
      cudaEventElapsedTime(&elapsed, start, stop) == cudaSuccess)
    return elapsed / kGemmTimedRuns;
  return -1;
}

// Times candidates 0 .. n-1 of one call on `stream` (GEMM algorithms, the
// CUTLASS instances against cuBLASLt, tcc's sm90 attention against cuDNN):
// launch(i) runs candidate i and says whether it launched (false also for
// one that cannot run this call). Each runs once untimed first (the
// warm-up; one that fails it is never timed), then each is timed
// (time_gemm_runs) `rounds` times in turn, its fastest kept. ms[i]:
// milliseconds per call, -1 when untimed. Returns the stream's error after
// the timing (cudaSuccess when none); the events are freed either way.
template <class Launch>
cudaError_t time_candidates(cudaStream_t stream, int n, int rounds, Launch &&launch,
                            std::vector<double> &ms) {
  ms.assign(n, -1.0);
  cudaEvent_t start = nullptr, stop = nullptr;
  if (cudaEventCreate(&start) == cudaSuccess && cudaEventCreate(&stop) == cudaSuccess) {
    std::vector<char> warm(n, 0);
    for (int i = 0; i < n; ++i)
      warm[i] = launch(i) ? 1 : 0;
    for (int r = 0; r < rounds; ++r)
      for (int i = 0; i < n; ++i) {
        if (!warm[i])
          continue;
        double t = time_gemm_runs(stream, start, stop, [&] { return launch(i); });
        if (t >= 0 && (ms[i] < 0 || t < ms[i]))
          ms[i] = t;
      }
  }
  cudaError_t e = cudaStreamSynchronize(stream);
  if (start)
    cudaEventDestroy(start);
  if (stop)
    cudaEventDestroy(stop);
  return e;
}

// Times `found` candidates on the call's operands; the index of the one to
// use, or -1 when nothing could be timed. Candidates that fail, and split-K
// ones that would round partial sums to 16 bits, are skipped.
inline int search_gemm_algos(const GemmOperands &o,
                             const cublasLtMatmulHeuristicResult_t *results, int found,
                             double &best_ms, double &heuristic_ms, int32_t kernel,
                             int32_t &rc) {
  rc = 0;
  best_ms = heuristic_ms = 0;
  void *scratch = nullptr;
  if (o.scratch_d_bytes && cudaMalloc(&scratch, o.scratch_d_bytes) != cudaSuccess) {
    cudaGetLastError();
    return -1; // no room to time safely: cuBLASLt's first answer
  }
  void *D = scratch ? scratch : o.D;
  std::vector<double> ms;
  if (cudaError_t e = time_candidates(
          o.stream, found, 1,
          [&](int i) {
            return results[i].state == CUBLAS_STATUS_SUCCESS &&
                   results[i].workspaceSize <= o.workspace_bytes &&
                   (i == 0 || gemm_algo_keeps_precision(results[i].algo, o.output16)) &&
                   run_gemm_algo(o, results[i].algo, D) == CUBLAS_STATUS_SUCCESS;
          },
          ms);
      e != cudaSuccess)
    rc = cuda_error(e, ("GEMM algorithm search, " + where(kernel)).c_str());
  if (scratch)
    cudaFree(scratch);
  int best = -1;
  for (int i = 0; i < found; ++i)
    if (ms[i] >= 0 && (best < 0 || ms[i] < ms[best]))
      best = i;
  if (best < 0)
    return -1;
  if (ms[0] >= 0 && ms[best] > kGemmSearchMargin * ms[0])
    best = 0;
  best_ms = ms[best];
  heuristic_ms = ms[0] >= 0 ? ms[0] : 0;
  return best;
}

inline void save_gemm_cache(GemmSelection &g) {
  if (g.cache_path.empty())
    return;
  std::string why;
  if (!write_gemm_cache_file(g.cache_path, format_gemm_cache(g.cache), why))
    gemm_cache_warning(g, "not written (" + why + ")");
}

// The algorithm for the product `descriptor`, run with `o` (the call's
// operands) and preference `pref` (workspace and alignment limits); made
// once per descriptor per process. Errors name `kernel`.
inline int32_t select_gemm_algo(const std::string &descriptor, const GemmOperands &o,
                                cublasLtMatmulPreference_t pref, int32_t kernel,
                                const GemmChoice *&chosen) {
  GemmSelection &g = gemm_selection();
  configure_gemm_selection(g);
  if (auto it = g.choices.find(descriptor); it != g.choices.end()) {
    chosen = it->second.get();
    return 0;
  }
  cublasLtMatmulHeuristicResult_t results[kGemmCandidates];
  int found = 0;
  cublasStatus_t h =
      cublasLtMatmulAlgoGetHeuristic(state().lt, o.op, o.a, o.b, o.c, o.c, pref,
                                     g.search ? kGemmCandidates : 1, results, &found);
  if (h != CUBLAS_STATUS_SUCCESS || found == 0)
    return set_error("cuBLASLt: no algorithm for the product %s: %s in %s",
                     descriptor.c_str(), cublas_status_name(h), where(kernel).c_str());
  auto choice = std::make_unique<GemmChoice>();
  choice->descriptor = descriptor;
  choice->algo = results[0].algo;
  bool decided = false;
  if (auto it = g.cache.entries.find(descriptor); it != g.cache.entries.end()) {
    cublasLtMatmulAlgo_t algo;
    static_assert(sizeof algo == sizeof it->second.algo, "cublasLtMatmulAlgo_t is 64 bytes");
    std::memcpy(&algo, it->second.algo, sizeof algo);
    cublasLtMatmulHeuristicResult_t check;
    if (cublasLtMatmulAlgoCheck(state().lt, o.op, o.a, o.b, o.c, o.c, &algo, &check) ==
            CUBLAS_STATUS_SUCCESS &&
        check.workspaceSize <= o.workspace_bytes) {
      choice->algo = algo;
      choice->source = kGemmFromCache;
      choice->best_ms = it->second.best_ms;
      choice->heuristic_ms = it->second.heuristic_ms;
      ++g.cached;
      decided = true;
    } else {
      gemm_cache_warning(g, "entry for " + descriptor + " rejected by cuBLASLt; searched again");
    }
  }
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  cudaStreamIsCapturing(o.stream, &capturing);
  if (!decided && g.search && capturing == cudaStreamCaptureStatusNone) {
    auto t0 = std::chrono::steady_clock::now();
    int32_t rc = 0;
    int best = search_gemm_algos(o, results, found, choice->best_ms, choice->heuristic_ms,
                                 kernel, rc);
    if (rc)
      return rc;
    g.search_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // The search's kernels are no launch's time (profiling).
    if (int32_t mark = profile_mark(o.stream, -1))
      return mark;
    if (best >= 0) {
      choice->algo = results[best].algo;
      choice->source = kGemmFromSearch;
      ++g.searched;
      decided = true;
    }
  }
  choice->algorithm = describe_gemm_algo(choice->algo);
  if (choice->source == kGemmFromSearch) {
    GemmCacheEntry &e = g.cache.entries[descriptor];
    std::memcpy(e.algo, &choice->algo, sizeof e.algo);
    e.best_ms = choice->best_ms;
    e.heuristic_ms = choice->heuristic_ms;
    e.description = choice->algorithm;
    save_gemm_cache(g);
  }
  if (!decided)
    ++g.heuristic;
  chosen = choice.get();
  g.choices.emplace(descriptor, std::move(choice));
  return 0;
}

// Launch `kernel` of the call in flight ran `choice` (gemm_choice reads it).
inline void note_gemm_choice(int32_t kernel, const GemmChoice *choice) {
  EntryState *c = current_call();
  if (!c || !c->entry || kernel < 0 || kernel >= c->entry->num_kernels)
    return;
  if (c->gemm_choices.size() != static_cast<size_t>(c->entry->num_kernels))
    c->gemm_choices.assign(c->entry->num_kernels, nullptr);
  c->gemm_choices[kernel] = choice;
}

// One line for trun: how the algorithms were chosen so far ("" if none).
inline const char *gemm_selection_note() {
  GemmSelection &g = gemm_selection();
  if (g.choices.empty())
    return "";
  char buf[256];
  if (!g.search) {
    std::snprintf(buf, sizeof buf,
                  "GEMM algorithms: %d shapes, cuBLASLt's first heuristic answer each "
                  "(TCC_GEMM_SEARCH=0)",
                  g.heuristic);
    g.note = buf;
    return g.note.c_str();
  }
  std::snprintf(buf, sizeof buf,
                "GEMM algorithms: %d shapes searched (up to %d candidates each, %.2f s), %d "
                "from the cache",
                g.searched, kGemmCandidates, g.search_seconds, g.cached);
  g.note = buf;
  if (g.heuristic)
    g.note += ", " + std::to_string(g.heuristic) + " cuBLASLt's first answer (nothing to "
              "time: made while capturing a CUDA graph, or no memory for a scratch output)";
  if (!g.cutlass_choices.empty()) {
    int taken = 0;
    for (const auto &[key, c] : g.cutlass_choices)
      taken += c->cutlass_config >= 0;
    g.note += "; CUTLASS sm90 kernels run " + std::to_string(taken) + " of the " +
              std::to_string(g.cutlass_choices.size()) +
              " epilogue shapes they could (timed against cuBLASLt's)";
  }
  g.note += g.cache_path.empty() ? std::string(" (no cache file: TCC_GEMM_CACHE=0 or no "
                                               "HOME)")
                                 : " (" + g.cache_path + ")";
  if (!g.cache_problem.empty())
    g.note += "; cache: " + g.cache_problem;
  return g.note.c_str();
}
