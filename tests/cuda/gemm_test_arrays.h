// What the GEMM device tests (gemm_epilogue_test.cu, gemm_search_test.cu,
// fp8_gemm_test.cu, cutlass_gemm_test.cu) share: host arrays of bf16 / f16 /
// f32 written from and read as doubles, device buffers, the types' names and
// unit roundoffs, a plan's heuristic candidates, the command line. Include
// after cuda_host_support.h (GemmType) and <random>, inside an anonymous
// namespace.

using tcc_cuda_host::GemmType;

double bf16ToDouble(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
uint16_t doubleToBf16(double x) {
  float f = static_cast<float>(x);
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}
double f16ToDouble(uint16_t h) { return static_cast<double>(__half2float(*reinterpret_cast<__half *>(&h))); }
uint16_t doubleToF16(double x) {
  __half h = __float2half_rn(static_cast<float>(x));
  return *reinterpret_cast<uint16_t *>(&h);
}

size_t bytesOf(GemmType t) { return t == tcc_cuda_host::kGemmF32 ? 4 : 2; }

// Host storage of `n` elements of type t, written from doubles (rounded)
// and read back as doubles.
struct HostArray {
  GemmType type;
  std::vector<unsigned char> bytes;
  HostArray(GemmType t, size_t n) : type(t), bytes(n * bytesOf(t)) {}
  size_t size() const { return bytes.size() / bytesOf(type); }
  void set(size_t i, double x) {
    if (type == tcc_cuda_host::kGemmF32) {
      float f = static_cast<float>(x);
      std::memcpy(&bytes[i * 4], &f, 4);
    } else {
      uint16_t h = type == tcc_cuda_host::kGemmBF16 ? doubleToBf16(x) : doubleToF16(x);
      std::memcpy(&bytes[i * 2], &h, 2);
    }
  }
  double get(size_t i) const {
    if (type == tcc_cuda_host::kGemmF32) {
      float f;
      std::memcpy(&f, &bytes[i * 4], 4);
      return f;
    }
    uint16_t h;
    std::memcpy(&h, &bytes[i * 2], 2);
    return type == tcc_cuda_host::kGemmBF16 ? bf16ToDouble(h) : f16ToDouble(h);
  }
};

struct Device {
  void *p = nullptr;
  explicit Device(size_t bytes) { cudaMalloc(&p, bytes > 0 ? bytes : 1); }
  ~Device() { cudaFree(p); }
};

const char *typeName(GemmType t) {
  return t == tcc_cuda_host::kGemmF32 ? "f32" : t == tcc_cuda_host::kGemmBF16 ? "bf16" : "f16";
}
double unitRoundoff(GemmType t) {
  return t == tcc_cuda_host::kGemmF32 ? std::ldexp(1.0, -22)
         : t == tcc_cuda_host::kGemmBF16 ? std::ldexp(1.0, -8)
                                         : std::ldexp(1.0, -11);
}

// Up to kGemmCandidates algorithms cuBLASLt's heuristic offers for `plan`'s
// descriptors within `workspace_bytes` (the candidates a search could take):
// how many went into `results`.
int heuristicCandidates(const tcc_cuda_host::GemmPlan &plan, uint64_t workspace_bytes,
                        cublasLtMatmulHeuristicResult_t *results) {
  cublasLtMatmulPreference_t pref = nullptr;
  cublasLtMatmulPreferenceCreate(&pref);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                       &workspace_bytes, sizeof workspace_bytes);
  int found = 0;
  cublasLtMatmulAlgoGetHeuristic(tcc_cuda_host::state().lt, plan.op, plan.a, plan.b, plan.c,
                                 plan.c, pref, tcc_cuda_host::kGemmCandidates, results, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  return found;
}

// The command line every GEMM device test takes: --seed N (default: a
// fresh one) and --bench (time the GPT-2 shapes after the checks).
struct TestArgs {
  uint64_t seed = std::random_device{}();
  bool bench = false;
};
TestArgs parseTestArgs(int argc, char **argv) {
  TestArgs args;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
      args.seed = std::strtoull(argv[++i], nullptr, 10);
    else if (std::strcmp(argv[i], "--bench") == 0)
      args.bench = true;
  }
  return args;
}
