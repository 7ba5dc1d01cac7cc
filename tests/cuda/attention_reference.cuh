// Shared by the attention device tests (attention_kernels_test.cu,
// cudnn_attention_test.cu): the float64 reference of kern.attention /
// kern.attention_grad (out, lse, dq, dk, dv), random inputs, device buffers,
// the error measure, the command line, the GPU check and the bench timer.
// Included inside each test's anonymous namespace, after `using
// tcc_cuda::bf16; using tcc_cuda::f16;` and the test's CUDA_CHECK.
uint64_t gSeed = 0;
std::string gFilter;
int gCases = 0, gPassed = 0;

double toD(float v) { return v; }
double toD(bf16 v) { return tcc_cuda::bf16_to_float(v.bits); }
double toD(f16 v) { return tcc_cuda::f16_to_float(v.bits); }
template <class T> T fromD(double v);
template <> float fromD<float>(double v) { return static_cast<float>(v); }
template <> bf16 fromD<bf16>(double v) {
  return bf16{tcc_cuda::float_to_bf16(static_cast<float>(v))};
}
template <> f16 fromD<f16>(double v) {
  return f16{tcc_cuda::float_to_f16(static_cast<float>(v))};
}
template <class T> const char *typeName();
template <> const char *typeName<float>() { return "float"; }
template <> const char *typeName<bf16>() { return "bf16"; }
template <> const char *typeName<f16>() { return "f16"; }
template <class T> double tolOf();
template <> double tolOf<float>() { return 2e-5; }
template <> double tolOf<bf16>() { return 1.0 / 128; }
template <> double tolOf<f16>() { return 1.0 / 512; }

struct Shape {
  int64_t B, H, Hkv, T, S, D;
  bool causal;
  float rate;
};

// A case's name ("bf16 D=64 B=2 H=4 Hkv=4 T=256 S=256 causal", with
// " dropout=R" when it has dropout) into `name`; false when --filter
// leaves it out, else counts it in gCases.
template <class T, size_t N> bool selectCase(const Shape &sh, char (&name)[N]) {
  int at = std::snprintf(name, N,
                         "%s D=%" PRId64 " B=%" PRId64 " H=%" PRId64 " Hkv=%" PRId64
                         " T=%" PRId64 " S=%" PRId64 "%s",
                         typeName<T>(), sh.D, sh.B, sh.H, sh.Hkv, sh.T, sh.S,
                         sh.causal ? " causal" : "");
  if (sh.rate > 0 && at > 0 && static_cast<size_t>(at) < N)
    std::snprintf(name + at, N - at, " dropout=%g", sh.rate);
  if (!gFilter.empty() && std::string(name).find(gFilter) == std::string::npos)
    return false;
  ++gCases;
  return true;
}

// splitmix64 stream per (seed, case name): inputs depend only on them.
struct Rng {
  uint64_t s;
  double uniform() { // [-1, 1)
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (z >> 11) * (2.0 / 9007199254740992.0) - 1.0;
  }
};

template <class T> struct DeviceBuf {
  T *ptr = nullptr;
  size_t n = 0;
  explicit DeviceBuf(size_t count) : n(count) {
    CUDA_CHECK(cudaMalloc(&ptr, (n ? n : 1) * sizeof(T)));
  }
  ~DeviceBuf() { cudaFree(ptr); }
  void poison() { CUDA_CHECK(cudaMemset(ptr, 0xFF, (n ? n : 1) * sizeof(T))); }
  void upload(const std::vector<T> &h) {
    CUDA_CHECK(cudaMemcpy(ptr, h.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    std::vector<T> h(n);
    CUDA_CHECK(cudaMemcpy(h.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }
};

// The reference: float64, the launchers' documented semantics.
struct Reference {
  std::vector<double> out, lse, dq, dk, dv;
};
Reference reference(const Shape &sh, const std::vector<double> &q,
                    const std::vector<double> &k, const std::vector<double> &v,
                    const std::vector<double> &dout, double scale,
                    uint64_t seed_key, uint64_t step) {
  const int64_t B = sh.B, H = sh.H, T = sh.T, S = sh.S, D = sh.D;
  const int64_t group = H / sh.Hkv;
  Reference r;
  r.out.assign(B * H * T * D, 0);
  r.lse.assign(B * H * T, 0);
  r.dq.assign(B * H * T * D, 0);
  r.dk.assign(B * sh.Hkv * S * D, 0);
  r.dv.assign(B * sh.Hkv * S * D, 0);
  const uint64_t threshold =
      static_cast<uint64_t>(std::ceil(static_cast<double>(sh.rate) * 16777216.0));
  const double ks = static_cast<double>(1.f / (1.f - sh.rate)); // as the kernel
  std::vector<double> s(S), p(S), z(S), dz(S);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t kvh = b * sh.Hkv + h / group;
      for (int64_t i = 0; i < T; ++i) {
        const int64_t row = (b * H + h) * T + i;
        const double *qi = &q[row * D], *doi = &dout[row * D];
        int64_t end = S;
        if (sh.causal)
          end = std::min<int64_t>(S, std::max<int64_t>(0, i + 1 + S - T));
        if (end == 0) {
          r.lse[row] = -INFINITY;
          continue; // out, dq stay 0
        }
        double mx = -INFINITY;
        for (int64_t j = 0; j < end; ++j) {
          const double *kj = &k[(kvh * S + j) * D];
          double acc = 0;
          for (int64_t d = 0; d < D; ++d)
            acc += qi[d] * kj[d];
          s[j] = scale * acc;
          mx = std::max(mx, s[j]);
        }
        double l = 0;
        for (int64_t j = 0; j < end; ++j)
          l += std::exp(s[j] - mx);
        r.lse[row] = mx + std::log(l);
        double delta = 0;
        for (int64_t j = 0; j < end; ++j) {
          p[j] = std::exp(s[j] - mx) / l;
          bool keep = true;
          if (sh.rate > 0)
            keep = (tcc_rng_bits(seed_key, step, static_cast<uint64_t>(row * S + j)) >>
                    40) >= threshold;
          const double m = sh.rate > 0 ? (keep ? ks : 0.0) : 1.0;
          z[j] = p[j] * m;
          const double *vj = &v[(kvh * S + j) * D];
          double acc = 0;
          for (int64_t d = 0; d < D; ++d) {
            r.out[row * D + d] += z[j] * vj[d];
            acc += doi[d] * vj[d];
          }
          dz[j] = acc * m; // dP
          delta += z[j] * acc;
        }
        for (int64_t j = 0; j < end; ++j) {
          const double ds = p[j] * (dz[j] - delta);
          const double *kj = &k[(kvh * S + j) * D];
          double *dkj = &r.dk[(kvh * S + j) * D], *dvj = &r.dv[(kvh * S + j) * D];
          for (int64_t d = 0; d < D; ++d) {
            r.dq[row * D + d] += scale * ds * kj[d];
            dkj[d] += scale * ds * qi[d];
            dvj[d] += z[j] * doi[d];
          }
        }
      }
    }
  return r;
}

// err = max |got - want| / max |want| (absolute when `absolute`); a NaN
// (poison left unwritten) or a mismatched infinity is an infinite error.
template <class T>
double compare(const std::vector<T> &got, const std::vector<double> &want,
               bool absolute) {
  double scale = 0, worst = 0;
  for (double w : want)
    if (std::isfinite(w))
      scale = std::max(scale, std::fabs(w));
  if (absolute || scale == 0)
    scale = 1;
  for (size_t i = 0; i < want.size(); ++i) {
    const double g = toD(got[i]), w = want[i];
    if (std::isinf(w)) {
      if (g != w)
        return INFINITY;
      continue;
    }
    if (!std::isfinite(g))
      return INFINITY;
    worst = std::max(worst, std::fabs(g - w) / scale);
  }
  return worst;
}

template <class T> bool sameBits(const std::vector<T> &a, const std::vector<T> &b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// A case's inputs: q, k, v, dout as the device type T and the same rounded
// values as doubles, drawn from the splitmix64 stream of (gSeed, name), so
// a case's inputs depend only on them.
template <class T> struct CaseInputs {
  std::vector<T> q, k, v, dout;
  std::vector<double> rq, rk, rv, rdo;
};
template <class T> CaseInputs<T> caseInputs(const Shape &sh, const char *name) {
  uint64_t h = gSeed;
  for (const char *c = name; *c; ++c)
    h = (h ^ static_cast<unsigned char>(*c)) * 0x100000001B3ull;
  Rng rng{h};
  const size_t nq = sh.B * sh.H * sh.T * sh.D, nk = sh.B * sh.Hkv * sh.S * sh.D;
  auto make = [&](size_t n, std::vector<T> &dev, std::vector<double> &ref) {
    dev.resize(n);
    ref.resize(n);
    for (size_t i = 0; i < n; ++i) {
      dev[i] = fromD<T>(rng.uniform());
      ref[i] = toD(dev[i]);
    }
  };
  CaseInputs<T> in;
  make(nq, in.q, in.rq);
  make(nk, in.k, in.rk);
  make(nk, in.v, in.rv);
  make(nq, in.dout, in.rdo);
  return in;
}

// [--seed N] [--filter SUBSTRING] [--bench] into gSeed (random when not
// given), gFilter and `bench`: 0, or the exit code 2 after a usage error.
int parseTestArgs(int argc, char **argv, const char *program, bool &bench) {
  bool haveSeed = false;
  bench = false;
  for (int a = 1; a < argc; ++a) {
    std::string arg = argv[a];
    if (arg == "--bench") {
      bench = true;
    } else if (arg == "--seed" && a + 1 < argc) {
      char *end = nullptr;
      gSeed = std::strtoull(argv[++a], &end, 10);
      if (*end != '\0') {
        std::fprintf(stderr, "%s: --seed needs a number\n", program);
        return 2;
      }
      haveSeed = true;
    } else if (arg == "--filter" && a + 1 < argc) {
      gFilter = argv[++a];
    } else {
      std::fprintf(stderr, "usage: %s [--seed N] [--filter SUBSTRING] [--bench]\n", program);
      return 2;
    }
  }
  if (!haveSeed)
    gSeed = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  return 0;
}

// Whether a GPU is visible; prints the SKIP line (exit 77) when not.
bool haveGpu(const char *program) {
  int devices = 0;
  cudaError_t err = cudaGetDeviceCount(&devices);
  if (err == cudaSuccess && devices > 0)
    return true;
  std::printf("SKIP: no CUDA GPU (%s): %s needs one; run it on the device machine "
              "(tests/cuda/README.md)\n",
              err != cudaSuccess ? cudaGetErrorString(err) : "0 devices", program);
  return false;
}

// The median of 20 timed calls of `launch` (after 3 warm-up), in ms.
template <class Launch> float medianMs(Launch &&launch) {
  cudaEvent_t a, b;
  CUDA_CHECK(cudaEventCreate(&a));
  CUDA_CHECK(cudaEventCreate(&b));
  std::vector<float> ms;
  for (int it = 0; it < 23; ++it) {
    CUDA_CHECK(cudaEventRecord(a));
    launch();
    CUDA_CHECK(cudaEventRecord(b));
    CUDA_CHECK(cudaEventSynchronize(b));
    float t = 0;
    CUDA_CHECK(cudaEventElapsedTime(&t, a, b));
    if (it >= 3)
      ms.push_back(t);
  }
  CUDA_CHECK(cudaEventDestroy(a));
  CUDA_CHECK(cudaEventDestroy(b));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}
