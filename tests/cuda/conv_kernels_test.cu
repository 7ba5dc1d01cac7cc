// Device test of the CUDA prelude's convolution and pooling launchers
// (compiler/codegen/cuda/prelude/conv_kernels.cuh: launch_conv2d's forward,
// input gradient and weight gradient; launch_pool2d's max / avg and their
// gradients) against a float64 CPU reference written independently here:
// the gradients in scatter form (each (output, tap) pair adds to the dx and
// dw elements it touched), where the kernels gather.
//
//   conv_kernels_test [--seed N] [--bench]
//   cudnn_conv_test [--seed N] [--bench]   (the same cases through cuDNN's
//       convolutions, compiler/codegen/cuda/cudnn/, NHWC ones too: built
//       with TCC_CUDNN_CONV_TEST and the cuDNN unit; f64 cases and the
//       pooling stay on tcc's kernels; exit 77 without cuDNN)
//
// Inputs are fresh random numbers every run (uniform in [-1, 1], rounded to
// the element type; the reference reads the rounded values exactly; one
// pooling case on a grid of 1/4 so that windows hold ties and the first
// maximum matters); the seed is printed and --seed N reproduces a run.
// Outputs are poisoned with 0xFF bytes (NaN) before each launch, so an
// element never written fails. Every launch runs twice: bit-identical
// results (no atomics). Exit 0 when every case passes, 1 on any failure,
// 77 (skipped) without a GPU. --bench times a few layer shapes and prints
// ms and TFLOP/s per product.
//
// Cases: stride 1 and 2 (also per axis), padding, dilation 2, groups 2,
// depthwise (groups = channels), 1x1 with stride 1 and 2, a 5x3 kernel,
// f32, bf16 and f64. Each also channels-last (Conv2dShape::nhwc,
// Pool2dShape::nhwc_channels) on the same data transposed, against the
// reference transposed and, bit for bit, against the NCHW launch's result
// transposed (tcc's kernels promise the same terms in the same order; not
// checked for cuDNN). Pooling adds ReLU'd inputs (half zeros: ties) on
// ResNet's stem pool with 64 channels. The max-pool gradient's band
// kernels (NCHW and NHWC) run multi-band and one-row bands, NHWC channel
// chunks of 32, 20 (C = 40), 17 + 16 (C = 33) and 3, and the per-element
// fallback where one row's windows overflow 48 KiB. Tolerance per tensor:
// max |got - want| / max |want|: 5e-5 for f32 (f32 sums of <= 8192 terms
// in any order), 1e-12 for f64, 2^-7 for bf16 outputs (one rounding plus
// f32 sums).
#include "compiler/codegen/cuda/cuda_prelude.cuh" // generated: the pieces, concatenated
#ifdef TCC_CUDNN_CONV_TEST
#include "compiler/codegen/cuda/cudnn/cudnn_attention.h"
#endif

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "tests/cuda/device_buffer.cuh"

using tcc_cuda::bf16;
using tcc_cuda::Conv2dShape;
using tcc_cuda::Pool2dShape;

namespace {

uint64_t gSeed = 0;
int gFailures = 0;
int gCases = 0;

using tcc_cuda_test::Host;
using tcc_cuda_test::widen;

// Tolerance per tensor (max |got - want| / max |want|).
template <class T> double tolerance();
// f32 sums of up to 8192 terms in the kernel's or cuDNN engine's order
// (cuDNN's f32 weight gradient: 1.3e-5 on the H200).
template <> double tolerance<float>() { return 5e-5; }
template <> double tolerance<double>() { return 1e-12; }
template <> double tolerance<bf16>() { return 1.0 / 128; }

// Random values rounded to T (grid > 0: multiples of 1 / grid).
template <class T>
std::vector<T> randomValues(std::mt19937_64 &rng, int64_t n, int grid = 0) {
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<T> v(static_cast<size_t>(n));
  for (T &x : v) {
    double d = u(rng);
    if (grid > 0)
      d = std::round(d * grid) / grid;
    x = Host<T>::make(d);
  }
  return v;
}

// (N, C, H, W) -> (N, H, W, C); a weight (O, C / g, KH, KW) -> (O, KH, KW,
// C / g) likewise (n = O, c = C / g).
template <class V>
std::vector<V> toNhwc(const std::vector<V> &v, int64_t n, int64_t c, int64_t h, int64_t w) {
  std::vector<V> t(v.size());
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x)
          t[((b * h + y) * w + x) * c + ch] = v[((b * c + ch) * h + y) * w + x];
  return t;
}

template <class T> T *upload(const std::vector<T> &v) {
  T *d = nullptr;
  CUDA_CHECK(cudaMalloc(&d, v.size() * sizeof(T) + 1));
  CUDA_CHECK(cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

// Runs `launch` (writing n T's at out) twice on poisoned outputs; the first
// result, and whether the second was bit-identical.
template <class T, class Launch>
std::vector<T> runTwice(T *out, int64_t n, Launch launch, bool &same) {
  std::vector<T> first(static_cast<size_t>(n)), second(static_cast<size_t>(n));
  for (int r = 0; r < 2; ++r) {
    CUDA_CHECK(cudaMemset(out, 0xFF, n * sizeof(T)));
    CUDA_CHECK(launch());
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(r == 0 ? first.data() : second.data(), out, n * sizeof(T),
                          cudaMemcpyDeviceToHost));
  }
  same = std::memcmp(first.data(), second.data(), n * sizeof(T)) == 0;
  return first;
}

template <class T>
void check(const std::string &what, const std::vector<T> &got, const std::vector<double> &want,
           bool same) {
  ++gCases;
  double scale = 0, err = 0;
  bool finite = true;
  for (size_t i = 0; i < want.size(); ++i) {
    double g = Host<T>::get(got[i]);
    if (!std::isfinite(g) && std::isfinite(want[i]))
      finite = false;
    scale = std::max(scale, std::fabs(want[i]));
    if (std::isfinite(want[i]))
      err = std::max(err, std::fabs(g - want[i]));
  }
  double rel = scale > 0 ? err / scale : err;
  bool ok = finite && same && rel <= tolerance<T>();
  std::printf("%s %-64s rel err %.2e (tol %.1e)%s%s\n", ok ? "ok  " : "FAIL", what.c_str(), rel,
              tolerance<T>(), finite ? "" : " non-finite output",
              same ? "" : " NOT bit-identical on a second run");
  if (!ok)
    ++gFailures;
}

// An NHWC result against the NCHW launch's result transposed: the same
// bits (the same terms, in the same order, per element).
template <class T>
void checkSameBits(const std::string &what, const std::vector<T> &got,
                   const std::vector<T> &nchwTransposed) {
  ++gCases;
  int64_t differ = 0;
  for (size_t i = 0; i < got.size(); ++i)
    differ += std::memcmp(&got[i], &nchwTransposed[i], sizeof(T)) != 0;
  const bool ok = got.size() == nchwTransposed.size() && differ == 0;
  std::printf("%s %-64s %s", ok ? "ok  " : "FAIL", what.c_str(),
              ok ? "bits of NCHW's, transposed\n" : "");
  if (!ok) {
    std::printf("%ld of %zu elements differ from NCHW's, transposed\n", (long)differ,
                got.size());
    ++gFailures;
  }
}

struct ConvCase {
  int64_t n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, groups;
  Conv2dShape shape() const {
    int64_t ho = (h + 2 * ph - dh * (kh - 1) - 1) / sh + 1;
    int64_t wo = (w + 2 * pw - dw * (kw - 1) - 1) / sw + 1;
    return {n, c, h, w, o, kh, kw, ho, wo, sh, sw, ph, pw, dh, dw, groups};
  }
};

// float64 reference: y, and dx / dw scattered from every (output, tap).
void referenceConv(const Conv2dShape &s, const std::vector<double> &x,
                   const std::vector<double> &w, const std::vector<double> &dy,
                   std::vector<double> &y, std::vector<double> &dx, std::vector<double> &dw) {
  const int64_t cg = s.c / s.groups, og = s.o / s.groups;
  y.assign(s.n * s.o * s.ho * s.wo, 0.0);
  dx.assign(s.n * s.c * s.h * s.w, 0.0);
  dw.assign(s.o * cg * s.kh * s.kw, 0.0);
  for (int64_t b = 0; b < s.n; ++b)
    for (int64_t oc = 0; oc < s.o; ++oc)
      for (int64_t oy = 0; oy < s.ho; ++oy)
        for (int64_t ox = 0; ox < s.wo; ++ox) {
          const int64_t yi = ((b * s.o + oc) * s.ho + oy) * s.wo + ox;
          for (int64_t ci = 0; ci < cg; ++ci) {
            const int64_t ic = (oc / og) * cg + ci;
            for (int64_t ky = 0; ky < s.kh; ++ky)
              for (int64_t kx = 0; kx < s.kw; ++kx) {
                const int64_t iy = oy * s.sh - s.ph + ky * s.dh, ix = ox * s.sw - s.pw + kx * s.dw;
                if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w)
                  continue;
                const int64_t xi = ((b * s.c + ic) * s.h + iy) * s.w + ix;
                const int64_t wi = ((oc * cg + ci) * s.kh + ky) * s.kw + kx;
                y[yi] += x[xi] * w[wi];
                dx[xi] += dy[yi] * w[wi];
                dw[wi] += dy[yi] * x[xi];
              }
          }
        }
}

#ifdef TCC_CUDNN_CONV_TEST
// cuDNN's convolutions (compiler/codegen/cuda/cudnn/, tcc_cudnn::conv) on
// the same cases and reference: one plan per product, as a step builds
// them. A case cuDNN declines is printed (steps then run tcc's kernels).
template <class T> struct CudnnType;
template <> struct CudnnType<float> { static constexpr int value = 0; };
template <> struct CudnnType<bf16> { static constexpr int value = 1; };
template <> struct CudnnType<double> { static constexpr int value = -1; };
int gDeclined = 0;
constexpr const char *kImpl = "cudnn";

template <class T>
cudaError_t launchConv(int product, const Conv2dShape &s, const T *a, const T *b, T *out,
                       bool &declined) {
  declined = true;
  if (CudnnType<T>::value < 0)
    return cudaSuccess;
  tcc_cudnn::ConvSite site{product, CudnnType<T>::value, s.n, s.c, s.h, s.w, s.o, s.kh, s.kw,
                           s.ho, s.wo, s.sh, s.sw, s.ph, s.pw, s.dh, s.dw, s.groups,
                           s.nhwc ? 1 : 0};
  static std::vector<std::pair<std::string, tcc_cudnn::Plan>> plans; // built once per case
  char key[256], why[512] = "";
  std::snprintf(key, sizeof key,
                "%d %d %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %d", product,
                site.dtype, (long)s.n, (long)s.c, (long)s.h, (long)s.w, (long)s.o, (long)s.kh,
                (long)s.kw, (long)s.sh, (long)s.sw, (long)s.ph, (long)s.pw, (long)s.dh,
                (long)s.dw, (long)s.groups, (long)s.ho, (int)site.nhwc);
  tcc_cudnn::Plan *plan = nullptr;
  for (auto &p : plans)
    if (p.first == key)
      plan = &p.second;
  if (!plan) {
    tcc_cudnn::Plan fresh;
    // cuDNN's first choice, as a step takes where its planned workspace
    // holds it (prepare_conv_sites).
    if (tcc_cudnn::prepare_conv(site, -1, fresh, why, sizeof why) != 0) {
      std::printf("note cuDNN declines product %d of %s: %s\n", product, key, why);
      ++gDeclined;
      plans.push_back({key, tcc_cudnn::Plan{}});
      return cudaSuccess;
    }
    plans.push_back({key, fresh});
    plan = &plans.back().second;
  }
  if (!plan->graph)
    return cudaSuccess;
  declined = false;
  static void *ws = nullptr;
  static int64_t wsBytes = 0;
  if (plan->workspace_bytes > wsBytes) {
    if (ws)
      cudaFree(ws);
    wsBytes = plan->workspace_bytes;
    if (cudaError_t e = cudaMalloc(&ws, wsBytes); e != cudaSuccess)
      return e;
  }
  if (tcc_cudnn::conv(*plan, nullptr, a, b, out, ws, why, sizeof why) != 0) {
    std::printf("FAIL cuDNN convolution: %s\n", why);
    ++gFailures;
  }
  return cudaSuccess;
}
#else
constexpr const char *kImpl = "tcc";
template <class T>
cudaError_t launchConv(int product, const Conv2dShape &s, const T *a, const T *b, T *out,
                       bool &declined) {
  declined = false;
  return tcc_cuda::launch_conv2d<T>(product, s, a, b, out, nullptr);
}
#endif

// nhwc: also channels-last, on the same data and reference transposed.
template <class T> void runConv(std::mt19937_64 &rng, const ConvCase &cc, bool nhwc) {
  const Conv2dShape s = cc.shape();
  const int64_t xs = s.n * s.c * s.h * s.w, ws = s.o * (s.c / s.groups) * s.kh * s.kw,
                ys = s.n * s.o * s.ho * s.wo;
  std::vector<T> x = randomValues<T>(rng, xs), w = randomValues<T>(rng, ws),
                 dy = randomValues<T>(rng, ys);
  std::vector<double> y, dx, dw;
  referenceConv(s, widen(x), widen(w), widen(dy), y, dx, dw);
  T *dX = upload(x), *dW = upload(w), *dDy = upload(dy);
  T *out = nullptr;
  CUDA_CHECK(cudaMalloc(&out, std::max({xs, ws, ys}) * sizeof(T)));
  char name[200];
  std::snprintf(name, sizeof name, "%s x%ldx%ldx%ldx%ld w%ldx%ldx%ldx%ld s%ld,%ld p%ld,%ld d%ld,%ld g%ld",
                Host<T>::name(), (long)s.n, (long)s.c, (long)s.h, (long)s.w, (long)s.o,
                (long)(s.c / s.groups), (long)s.kh, (long)s.kw, (long)s.sh, (long)s.sw,
                (long)s.ph, (long)s.pw, (long)s.dh, (long)s.dw, (long)s.groups);
  bool same = false, declined = false;
  const char *what[] = {"conv forward     ", "conv input grad  ", "conv weight grad "};
  const T *aIn[] = {dX, dDy, dDy}, *bIn[] = {dW, dW, dX};
  const int64_t outSize[] = {ys, xs, ws};
  const std::vector<double> *want[] = {&y, &dx, &dw};
  std::vector<T> nchwGot[3];
  for (int p = 0; p < 3; ++p) {
    std::vector<T> got = runTwice(out, outSize[p], [&] {
      return launchConv<T>(p, s, aIn[p], bIn[p], out, declined);
    }, same);
    if (!declined)
      check(std::string(what[p]) + name, got, *want[p], same);
    nchwGot[p] = got;
  }
  if (nhwc) {
    // Outputs y (N, O, HO, WO), dx (N, C, H, W), dw (O, C / g, KH, KW).
    const int64_t cg = s.c / s.groups;
    const int64_t dims[3][4] = {
        {s.n, s.o, s.ho, s.wo}, {s.n, s.c, s.h, s.w}, {s.o, cg, s.kh, s.kw}};
    auto nhwcOf = [&](const auto &v, int p) {
      return toNhwc(v, dims[p][0], dims[p][1], dims[p][2], dims[p][3]);
    };
    Conv2dShape t = s;
    t.nhwc = true;
    T *tX = upload(nhwcOf(x, 1)), *tW = upload(nhwcOf(w, 2)), *tDy = upload(nhwcOf(dy, 0));
    const T *tA[] = {tX, tDy, tDy}, *tB[] = {tW, tW, tX};
    for (int p = 0; p < 3; ++p) {
      std::vector<T> got = runTwice(out, outSize[p], [&] {
        return launchConv<T>(p, t, tA[p], tB[p], out, declined);
      }, same);
      if (declined)
        continue;
      check(std::string(what[p]) + name + " NHWC", got, nhwcOf(*want[p], p), same);
#ifndef TCC_CUDNN_CONV_TEST
      checkSameBits(std::string(what[p]) + name + " NHWC", got, nhwcOf(nchwGot[p], p));
#endif
    }
    CUDA_CHECK(cudaFree(tX));
    CUDA_CHECK(cudaFree(tW));
    CUDA_CHECK(cudaFree(tDy));
  }
  CUDA_CHECK(cudaFree(dX));
  CUDA_CHECK(cudaFree(dW));
  CUDA_CHECK(cudaFree(dDy));
  CUDA_CHECK(cudaFree(out));
}

struct PoolCase {
  int64_t n, c, h, w, kh, kw, sh, sw, ph, pw;
  Pool2dShape shape() const {
    return {n * c, h, w, (h + 2 * ph - kh) / sh + 1, (w + 2 * pw - kw) / sw + 1, kh, kw, sh, sw,
            ph, pw};
  }
};

// float64 reference: y, and dx scattered from each window (max: to its
// first maximum in row-major order, padding never a candidate; avg: dy /
// (KH * KW) to each position inside x).
void referencePool(const Pool2dShape &s, bool avg, const std::vector<double> &x,
                   const std::vector<double> &dy, std::vector<double> &y,
                   std::vector<double> &dx) {
  y.assign(s.planes * s.ho * s.wo, 0.0);
  dx.assign(s.planes * s.h * s.w, 0.0);
  for (int64_t p = 0; p < s.planes; ++p)
    for (int64_t oy = 0; oy < s.ho; ++oy)
      for (int64_t ox = 0; ox < s.wo; ++ox) {
        const int64_t yi = (p * s.ho + oy) * s.wo + ox;
        double acc = avg ? 0.0 : -std::numeric_limits<double>::infinity();
        int64_t best = -1;
        for (int64_t ky = 0; ky < s.kh; ++ky)
          for (int64_t kx = 0; kx < s.kw; ++kx) {
            const int64_t iy = oy * s.sh - s.ph + ky, ix = ox * s.sw - s.pw + kx;
            if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w)
              continue;
            const int64_t xi = (p * s.h + iy) * s.w + ix;
            if (avg) {
              acc += x[xi];
              dx[xi] += dy[yi] / static_cast<double>(s.kh * s.kw);
            } else if (best < 0 || x[xi] > acc) {
              acc = x[xi];
              best = xi;
            }
          }
        y[yi] = avg ? acc / static_cast<double>(s.kh * s.kw) : acc;
        if (!avg && best >= 0)
          dx[best] += dy[yi];
      }
}

// relu: x = max(x, 0), half zeros (ties, as after a ReLU). nhwc: also
// channels-last, on the same data and reference transposed.
template <class T>
void runPool(std::mt19937_64 &rng, const PoolCase &pc, bool avg, int grid, bool nhwc,
             bool relu = false) {
  const Pool2dShape s = pc.shape();
  const int64_t xs = s.planes * s.h * s.w, ys = s.planes * s.ho * s.wo;
  std::vector<T> x = randomValues<T>(rng, xs, grid), dy = randomValues<T>(rng, ys);
  if (relu)
    for (T &v : x)
      v = Host<T>::make(std::max(Host<T>::get(v), 0.0));
  std::vector<double> y, dx;
  referencePool(s, avg, widen(x), widen(dy), y, dx);
  T *dX = upload(x), *dDy = upload(dy), *out = nullptr;
  CUDA_CHECK(cudaMalloc(&out, std::max(xs, ys) * sizeof(T)));
  char name[160];
  std::snprintf(name, sizeof name, "%s %s x%ldx%ldx%ldx%ld k%ld,%ld s%ld,%ld p%ld,%ld%s%s",
                Host<T>::name(), avg ? "avg" : "max", (long)pc.n, (long)pc.c, (long)s.h,
                (long)s.w, (long)s.kh, (long)s.kw, (long)s.sh, (long)s.sw, (long)s.ph,
                (long)s.pw, grid ? " (ties)" : "", relu ? " (relu)" : "");
  bool same = false;
  std::vector<T> fwd = runTwice(out, ys, [&] {
    return tcc_cuda::launch_pool2d<T>(avg ? 1 : 0, s, dX, static_cast<const T *>(nullptr), out,
                                      nullptr);
  }, same);
  check(std::string("pool forward     ") + name, fwd, y, same);
  std::vector<T> grad = runTwice(out, xs, [&] {
    return tcc_cuda::launch_pool2d<T>(avg ? 3 : 2, s, dX, dDy, out, nullptr);
  }, same);
  check(std::string("pool grad        ") + name, grad, dx, same);
  if (nhwc) {
    // x (N, C, H, W), y (N, C, HO, WO) -> channels-last.
    auto xOf = [&](const auto &v) { return toNhwc(v, pc.n, pc.c, s.h, s.w); };
    auto yOf = [&](const auto &v) { return toNhwc(v, pc.n, pc.c, s.ho, s.wo); };
    Pool2dShape t = s;
    t.nhwc_channels = pc.c;
    T *tX = upload(xOf(x)), *tDy = upload(yOf(dy));
    std::vector<T> got = runTwice(out, ys, [&] {
      return tcc_cuda::launch_pool2d<T>(avg ? 1 : 0, t, tX, static_cast<const T *>(nullptr),
                                        out, nullptr);
    }, same);
    check(std::string("pool forward     ") + name + " NHWC", got, yOf(y), same);
    checkSameBits(std::string("pool forward     ") + name + " NHWC", got, yOf(fwd));
    got = runTwice(out, xs, [&] {
      return tcc_cuda::launch_pool2d<T>(avg ? 3 : 2, t, tX, tDy, out, nullptr);
    }, same);
    check(std::string("pool grad        ") + name + " NHWC", got, xOf(dx), same);
    checkSameBits(std::string("pool grad        ") + name + " NHWC", got, xOf(grad));
    CUDA_CHECK(cudaFree(tX));
    CUDA_CHECK(cudaFree(tDy));
  }
  CUDA_CHECK(cudaFree(dX));
  CUDA_CHECK(cudaFree(dDy));
  CUDA_CHECK(cudaFree(out));
}

// Median ms of `launch` over 10 runs after 2 warm-ups.
template <class Launch> double timeMs(Launch launch) {
  cudaEvent_t a, b;
  CUDA_CHECK(cudaEventCreate(&a));
  CUDA_CHECK(cudaEventCreate(&b));
  std::vector<float> ms;
  for (int r = 0; r < 12; ++r) {
    CUDA_CHECK(cudaEventRecord(a));
    CUDA_CHECK(launch());
    CUDA_CHECK(cudaEventRecord(b));
    CUDA_CHECK(cudaEventSynchronize(b));
    float t = 0;
    CUDA_CHECK(cudaEventElapsedTime(&t, a, b));
    if (r >= 2)
      ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  CUDA_CHECK(cudaEventDestroy(a));
  CUDA_CHECK(cudaEventDestroy(b));
  return ms[ms.size() / 2];
}

template <class T> void bench(std::mt19937_64 &rng, const ConvCase &cc) {
  const Conv2dShape s = cc.shape();
  const int64_t xs = s.n * s.c * s.h * s.w, ws = s.o * (s.c / s.groups) * s.kh * s.kw,
                ys = s.n * s.o * s.ho * s.wo;
  T *dX = upload(randomValues<T>(rng, xs)), *dW = upload(randomValues<T>(rng, ws)),
    *dDy = upload(randomValues<T>(rng, ys)), *out = nullptr;
  CUDA_CHECK(cudaMalloc(&out, std::max({xs, ws, ys}) * sizeof(T)));
  const double flops = 2.0 * ys * (s.c / s.groups) * s.kh * s.kw;
  const char *names[] = {"forward", "input grad", "weight grad"};
  const T *a[] = {dX, dDy, dDy}, *b[] = {dW, dW, dX};
  for (int p = 0; p < 3; ++p) {
    bool declined = false;
    double ms = timeMs([&] { return launchConv<T>(p, s, a[p], b[p], out, declined); });
    if (declined)
      continue;
    std::printf("bench %s %s conv x%ldx%ldx%ldx%ld -> %ld, %ldx%ld s%ld g%ld %-11s %8.3f ms %6.2f TFLOP/s\n",
                kImpl, Host<T>::name(), (long)s.n, (long)s.c, (long)s.h, (long)s.w, (long)s.o,
                (long)s.kh, (long)s.kw, (long)s.sh, (long)s.groups, names[p], ms,
                flops / (ms * 1e-3) / 1e12);
  }
  CUDA_CHECK(cudaFree(dX));
  CUDA_CHECK(cudaFree(dW));
  CUDA_CHECK(cudaFree(dDy));
  CUDA_CHECK(cudaFree(out));
}

// Max pooling's gradient (by bands) on a ResNet stem shape, NCHW or
// channels-last: GB/s over the bytes it must move (x and dy read, dx
// written).
template <class T> void benchPoolGrad(std::mt19937_64 &rng, const PoolCase &pc, bool nhwc) {
  Pool2dShape s = pc.shape();
  if (nhwc)
    s.nhwc_channels = pc.c;
  const int64_t xs = s.planes * s.h * s.w, ys = s.planes * s.ho * s.wo;
  T *dX = upload(randomValues<T>(rng, xs)), *dDy = upload(randomValues<T>(rng, ys)),
    *out = nullptr;
  CUDA_CHECK(cudaMalloc(&out, xs * sizeof(T)));
  double ms = timeMs([&] { return tcc_cuda::launch_pool2d<T>(2, s, dX, dDy, out, nullptr); });
  std::printf("bench %s max-pool grad %s x%ldx%ldx%ldx%ld k%ld s%ld %8.3f ms %7.1f GB/s\n",
              Host<T>::name(), nhwc ? "NHWC" : "NCHW", (long)pc.n, (long)pc.c, (long)s.h,
              (long)s.w, (long)s.kh, (long)s.sh, ms,
              (2.0 * xs + ys) * sizeof(T) / (ms * 1e-3) / 1e9);
  CUDA_CHECK(cudaFree(dX));
  CUDA_CHECK(cudaFree(dDy));
  CUDA_CHECK(cudaFree(out));
}

} // namespace

int main(int argc, char **argv) {
  bool haveSeed = false, doBench = false;
  for (int a = 1; a < argc; ++a) {
    std::string arg = argv[a];
    if (arg == "--seed" && a + 1 < argc) {
      gSeed = std::strtoull(argv[++a], nullptr, 10);
      haveSeed = true;
    } else if (arg == "--bench") {
      doBench = true;
    } else {
      std::fprintf(stderr, "usage: conv_kernels_test [--seed N] [--bench]\n");
      return 2;
    }
  }
  int devices = 0;
  cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess || devices == 0) {
    std::printf("SKIP: no CUDA GPU (%s): conv_kernels_test needs one\n",
                err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
    return 77;
  }
#ifdef TCC_CUDNN_CONV_TEST
  {
    char why[512] = "";
    if (tcc_cudnn::load(TCC_CUDA_LIB_DIR, why, sizeof why) != 0) {
      std::printf("SKIP: cuDNN does not load (%s)\n", why);
      return 77;
    }
  }
#endif
  if (!haveSeed)
    gSeed = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  std::printf("seed %llu\n", static_cast<unsigned long long>(gSeed));
  std::mt19937_64 rng(gSeed);
  //                 n   c   h   w   o kh kw sh sw ph pw dh dw groups
  const ConvCase convs[] = {
      {2, 3, 9, 9, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1},       // RGB input layer, padding
      {2, 8, 16, 16, 16, 3, 3, 2, 2, 1, 1, 1, 1, 1},    // stride 2
      {2, 8, 13, 11, 8, 3, 3, 1, 1, 2, 2, 2, 2, 1},     // dilation 2
      {2, 8, 10, 10, 12, 3, 3, 1, 1, 1, 1, 1, 1, 2},    // groups 2
      {2, 16, 12, 12, 16, 3, 3, 1, 1, 1, 1, 1, 1, 16},  // depthwise
      {4, 16, 8, 8, 32, 1, 1, 2, 2, 0, 0, 1, 1, 1},     // 1x1, stride 2
      {2, 4, 7, 12, 6, 5, 3, 2, 1, 2, 1, 1, 2, 2},      // 5x3, per-axis stride / dilation
      {8, 32, 32, 32, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1},   // 8192 terms a weight-grad element
      {2, 24, 7, 7, 40, 1, 1, 1, 1, 0, 0, 1, 1, 1},     // 1x1 (a bottleneck's)
  };
  // Every case NCHW, then channels-last on the same data.
  for (const ConvCase &c : convs)
    runConv<float>(rng, c, true);
  for (int i : {0, 1, 2, 3, 4, 5, 6, 8})
    runConv<bf16>(rng, convs[i], true);
  runConv<double>(rng, convs[2], true);
  runConv<double>(rng, convs[6], true);
  //                 n  c   h   w kh kw sh sw ph pw
  const PoolCase pools[] = {
      {2, 3, 8, 8, 2, 2, 2, 2, 0, 0},
      {2, 4, 9, 7, 3, 3, 2, 2, 1, 1},
      {2, 4, 6, 6, 3, 3, 1, 1, 1, 1},
      {1, 5, 11, 13, 3, 2, 2, 3, 1, 0},
      // ResNet's stem pool: NCHW 7 bands of 18 rows; NHWC 3 bands of 48
      // rows (C = 3: one chunk of 3 channels)
      {2, 3, 112, 112, 3, 3, 2, 2, 1, 1},
      // rows of >= 2048: NCHW bands of one row; NHWC bands of 2 (f32: 48032
      // bytes of windows)
      {1, 2, 9, 3001, 3, 3, 2, 2, 1, 1},
      {1, 1, 5, 9000, 3, 3, 1, 1, 1, 1}, // one row's windows > 48 KiB: no bands
      // NHWC chunks of 20 channels; f32 bands of one row (3 window rows of
      // 100 x 20 x 8 bytes: 48000), bf16 bands of 2 (4 rows x 6 bytes)
      {2, 40, 6, 100, 3, 3, 1, 1, 1, 1},
      {2, 33, 15, 15, 3, 3, 2, 2, 1, 1}, // NHWC chunks of 17 and 16 channels
  };
  // Every case NCHW, then channels-last on the same data.
  for (const PoolCase &p : pools)
    for (bool avg : {false, true}) {
      runPool<float>(rng, p, avg, 0, true);
      runPool<bf16>(rng, p, avg, 0, true);
    }
  runPool<float>(rng, pools[1], false, 4, true); // ties: the first maximum takes dy
  runPool<float>(rng, pools[2], false, 4, true);
  runPool<float>(rng, pools[4], false, 4, true);
  runPool<double>(rng, pools[3], false, 0, true);
  runPool<double>(rng, pools[3], true, 0, true);
  runPool<float>(rng, pools[7], false, 4, true, true); // ties after a ReLU, C = 40
  // ResNet's stem pool after its ReLU, 64 channels: windows of zeros tie
  // (NHWC: 2 chunks of 32 channels, 28 bands of 4 rows).
  const PoolCase stem = {2, 64, 112, 112, 3, 3, 2, 2, 1, 1};
  runPool<float>(rng, stem, false, 0, true, true);
  runPool<bf16>(rng, stem, false, 0, true, true);
  runPool<float>(rng, stem, false, 4, true, true);
  runPool<float>(rng, stem, true, 0, true, true);
#ifdef TCC_CUDNN_CONV_TEST
  std::printf("cuDNN %s; %d products declined (tcc's kernels run those)\n", tcc_cudnn::version(),
              gDeclined);
#endif
  std::printf("%d of %d checks passed (seed %llu)\n", gCases - gFailures, gCases,
              static_cast<unsigned long long>(gSeed));
  if (doBench) {
    bench<float>(rng, {32, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1});
    bench<bf16>(rng, {32, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1});
    bench<float>(rng, {128, 32, 32, 32, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1});
    bench<float>(rng, {32, 128, 28, 28, 128, 3, 3, 1, 1, 1, 1, 1, 1, 128});
    const PoolCase resnetStem = {64, 64, 112, 112, 3, 3, 2, 2, 1, 1}; // ResNet-50, B64
    benchPoolGrad<bf16>(rng, resnetStem, false);
    benchPoolGrad<bf16>(rng, resnetStem, true);
    benchPoolGrad<bf16>(rng, {32, 32, 128, 128, 2, 2, 2, 2, 0, 0}, false); // the UNet's first pool
  }
  return gFailures ? 1 : 0;
}
