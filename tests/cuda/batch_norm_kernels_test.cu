// Device test of the CUDA prelude's batch-norm reductions
// (compiler/codegen/cuda/prelude/batch_norm_*.cuh: launch_batch_norm_stats,
// launch_batch_norm_grad_sums) against a float64 CPU reference (two-pass
// mean and biased variance; sum(g) and sum(g * (x - mean)) * rstd), with
// the parts each shape gets in a step (kern::batchNormDims). A standalone
// program like norm_kernels_test (no gtest).
//
//   batch_norm_kernels_test [--seed N] [--bench]
//
// Inputs are fresh random numbers every run: per channel an offset (up to
// 50 times its spread in the `offset` cases: the shifted sums must not
// cancel) plus uniform noise, rounded to the element type; the reference
// reads the rounded values. Outputs are poisoned (NaN) before each launch.
// Exit 0 when every case passes, 1 on any failure, 77 without a GPU. Every
// case runs twice and must be bit-identical (fixed summation order).
// --bench times ResNet-50's first batch norm (64 x 64 x 112 x 112 bf16)
// and a deep one (64 x 2048 x 7 x 7), and the same layers channels-last
// (S = 1: (N * H * W, C), the column kernels; the statistics and the
// gradient's sums), and prints GB/s (bytes read: x, and grad and x).
//
// Cases: x bf16, f32 or f64; grad bf16 or f32; S a multiple of the vector
// (vector path) or not (49, 7: scalar path); a misaligned x (scalar path);
// one part (wide layers) and many (ResNet's stem: 16 parts); N = 1. S = 1
// (channels-last, the column kernels): ResNet-50's NHWC layers (64 x 56 x
// 56 x 64, 64 x 7 x 7 x 2048) and 128 x 32 x 32 x 128 in bf16 (hundreds of
// parts), C not a multiple of the vector or a misaligned x (scalar loads),
// a partial last channel tile (C = 3, 20, 100), f32 and f64.
// Tolerance: relative to the reference's scale (max |want| over the
// channels; sums of |terms| for the gradient's): 3e-5 for f32 / bf16 inputs
// (f32 sums), 1e-12 for f64.
#include "compiler/codegen/cuda/cuda_prelude.cuh" // generated: the pieces, concatenated
#include "dialects/kern/NormWorkspace.h"
#include "tests/cuda/device_buffer.cuh"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using tcc_cuda::bf16;
using tcc_cuda_test::DeviceBuffer;
using tcc_cuda_test::Host;

namespace {

int gFailures = 0;

// (n, c, s) values: per channel offset * spread-sized shift plus noise.
template <class T>
std::vector<T> randomChannels(std::mt19937_64 &rng, int64_t n, int64_t c, int64_t s,
                              double offset) {
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<double> shift(c), scale(c);
  for (int64_t ch = 0; ch < c; ++ch) {
    scale[ch] = 0.5 + std::fabs(u(rng));
    shift[ch] = offset * scale[ch] * u(rng);
  }
  std::vector<T> v(n * c * s);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t j = 0; j < s; ++j)
        v[(i * c + ch) * s + j] = Host<T>::make(shift[ch] + scale[ch] * u(rng));
  return v;
}

template <class A>
void check(const std::string &what, const std::vector<A> &got, const std::vector<double> &want,
           double scale, double tol) {
  double err = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    double g = Host<A>::get(got[i]);
    double e = std::isfinite(g) ? std::fabs(g - want[i]) : INFINITY;
    if (!(e <= err))
      err = e;
  }
  double rel = err / (scale > 0 ? scale : 1);
  bool ok = rel <= tol;
  if (!ok)
    ++gFailures;
  std::printf("  %-4s %-58s rel err %.2e (tol %.0e)\n", ok ? "ok" : "FAIL", what.c_str(), rel,
              tol);
}

template <class A> bool sameBits(const std::vector<A> &a, const std::vector<A> &b) {
  return std::memcmp(a.data(), b.data(), a.size() * sizeof(A)) == 0;
}

template <class T, class G>
void runCase(std::mt19937_64 &rng, int64_t n, int64_t c, int64_t s, double offset,
             int misalign) {
  using A = typename std::conditional<std::is_same<T, double>::value, double, float>::type;
  const int64_t count = n * s, parts = tcc::kern::batchNormDims(n, c, n * c * s).parts;
  std::vector<T> x = randomChannels<T>(rng, n, c, s, offset);
  std::vector<G> g = randomChannels<G>(rng, n, c, s, 0.5);
  // float64 reference.
  std::vector<double> mean(c), var(c), rstd(c), gsum(c), gdot(c);
  double meanScale = 0, varScale = 0, sumScale = 0, dotScale = 0;
  for (int64_t ch = 0; ch < c; ++ch) {
    double s1 = 0, s2 = 0, t1 = 0, t2 = 0, a0 = 0, a1 = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < s; ++j)
        s1 += Host<T>::get(x[(i * c + ch) * s + j]);
    mean[ch] = s1 / count;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < s; ++j) {
        double d = Host<T>::get(x[(i * c + ch) * s + j]) - mean[ch];
        double gv = Host<G>::get(g[(i * c + ch) * s + j]);
        s2 += d * d;
        t1 += gv;
        a0 += std::fabs(gv);
        t2 += gv * d;
        a1 += std::fabs(gv) * std::fabs(d);
      }
    var[ch] = s2 / count;
    rstd[ch] = 1.0 / std::sqrt(var[ch] + 1e-5);
    gsum[ch] = t1;
    gdot[ch] = t2 * rstd[ch];
    meanScale = std::fmax(meanScale, std::fabs(mean[ch]) + std::sqrt(var[ch]));
    varScale = std::fmax(varScale, var[ch]);
    sumScale = std::fmax(sumScale, a0);
    dotScale = std::fmax(dotScale, a1 * rstd[ch]);
  }
  DeviceBuffer<T> dx(x.size(), misalign);
  DeviceBuffer<G> dg(g.size(), misalign);
  DeviceBuffer<A> dmean(c), dvar(c), drstd(c), dsum(c), ddot(c);
  DeviceBuffer<A> ws(parts > 1 ? parts * 2 * c : 1);
  dx.upload(x);
  dg.upload(g);
  std::vector<A> hostRstd(c);
  for (int64_t ch = 0; ch < c; ++ch)
    hostRstd[ch] = static_cast<A>(rstd[ch]);
  // The gradient's sums use the reference mean / rstd, rounded to A, as a
  // step passes its own statistics.
  std::vector<A> hostMean(c);
  for (int64_t ch = 0; ch < c; ++ch)
    hostMean[ch] = static_cast<A>(mean[ch]);
  std::vector<A> runs[2][4];
  for (int run = 0; run < 2; ++run) {
    dmean.poison();
    dvar.poison();
    tcc_cuda::launch_batch_norm_stats(dx.p, dmean.p, dvar.p, parts > 1 ? ws.p : nullptr, n, c,
                                      s, parts, 0);
    CUDA_CHECK(cudaGetLastError());
    runs[run][0] = dmean.download();
    runs[run][1] = dvar.download();
    DeviceBuffer<A> m2(c);
    m2.upload(hostMean);
    drstd.upload(hostRstd);
    dsum.poison();
    ddot.poison();
    tcc_cuda::launch_batch_norm_grad_sums(dg.p, static_cast<const T *>(dx.p),
                                          static_cast<const A *>(m2.p),
                                          static_cast<const A *>(drstd.p), dsum.p, ddot.p,
                                          parts > 1 ? ws.p : nullptr, n, c, s, parts, 0);
    CUDA_CHECK(cudaDeviceSynchronize());
    runs[run][2] = dsum.download();
    runs[run][3] = ddot.download();
  }
  const double tol = std::is_same<T, double>::value ? 1e-12 : 3e-5;
  char what[200];
  std::snprintf(what, sizeof what, "x %s grad %s (%lld, %lld, %lld) offset %g%s, %lld parts",
                Host<T>::name(), Host<G>::name(), (long long)n, (long long)c, (long long)s,
                offset, misalign ? " misaligned" : "", (long long)parts);
  std::printf("%s\n", what);
  check("mean", runs[0][0], mean, meanScale, tol);
  check("var", runs[0][1], var, varScale, tol);
  check("grad_sum", runs[0][2], gsum, sumScale, tol);
  check("grad_xhat_sum", runs[0][3], gdot, dotScale, tol);
  bool same = true;
  for (int k = 0; k < 4; ++k)
    same = same && sameBits(runs[0][k], runs[1][k]);
  if (!same)
    ++gFailures;
  std::printf("  %-4s two runs bit-identical\n", same ? "ok" : "FAIL");
}

// Milliseconds per call of `once` (20 calls after one warm-up).
template <class F> double timeCalls(F &&once) {
  once();
  CUDA_CHECK(cudaDeviceSynchronize());
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  const int reps = 20;
  cudaEventRecord(a);
  for (int i = 0; i < reps; ++i)
    once();
  cudaEventRecord(b);
  CUDA_CHECK(cudaEventSynchronize(b));
  CUDA_CHECK(cudaGetLastError());
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms / reps;
}

// The gradient's sums on bf16 grad and x (n, c, s): reads both.
double benchGradSums(int64_t n, int64_t c, int64_t s) {
  const int64_t parts = tcc::kern::batchNormDims(n, c, n * c * s).parts;
  DeviceBuffer<bf16> g(n * c * s), x(n * c * s);
  CUDA_CHECK(cudaMemset(g.p, 0x3f, n * c * s * sizeof(bf16)));
  CUDA_CHECK(cudaMemset(x.p, 0x3e, n * c * s * sizeof(bf16)));
  DeviceBuffer<float> mean(c), rstd(c), sum(c), dot(c), ws(parts * 2 * c);
  CUDA_CHECK(cudaMemset(mean.p, 0, c * sizeof(float)));
  CUDA_CHECK(cudaMemset(rstd.p, 0, c * sizeof(float)));
  double perCall = timeCalls([&] {
    tcc_cuda::launch_batch_norm_grad_sums(static_cast<const bf16 *>(g.p),
                                          static_cast<const bf16 *>(x.p),
                                          static_cast<const float *>(mean.p),
                                          static_cast<const float *>(rstd.p), sum.p, dot.p,
                                          parts > 1 ? ws.p : nullptr, n, c, s, parts, 0);
  });
  double gbs = 2.0 * n * c * s * sizeof(bf16) / (perCall * 1e-3) / 1e9;
  std::printf("bench grad_sums bf16 (%lld, %lld, %lld), %lld parts: %.4f ms, %.0f GB/s\n",
              (long long)n, (long long)c, (long long)s, (long long)parts, perCall, gbs);
  return gbs;
}

double benchStats(int64_t n, int64_t c, int64_t s) {
  const int64_t parts = tcc::kern::batchNormDims(n, c, n * c * s).parts;
  DeviceBuffer<bf16> x(n * c * s);
  CUDA_CHECK(cudaMemset(x.p, 0x3f, n * c * s * sizeof(bf16)));
  DeviceBuffer<float> mean(c), var(c), ws(parts * 2 * c);
  double perCall = timeCalls([&] {
    tcc_cuda::launch_batch_norm_stats(x.p, mean.p, var.p, parts > 1 ? ws.p : nullptr, n, c, s,
                                      parts, 0);
  });
  double gbs = n * c * s * sizeof(bf16) / (perCall * 1e-3) / 1e9;
  std::printf("bench stats bf16 (%lld, %lld, %lld), %lld parts: %.4f ms, %.0f GB/s\n",
              (long long)n, (long long)c, (long long)s, (long long)parts, perCall, gbs);
  return gbs;
}

} // namespace

int main(int argc, char **argv) {
  uint64_t seed = std::random_device{}();
  bool bench = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--seed") && i + 1 < argc)
      seed = std::strtoull(argv[++i], nullptr, 10);
    else if (!std::strcmp(argv[i], "--bench"))
      bench = true;
    else {
      std::fprintf(stderr, "usage: batch_norm_kernels_test [--seed N] [--bench]\n");
      return 2;
    }
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no GPU: skipped\n");
    return 77;
  }
  std::printf("seed %llu\n", (unsigned long long)seed);
  std::mt19937_64 rng(seed);
  runCase<bf16, bf16>(rng, 8, 16, 32 * 32, 1.0, 0);    // vector path, 2 parts
  runCase<bf16, bf16>(rng, 16, 4, 56 * 56, 50.0, 0);   // large means, many parts
  runCase<bf16, float>(rng, 8, 64, 7 * 7, 1.0, 0);     // S = 49: scalar path
  runCase<float, float>(rng, 32, 8, 16 * 16, 20.0, 0); // f32
  runCase<float, bf16>(rng, 4, 24, 64, 1.0, 1);        // misaligned: scalar path
  runCase<double, double>(rng, 4, 6, 7, 5.0, 0);       // f64
  runCase<bf16, bf16>(rng, 1, 300, 8, 1.0, 0);         // N = 1, one part
  runCase<float, float>(rng, 3, 2, 5000, 3.0, 0);      // few channels, long runs
  // S = 1: channels-last (N * H * W, C), the column kernels.
  runCase<bf16, bf16>(rng, 64 * 56 * 56, 64, 1, 20.0, 0);   // 528 parts
  runCase<bf16, bf16>(rng, 64 * 7 * 7, 2048, 1, 1.0, 0);    // 32 tiles x 12 parts
  runCase<bf16, float>(rng, 128 * 32 * 32, 128, 1, 1.0, 0); // grad f32: V = 4
  runCase<bf16, bf16>(rng, 37, 3, 1, 5.0, 0);               // scalar, one partial tile
  runCase<bf16, bf16>(rng, 1000, 24, 1, 1.0, 1);            // misaligned: scalar, 3 parts
  runCase<bf16, bf16>(rng, 1000, 20, 1, 1.0, 0);            // C % 8 != 0: scalar
  runCase<float, float>(rng, 1000, 20, 1, 1.0, 0);          // f32, C % 4 == 0: vector
  runCase<float, float>(rng, 5000, 100, 1, 10.0, 0);        // f32, 2 tiles (36 left), 19 parts
  runCase<float, bf16>(rng, 3000, 30, 1, 1.0, 0);           // V = 4, C % 4 != 0: scalar
  runCase<double, double>(rng, 4000, 70, 1, 50.0, 0);       // f64, 2 tiles, 15 parts
  runCase<double, double>(rng, 9, 5, 1, 3.0, 1);            // f64 misaligned, one part
  runCase<float, float>(rng, 1, 40, 1, 1.0, 0);             // N = 1
  if (bench) {
    benchStats(64, 64, 112 * 112);
    benchStats(64, 256, 56 * 56);
    benchStats(64, 2048, 7 * 7);
    // Channels-last (S = 1): the column kernels.
    const int64_t nhwc[][2] = {
        {64 * 112 * 112, 64}, {64 * 56 * 56, 64}, {64 * 56 * 56, 256}, {64 * 28 * 28, 512},
        {64 * 14 * 14, 1024}, {64 * 7 * 7, 2048}, {128 * 32 * 32, 128}};
    for (const auto &d : nhwc)
      benchStats(d[0], d[1], 1);
    for (const auto &d : nhwc)
      benchGradSums(d[0], d[1], 1);
  }
  std::printf("%s\n", gFailures ? "FAIL" : "PASS");
  return gFailures ? 1 : 0;
}
