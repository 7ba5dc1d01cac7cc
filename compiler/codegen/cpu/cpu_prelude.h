// tcc CPU kernel prelude — pasted by the CPU code generator at the top of
// every generated step.cpp, so the generated source is self-contained.
// Kernels whose loops depend on a shape (elementwise bodies, reductions,
// copies) are generated inline instead; these are the fixed-shape-family
// kernels and scalar helpers. Matrix products go to BLAS (OpenBLAS, Debian
// libopenblas-dev).
//
// Threads: the generated loops use OpenMP (`#pragma omp parallel for` above
// a size threshold; the library is built with -fopenmp), and large gemms
// are split into row or column blocks across the same OpenMP threads, each
// block one single-threaded BLAS call. OpenBLAS's own thread pool is set to
// one thread (init_threads), so the two pools never compete for the cores.
// Without -fopenmp the same source builds and runs on one thread.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#ifdef _OPENMP
#include <omp.h>
#endif

extern "C" {
// CBLAS, declared here so the generated file needs no BLAS headers.
enum { TCC_CBLAS_ROW_MAJOR = 101, TCC_CBLAS_NO_TRANS = 111, TCC_CBLAS_TRANS = 112 };
void cblas_sgemm(int order, int ta, int tb, int m, int n, int k, float alpha,
                 const float *a, int lda, const float *b, int ldb, float beta,
                 float *c, int ldc);
void cblas_dgemm(int order, int ta, int tb, int m, int n, int k, double alpha,
                 const double *a, int lda, const double *b, int ldb,
                 double beta, double *c, int ldc);
void openblas_set_num_threads(int num_threads);
}

// Per-kernel timing: `tcc compile --profile` builds the step with
// -DTCC_PROFILE, and every kernel's wall time is summed; the totals go to
// stderr at exit, slowest first. Without it TCC_PROFILE_SCOPE expands to
// nothing.
#ifdef TCC_PROFILE
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>
namespace tcc_cpu {
struct Profile {
  struct Entry {
    const char *name = "";
    double seconds = 0;
    long calls = 0;
  };
  std::map<int, Entry> entries;
  ~Profile() {
    std::vector<Entry> sorted;
    double total = 0;
    for (auto &e : entries) {
      sorted.push_back(e.second);
      total += e.second.seconds;
    }
    std::sort(sorted.begin(), sorted.end(),
              [](const Entry &a, const Entry &b) { return a.seconds > b.seconds; });
    std::fprintf(stderr, "tcc profile: %.3f s in kernels\n", total);
    std::map<std::string, double> byKind; // "kern.gemm" -> seconds
    for (const Entry &e : sorted) {
      std::string name = e.name;
      byKind[name.substr(name.rfind(": ") + 2)] += e.seconds;
    }
    for (auto &k : byKind)
      std::fprintf(stderr, "%9.3f ms %5.1f%%  all %s\n", k.second * 1e3,
                   100 * k.second / total, k.first.c_str());
    for (size_t i = 0; i < sorted.size() && i < 40; ++i)
      std::fprintf(stderr, "%9.3f ms %5.1f%% %7ld calls  %s\n",
                   sorted[i].seconds * 1e3, 100 * sorted[i].seconds / total,
                   sorted[i].calls, sorted[i].name);
  }
};
inline Profile &profile() {
  static Profile p;
  return p;
}
struct ProfileScope {
  Profile::Entry &entry;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  ProfileScope(int id, const char *name) : entry(profile().entries[id]) {
    entry.name = name;
  }
  ~ProfileScope() {
    entry.seconds += std::chrono::duration<double>(
                         std::chrono::steady_clock::now() - start).count();
    ++entry.calls;
  }
};
} // namespace tcc_cpu
#define TCC_PROFILE_SCOPE(id, name) tcc_cpu::ProfileScope tcc_profile_scope(id, name)
#else
#define TCC_PROFILE_SCOPE(id, name)
#endif

namespace tcc_cpu {

// Work (elements x ops, or multiply-adds) above which a loop is worth
// spreading over threads.
constexpr double kParallelWork = 1 << 17;

inline void init_threads() {
  static const bool once = [] {
    openblas_set_num_threads(1);
    return true;
  }();
  (void)once;
}

inline int max_threads() {
#ifdef _OPENMP
  return omp_in_parallel() ? 1 : omp_get_max_threads();
#else
  return 1;
#endif
}

//===--------------------------------------------------------------------===//
// Scalars
//===--------------------------------------------------------------------===//

template <typename To, typename From> To bit_cast(From from) {
  static_assert(sizeof(To) == sizeof(From), "bit_cast needs equal sizes");
  To to;
  std::memcpy(&to, &from, sizeof(To));
  return to;
}

// bf16 and f16 are stored as their 16 bits and computed in float; every
// operation producing one rounds to nearest even (round_bf16 / round_f16).
inline float bf16_to_float(uint16_t h) {
  return bit_cast<float>(static_cast<uint32_t>(h) << 16);
}
inline uint16_t float_to_bf16(float f) {
  uint32_t u = bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) // NaN: the canonical quiet NaN, as
    return 0x7fffu;                      // the GPU's cvt.rn.bf16.f32 gives
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
inline float round_bf16(float f) { return bf16_to_float(float_to_bf16(f)); }

inline float f16_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0x1f) // inf or NaN
    return bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) { // zero or subnormal: mant * 2^-24
    float v = static_cast<float>(mant) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  return bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
}
inline uint16_t float_to_f16(float f) {
  uint32_t u = bit_cast<uint32_t>(f);
  uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) // NaN
    return sign | 0x7e00u;
  if (a >= 0x477ff000u) // rounds to >= 65520: infinity
    return sign | 0x7c00u;
  if (a < 0x38800000u) { // below 2^-14: subnormal half, a multiple of 2^-24
    float v = bit_cast<float>(a) * 16777216.0f; // exact
    return sign | static_cast<uint16_t>(std::nearbyint(v)); // ties to even
  }
  // Normal: drop 13 mantissa bits with round to nearest even.
  uint32_t r = a + 0xfffu + ((a >> 13) & 1u);
  return sign | static_cast<uint16_t>((r - 0x38000000u) >> 13);
}
inline float round_f16(float f) { return f16_to_float(float_to_f16(f)); }

// bf16 and f16 elements of the fixed kernels (gemm_via_float, the losses,
// gather / scatter-add). Generated code stores both as uint16_t and casts
// the pointers it passes, so no template mistakes their bits for integers.
struct bf16 {
  uint16_t bits;
};
struct f16 {
  uint16_t bits;
};

// Element traits: Acc is the type a kernel computes in (float for the
// 16-bit types), load widens an element to it, store rounds back (nearest
// even), once per output element.
template <typename T> struct Elem {
  using Acc = T;
  static T load(T x) { return x; }
  static T store(T x) { return x; }
};
template <> struct Elem<bf16> {
  using Acc = float;
  static float load(bf16 x) { return bf16_to_float(x.bits); }
  static bf16 store(float x) { return bf16{float_to_bf16(x)}; }
};
template <> struct Elem<f16> {
  using Acc = float;
  static float load(f16 x) { return f16_to_float(x.bits); }
  static f16 store(float x) { return f16{float_to_f16(x)}; }
};
template <typename T> using acc_t = typename Elem<T>::Acc;

// Results of the kernels that need memory of their own (the 16-bit gemm
// and scatter-add work on float copies): the step ABI's tcc_status values.
constexpr int32_t kKernelOk = 0, kKernelBadIndex = 1, kKernelNoMemory = 2;

// arith.maximumf / minimumf: NaN propagates, -0 < +0.
template <typename T> T maximumf(T a, T b) {
  if (a != a || b != b)
    return a + b;
  if (a == b)
    return std::signbit(a) ? b : a;
  return a > b ? a : b;
}
template <typename T> T minimumf(T a, T b) {
  if (a != a || b != b)
    return a + b;
  if (a == b)
    return std::signbit(a) ? a : b;
  return a < b ? a : b;
}

// e^x for float, written so the host compiler can vectorize loops calling
// it (glibc's expf is an opaque call): Cody-Waite range reduction and a
// degree-7 polynomial, within 2 ulp of expf; overflows to inf, underflows
// to 0 (the -inf of a causal mask gives exactly 0), NaN stays NaN.
inline float exp(float x) {
  float xc = x < -104.0f ? -104.0f : (x > 89.0f ? 89.0f : x);
  float n = std::nearbyint(xc * 1.44269504088896341f);
  float r = xc - n * 0.693145751953125f; // ln2 split: exact high part
  r = r - n * 1.428606765330187045e-06f;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // 2^n in two steps so n down to -150 stays representable.
  int32_t ni = static_cast<int32_t>(n);
  int32_t n1 = ni / 2, n2 = ni - n1;
  float s1 = bit_cast<float>(static_cast<uint32_t>(n1 + 127) << 23);
  float s2 = bit_cast<float>(static_cast<uint32_t>(n2 + 127) << 23);
  float v = p * s1 * s2;
  v = x > 88.7228394f ? std::numeric_limits<float>::infinity() : v;
  v = x < -103.972084f ? 0.0f : v;
  return x != x ? x : v;
}
inline double exp(double x) { return std::exp(x); }

// tanh through exp (vectorizable like exp): tanh(x) = 1 - 2 / (e^2x + 1),
// with the odd polynomial near 0 where that form loses digits.
inline float tanh(float x) {
  float ax = std::fabs(x);
  float e = tcc_cpu::exp(2.0f * ax);
  float big = 1.0f - 2.0f / (e + 1.0f);
  float x2 = x * x;
  float small = ax * (1.0f + x2 * (-1.0f / 3.0f + x2 * (2.0f / 15.0f +
                 x2 * (-17.0f / 315.0f + x2 * (62.0f / 2835.0f)))));
  float t = ax < 0.0625f ? small : big;
  t = ax > 9.0f ? 1.0f : t;
  return x != x ? x : std::copysign(t, x);
}
inline double tanh(double x) { return std::tanh(x); }

//===--------------------------------------------------------------------===//
// Matrix products
//===--------------------------------------------------------------------===//

// c (M,N) = alpha * op(a) x op(b) + beta * c with explicit leading
// dimensions; a is (M,K) or (K,M) when ta, b is (K,N) or (N,K) when tb.
inline void gemm_serial(bool ta, bool tb, int m, int n, int k, float alpha,
                        const float *a, int lda, const float *b, int ldb,
                        float beta, float *c, int ldc) {
  cblas_sgemm(TCC_CBLAS_ROW_MAJOR, ta ? TCC_CBLAS_TRANS : TCC_CBLAS_NO_TRANS,
              tb ? TCC_CBLAS_TRANS : TCC_CBLAS_NO_TRANS, m, n, k, alpha, a,
              lda, b, ldb, beta, c, ldc);
}
inline void gemm_serial(bool ta, bool tb, int m, int n, int k, double alpha,
                        const double *a, int lda, const double *b, int ldb,
                        double beta, double *c, int ldc) {
  cblas_dgemm(TCC_CBLAS_ROW_MAJOR, ta ? TCC_CBLAS_TRANS : TCC_CBLAS_NO_TRANS,
              tb ? TCC_CBLAS_TRANS : TCC_CBLAS_NO_TRANS, m, n, k, alpha, a,
              lda, b, ldb, beta, c, ldc);
}

// Row-major operands with explicit leading dimensions; a large product is
// split into blocks of rows (or of columns, when N > M) of c, one per
// thread. Every element of c is one BLAS call's dot product whichever block
// holds it, so the result does not depend on the thread count.
template <typename T>
void gemm_strided(bool ta, bool tb, int m, int n, int k, T alpha, const T *a,
                  int lda, const T *b, int ldb, T beta, T *c, int ldc) {
  int threads = max_threads();
  if (threads < 2 || static_cast<double>(m) * n * k < kParallelWork * 8) {
    gemm_serial(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  bool byRows = m >= n;
  int extent = byRows ? m : n;
  // Blocks of whole 16-row/column panels, so BLAS sees aligned sizes.
  int panels = (extent + 15) / 16;
  int blocks = threads < panels ? threads : panels;
#ifdef _OPENMP
#pragma omp parallel for num_threads(blocks) schedule(static)
#endif
  for (int t = 0; t < blocks; ++t) {
    int begin = static_cast<int>(static_cast<int64_t>(panels) * t / blocks) * 16;
    int end = static_cast<int>(static_cast<int64_t>(panels) * (t + 1) / blocks) * 16;
    end = end < extent ? end : extent;
    if (begin >= end)
      continue;
    if (byRows)
      gemm_serial(ta, tb, end - begin, n, k, alpha,
                  ta ? a + begin : a + static_cast<int64_t>(begin) * lda, lda,
                  b, ldb, beta, c + static_cast<int64_t>(begin) * ldc, ldc);
    else
      gemm_serial(ta, tb, m, end - begin, k, alpha, a, lda,
                  tb ? b + static_cast<int64_t>(begin) * ldb : b + begin, ldb,
                  beta, c + begin, ldc);
  }
}

// Contiguous row-major operands.
template <typename T>
void gemm(bool ta, bool tb, int m, int n, int k, T alpha, const T *a,
          const T *b, T beta, T *c) {
  gemm_strided(ta, tb, m, n, k, alpha, a, ta ? m : k, b, tb ? k : n, beta, c, n);
}

// gemm for bf16 / f16 operands and result (H): the operands are widened to
// float copies, multiplied by sgemm (fp32 accumulation, alpha and beta in
// float), and every result element is rounded once. c is read (widened)
// only when beta != 0. kKernelNoMemory if the copies cannot be allocated.
template <typename H>
int32_t gemm_via_float(bool ta, bool tb, int m, int n, int k, float alpha,
                       const H *a, const H *b, float beta, H *c) {
  const int64_t na = static_cast<int64_t>(m) * k, nb = static_cast<int64_t>(k) * n,
                nc = static_cast<int64_t>(m) * n;
  std::unique_ptr<float[]> fa(new (std::nothrow) float[na > 0 ? na : 1]);
  std::unique_ptr<float[]> fb(new (std::nothrow) float[nb > 0 ? nb : 1]);
  std::unique_ptr<float[]> fc(new (std::nothrow) float[nc > 0 ? nc : 1]);
  if (!fa || !fb || !fc)
    return kKernelNoMemory;
  for (int64_t i = 0; i < na; ++i)
    fa[i] = Elem<H>::load(a[i]);
  for (int64_t i = 0; i < nb; ++i)
    fb[i] = Elem<H>::load(b[i]);
  for (int64_t i = 0; i < nc; ++i)
    fc[i] = beta != 0.0f ? Elem<H>::load(c[i]) : 0.0f;
  if (k > 0)
    gemm<float>(ta, tb, m, n, k, alpha, fa.get(), fb.get(), beta, fc.get());
  else // an empty sum: BLAS may skip the scaling of c
    for (int64_t i = 0; i < nc; ++i)
      fc[i] *= beta;
  for (int64_t i = 0; i < nc; ++i)
    c[i] = Elem<H>::store(fc[i]);
  return kKernelOk;
}

//===--------------------------------------------------------------------===//
// Losses
//===--------------------------------------------------------------------===//

// row_max in kRowLanes interleaved partials (element j goes to partial
// j % kRowLanes), combined pairwise at the end: the maximum does not depend
// on the order, and the partials fit one vector register, so the loop
// vectorizes (NaN and signed zeros come out as in element order).
constexpr int kRowLanes = 8;

template <typename A> A max_of_lanes(A *part) {
  for (int width = kRowLanes / 2; width > 0; width /= 2)
    for (int l = 0; l < width; ++l)
      part[l] = part[l + width] > part[l] ? part[l + width] : part[l];
  return part[0];
}

// max over row[0..c) in the compute type: subtracted before exp so softmax
// never overflows.
template <typename T> acc_t<T> row_max(const T *row, int64_t c) {
  using A = acc_t<T>;
  A part[kRowLanes];
  for (int l = 0; l < kRowLanes; ++l)
    part[l] = Elem<T>::load(row[0]);
  int64_t j = 0;
  for (; j + kRowLanes <= c; j += kRowLanes)
    for (int l = 0; l < kRowLanes; ++l) {
      A x = Elem<T>::load(row[j + l]);
      part[l] = x > part[l] ? x : part[l];
    }
  for (int l = 0; j < c; ++j, ++l) {
    A x = Elem<T>::load(row[j]);
    part[l] = x > part[l] ? x : part[l];
  }
  return max_of_lanes(part);
}

// sum over j of exp(row[j] - maxv), in the compute type, in element order.
// (In 8 partials it ran ~17% faster, but the changed rounding moved a bf16
// run's loss after 60 steps by 3% — e2e_rope_cpu's 20% fall became 19.3% —
// so the sum keeps the order every earlier step used.)
template <typename T> acc_t<T> row_exp_sum(const T *row, int64_t c, acc_t<T> maxv) {
  acc_t<T> sum = 0;
  for (int64_t j = 0; j < c; ++j)
    sum += tcc_cpu::exp(Elem<T>::load(row[j]) - maxv);
  return sum;
}

// Whether every id is in [0, limit).
template <typename L> bool ids_in_range(int64_t n, const L *ids, int64_t limit) {
  bool ok = true;
  for (int64_t i = 0; i < n; ++i)
    ok &= ids[i] >= 0 && ids[i] < limit;
  return ok;
}

// loss (N) = logsumexp(logits[n]) - logits[n, labels[n]]; logits is (N,C),
// computed in acc_t<T> (float for bf16 / f16 logits) and rounded once to
// the loss type O (T, or float with 16-bit logits). Returns false if a
// label is outside [0, C).
template <typename T, typename L, typename O>
bool softmax_cross_entropy(int64_t n, int64_t c, const T *logits,
                           const L *labels, O *loss) {
  using A = acc_t<T>;
  if (!ids_in_range(n, labels, c))
    return false;
#ifdef _OPENMP
#pragma omp parallel for if (static_cast<double>(n) * c > kParallelWork)
#endif
  for (int64_t i = 0; i < n; ++i) {
    const T *row = logits + i * c;
    A maxv = row_max(row, c);
    A sum = row_exp_sum(row, c, maxv);
    loss[i] = Elem<O>::store(static_cast<acc_t<O>>(
        std::log(sum) + maxv - Elem<T>::load(row[labels[i]])));
  }
  return true;
}

// kern.softmax_cross_entropy_with_grad: loss (N) as softmax_cross_entropy
// and out (N,C) as softmax_cross_entropy_grad, from one max / sum of exps
// per row; out may be logits itself (each row's label logit is read, and
// the loss written, before the row is overwritten). loss is of type O; null
// for the gradient alone (softmax_cross_entropy_grad).
template <typename T, typename L, typename G, typename O>
bool softmax_cross_entropy_with_grad(int64_t n, int64_t c, const T *logits,
                                     const L *labels, const G *grad, O *loss,
                                     T *out) {
  using A = acc_t<T>;
  if (!ids_in_range(n, labels, c))
    return false;
#ifdef _OPENMP
#pragma omp parallel for if (static_cast<double>(n) * c > kParallelWork)
#endif
  for (int64_t i = 0; i < n; ++i) {
    const T *row = logits + i * c;
    T *orow = out + i * c;
    A maxv = row_max(row, c);
    A sum = row_exp_sum(row, c, maxv);
    const int64_t label = static_cast<int64_t>(labels[i]);
    if (loss)
      loss[i] = Elem<O>::store(static_cast<acc_t<O>>(
          std::log(sum) + maxv - Elem<T>::load(row[label])));
    const A g = static_cast<A>(Elem<G>::load(grad[i]));
    const A scale = g / sum;
    for (int64_t j = 0; j < c; ++j) {
      A o = tcc_cpu::exp(Elem<T>::load(row[j]) - maxv) * scale;
      orow[j] = Elem<T>::store(j == label ? o - g : o);
    }
  }
  return true;
}

// out (N,C) = (softmax(logits[n]) - onehot(labels[n])) * grad[n], computed
// in acc_t<T>, each element rounded once to T; grad is of type G (T, or
// float with 16-bit logits). out may be logits itself.
template <typename T, typename L, typename G>
bool softmax_cross_entropy_grad(int64_t n, int64_t c, const T *logits,
                                const L *labels, const G *grad, T *out) {
  return softmax_cross_entropy_with_grad<T, L, G, float>(n, c, logits, labels, grad,
                                                         nullptr, out);
}

//===--------------------------------------------------------------------===//
// Rotary position embeddings (kern.rope)
//===--------------------------------------------------------------------===//

// Where a rope operand's (B, H, T, D) elements are: element (b, hh, i, j)
// at offset + b * batch + hh * head + i * row + j (element strides; D is
// contiguous). Contiguous (B, H, T, D) is {0, H*T*D, T*D, D}; q read from a
// packed (B, T, 3*H*D) qkv buffer is {0, T*3*H*D, D, 3*H*D}.
struct RopeStrides {
  int64_t offset, batch, head, row;
};

// out = x * cos + rotate_half(x) * sin, rotate_half(x) = (-x[h:], x[:h]),
// h = D / 2; with `transposed` its gradient x * cos + (y[h:], -y[:h]) for
// y = x * sin. x and out are logically (B, H, T, D) = (batch, heads, t, d)
// at element strides xs / os (out never aliases x); row (b, hh, i) uses
// row i of the contiguous (T, D) tables cos / sin, of type C (T, or float
// for 16-bit x). Computed in acc_t<T>, rounded once per element. The
// contiguous (rows, D) form is batch = rows / T, heads = 1, strides
// {0, T*D, 0, D}.
template <typename T, typename C>
void rope(int64_t batch, int64_t heads, int64_t t, int64_t d, const T *x, RopeStrides xs,
          const C *cos, const C *sin, bool transposed, T *out, RopeStrides os) {
  using A = acc_t<T>;
  const int64_t h = d / 2, rows = batch * heads * t;
#ifdef _OPENMP
#pragma omp parallel for if (static_cast<double>(rows) * d > kParallelWork)
#endif
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t i = r % t, bh = r / t, hh = bh % heads, b = bh / heads;
    const T *xr = x + xs.offset + b * xs.batch + hh * xs.head + i * xs.row;
    T *o = out + os.offset + b * os.batch + hh * os.head + i * os.row;
    const C *c = cos + i * d, *s = sin + i * d;
    for (int64_t j = 0; j < h; ++j) {
      A x1 = Elem<T>::load(xr[j]), x2 = Elem<T>::load(xr[j + h]);
      A c1 = static_cast<A>(Elem<C>::load(c[j])), c2 = static_cast<A>(Elem<C>::load(c[j + h]));
      A s1 = static_cast<A>(Elem<C>::load(s[j])), s2 = static_cast<A>(Elem<C>::load(s[j + h]));
      if (!transposed) {
        o[j] = Elem<T>::store(x1 * c1 - x2 * s1);
        o[j + h] = Elem<T>::store(x2 * c2 + x1 * s2);
      } else {
        o[j] = Elem<T>::store(x1 * c1 + x2 * s2);
        o[j + h] = Elem<T>::store(x2 * c2 - x1 * s1);
      }
    }
  }
}

//===--------------------------------------------------------------------===//
// Embeddings
//===--------------------------------------------------------------------===//

// out (N, row) = table[ids[n]] for n < N; table is (V, row). False (and
// nothing read) when an id is outside [0, V).
template <typename T, typename L>
bool gather_rows(int64_t n, int64_t row, int64_t v, const T *table,
                 const L *ids, T *out) {
  if (!ids_in_range(n, ids, v))
    return false;
#ifdef _OPENMP
#pragma omp parallel for if (static_cast<double>(n) * row > kParallelWork)
#endif
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(out + i * row, table + static_cast<int64_t>(ids[i]) * row,
                sizeof(T) * row);
  return true;
}

// out (V, row) = 0, then out[ids[n]] += updates[n] for n < N, in order of
// n, so repeated ids accumulate (threads split the columns, never the ids).
template <typename T, typename L>
bool scatter_add_rows(int64_t n, int64_t row, int64_t v, const T *updates,
                      const L *ids, T *out) {
  if (!ids_in_range(n, ids, v))
    return false;
  int blocks = static_cast<double>(n) * row > kParallelWork && row >= 32
                   ? max_threads() : 1;
#ifdef _OPENMP
#pragma omp parallel for num_threads(blocks) schedule(static)
#endif
  for (int t = 0; t < blocks; ++t) {
    int64_t begin = row * t / blocks, end = row * (t + 1) / blocks;
    for (int64_t r = 0; r < v; ++r)
      for (int64_t j = begin; j < end; ++j)
        out[r * row + j] = T(0);
    for (int64_t i = 0; i < n; ++i) {
      T *dst = out + static_cast<int64_t>(ids[i]) * row;
      const T *src = updates + i * row;
      for (int64_t j = begin; j < end; ++j)
        dst[j] += src[j];
    }
  }
  return true;
}

// scatter_add_rows for bf16 / f16 (H): the sums accumulate in a float copy,
// in order of n, and each element of out is rounded once (adding into the
// 16-bit out would round after every add, and small updates would vanish
// against a large sum). kKernelBadIndex when an id is outside [0, V),
// kKernelNoMemory if the float copy cannot be allocated.
template <typename H, typename L>
int32_t scatter_add_rows_via_float(int64_t n, int64_t row, int64_t v,
                                   const H *updates, const L *ids, H *out) {
  if (!ids_in_range(n, ids, v))
    return kKernelBadIndex;
  const int64_t elems = v * row;
  std::unique_ptr<float[]> sums(new (std::nothrow) float[elems > 0 ? elems : 1]);
  if (!sums)
    return kKernelNoMemory;
  for (int64_t i = 0; i < elems; ++i)
    sums[i] = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    float *dst = sums.get() + static_cast<int64_t>(ids[i]) * row;
    const H *src = updates + i * row;
    for (int64_t j = 0; j < row; ++j)
      dst[j] += Elem<H>::load(src[j]);
  }
  for (int64_t i = 0; i < elems; ++i)
    out[i] = Elem<H>::store(sums[i]);
  return kKernelOk;
}

} // namespace tcc_cpu
