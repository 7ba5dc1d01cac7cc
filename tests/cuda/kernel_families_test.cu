// Device test of the CUDA prelude's fixed kernel families
// (compiler/codegen/cuda/prelude/*.cuh) against float64 CPU references that
// follow the CPU backend's semantics (cpu_prelude.h, CpuCodegen's
// reductions). A standalone program (no gtest): the device machine has only
// the CUDA toolkit and the driver.
//
//   kernel_families_test [--seed N] [--filter SUBSTRING] [--bench]
//
// Inputs are fresh random numbers every run (the seed is printed; --seed N
// reproduces a run, --filter runs only the families / cases whose name
// contains SUBSTRING). Outputs are poisoned with 0xFF bytes before every
// launch (a NaN that no kernel produces: GPU arithmetic NaNs are positive),
// so an element a kernel forgot to write fails. Exit 0 when every case
// passes, 1 on any failure, 77 (skipped) when there is no GPU. --bench
// only times the softmax cross-entropy at GPT-2's shape (benchXent).
//
// Every floating-point family runs in float, double, bf16 and f16
// (tcc_cuda::bf16 / f16: loaded into float, computed and accumulated in
// float, each output rounded once), the softmax cross-entropy pair also
// with 16-bit logits and an f32 loss / upstream gradient.
//
// Tolerances: |got - want| <= rtol * max(|want|, floor), rtol 1e-5 for
// float, 1e-12 for double, u + 1e-5 for bf16 (u = 2^-8) and f16 (2^-11):
// the one rounding of a 16-bit output is at most u |want|, the float math
// before it at most 1e-5 of the floor; the reference reads the same 16-bit
// inputs as exact doubles; an f16 output among the subnormals (below 2^-14)
// may also be off by half their spacing, 2^-25 (atolFor). floor is the
// scale of the rounding error of the
// computation, per family:
// - sums / means: floor = ||x||_2 of the reduced values (/ count for a
//   mean). Summing n random-signed terms in chains of L (per thread) plus a
//   tree leaves an error of about u * sqrt(L) * ||x||_2 (u = 6e-8 float,
//   1.1e-16 double; L <= 196 here), 10x (float) to 1e4x (double) under
//   rtol, while dropping or doubling one term moves the result by about
//   ||x||_2 / sqrt(n) >= 4e-3 ||x||_2 (n <= 50304): far above rtol.
// - max: exact (floor 0).
// - cross-entropy loss: floor 1 (log(s) turns a relative error of s into an
//   absolute one). Gradient: floor |grad[n]| * p[c], every element relative
//   to its own probability, so no element can be wrong unnoticed.
// - scatter-add: floor = ||updates landing on the element||_2 (atomics
//   add them in any order). For bf16 / f16 this also proves the sums
//   accumulate in float: rounding to 16 bits after each of k adds would
//   leave an error near u * k * |update| / 2, sqrt(k) / 2 times the bound
//   (k ~ 140 for 1000 ids into 7 rows).
// - gather, bf16 / f16 conversions, maximumf / minimumf: bit-exact.
// - exp / tanh: within 2 ulp of a correctly rounded reference.
// - rope: floor |x1 c1| + |x2 s2| per output (tests/cuda/rope_cases.cuh).
#include "compiler/codegen/cuda/cuda_prelude.cuh" // generated: the pieces, concatenated
#include "tests/cuda/reduce_plan_runner.cuh"      // kern.reduce's phases over any axes

// The CPU backend's scalar helpers, the reference for the conversions.
#include "compiler/codegen/cpu/cpu_prelude.h"

#include <algorithm>
#include <cinttypes>
#include <climits>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "tests/cuda/cuda_check.cuh"

namespace {

//===--------------------------------------------------------------------===//
// Bookkeeping
//===--------------------------------------------------------------------===//

uint64_t gSeed = 0;
std::string gFilter;
cudaStream_t gStream = nullptr;
constexpr double kRtolFloat = 1e-5, kRtolDouble = 1e-12;
constexpr int32_t kCode = 7; // the status code passed to the launchers

std::string format(const char *fmt, ...) {
  char buf[512];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, args);
  va_end(args);
  return buf;
}

using tcc_cuda::bf16;
using tcc_cuda::f16;
using tcc_cuda::acc_t;
using tcc_cuda::Elem;

// Element values on the host as doubles, and back: bf16 / f16 through the
// CPU prelude's conversions (bit-identical to the device's).
template <class T> double toD(T v) { return static_cast<double>(v); }
double toD(bf16 v) { return tcc_cpu::bf16_to_float(v.bits); }
double toD(f16 v) { return tcc_cpu::f16_to_float(v.bits); }
template <class T> T fromD(double v) { return static_cast<T>(v); }
template <> bf16 fromD<bf16>(double v) {
  return bf16{tcc_cpu::float_to_bf16(static_cast<float>(v))};
}
template <> f16 fromD<f16>(double v) {
  return f16{tcc_cpu::float_to_f16(static_cast<float>(v))};
}
template <class T> T nanOf() { return fromD<T>(NAN); }
template <class T> T infOf() { return fromD<T>(INFINITY); }

struct FamilyStats {
  std::string name;
  int cases = 0, passed = 0;
  double worst = 0;
};
std::vector<FamilyStats> gFamilies;

FamilyStats &family(const std::string &name) {
  for (FamilyStats &f : gFamilies)
    if (f.name == name)
      return f;
  gFamilies.push_back({name});
  return gFamilies.back();
}

// Whether --filter is empty or a substring of "family case".
bool selected(const std::string &fam, const std::string &desc) {
  return gFilter.empty() ||
         (fam + " " + desc).find(gFilter) != std::string::npos;
}

// One case's comparisons: the worst error (relative to the tolerance's
// denominator, or ulps for exp / tanh) and the first failure.
struct Check {
  double rtol;
  // Absolute slack for outputs that land among f16's subnormals (below
  // 2^-14), where the one rounding is half the fixed spacing 2^-24, not a
  // relative u: set by checkFor<f16>; 0 elsewhere.
  double atol = 0;
  double worst = 0;
  int64_t failures = 0;
  std::string first;
  explicit Check(double rtol, double atol = 0) : rtol(rtol), atol(atol) {}

  void fail(const std::string &what) {
    if (failures++ == 0)
      first = what;
    worst = INFINITY;
  }
  void expect(bool ok, const std::string &what) {
    if (!ok)
      fail(what);
  }
  // |got - want| <= rtol * max(|want|, floor); NaN must meet NaN and an
  // infinity the same infinity.
  void near(double got, double want, double floor, int64_t at) {
    double err;
    if (std::isnan(want) || std::isnan(got))
      err = std::isnan(want) && std::isnan(got) ? 0 : INFINITY;
    else if (std::isinf(want) || std::isinf(got))
      err = got == want ? 0 : INFINITY;
    else {
      double d = std::fabs(got - want);
      double den = std::max(std::fabs(want), floor);
      err = d <= atol ? 0 : den > 0 ? d / den : INFINITY;
    }
    if (!(err <= rtol)) {
      fail(format("at %" PRId64 ": got %.17g, want %.17g (floor %.3g)", at, got,
                  want, floor));
      return;
    }
    worst = std::max(worst, err);
  }
  // As near, after checking the element was written at all.
  template <class T> void value(T got, double want, double floor, int64_t at) {
    if (isPoison(got)) {
      fail(format("at %" PRId64 ": never written (still the 0xFF poison)", at));
      return;
    }
    near(toD(got), want, floor, at);
  }
  template <class T> static bool isPoison(T v) {
    unsigned char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    for (unsigned char c : b)
      if (c != 0xFF)
        return false;
    return true;
  }
};

void finishCase(const std::string &fam, const std::string &desc,
                const Check &c) {
  FamilyStats &f = family(fam);
  ++f.cases;
  bool ok = c.failures == 0;
  if (ok)
    ++f.passed;
  f.worst = std::max(f.worst, c.worst);
  if (ok)
    std::printf("[PASS] %-16s %-58s worst %.3g\n", fam.c_str(), desc.c_str(),
                c.worst);
  else
    std::printf("[FAIL] %-16s %-58s %" PRId64 " bad; first: %s\n", fam.c_str(),
                desc.c_str(), c.failures, c.first.c_str());
  std::fflush(stdout);
}

// splitmix64: fast, and seeded per case from the run seed and the case's
// name, so --seed N reproduces a case whatever --filter selects.
struct Rng {
  uint64_t s;
  explicit Rng(const std::string &name) : s(gSeed) {
    for (char ch : name)
      s = (s ^ static_cast<unsigned char>(ch)) * 0x100000001b3ull;
  }
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform(double lo, double hi) {
    return lo + (hi - lo) * static_cast<double>(next() >> 11) * 0x1p-53;
  }
  int64_t below(int64_t n) { return static_cast<int64_t>(next() % n); }
};

// A device buffer. Every transfer and memset goes on gStream and waits for
// it: gStream is non-blocking (no implicit ordering with the legacy default
// stream), so a launcher that enqueued on any other stream would race with
// the poison and the read-back, and fail.
template <class T> struct Dev {
  T *p = nullptr;
  size_t n = 0;
  explicit Dev(size_t count) : n(count) {
    if (n)
      CUDA_CHECK(cudaMalloc(&p, n * sizeof(T)));
  }
  ~Dev() {
    if (p)
      cudaFree(p);
  }
  Dev(const Dev &) = delete;
  Dev &operator=(const Dev &) = delete;
  void fill(int byte) {
    if (!n)
      return;
    CUDA_CHECK(cudaMemsetAsync(p, byte, n * sizeof(T), gStream));
    CUDA_CHECK(cudaStreamSynchronize(gStream));
  }
  void poison() { fill(0xFF); }
  void zero() { fill(0); }
  void upload(const std::vector<T> &v) {
    if (!n)
      return;
    CUDA_CHECK(cudaMemcpyAsync(p, v.data(), n * sizeof(T),
                               cudaMemcpyHostToDevice, gStream));
    CUDA_CHECK(cudaStreamSynchronize(gStream));
  }
  std::vector<T> download() const {
    std::vector<T> v(n);
    if (!n)
      return v;
    CUDA_CHECK(cudaMemcpyAsync(v.data(), p, n * sizeof(T),
                               cudaMemcpyDeviceToHost, gStream));
    CUDA_CHECK(cudaStreamSynchronize(gStream));
    return v;
  }
};

// Waits for the stream and surfaces launch and execution errors.
void sync() {
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaStreamSynchronize(gStream));
  CUDA_CHECK(cudaGetLastError());
}

int32_t readStatus(const Dev<int32_t> &status) { return status.download()[0]; }

template <class T> const char *typeName();
template <> const char *typeName<float>() { return "float"; }
template <> const char *typeName<double>() { return "double"; }
template <> const char *typeName<int32_t>() { return "i32"; }
template <> const char *typeName<int64_t>() { return "i64"; }
template <> const char *typeName<uint16_t>() { return "u16"; }
template <> const char *typeName<uint8_t>() { return "u8"; }
template <> const char *typeName<bf16>() { return "bf16"; }
template <> const char *typeName<f16>() { return "f16"; }

template <class T> double rtolFor() {
  return sizeof(T) == 4 ? kRtolFloat : kRtolDouble;
}
template <> double rtolFor<bf16>() { return 0x1p-8 + kRtolFloat; }
template <> double rtolFor<f16>() { return 0x1p-11 + kRtolFloat; }
// Half of f16's subnormal spacing (2^-24), plus the float math's share.
template <class T> double atolFor() { return 0; }
template <> double atolFor<f16>() { return 0x1p-25 * (1 + 1e-3); }

const char *kindName(int kind) {
  return kind == 0 ? "sum" : kind == 1 ? "mean" : "max";
}

template <class T>
bool sameBytes(const std::vector<T> &a, const std::vector<T> &b) {
  return a.size() == b.size() &&
         (a.empty() ||
          std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

// Labels / ids in the tests are kept as int64_t; these stand for the
// extremes of the narrower index type.
constexpr int64_t kIdMin = INT64_MIN, kIdMax = INT64_MAX;
template <class I> std::vector<I> toIndex(const std::vector<int64_t> &v) {
  std::vector<I> out(v.size());
  for (size_t k = 0; k < v.size(); ++k)
    out[k] = v[k] == kIdMin   ? std::numeric_limits<I>::min()
             : v[k] == kIdMax ? std::numeric_limits<I>::max()
                              : static_cast<I>(v[k]);
  return out;
}
bool idOk(int64_t id, int64_t limit) { return id >= 0 && id < limit; }

// Puts a bad id / label (-1, limit, the index type's min and max) at a few
// rows; returns how many.
int plantBadIds(std::vector<int64_t> &ids, int64_t limit) {
  const int64_t bad[] = {-1, limit, kIdMin, kIdMax};
  int planted = 0;
  for (size_t k = 0; k < 4 && k * 7 + 2 < ids.size(); ++k, ++planted)
    ids[k * 7 + 2] = bad[k];
  return planted;
}

//===--------------------------------------------------------------------===//
// Scalars
//===--------------------------------------------------------------------===//

__global__ void halfToFloatKernel(const uint16_t *h, uint32_t *bf,
                                  uint32_t *f16, int n) {
  for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < n;
       k += gridDim.x * blockDim.x) {
    bf[k] = tcc_cuda::bit_cast<uint32_t>(tcc_cuda::bf16_to_float(h[k]));
    f16[k] = tcc_cuda::bit_cast<uint32_t>(tcc_cuda::f16_to_float(h[k]));
  }
}

// packed: the xent kernel's pack_bf16x2 of (x[k], -x[k]).
__global__ void floatToHalfKernel(const float *x, uint16_t *bf, uint16_t *f16,
                                  float *rbf, float *rf16, uint32_t *packed,
                                  int n) {
  for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < n;
       k += gridDim.x * blockDim.x) {
    packed[k] = tcc_cuda::detail::pack_bf16x2(x[k], -x[k]);
    bf[k] = tcc_cuda::float_to_bf16(x[k]);
    f16[k] = tcc_cuda::float_to_f16(x[k]);
    rbf[k] = tcc_cuda::round_bf16(x[k]);
    rf16[k] = tcc_cuda::round_f16(x[k]);
  }
}

template <class T>
__global__ void maxMinKernel(const T *a, const T *b, T *mx, T *mn, int n) {
  for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < n;
       k += gridDim.x * blockDim.x) {
    mx[k] = tcc_cuda::maximumf(a[k], b[k]);
    mn[k] = tcc_cuda::minimumf(a[k], b[k]);
  }
}

template <class T>
__global__ void expTanhKernel(const T *x, T *e, T *t, int n) {
  for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < n;
       k += gridDim.x * blockDim.x) {
    e[k] = tcc_cuda::exp(x[k]);
    t[k] = tcc_cuda::tanh(x[k]);
  }
}

__global__ void failKernel(int32_t *status, int32_t base, int distinct) {
  tcc_cuda::fail(status, base + static_cast<int32_t>(threadIdx.x % distinct));
  tcc_cuda::fail(nullptr, base); // a null status records nothing
}

void testConversions() {
  const std::string desc = "bf16/f16 <-> float, all 65536 halves";
  if (!selected("scalars", desc))
    return;
  {
    Check c(0);
    const int n = 65536;
    std::vector<uint16_t> h(n);
    for (int k = 0; k < n; ++k)
      h[k] = static_cast<uint16_t>(k);
    Dev<uint16_t> dh(n);
    Dev<uint32_t> dbf(n), df16(n);
    dh.upload(h);
    dbf.poison();
    df16.poison();
    halfToFloatKernel<<<64, 256, 0, gStream>>>(dh.p, dbf.p, df16.p, n);
    sync();
    std::vector<uint32_t> bf = dbf.download(), f16 = df16.download();
    for (int k = 0; k < n; ++k) {
      uint32_t wantBf =
          tcc_cpu::bit_cast<uint32_t>(tcc_cpu::bf16_to_float(h[k]));
      uint32_t wantF16 =
          tcc_cpu::bit_cast<uint32_t>(tcc_cpu::f16_to_float(h[k]));
      c.expect(bf[k] == wantBf,
               format("bf16_to_float(0x%04x) = 0x%08x, cpu 0x%08x", k, bf[k],
                      wantBf));
      c.expect(f16[k] == wantF16,
               format("f16_to_float(0x%04x) = 0x%08x, cpu 0x%08x", k, f16[k],
                      wantF16));
    }
    finishCase("scalars", desc, c);
  }
  {
    const std::string desc2 =
        "float -> bf16/f16/round_*, specials + 2^20 random";
    Check c(0);
    Rng rng(desc2);
    std::vector<uint32_t> bits = {
        0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u,
        0xffc00000u, 0x7f800001u, 0x7fbfffffu, 0x7f7fffffu, 0x00000001u,
        0x80000001u, 0x007fffffu, 0x3f800000u, 0x3f808000u, 0x3f818000u,
        0x3f807fffu, 0x3f808001u, 0x477fe000u, 0x477fefffu, 0x477ff000u,
        0x477ff001u, 0x38800000u, 0x387fffffu, 0x33800000u, 0x33000000u,
        0x33000001u, 0x337fffffu, 0x32ffffffu, 0x387fe000u, 0x387ff000u,
        0x7f7f8000u, 0x7f7f7fffu, 0xc77fefffu, 0xb8800000u, 0x7fffffffu};
    while (bits.size() < (1u << 20) + 35)
      bits.push_back(static_cast<uint32_t>(rng.next()));
    // Also every f16 / bf16 rounding tie neighbourhood near 1.
    for (uint32_t m = 0; m < 4096; ++m)
      bits.push_back(0x3f800000u | (m << 1) | (m & 1));
    const int n = static_cast<int>(bits.size());
    std::vector<float> x(n);
    for (int k = 0; k < n; ++k)
      x[k] = tcc_cpu::bit_cast<float>(bits[k]);
    Dev<float> dx(n), drbf(n), drf16(n);
    Dev<uint16_t> dbf(n), df16(n);
    Dev<uint32_t> dpacked(n);
    dx.upload(x);
    dbf.poison();
    df16.poison();
    drbf.poison();
    drf16.poison();
    dpacked.poison();
    floatToHalfKernel<<<256, 256, 0, gStream>>>(dx.p, dbf.p, df16.p, drbf.p,
                                                drf16.p, dpacked.p, n);
    sync();
    std::vector<uint16_t> bf = dbf.download(), f16 = df16.download();
    std::vector<float> rbf = drbf.download(), rf16 = drf16.download();
    std::vector<uint32_t> packed = dpacked.download();
    for (int k = 0; k < n; ++k) {
      // pack_bf16x2: float_to_bf16's bits, NaN included (every NaN, of
      // either sign and any payload, becomes 0x7fff in both).
      const uint16_t lo = static_cast<uint16_t>(packed[k]),
                     hi = static_cast<uint16_t>(packed[k] >> 16);
      const uint16_t wantLo = tcc_cpu::float_to_bf16(x[k]),
                     wantHi = tcc_cpu::float_to_bf16(-x[k]);
      const bool packOk = lo == wantLo && hi == wantHi;
      c.expect(packOk, format("pack_bf16x2(0x%08x, -it) = 0x%08x, cpu "
                              "0x%04x%04x",
                              bits[k], packed[k], wantHi, wantLo));
      uint16_t wantBf = tcc_cpu::float_to_bf16(x[k]);
      uint16_t wantF16 = tcc_cpu::float_to_f16(x[k]);
      uint32_t wantRbf = tcc_cpu::bit_cast<uint32_t>(tcc_cpu::round_bf16(x[k]));
      uint32_t wantRf16 = tcc_cpu::bit_cast<uint32_t>(tcc_cpu::round_f16(x[k]));
      c.expect(bf[k] == wantBf,
               format("float_to_bf16(0x%08x) = 0x%04x, cpu 0x%04x", bits[k],
                      bf[k], wantBf));
      c.expect(f16[k] == wantF16,
               format("float_to_f16(0x%08x) = 0x%04x, cpu 0x%04x", bits[k],
                      f16[k], wantF16));
      c.expect(tcc_cpu::bit_cast<uint32_t>(rbf[k]) == wantRbf,
               format("round_bf16(0x%08x) differs from cpu", bits[k]));
      c.expect(tcc_cpu::bit_cast<uint32_t>(rf16[k]) == wantRf16,
               format("round_f16(0x%08x) differs from cpu", bits[k]));
    }
    finishCase("scalars", desc2, c);
  }
}

template <class T> void testMaxMin() {
  const std::string desc =
      format("maximumf/minimumf<%s> specials x specials", typeName<T>());
  if (!selected("scalars", desc))
    return;
  const T nan = std::numeric_limits<T>::quiet_NaN();
  const T inf = std::numeric_limits<T>::infinity();
  const T vals[] = {
      nan,  -inf, T(-2.5), T(-1), T(-0.0),
      T(0), T(1), T(2.5),  inf,   std::numeric_limits<T>::denorm_min()};
  std::vector<T> a, b;
  for (T x : vals)
    for (T y : vals) {
      a.push_back(x);
      b.push_back(y);
    }
  const int n = static_cast<int>(a.size());
  Dev<T> da(n), db(n), dmx(n), dmn(n);
  da.upload(a);
  db.upload(b);
  dmx.poison();
  dmn.poison();
  maxMinKernel<T><<<1, 128, 0, gStream>>>(da.p, db.p, dmx.p, dmn.p, n);
  sync();
  std::vector<T> mx = dmx.download(), mn = dmn.download();
  Check c(0);
  for (int k = 0; k < n; ++k) {
    T wantMx = tcc_cpu::maximumf(a[k], b[k]),
      wantMn = tcc_cpu::minimumf(a[k], b[k]);
    // NaN results must be NaN (payloads may differ); others bit-exact, so
    // -0 / +0 are told apart.
    auto same = [](T got, T want) {
      return std::isnan(want) ? static_cast<bool>(std::isnan(got))
                              : std::memcmp(&got, &want, sizeof(T)) == 0;
    };
    c.expect(same(mx[k], wantMx),
             format("maximumf(%g, %g) = %g, cpu %g", double(a[k]), double(b[k]),
                    double(mx[k]), double(wantMx)));
    c.expect(same(mn[k], wantMn),
             format("minimumf(%g, %g) = %g, cpu %g", double(a[k]), double(b[k]),
                    double(mn[k]), double(wantMn)));
  }
  finishCase("scalars", desc, c);
}

// Error of got in ulps of T at the correctly rounded value of want.
template <class T> double ulpError(T got, long double want) {
  if (std::isnan(want) || std::isnan(got))
    return std::isnan(want) && std::isnan(got) ? 0 : INFINITY;
  T rounded = static_cast<T>(want);
  if (std::isinf(rounded) || std::isinf(got))
    return got == rounded ? 0 : INFINITY;
  int digits = std::numeric_limits<T>::digits; // 24 or 53
  int minExp = std::numeric_limits<T>::min_exponent - 1;
  int e = want == 0 ? minExp
                    : std::max(static_cast<int>(std::ilogb(rounded)), minExp);
  long double ulp = std::ldexp(1.0L, e - digits + 1);
  return static_cast<double>(std::fabs(static_cast<long double>(got) - want) /
                             ulp);
}

template <class T> void testExpTanh() {
  const std::string desc = format("exp/tanh<%s> within 2 ulp", typeName<T>());
  if (!selected("scalars", desc))
    return;
  Rng rng(desc);
  const T inf = std::numeric_limits<T>::infinity();
  std::vector<T> x = {T(0),
                      T(-0.0),
                      inf,
                      -inf,
                      std::numeric_limits<T>::quiet_NaN(),
                      T(1e-30),
                      T(-1e-30),
                      T(1e-5),
                      T(88.5),
                      T(-103.5),
                      T(-104),
                      T(-87.3),
                      T(700),
                      T(-745),
                      T(0.5),
                      T(-0.5),
                      T(20),
                      T(-20)};
  for (int k = 0; k < 200000; ++k)
    x.push_back(static_cast<T>(rng.uniform(-110, 90)));
  for (int k = 0; k < 100000; ++k)
    x.push_back(static_cast<T>(rng.uniform(-2, 2)));
  const int n = static_cast<int>(x.size());
  Dev<T> dx(n), de(n), dt(n);
  dx.upload(x);
  de.poison();
  dt.poison();
  expTanhKernel<T><<<128, 256, 0, gStream>>>(dx.p, de.p, dt.p, n);
  sync();
  std::vector<T> e = de.download(), t = dt.download();
  Check c(2.0);
  for (int k = 0; k < n; ++k) {
    long double xl = x[k];
    double eu = ulpError(e[k], std::exp(xl)),
           tu = ulpError(t[k], std::tanh(xl));
    if (!(eu <= 2.0))
      c.fail(
          format("exp(%.9g) = %.9g: %.3g ulp", double(x[k]), double(e[k]), eu));
    else if (!(tu <= 2.0))
      c.fail(format("tanh(%.9g) = %.9g: %.3g ulp", double(x[k]), double(t[k]),
                    tu));
    else
      c.worst = std::max({c.worst, eu, tu});
  }
  // e^-inf is exactly 0 (a causal mask's -inf must contribute nothing).
  c.expect(e[3] == T(0), "exp(-inf) != 0");
  finishCase("scalars", desc, c);
}

void testFailAndGrid() {
  const std::string desc = "fail() first code wins; grid_for";
  if (!selected("scalars", desc))
    return;
  Check c(0);
  Dev<int32_t> status(1);
  status.zero();
  failKernel<<<8, 256, 0, gStream>>>(status.p, 100, 7);
  sync();
  int32_t first = readStatus(status);
  c.expect(first >= 100 && first < 107,
           format("status %d after many fail(100..106)", first));
  failKernel<<<1, 32, 0, gStream>>>(status.p, 999, 1);
  sync();
  c.expect(readStatus(status) == first,
           "a later fail() replaced the first code");
  c.expect(tcc_cuda::grid_for(0, 256) == 0, "grid_for(0) != 0");
  c.expect(tcc_cuda::grid_for(-3, 256) == 0, "grid_for(-3) != 0");
  c.expect(tcc_cuda::grid_for(1, 256) == 1, "grid_for(1, 256) != 1");
  c.expect(tcc_cuda::grid_for(257, 256) == 2, "grid_for(257, 256) != 2");
  c.expect(tcc_cuda::grid_for(int64_t(1) << 40, 256) ==
               tcc_cuda::kMaxGridBlocks,
           "grid_for(2^40) not capped");
  finishCase("scalars", desc, c);
}

//===--------------------------------------------------------------------===//
// Reductions
//===--------------------------------------------------------------------===//

// reduce(x[0], x[stride], ..., x[(n-1)*stride]) with the CPU's semantics
// (max: `v > acc ? v : acc` from -inf, NaN never wins; mean: sum * (1/n)),
// in double; floor is the tolerance floor (header comment).
template <class T>
double refReduce(const T *x, int64_t n, int64_t stride, int kind,
                 double &floor) {
  double acc = kind == 2 ? -INFINITY : 0.0, sq = 0;
  for (int64_t k = 0; k < n; ++k) {
    double v = toD(x[k * stride]);
    acc = kind == 2 ? (v > acc ? v : acc) : acc + v;
    sq += v * v;
  }
  floor = kind == 2 ? 0.0 : std::sqrt(sq) / (kind == 1 && n > 0 ? n : 1);
  return kind == 1 ? acc * (1.0 / static_cast<double>(n)) : acc;
}

// Rows of NaN, +inf, -inf and their mixes (the NaN-ignoring max and the
// NaN / inf sums).
template <class T>
void plantSpecials(std::vector<T> &x, int64_t rows, int64_t cols, int64_t off,
                   Rng &rng) {
  const T nan = nanOf<T>();
  const T inf = infOf<T>(), ninf = fromD<T>(-INFINITY);
  auto at = [&](int64_t r, int64_t c) -> T & { return x[off + r * cols + c]; };
  if (cols == 0)
    return;
  for (int64_t r = 0; r < rows; ++r) {
    switch (r % 7) {
    case 0:
      at(r, rng.below(cols)) = nan;
      break;
    case 1:
      for (int64_t c = 0; c < cols; ++c)
        at(r, c) = nan;
      break;
    case 2:
      at(r, rng.below(cols)) = inf;
      break;
    case 3:
      at(r, rng.below(cols)) = ninf;
      at(r, rng.below(cols)) = inf;
      break;
    case 4:
      break;
    case 5:
      for (int64_t c = 0; c < cols; ++c)
        at(r, c) = ninf;
      break;
    case 6:
      at(r, 0) = nan;
      at(r, cols - 1) = ninf;
      break;
    }
  }
}

template <class T, int Kind>
void caseReduceRows(int64_t rows, int64_t cols, const std::string &variant) {
  const std::string desc = format(
      "<%s,%s> rows=%" PRId64 " cols=%" PRId64 "%s%s", typeName<T>(),
      kindName(Kind), rows, cols, variant.empty() ? "" : " ", variant.c_str());
  if (!selected("reduce_rows", desc))
    return;
  Rng rng(desc);
  const int64_t off = variant == "misaligned" ? 1 : 0; // defeats 16-byte loads
  std::vector<T> in(rows * cols + off);
  for (T &v : in)
    v = fromD<T>(rng.uniform(-1, 1));
  if (variant == "specials")
    plantSpecials(in, rows, cols, off, rng);
  Dev<T> din(in.size()), dout(rows), dout2(rows);
  din.upload(in);
  dout.poison();
  dout2.poison();
  tcc_cuda::launch_reduce_rows<T, Kind>(din.p ? din.p + off : nullptr, dout.p,
                                        rows, cols, gStream);
  sync();
  tcc_cuda::launch_reduce_rows<T, Kind>(din.p ? din.p + off : nullptr, dout2.p,
                                        rows, cols, gStream);
  sync();
  std::vector<T> got = dout.download(), again = dout2.download();
  Check c(rtolFor<T>(), atolFor<T>());
  for (int64_t r = 0; r < rows; ++r) {
    double floor;
    double want = refReduce(in.data() + off + r * cols, cols, 1, Kind, floor);
    c.value(got[r], want, floor, r);
  }
  c.expect(sameBytes(got, again), "two launches differ (not deterministic)");
  finishCase("reduce_rows", desc, c);
}

template <class T, int Kind>
void caseReduceMiddle(int64_t outer, int64_t reduced, int64_t inner,
                      const std::string &variant) {
  const std::string desc = format(
      "<%s,%s> outer=%" PRId64 " reduced=%" PRId64 " inner=%" PRId64 "%s%s",
      typeName<T>(), kindName(Kind), outer, reduced, inner,
      variant.empty() ? "" : " ", variant.c_str());
  if (!selected("reduce_middle", desc))
    return;
  Rng rng(desc);
  const int64_t off = variant == "misaligned" ? 1 : 0; // defeats 16-byte loads
  std::vector<T> in(off + outer * reduced * inner);
  for (T &v : in)
    v = fromD<T>(rng.uniform(-1, 1));
  if (variant == "specials") // (outer*reduced) rows of inner: NaN / inf columns
    plantSpecials(in, outer * reduced, inner, off, rng);
  Dev<T> din(in.size()), dout(outer * inner), dout2(outer * inner);
  din.upload(in);
  dout.poison();
  dout2.poison();
  const T *inp = din.p ? din.p + off : nullptr;
  tcc_cuda::launch_reduce_middle<T, Kind>(inp, dout.p, outer, reduced, inner,
                                          gStream);
  sync();
  tcc_cuda::launch_reduce_middle<T, Kind>(inp, dout2.p, outer, reduced, inner,
                                          gStream);
  sync();
  std::vector<T> got = dout.download(), again = dout2.download();
  Check c(rtolFor<T>(), atolFor<T>());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      double floor;
      double want = refReduce(in.data() + off + o * reduced * inner + i,
                              reduced, inner, Kind, floor);
      c.value(got[o * inner + i], want, floor, o * inner + i);
    }
  c.expect(sameBytes(got, again), "two launches differ (not deterministic)");
  finishCase("reduce_middle", desc, c);
}

// Reductions over any axes, as generated steps run them: the phases of
// planReduce (ReducePlan.h) through tcc_test::runReducePlan, partials in a
// scratch buffer, against the float64 reduction over the axes.
template <class T, int Kind>
void caseReduceAxes(const std::vector<int64_t> &shape,
                    const std::vector<int64_t> &axes, const std::string &variant) {
  std::string dims, ax;
  for (int64_t d : shape)
    dims += (dims.empty() ? "" : "x") + std::to_string(d);
  for (int64_t a : axes)
    ax += (ax.empty() ? "" : ",") + std::to_string(a);
  const std::string desc =
      format("<%s,%s> %s over {%s}%s%s", typeName<T>(), kindName(Kind), dims.c_str(),
             ax.c_str(), variant.empty() ? "" : " ", variant.c_str());
  if (!selected("reduce_axes", desc))
    return;
  using A = acc_t<T>;
  namespace plan_ns = tcc::codegen::cuda;
  plan_ns::ReducePlan plan = plan_ns::planReduce(plan_ns::reduceRuns(shape, axes), sizeof(T));
  if (variant == "no-clusters") // clusters of 9 (> 8): the two-launch fallback
    for (plan_ns::ReducePhase &p : plan.phases)
      if (p.cluster > 1) {
        p.cluster = 9;
        plan.slotElements[p.fallback] =
            std::max(plan.slotElements[p.fallback], p.outer * 9 * p.inner);
      }
  Rng rng(desc);
  int64_t n = 1, outN = 1;
  std::vector<bool> isReduced(shape.size(), false);
  for (int64_t a : axes)
    isReduced[a] = true;
  for (size_t d = 0; d < shape.size(); ++d) {
    n *= shape[d];
    outN *= isReduced[d] ? 1 : shape[d];
  }
  const int64_t off = variant == "misaligned" ? 1 : 0; // defeats 16-byte loads
  std::vector<T> in(off + n);
  for (T &v : in)
    v = fromD<T>(rng.uniform(-1, 1));
  if (variant == "specials") // rows of the innermost dimension: NaN / inf
    plantSpecials(in, n / shape.back(), shape.back(), off, rng);
  // The float64 reference: every input element into its output.
  std::vector<double> acc(outN, Kind == 2 ? -INFINITY : 0.0), sq(outN, 0.0);
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t flat = 0; flat < n; ++flat) {
    int64_t o = 0;
    for (size_t d = 0; d < shape.size(); ++d)
      if (!isReduced[d])
        o = o * shape[d] + idx[d];
    const double v = toD(in[off + flat]);
    acc[o] = Kind == 2 ? (v > acc[o] ? v : acc[o]) : acc[o] + v;
    sq[o] += v * v;
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
      if (++idx[d] < shape[d])
        break;
      idx[d] = 0;
    }
  }
  Dev<T> din(in.size()), dout(outN), dout2(outN);
  Dev<char> scratch(static_cast<size_t>(plan.scratchBytes(sizeof(A))) + 256);
  din.upload(in);
  dout.poison();
  dout2.poison();
  const T *inp = din.p ? din.p + off : nullptr;
  tcc_test::runReducePlan<T, Kind>(plan, inp, dout.p, scratch.p, gStream);
  sync();
  scratch.poison(); // the second launch must not depend on stale partials
  tcc_test::runReducePlan<T, Kind>(plan, inp, dout2.p, scratch.p, gStream);
  sync();
  std::vector<T> got = dout.download(), again = dout2.download();
  Check c(rtolFor<T>(), atolFor<T>());
  for (int64_t o = 0; o < outN; ++o) {
    const double count = static_cast<double>(plan.count);
    const double want = Kind == 1 ? acc[o] * (1.0 / count) : acc[o];
    const double floor = Kind == 2 ? 0.0 : std::sqrt(sq[o]) / (Kind == 1 ? count : 1.0);
    c.value(got[o], want, floor, o);
  }
  c.expect(sameBytes(got, again), "two launches differ (not deterministic)");
  std::string phases;
  for (const auto &p : plan.phases)
    phases += (phases.empty() ? "" : " -> ") + p.describe();
  if (c.failures)
    std::printf("       plan: %s\n", phases.c_str());
  finishCase("reduce_axes", desc, c);
}

template <class T> void reduceAxesAll() {
  struct Shape {
    std::vector<int64_t> shape, axes;
  };
  const Shape shapes[] = {
      {{128, 64, 32, 32}, {0, 2, 3}}, // batch norm (ResNet-18 on CIFAR, first stage)
      {{128, 512, 4, 4}, {0, 2, 3}},  // its last stage: down N first
      {{64, 256, 14, 14}, {0, 2, 3}}, // ResNet-50 shapes
      {{8, 17, 9, 9}, {0, 2, 3}},     // odd sizes
      {{3, 5, 7, 11, 2}, {0, 2, 4}},
      {{3, 5, 7, 11, 2}, {1, 3}},
      {{4096, 3, 33}, {0, 2}},
      {{16384, 64}, {0}},       // few outputs, long reduction: split segments
      {{16384, 768}, {0}},      // a bias gradient: split
      {{3, 40000, 5}, {1}},     // middle, split
      {{1 << 22}, {0}},         // one number: split rows
      {{2, 100003}, {1}},       // odd long rows, split
      {{2, 3, 4}, {}},          // nothing to reduce: a copy
      {{1, 7, 1}, {0, 2}},      // size-1 axes only
      {{37, 1, 1000}, {0, 1}},  // a size-1 reduced axis between
      // strided phases (N and H*W at once): groups of 1024 lanes, several
      // columns a lane (long rows), few lanes an output, rows of 6 / 8
      // elements, and one leaving partials for a middle phase
      {{128, 256, 8, 8}, {0, 2, 3}},
      {{8, 512, 16, 64}, {1, 3}},
      {{4, 130, 1000}, {0, 2}},
      {{16, 300, 4, 6}, {0, 2, 3}},
      {{4, 200, 8}, {0, 2}},
      {{7, 3, 9, 130, 8}, {0, 2, 4}},
      // clusters: long columns over few outputs, an odd length, an outer
      // kept run
      {{4096, 4096}, {0}},
      {{10007, 2048}, {0}},
      {{2, 4096, 2048}, {1}},
  };
  for (const Shape &s : shapes) {
    caseReduceAxes<T, 0>(s.shape, s.axes, "");
    caseReduceAxes<T, 1>(s.shape, s.axes, "");
    caseReduceAxes<T, 2>(s.shape, s.axes, "");
  }
  caseReduceAxes<T, 1>({16, 24, 9, 8}, {0, 2, 3}, "misaligned");
  caseReduceAxes<T, 0>({64, 24, 8, 8}, {0, 2}, "misaligned");
  caseReduceAxes<T, 1>({16, 200, 4, 4}, {0, 2, 3}, "misaligned"); // strided, scalar
  caseReduceAxes<T, 0>({2048, 4096}, {0}, "misaligned");           // clusters, scalar
  caseReduceAxes<T, 1>({4096, 4096}, {0}, "no-clusters");
  caseReduceAxes<T, 2>({2, 4096, 2048}, {1}, "no-clusters");
  caseReduceAxes<T, 2>({40, 130, 4, 4}, {0, 2, 3}, "specials");
  caseReduceAxes<T, 0>({40, 130, 4, 4}, {0, 2, 3}, "specials");
  caseReduceAxes<T, 2>({6, 4, 5, 300}, {0, 3}, "specials");
  caseReduceAxes<T, 0>({6, 4, 5, 300}, {0, 3}, "specials");
}

template <class T> void reduceRowsAll() {
  const int64_t rowsList[] = {1, 3, 37, 1000};
  const int64_t colsList[] = {1, 7, 31, 33, 1000, 4097, 50304};
  for (int64_t rows : rowsList)
    for (int64_t cols : colsList) {
      caseReduceRows<T, 0>(rows, cols, "");
      caseReduceRows<T, 1>(rows, cols, "");
      caseReduceRows<T, 2>(rows, cols, "");
    }
  // 0 rows (nothing launched), 0 cols (sum 0, mean NaN, max -inf), the
  // vector-width multiple with a misaligned base, NaN / inf rows on both
  // the warp and the block path (aligned and not).
  for (const auto &rc :
       std::vector<std::pair<int64_t, int64_t>>{{0, 5}, {3, 0}}) {
    caseReduceRows<T, 0>(rc.first, rc.second, "");
    caseReduceRows<T, 1>(rc.first, rc.second, "");
    caseReduceRows<T, 2>(rc.first, rc.second, "");
  }
  caseReduceRows<T, 0>(37, 4096, "misaligned");
  caseReduceRows<T, 2>(37, 4096, "misaligned");
  // Few long rows: split into segments, partials combined by a second
  // kernel (aligned: 16-byte loads; odd length or misaligned: scalar).
  for (const auto &rc : std::vector<std::pair<int64_t, int64_t>>{
           {1, 1000003}, {3, 262144}, {2, 65536}, {263, 65536}}) {
    caseReduceRows<T, 0>(rc.first, rc.second, "");
    caseReduceRows<T, 1>(rc.first, rc.second, "");
    caseReduceRows<T, 2>(rc.first, rc.second, "");
  }
  caseReduceRows<T, 1>(1, 262144, "misaligned");
  caseReduceRows<T, 2>(5, 100000, "specials");
  for (int64_t cols : {int64_t(100), int64_t(2000), int64_t(2001)}) {
    caseReduceRows<T, 0>(14, cols, "specials");
    caseReduceRows<T, 1>(14, cols, "specials");
    caseReduceRows<T, 2>(14, cols, "specials");
  }
}

template <class T> void reduceMiddleAll() {
  struct Shape {
    int64_t outer, reduced, inner;
  };
  const Shape shapes[] = {
      {1, 16384, 768}, // bias gradient (B*T = 16384, width 768)
      {1, 1, 1},       {3, 1, 37},    {2, 37, 1},    {1000, 7, 1}, {1, 1000, 1},
      {5, 7, 33},      {37, 31, 7},   {1, 4097, 3},  {4, 3, 1000}, {3, 0, 5},
      {1, 1, 50304},   {2, 1000, 31}, {7, 33, 4097}, {1000, 3, 7}, {0, 5, 5},
      {3, 5, 0},       {1, 50304, 2}, {3, 2, 50304}};
  for (const Shape &s : shapes) {
    caseReduceMiddle<T, 0>(s.outer, s.reduced, s.inner, "");
    caseReduceMiddle<T, 1>(s.outer, s.reduced, s.inner, "");
    caseReduceMiddle<T, 2>(s.outer, s.reduced, s.inner, "");
  }
  caseReduceMiddle<T, 0>(1, 1000, 768, "misaligned"); // no 16-byte loads
  caseReduceMiddle<T, 2>(3, 100, 36, "misaligned");
  caseReduceMiddle<T, 0>(3, 14, 33, "specials");
  caseReduceMiddle<T, 1>(2, 14, 36, "specials"); // 16-byte loads
  caseReduceMiddle<T, 2>(3, 14, 33, "specials");
  caseReduceMiddle<T, 2>(1, 14, 1, "specials");
}

//===--------------------------------------------------------------------===//
// Softmax cross-entropy
//===--------------------------------------------------------------------===//

// One input set, run with both label types.
template <class T> struct XentCase {
  std::string desc;
  int64_t rows = 0, classes = 0, off = 0; // off: elements before row 0
  std::vector<T> logits, grad;            // logits has off + rows*classes
  std::vector<int64_t> labels;
  int badRows = 0;
  std::vector<double> loss, out, outFloor; // references
};

// The CPU's computation (cpu_prelude softmax_cross_entropy[_grad]) in
// double: max from row[0] with `>`, sum of exp(x - max), then
// loss = log(sum) + max - x[label] and out = exp(x - max) * (g / sum),
// minus g at the label. A bad label gives NaN (the launchers' contract).
template <class T> void xentReference(XentCase<T> &x) {
  const int64_t C = x.classes;
  x.loss.assign(x.rows, 0);
  x.out.assign(x.rows * C, 0);
  x.outFloor.assign(x.rows * C, 0);
  for (int64_t n = 0; n < x.rows; ++n) {
    const T *row = x.logits.data() + x.off + n * C;
    if (!idOk(x.labels[n], C)) {
      x.loss[n] = NAN;
      for (int64_t c = 0; c < C; ++c)
        x.out[n * C + c] = NAN;
      continue;
    }
    double m = toD(row[0]);
    for (int64_t c = 1; c < C; ++c)
      m = toD(row[c]) > m ? toD(row[c]) : m;
    double sum = 0;
    for (int64_t c = 0; c < C; ++c)
      sum += std::exp(toD(row[c]) - m);
    const int64_t l = x.labels[n];
    x.loss[n] = std::log(sum) + m - toD(row[l]);
    const double g = toD(x.grad[n]), scale = g / sum;
    for (int64_t c = 0; c < C; ++c) {
      double p = std::exp(toD(row[c]) - m);
      x.out[n * C + c] = p * scale - (c == l ? g : 0.0);
      x.outFloor[n * C + c] = std::fabs(g) * p / sum;
    }
  }
}

// L: the loss and upstream gradient type (T, or float with 16-bit logits).
template <class T, class I, class L = T> void runXent(const XentCase<T> &x) {
  const std::string desc =
      format("<%s,%s%s%s> %s", typeName<T>(), typeName<I>(),
             std::is_same<L, T>::value ? "" : ",loss ",
             std::is_same<L, T>::value ? "" : typeName<L>(), x.desc.c_str());
  const bool fwd = selected("xent_forward", desc);
  const bool bwd = selected("xent_backward", desc);
  const bool both = selected("xent_with_grad", desc);
  if (!fwd && !bwd && !both)
    return;
  const int64_t rows = x.rows, C = x.classes;
  std::vector<I> labels = toIndex<I>(x.labels);
  Dev<T> dlogits(x.logits.size());
  Dev<L> dgrad(rows), dloss(rows), dloss2(rows);
  Dev<T> dout(x.off + rows * C), dout2(x.off + rows * C);
  Dev<I> dlabels(rows);
  Dev<int32_t> status(1);
  dlogits.upload(x.logits);
  std::vector<L> grad(rows);
  for (int64_t n = 0; n < rows; ++n)
    grad[n] = fromD<L>(toD(x.grad[n])); // exact: bf16 / f16 values fit
  dgrad.upload(grad);
  dlabels.upload(labels);
  const int32_t wantStatus = x.badRows > 0 ? kCode : 0;
  const T *logits = dlogits.p ? dlogits.p + x.off : nullptr;
  if (fwd) {
    Check c(rtolFor<L>(), atolFor<L>());
    dloss.poison();
    dloss2.poison();
    status.zero();
    tcc_cuda::launch_softmax_xent_forward<T, I, L>(
        logits, dlabels.p, dloss.p, rows, C, status.p, kCode, gStream);
    sync();
    int32_t got = readStatus(status);
    c.expect(got == wantStatus, format("status %d, want %d", got, wantStatus));
    tcc_cuda::launch_softmax_xent_forward<T, I, L>(
        logits, dlabels.p, dloss2.p, rows, C, status.p, kCode, gStream);
    sync();
    std::vector<L> loss = dloss.download(), again = dloss2.download();
    for (int64_t n = 0; n < rows; ++n)
      c.value(loss[n], x.loss[n], 1.0, n);
    c.expect(sameBytes(loss, again), "two launches differ (not deterministic)");
    finishCase("xent_forward", desc, c);
  }
  if (bwd) {
    Check c(rtolFor<T>(), atolFor<T>());
    dout.poison();
    dout2.poison();
    status.zero();
    T *out = dout.p ? dout.p + x.off : nullptr;
    T *out2 = dout2.p ? dout2.p + x.off : nullptr;
    tcc_cuda::launch_softmax_xent_backward<T, I, L>(
        logits, dlabels.p, dgrad.p, out, rows, C, status.p, kCode, gStream);
    sync();
    int32_t got = readStatus(status);
    c.expect(got == wantStatus, format("status %d, want %d", got, wantStatus));
    tcc_cuda::launch_softmax_xent_backward<T, I, L>(
        logits, dlabels.p, dgrad.p, out2, rows, C, status.p, kCode, gStream);
    sync();
    std::vector<T> o = dout.download(), again = dout2.download();
    for (int64_t k = 0; k < rows * C; ++k)
      c.value(o[x.off + k], x.out[k], x.outFloor[k], k);
    c.expect(sameBytes(o, again), "two launches differ (not deterministic)");
    finishCase("xent_backward", desc, c);
  }
  if (both) {
    // kern.softmax_cross_entropy_with_grad, as the step runs it: the
    // gradient written over a copy of the logits (in place), and once into
    // a buffer of its own; the loss from the same launch.
    Check c(rtolFor<T>(), atolFor<T>());
    Check cl(rtolFor<L>(), atolFor<L>());
    dout.upload(x.logits); // logits at x.off, as dlogits
    dout2.poison();
    dloss.poison();
    dloss2.poison();
    status.zero();
    T *inPlace = dout.p ? dout.p + x.off : nullptr;
    T *apart = dout2.p ? dout2.p + x.off : nullptr;
    tcc_cuda::launch_softmax_xent_with_grad<T, I, L, L>(
        inPlace, dlabels.p, dgrad.p, inPlace, dloss.p, rows, C, status.p, kCode, gStream);
    sync();
    int32_t got = readStatus(status);
    c.expect(got == wantStatus, format("status %d, want %d", got, wantStatus));
    tcc_cuda::launch_softmax_xent_with_grad<T, I, L, L>(
        logits, dlabels.p, dgrad.p, apart, dloss2.p, rows, C, status.p, kCode, gStream);
    sync();
    std::vector<T> o = dout.download(), o2 = dout2.download();
    std::vector<L> loss = dloss.download(), loss2 = dloss2.download();
    for (int64_t k = 0; k < rows * C; ++k)
      c.value(o[x.off + k], x.out[k], x.outFloor[k], k);
    for (int64_t n = 0; n < rows; ++n)
      cl.value(loss[n], x.loss[n], 1.0, n);
    o.erase(o.begin(), o.begin() + x.off); // the in-place copy's leading pad
    o2.erase(o2.begin(), o2.begin() + x.off);
    c.expect(sameBytes(o, o2), "the gradient differs in place and apart");
    c.expect(sameBytes(loss, loss2), "the loss differs in place and apart");
    if (cl.failures)
      c.fail("loss " + cl.first);
    finishCase("xent_with_grad", desc, c);
  }
}

// variant: "" random logits in [-4, 4]; "bad" a few labels out of range;
// "misaligned" logits / out one element past a 16-byte boundary; "specials"
// rows with -inf (also at the label and first), NaN, +inf, all -inf, and
// large logits.
template <class T>
void xentCase(int64_t rows, int64_t classes, const std::string &variant) {
  XentCase<T> x;
  x.desc = format("rows=%" PRId64 " classes=%" PRId64 "%s%s", rows, classes,
                  variant.empty() ? "" : " ", variant.c_str());
  const std::string full = format("<%s,", typeName<T>()) + x.desc;
  bool any = false;
  for (const char *fam : {"xent_forward", "xent_backward", "xent_with_grad"})
    for (const char *index : {"i32", "i64"})
      any |= selected(fam, format("<%s,%s> ", typeName<T>(), index) + x.desc);
  if (!any)
    return;
  Rng rng(full);
  x.rows = rows;
  x.classes = classes;
  x.off = variant == "misaligned" ? 1 : 0;
  x.logits.resize(x.off + rows * classes);
  for (T &v : x.logits)
    v = fromD<T>(rng.uniform(-4, 4));
  x.grad.resize(rows);
  for (T &g : x.grad)
    g = fromD<T>(rng.uniform(-1, 1));
  x.labels.resize(rows);
  for (int64_t &l : x.labels)
    l = classes > 0 ? rng.below(classes) : 0;
  if (variant == "bad")
    x.badRows = plantBadIds(x.labels, classes);
  if (classes == 0)
    x.badRows = static_cast<int>(rows); // no label fits [0, 0)
  if (variant == "specials") {
    const T inf = infOf<T>(), ninf = fromD<T>(-INFINITY);
    const T nan = nanOf<T>();
    for (int64_t n = 0; n < rows; ++n) {
      T *row = x.logits.data() + n * classes;
      const int64_t l = x.labels[n];
      const int64_t other = (l + 1 + rng.below(classes - 1)) % classes;
      switch (n % 8) {
      case 0:
        row[other] = ninf;
        row[(other + 3) % classes] = ninf;
        break;
      case 1:
        row[l] = ninf;
        break; // loss +inf, grad -g there
      case 2:
        row[other] = nan;
        break; // NaN row
      case 3:
        row[other] = inf;
        break; // NaN row (e^(inf - inf))
      case 4:
        for (int64_t c = 0; c < classes; ++c)
          row[c] = ninf;
        break;
      case 5:
        row[0] = ninf;
        if (l == 0)
          x.labels[n] = 1;
        break; // -inf first
      case 6:
        for (int64_t c = 0; c < classes; ++c)
          row[c] = fromD<T>(toD(row[c]) + 60);
        break;
      case 7:
        row[l] = fromD<T>(30);
        break; // a confident row: p near 1
      }
    }
  }
  xentReference(x);
  runXent<T, int32_t>(x);
  runXent<T, int64_t>(x);
  if (!std::is_same<T, float>::value && !std::is_same<T, double>::value)
    runXent<T, int32_t, float>(x); // 16-bit logits, f32 loss and gradient
}

template <class T> void xentAll() {
  const int64_t rowsList[] = {1, 3, 37, 1000};
  const int64_t classesList[] = {1, 7, 31, 33, 1000, 4097, 50304};
  for (int64_t rows : rowsList)
    for (int64_t classes : classesList)
      xentCase<T>(rows, classes, "");
  xentCase<T>(0, 7, ""); // nothing launched
  xentCase<T>(3, 0, ""); // every label out of range
  xentCase<T>(37, 1000, "bad");
  xentCase<T>(37, 4097, "bad");
  xentCase<T>(37, 1000, "misaligned");
  for (int64_t classes :
       {int64_t(7), int64_t(100), int64_t(2000), int64_t(2001)})
    xentCase<T>(16, classes, "specials");
  // Long rows: the staged kernel (rows in shared memory; double 50304 and
  // every type at 120000 classes do not fit and take the two-read kernel),
  // with more rows than resident blocks, so blocks loop and prefetch their
  // next row, also after a bad-label row. Misaligned: the scalar kernel.
  xentCase<T>(64, 50304, "");
  xentCase<T>(16, 8192, "specials");
  xentCase<T>(1000, 8192, "bad");
  xentCase<T>(3, 50304, "misaligned");
  xentCase<T>(2, 120000, "");
}

// --bench: kern.softmax_cross_entropy_with_grad at GPT-2 124M's shape
// (16384 x 50304 bf16 logits, f32 loss and upstream gradient, int32
// labels, the gradient in place), the launcher against the two-read
// kernel it replaced there. Every launch reads and writes the logits once
// (3.3 GB); in place, launches after the first run on the previous
// gradient, which costs the same.
__global__ void benchFillKernel(bf16 *x, int64_t n, float *grad, int32_t *labels,
                                int64_t rows, int64_t classes) {
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n;
       k += int64_t(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(k) * 2654435761u;
    h ^= h >> 15;
    x[k] = bf16{tcc_cuda::float_to_bf16(
        (static_cast<float>(h & 0xffffu) / 65535.f - 0.5f) * 8.f)};
    if (k < rows) {
      grad[k] = 1.f / static_cast<float>(rows);
      labels[k] = static_cast<int32_t>((h >> 3) % classes);
    }
  }
}

template <class Launch> float benchMedianMs(Launch &&launch) {
  cudaEvent_t a, b;
  CUDA_CHECK(cudaEventCreate(&a));
  CUDA_CHECK(cudaEventCreate(&b));
  std::vector<float> ms;
  for (int it = 0; it < 23; ++it) { // 3 warm-up, then 20 timed
    CUDA_CHECK(cudaEventRecord(a, gStream));
    launch();
    CUDA_CHECK(cudaEventRecord(b, gStream));
    CUDA_CHECK(cudaEventSynchronize(b));
    CUDA_CHECK(cudaGetLastError());
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

void benchXent() {
  const int64_t rows = 16384, classes = 50304, n = rows * classes;
  Dev<bf16> logits(n);
  Dev<float> grad(rows), loss(rows);
  Dev<int32_t> labels(rows), status(1);
  benchFillKernel<<<1024, 256, 0, gStream>>>(logits.p, n, grad.p, labels.p,
                                             rows, classes);
  status.zero();
  sync();
  const double gb = 2.0 * n * sizeof(bf16) / 1e9;
  const float staged = benchMedianMs([&] {
    tcc_cuda::launch_softmax_xent_with_grad<bf16, int32_t, float, float>(
        logits.p, labels.p, grad.p, logits.p, loss.p, rows, classes, status.p,
        kCode, gStream);
  });
  const float twoRead = benchMedianMs([&] {
    tcc_cuda::detail::softmax_xent_backward_kernel<bf16, int32_t, float, float,
                                                   true>
        <<<static_cast<unsigned>(tcc_cuda::grid_for(rows, 1)),
           tcc_cuda::row_block_threads(classes), 0, gStream>>>(
            logits.p, labels.p, grad.p, logits.p, loss.p, rows, classes,
            status.p, kCode);
  });
  float copy = 0; // the memory's speed for the same bytes, for scale
  {
    Dev<bf16> to(n);
    copy = benchMedianMs([&] {
      CUDA_CHECK(cudaMemcpyAsync(to.p, logits.p, n * sizeof(bf16),
                                 cudaMemcpyDeviceToDevice, gStream));
    });
  }
  std::printf("bench xent_with_grad %" PRId64 " x %" PRId64
              " bf16, f32 loss/grad, in place, %.2f GB moved (median of 20):\n"
              "  launcher (staged)  %.3f ms  %.0f GB/s\n"
              "  two-read kernel    %.3f ms  %.0f GB/s  (%.2fx)\n"
              "  cudaMemcpy of the logits (same bytes) %.3f ms  %.0f GB/s\n",
              rows, classes, gb, staged, gb / staged * 1e3, twoRead,
              gb / twoRead * 1e3, twoRead / staged, copy, gb / copy * 1e3);
  const int32_t got = readStatus(status);
  if (got != 0)
    std::printf("bench: status %d (a label out of range?)\n", got);
}

//===--------------------------------------------------------------------===//
// Embeddings
//===--------------------------------------------------------------------===//

template <class T> bool floatLike() {
  return tcc_cuda::detail::IsFloating<T>::value;
}

// variant: "" random ids; "bad" a few ids out of range; "misaligned" table
// and out one element off (narrower copy units).
template <class T, class I>
void caseGather(int64_t nIds, int64_t vocab, int64_t row,
                const std::string &variant) {
  const std::string desc =
      format("<%s,%s> ids=%" PRId64 " vocab=%" PRId64 " row=%" PRId64 "%s%s",
             typeName<T>(), typeName<I>(), nIds, vocab, row,
             variant.empty() ? "" : " ", variant.c_str());
  if (!selected("gather_rows", desc))
    return;
  Rng rng(desc);
  const int64_t off = variant == "misaligned" ? 1 : 0;
  std::vector<T> table(off + vocab * row);
  for (T &v : table) {
    uint64_t bits = rng.next();
    std::memcpy(&v, &bits, sizeof(T));
    if (Check::isPoison(v)) // keep the poison pattern out of the table
      std::memset(&v, 0, sizeof(T));
  }
  std::vector<int64_t> ids(nIds);
  for (int64_t &id : ids)
    id = vocab > 0 ? rng.below(vocab) : 0;
  int bad = variant == "bad" ? plantBadIds(ids, vocab) : 0;
  if (vocab == 0)
    bad = static_cast<int>(nIds);
  Dev<T> dtable(table.size()), dout(off + nIds * row);
  Dev<I> dids(nIds);
  Dev<int32_t> status(1);
  dtable.upload(table);
  dids.upload(toIndex<I>(ids));
  dout.poison();
  status.zero();
  tcc_cuda::launch_gather_rows<T, I>(dtable.p ? dtable.p + off : nullptr,
                                     dids.p, dout.p ? dout.p + off : nullptr,
                                     nIds, vocab, row, status.p, kCode,
                                     gStream);
  sync();
  std::vector<T> out = dout.download();
  Check c(0);
  int32_t st = readStatus(status);
  c.expect(st == (bad ? kCode : 0),
           format("status %d, want %d", st, bad ? kCode : 0));
  T fill{};
  if (floatLike<T>())
    fill = nanOf<T>();
  for (int64_t n = 0; n < nIds && c.failures < 20; ++n)
    for (int64_t j = 0; j < row; ++j) {
      const T got = out[off + n * row + j];
      const T want = idOk(ids[n], vocab) ? table[off + ids[n] * row + j] : fill;
      if (std::memcmp(&got, &want, sizeof(T)) != 0) {
        c.fail(format(
            "id %" PRId64 " (row %" PRId64 ") element %" PRId64 " differs%s",
            ids[n], n, j, idOk(ids[n], vocab) ? "" : " (bad id fill)"));
        break;
      }
    }
  finishCase("gather_rows", desc, c);
}

template <class T, class I>
void caseScatter(int64_t nIds, int64_t vocab, int64_t row,
                 const std::string &variant) {
  const std::string desc =
      format("<%s,%s> ids=%" PRId64 " vocab=%" PRId64 " row=%" PRId64 "%s%s",
             typeName<T>(), typeName<I>(), nIds, vocab, row,
             variant.empty() ? "" : " ", variant.c_str());
  if (!selected("scatter_add_rows", desc))
    return;
  Rng rng(desc);
  std::vector<T> updates(nIds * row);
  for (T &u : updates)
    u = fromD<T>(rng.uniform(-1, 1));
  std::vector<int64_t> ids(nIds);
  for (int64_t &id : ids)
    id = vocab > 0 ? rng.below(vocab) : 0;
  int bad = variant == "bad" ? plantBadIds(ids, vocab) : 0;
  if (vocab == 0)
    bad = static_cast<int>(nIds);
  std::vector<double> want(vocab * row, 0.0), sq(vocab * row, 0.0);
  for (int64_t n = 0; n < nIds; ++n)
    if (idOk(ids[n], vocab))
      for (int64_t j = 0; j < row; ++j) {
        double u = toD(updates[n * row + j]);
        want[ids[n] * row + j] += u;
        sq[ids[n] * row + j] += u * u;
      }
  Dev<T> dupdates(updates.size()), dout(vocab * row);
  Dev<I> dids(nIds);
  Dev<int32_t> status(1);
  dupdates.upload(updates);
  dids.upload(toIndex<I>(ids));
  dout.poison(); // the launcher's memset must clear it
  status.zero();
  const bool ordered = variant.find("ordered") != std::string::npos;
  tcc_cuda::launch_scatter_add_rows<T, I>(dupdates.p, dids.p, dout.p, nIds,
                                          vocab, row, status.p, kCode, gStream,
                                          ordered);
  sync();
  std::vector<T> out = dout.download();
  Check c(rtolFor<T>(), atolFor<T>());
  int32_t st = readStatus(status);
  c.expect(st == (bad ? kCode : 0),
           format("status %d, want %d", st, bad ? kCode : 0));
  for (int64_t k = 0; k < vocab * row; ++k)
    c.value(out[k], want[k], std::sqrt(sq[k]), k);
  if (ordered) {
    // In the order of n, as the CPU adds: the sums in the accumulator
    // type, rounded once, bit for bit; and the same bits a second time.
    std::vector<acc_t<T>> inOrder(vocab * row, acc_t<T>(0));
    for (int64_t n = 0; n < nIds; ++n)
      if (idOk(ids[n], vocab))
        for (int64_t j = 0; j < row; ++j)
          inOrder[ids[n] * row + j] += Elem<T>::load(updates[n * row + j]);
    for (int64_t k = 0; k < vocab * row; ++k) {
      const T expect = Elem<T>::store(inOrder[k]);
      if (std::memcmp(&out[k], &expect, sizeof(T)) != 0) {
        c.fail(format("at %" PRId64 ": got %.9g, the in-order sum is %.9g", k,
                      toD(out[k]), toD(expect)));
        break;
      }
    }
    dout.poison();
    tcc_cuda::launch_scatter_add_rows<T, I>(dupdates.p, dids.p, dout.p, nIds, vocab,
                                            row, status.p, kCode, gStream, true);
    sync();
    std::vector<T> again = dout.download();
    c.expect(std::memcmp(again.data(), out.data(), out.size() * sizeof(T)) == 0,
             "a second run gave other bits");
  }
  finishCase("scatter_add_rows", desc, c);
}

// 3000 updates of 1 onto each element of one row: the float sums are
// exactly 3000, so a 16-bit out must hold 3000 rounded once (bf16 3008,
// f16 3000). Rounding after every add would stop at 256 (bf16) or 2048
// (f16), whatever order the atomics land in.
template <class T> void caseScatterRoundsOnce() {
  const int64_t n = 3000, vocab = 2, row = 5;
  const std::string desc = format("<%s,i32> ids=%" PRId64 " vocab=%" PRId64
                                  " row=%" PRId64 " rounds once",
                                  typeName<T>(), n, vocab, row);
  if (!selected("scatter_add_rows", desc))
    return;
  std::vector<T> updates(n * row, fromD<T>(1.0));
  std::vector<int32_t> ids(n, 1);
  Dev<T> dupdates(updates.size()), dout(vocab * row);
  Dev<int32_t> dids(n), status(1);
  dupdates.upload(updates);
  dids.upload(ids);
  dout.poison();
  status.zero();
  tcc_cuda::launch_scatter_add_rows<T, int32_t>(dupdates.p, dids.p, dout.p, n,
                                                vocab, row, status.p, kCode,
                                                gStream);
  sync();
  std::vector<T> out = dout.download();
  Check c(0);
  c.expect(readStatus(status) == 0, "status set");
  const T want = fromD<T>(static_cast<double>(n)), zero = fromD<T>(0.0);
  for (int64_t k = 0; k < vocab * row; ++k) {
    const T expect = k >= row ? want : zero;
    if (std::memcmp(&out[k], &expect, sizeof(T)) != 0)
      c.fail(format("at %" PRId64 ": got %.9g, want %.9g", k, toD(out[k]),
                    toD(expect)));
  }
  finishCase("scatter_add_rows", desc, c);
}

#include "tests/cuda/rope_cases.cuh"

template <class T, class I> void gatherAll() {
  const int64_t nList[] = {1, 3, 37, 1000};
  const std::pair<int64_t, int64_t> tables[] = {
      {1, 1},       {7, 7},    {37, 31},  {50304, 33},
      {1000, 1000}, {3, 4097}, {50304, 4}};
  for (int64_t n : nList)
    for (const auto &t : tables)
      caseGather<T, I>(n, t.first, t.second, "");
  caseGather<T, I>(37, 7, 33, "bad");
  caseGather<T, I>(37, 7, 4, "bad"); // 16-byte units for 4-byte T
  caseGather<T, I>(37, 7, 1000, "misaligned");
  caseGather<T, I>(0, 7, 3, "");     // nothing launched
  caseGather<T, I>(37, 7, 0, "bad"); // empty rows: ids still checked
  caseGather<T, I>(5, 0, 3, "");     // empty table: every id is bad
}

template <class T, class I> void scatterAll() {
  const std::tuple<int64_t, int64_t, int64_t> shapes[] = {
      {1, 1, 1},     {3, 7, 7},         {37, 3, 33},      {1000, 7, 1000},
      {1000, 1, 31}, {1000, 50304, 33}, {37, 1000, 4097}, {3, 37, 1}};
  for (const auto &s : shapes)
    caseScatter<T, I>(std::get<0>(s), std::get<1>(s), std::get<2>(s), "");
  caseScatter<T, I>(37, 7, 33, "bad");
  caseScatter<T, I>(0, 5, 3, "");     // out still zeroed
  caseScatter<T, I>(37, 7, 0, "bad"); // empty rows: ids still checked
  caseScatter<T, I>(5, 0, 3, "");     // empty table: every id is bad
  // --deterministic: in the order of n (GPT-2's embedding gradient shape too).
  caseScatter<T, I>(1000, 50304, 33, "ordered");
  caseScatter<T, I>(4096, 300, 768, "ordered"); // many repeats per row
  caseScatter<T, I>(37, 7, 1000, "ordered");
  caseScatter<T, I>(37, 7, 33, "bad ordered");
  caseScatter<T, I>(5, 0, 3, "ordered");     // empty table: every id is bad
}

int printTable() {
  std::printf("\n%-18s %7s %7s  %s\n", "family", "cases", "passed",
              "worst error");
  bool ok = !gFamilies.empty();
  for (const FamilyStats &f : gFamilies) {
    std::printf("%-18s %7d %7d  %.3g\n", f.name.c_str(), f.cases, f.passed,
                f.worst);
    ok &= f.cases == f.passed;
  }
  std::printf(
      "(worst error: |got - want| / max(|want|, floor), against rtol "
      "%.0e float / %.0e double / %.3g bf16 / %.3g f16; ulps for exp/tanh; "
      "0 for exact checks)\n",
      kRtolFloat, kRtolDouble, rtolFor<bf16>(), rtolFor<f16>());
  if (gFamilies.empty())
    std::printf("no case matched --filter '%s'\n", gFilter.c_str());
  std::printf("%s (seed %" PRIu64 ")\n", ok ? "ALL PASSED" : "FAILED", gSeed);
  return ok ? 0 : 1;
}

} // namespace

int main(int argc, char **argv) {
  bool haveSeed = false, bench = false;
  for (int k = 1; k < argc; ++k) {
    std::string a = argv[k];
    if (a == "--seed" && k + 1 < argc) {
      char *end = nullptr;
      gSeed = std::strtoull(argv[++k], &end, 10);
      if (*end != '\0') {
        std::fprintf(stderr, "kernel_families_test: --seed needs a number\n");
        return 2;
      }
      haveSeed = true;
    } else if (a == "--filter" && k + 1 < argc) {
      gFilter = argv[++k];
    } else if (a == "--bench") {
      bench = true;
    } else {
      std::fprintf(stderr, "usage: kernel_families_test [--seed N] [--filter "
                           "SUBSTRING] [--bench]\n");
      return 2;
    }
  }
  int devices = 0;
  cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess || devices == 0) {
    std::printf(
        "SKIP: no CUDA GPU (%s): kernel_families_test needs one; run it "
        "on the device machine (tests/cuda/README.md)\n",
        err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
    return 77;
  }
  if (!haveSeed)
    gSeed = (static_cast<uint64_t>(std::random_device{}()) << 32) ^
            std::random_device{}();
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s (sm_%d%d, %d SMs)\nseed %" PRIu64
              " (reproduce with --seed %" PRIu64 ")\n",
              prop.name, prop.major, prop.minor, prop.multiProcessorCount,
              gSeed, gSeed);
  CUDA_CHECK(cudaStreamCreateWithFlags(&gStream, cudaStreamNonBlocking));
  if (bench) {
    benchXent();
    CUDA_CHECK(cudaStreamDestroy(gStream));
    return 0;
  }

  testConversions();
  testMaxMin<float>();
  testMaxMin<double>();
  testExpTanh<float>();
  testExpTanh<double>();
  testFailAndGrid();
  reduceRowsAll<float>();
  reduceRowsAll<double>();
  reduceRowsAll<bf16>();
  reduceRowsAll<f16>();
  reduceMiddleAll<float>();
  reduceMiddleAll<double>();
  reduceMiddleAll<bf16>();
  reduceMiddleAll<f16>();
  reduceAxesAll<float>();
  reduceAxesAll<double>();
  reduceAxesAll<bf16>();
  reduceAxesAll<f16>();
  xentAll<float>();
  xentAll<double>();
  xentAll<bf16>();
  xentAll<f16>();
  gatherAll<float, int32_t>();
  gatherAll<float, int64_t>();
  gatherAll<double, int32_t>();
  gatherAll<double, int64_t>();
  gatherAll<int32_t, int32_t>();
  gatherAll<int32_t, int64_t>();
  caseGather<int64_t, int64_t>(37, 50, 7, "bad");
  gatherAll<bf16, int32_t>(); // bad ids: NaN rows
  gatherAll<f16, int64_t>();
  caseGather<uint16_t, int32_t>(37, 50, 7, "bad"); // 16-bit integer rows
  caseGather<uint16_t, int64_t>(37, 50, 8, "");
  caseGather<uint16_t, int32_t>(37, 50, 33, "misaligned");
  caseGather<uint8_t, int32_t>(37, 50, 7, "bad"); // bool / byte rows
  caseGather<uint8_t, int64_t>(37, 50, 16, "");
  caseGather<uint8_t, int64_t>(37, 50, 33, "misaligned");
  scatterAll<float, int32_t>();
  scatterAll<float, int64_t>();
  scatterAll<double, int32_t>();
  scatterAll<double, int64_t>();
  scatterAll<bf16, int32_t>();
  scatterAll<f16, int64_t>();
  caseScatterRoundsOnce<bf16>();
  caseScatterRoundsOnce<f16>();
  ropeAll<float, float>();
  ropeAll<double, double>();
  ropeAll<bf16, bf16>();
  ropeAll<bf16, float>(); // tg-amp: 16-bit x, f32 tables
  ropeAll<f16, f16>();
  ropeAll<f16, float>();

  CUDA_CHECK(cudaStreamDestroy(gStream));
  return printTable();
}
