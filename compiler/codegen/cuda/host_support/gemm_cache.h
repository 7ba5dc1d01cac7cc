// ---- the cuBLASLt algorithm cache file (gemm_search.h) ----
//
// Plain C++ without CUDA types, so that tests/codegen/GemmCacheTest.cpp can
// paste it alone (like every piece, it sits inside namespace tcc_cuda_host
// and gets its #includes from errors.h). The algorithms a search picked,
// kept across runs in one text file per GPU model and cuBLASLt version:
//
//   tcc-gemm-cache 1
//   gpu NVIDIA H200
//   cublaslt 120804
//   <descriptor>\t<algorithm: 128 hex digits>\t<best ms>\t<heuristic ms>\t<description>
//   ...
//
// The algorithm is cublasLtMatmulAlgo_t's 64 bytes (cuBLASLt documents it as
// trivially serializable for the same library version; the reader still
// checks it with cublasLtMatmulAlgoCheck). A file that names another GPU or
// version, or has any malformed line, is ignored as a whole with a warning:
// its shapes are searched again and the file rewritten.

constexpr const char *kGemmCacheMagic = "tcc-gemm-cache 1";
constexpr int kGemmAlgoWords = 8; // sizeof(cublasLtMatmulAlgo_t) / 8

struct GemmCacheEntry {
  uint64_t algo[kGemmAlgoWords] = {};
  double best_ms = 0;      // the chosen algorithm, per call
  double heuristic_ms = 0; // cuBLASLt's first heuristic, per call
  std::string description; // "algo 21 tile 128x256 ..." (for people)
};

struct GemmCache {
  std::string gpu, version;
  std::map<std::string, GemmCacheEntry> entries; // by descriptor
};

// Names and descriptions are one field each: no tabs or line breaks.
inline std::string gemm_cache_field(const std::string &s) {
  std::string out = s;
  for (char &c : out)
    if (c == '\t' || c == '\n' || c == '\r')
      c = ' ';
  return out;
}

inline std::string format_gemm_cache(const GemmCache &cache) {
  std::string text = std::string(kGemmCacheMagic) + "\ngpu " + gemm_cache_field(cache.gpu) +
                     "\ncublaslt " + gemm_cache_field(cache.version) + "\n";
  char buf[64];
  for (const auto &[descriptor, e] : cache.entries) {
    text += gemm_cache_field(descriptor) + "\t";
    for (uint64_t w : e.algo) {
      std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(w));
      text += buf;
    }
    std::snprintf(buf, sizeof buf, "\t%.6f\t%.6f\t", e.best_ms, e.heuristic_ms);
    text += buf + gemm_cache_field(e.description) + "\n";
  }
  return text;
}

// A non-negative finite number spanning all of `s`.
inline bool parse_gemm_cache_ms(const std::string &s, double &out) {
  if (s.empty())
    return false;
  char *end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size() && out >= 0 && out < 1e30;
}

// The cache in `text` if it is one for (gpu, version); otherwise false and
// `why` (for a warning).
inline bool parse_gemm_cache(const std::string &text, const std::string &gpu,
                             const std::string &version, GemmCache &out, std::string &why) {
  out = GemmCache{};
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) {
      why = "the last line is cut off (no line break)";
      return false;
    }
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  if (lines.size() < 3 || lines[0] != kGemmCacheMagic) {
    why = std::string("not a tcc GEMM cache (the first line is not '") + kGemmCacheMagic + "')";
    return false;
  }
  if (lines[1] != "gpu " + gemm_cache_field(gpu)) {
    why = "written for another GPU ('" + lines[1] + "', this is '" + gpu + "')";
    return false;
  }
  if (lines[2] != "cublaslt " + gemm_cache_field(version)) {
    why = "written for another cuBLASLt ('" + lines[2] + "', this is " + version + ")";
    return false;
  }
  out.gpu = gpu;
  out.version = version;
  for (size_t i = 3; i < lines.size(); ++i) {
    std::vector<std::string> fields;
    size_t from = 0;
    for (size_t tab; (tab = lines[i].find('\t', from)) != std::string::npos; from = tab + 1)
      fields.push_back(lines[i].substr(from, tab - from));
    fields.push_back(lines[i].substr(from));
    std::string where = "line " + std::to_string(i + 1) + ": ";
    if (fields.size() != 5 || fields[0].empty()) {
      why = where + "expected 5 tab-separated fields";
      return false;
    }
    GemmCacheEntry e;
    const std::string &hex = fields[1];
    if (hex.size() != 16 * kGemmAlgoWords ||
        hex.find_first_not_of("0123456789abcdef") != std::string::npos) {
      why = where + "the algorithm is not " + std::to_string(16 * kGemmAlgoWords) +
            " lower-case hex digits";
      return false;
    }
    for (int w = 0; w < kGemmAlgoWords; ++w)
      e.algo[w] = std::strtoull(hex.substr(16 * w, 16).c_str(), nullptr, 16);
    if (!parse_gemm_cache_ms(fields[2], e.best_ms) ||
        !parse_gemm_cache_ms(fields[3], e.heuristic_ms)) {
      why = where + "the times are not non-negative numbers";
      return false;
    }
    e.description = fields[4];
    if (!out.entries.emplace(fields[0], e).second) {
      why = where + "a second entry for '" + fields[0] + "'";
      return false;
    }
  }
  return true;
}

// "gemm-NVIDIA_H200-cublasLt120804.txt": one file per GPU model and
// library version (letters, digits, '.', '-' kept; anything else '_').
inline std::string gemm_cache_file_name(const std::string &gpu, const std::string &version) {
  std::string name = "gemm-" + gpu + "-cublasLt" + version;
  for (char &c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-')
      c = '_';
  return name + ".txt";
}

// Where the cache lives: TCC_GEMM_CACHE names the file ("0": none); by
// default <cache root>/gemm/<gemm_cache_file_name>, the cache root that of
// tcc's nvcc object cache (TCC_CACHE_DIR, else $XDG_CACHE_HOME/tcc, else
// $HOME/.cache/tcc). "" when there is none.
inline std::string gemm_cache_path(const std::string &gpu, const std::string &version) {
  if (const char *f = std::getenv("TCC_GEMM_CACHE"); f && *f)
    return std::strcmp(f, "0") == 0 ? std::string() : std::string(f);
  std::string root;
  if (const char *d = std::getenv("TCC_CACHE_DIR"); d && *d)
    root = d;
  else if (const char *x = std::getenv("XDG_CACHE_HOME"); x && *x)
    root = std::string(x) + "/tcc";
  else if (const char *h = std::getenv("HOME"); h && *h)
    root = std::string(h) + "/.cache/tcc";
  else
    return "";
  return root + "/gemm/" + gemm_cache_file_name(gpu, version);
}

// The whole file; false and `why` if it cannot be read (a missing file is
// `missing`, not an error).
inline bool read_gemm_cache_file(const std::string &path, std::string &text, bool &missing,
                                 std::string &why) {
  missing = false;
  FILE *f = std::fopen(path.c_str(), "rb");
  if (!f) {
    missing = errno == ENOENT;
    why = std::string("cannot open it: ") + std::strerror(errno);
    return false;
  }
  text.clear();
  char buf[65536];
  size_t got;
  while ((got = std::fread(buf, 1, sizeof buf, f)) > 0)
    text.append(buf, got);
  bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed)
    why = "read error";
  return !failed;
}

// Writes `text` to a temporary file next to `path` and renames it over
// `path` (readers see the old file or the new one, never half of one),
// creating the folders on the way.
inline bool write_gemm_cache_file(const std::string &path, const std::string &text,
                                  std::string &why) {
  for (size_t slash = path.find('/', 1); slash != std::string::npos;
       slash = path.find('/', slash + 1))
    if (::mkdir(path.substr(0, slash).c_str(), 0755) != 0 && errno != EEXIST) {
      why = "cannot create " + path.substr(0, slash) + ": " + std::strerror(errno);
      return false;
    }
  std::string tmp = path + ".tmp." + std::to_string(static_cast<long>(::getpid()));
  FILE *f = std::fopen(tmp.c_str(), "wb");
  if (!f) {
    why = "cannot create " + tmp + ": " + std::strerror(errno);
    return false;
  }
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  ok &= std::fclose(f) == 0;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    why = "cannot write " + path + ": " + std::strerror(errno);
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}
