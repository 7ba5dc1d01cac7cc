// Device test of the CUDA prelude's fused norm launchers
// (compiler/codegen/cuda/prelude/norm_*.cuh: launch_layer_norm,
// launch_layer_norm_backward) against a float64 CPU reference of the same
// math (y; dx, dweight, dbias). A standalone program like
// attention_kernels_test (no gtest).
//
//   norm_kernels_test [--seed N] [--bench]
//
// Inputs are fresh random numbers every run (uniform in [-1, 1] plus a
// per-row offset so the mean matters, rounded to the element type; the
// reference reads the rounded values exactly); the seed is printed and
// --seed N reproduces a run. Outputs are poisoned with 0xFF bytes (NaN in
// every type) before each launch, so an element never written fails.
// Exit 0 when every case passes, 1 on any failure, 77 (skipped) without a
// GPU. The backward runs three times, bit-identical: the defaults twice
// and with the grad row (and the addend's) read per chunk (cache_grad
// false; the addend asked of L2 ahead instead); cases of the shapes
// withFixed names run a fourth time compiled for the call (NormGradFixed,
// as tcc emits it), checked against the reference, and a NormGradFixed
// launch whose arguments disagree must be refused. --bench also times
// GPT-2's shapes (16384 x 768, x f32, y / grad bf16, the f32 residual
// gradient added) and prints ms and GB/s (bytes each launch must move /
// time) per variant, and the two backward kernels apart.
//
// Cases: layer and rms norm; x f32 or bf16; y f32 or bf16 (f32 x, the
// folded cast); grad bf16 or f32; weight and bias present or absent; widths
// 768, 100, 129 (scalar path: no multiple of the vector) and 2000 (beyond
// the registers' row cache, and fewer warps per backward block); a
// misaligned (offset by one element) x; dx plus a residual gradient (held
// in registers or read per chunk, both in one 2000-wide row); GPT-2's
// 16384 x 768 (512 parts, several rows per warp); dx also written as the
// other float type (the folded cast: bit-identical to dx converted on the
// host); dx's column sums (of dx or of the cast) against the reference's
// column sums and bit-identical across the three runs.
//
// Tolerance per tensor: max |got - want| / max |want|: 2e-5 for f32
// outputs (f32 sums of <= 2000 terms, then <= 512 parts), 2^-7 for bf16
// outputs (one rounding, half an ulp, plus the f32 math).
#include "compiler/codegen/cuda/cuda_prelude.cuh" // generated: the pieces, concatenated
#include "dialects/kern/NormWorkspace.h"
#include "tests/cuda/device_buffer.cuh"
#include "tests/reference/norm_reference.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

using tcc_cuda::bf16;
using tcc_cuda_test::DeviceBuffer;
using tcc_cuda_test::Host;
using tcc_cuda_test::randomRows;
using tcc_cuda_test::widen;

namespace {

uint64_t gSeed = 0;
int gFailures = 0;

template <class T> double tolerance() { return sizeof(T) == 2 ? 1.0 / 128 : 2e-5; }

template <class T>
void check(const std::string &what, const std::vector<T> &got, const std::vector<double> &want) {
  double maxWant = 0, maxErr = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    maxWant = std::max(maxWant, std::fabs(want[i]));
    double g = Host<T>::get(got[i]);
    double e = std::isfinite(g) ? std::fabs(g - want[i]) : INFINITY;
    maxErr = std::max(maxErr, e);
  }
  double rel = maxErr / std::max(maxWant, 1e-30);
  bool ok = rel <= tolerance<T>();
  if (!ok)
    ++gFailures;
  std::printf("%s %-58s rel err %.3g (tol %.3g)\n", ok ? "ok  " : "FAIL", what.c_str(), rel,
              tolerance<T>());
}

// The other float type: what a folded cast of dx converts to.
template <class T> using OtherFloat = typename std::conditional<sizeof(T) == 2, float, bf16>::type;

// dx converted to C on the host (the separate cast kernel's result):
// the folded cast must give exactly these bits.
template <class C, class T> std::vector<C> castOnHost(const std::vector<T> &dx) {
  std::vector<C> out(dx.size());
  for (size_t i = 0; i < dx.size(); ++i)
    out[i] = Host<C>::make(Host<T>::get(dx[i]));
  return out;
}

// What the backward adds up of dx besides (kern `sum`): nothing, dx's
// stored values (a sum of T), or the cast's (a sum of OtherFloat<T>).
enum class DxSum { none, stored, cast };

// Column sums `got` (c) of dx (rows, c) against the float64 reference's,
// each within U's rounding of the sum plus termTolerance of every term
// (relative to the column's sum of |dx|: the terms cancel).
template <class U>
void checkColumnSums(const std::string &what, const std::vector<U> &got,
                     const std::vector<double> &dx, int64_t rows, int64_t c,
                     double termTolerance) {
  double worst = 0; // the largest error / bound
  for (int64_t j = 0; j < c; ++j) {
    double want = 0, size = 0;
    for (int64_t r = 0; r < rows; ++r) {
      want += dx[r * c + j];
      size += std::fabs(dx[r * c + j]);
    }
    double g = Host<U>::get(got[j]);
    double bound = tolerance<U>() * std::fabs(want) + termTolerance * size + 1e-30;
    worst = std::max(worst, std::isfinite(g) ? std::fabs(g - want) / bound : INFINITY);
  }
  bool ok = worst <= 1;
  if (!ok)
    ++gFailures;
  std::printf("%s %-58s err / bound %.3g\n", ok ? "ok  " : "FAIL", what.c_str(), worst);
}

template <class F> struct FixedTag {
  using type = F;
};

// launch(FixedTag<NormGradFixed<...>>{}) for the cases the generated step's
// fixed calls are checked on (GPT-2's two at width 768, a scalar width 129,
// RMSNorm at 2000); false (nothing launched) for any other.
template <class L>
bool withFixed(int64_t c, bool dw, bool db, DxSum sum, bool rms, L &&launch) {
  using tcc_cuda::NormGradFixed;
  if (c == 768 && dw && db && sum == DxSum::none && !rms)
    return launch(FixedTag<NormGradFixed<768, true, true, false, false, false>>{}), true;
  if (c == 768 && dw && db && sum == DxSum::cast && !rms)
    return launch(FixedTag<NormGradFixed<768, true, true, true, true, false>>{}), true;
  if (c == 129 && !dw && !db && sum == DxSum::stored && !rms)
    return launch(FixedTag<NormGradFixed<129, false, false, true, false, false>>{}), true;
  if (c == 2000 && dw && !db && sum == DxSum::stored && rms)
    return launch(FixedTag<NormGradFixed<2000, true, false, true, false, true>>{}), true;
  return false;
}

// One case: x of T, y of Y, grad of G; castDx: dx also written as
// OtherFloat<T> (the folded cast), compared bit for bit with dx converted;
// sum: dx's column sums (of dx, or of the cast) written too.
template <class T, class Y, class G>
void runCase(std::mt19937_64 &rng, int64_t rows, int64_t c, bool rms, bool affine, int offset,
             bool residual = false, bool castDx = false, DxSum sum = DxSum::none) {
  using C = OtherFloat<T>;
  const double eps = 1e-5;
  char label[160];
  std::snprintf(label, sizeof label, "%s %lldx%lld x %s y %s grad %s%s%s%s%s%s%s",
                rms ? "rms" : "layer", static_cast<long long>(rows), static_cast<long long>(c),
                Host<T>::name(), Host<Y>::name(), Host<G>::name(), affine ? " affine" : "",
                offset ? " misaligned" : "", residual ? " plus" : "", castDx ? " cast " : "",
                castDx ? Host<C>::name() : "",
                sum == DxSum::none ? "" : sum == DxSum::stored ? " sum" : " sum-of-cast");
  std::vector<T> x = randomRows<T>(rng, rows, c), w = randomRows<T>(rng, 1, c),
                 b = randomRows<T>(rng, 1, c);
  std::vector<G> g = randomRows<G>(rng, rows, c);
  std::vector<T> addend = randomRows<T>(rng, rows, c);
  std::vector<double> wd = widen(w), bd = widen(b);
  bool bias = affine && !rms;
  tcc_test::NormReference ref = tcc_test::normReference(
      widen(x), widen(g), affine ? &wd : nullptr, bias ? &bd : nullptr, rows, c, eps, rms);
  if (residual)
    for (int64_t i = 0; i < rows * c; ++i)
      ref.dx[i] += Host<T>::get(addend[i]);
  DeviceBuffer<T> dA(rows * c, offset), dX(rows * c, offset), dW(c), dB(c), dDx(rows * c, offset), dDw(c), dDb(c);
  DeviceBuffer<Y> dY(rows * c, offset);
  DeviceBuffer<C> dCast(rows * c, offset);
  DeviceBuffer<G> dG(rows * c, offset);
  int64_t parts = tcc::kern::normGradParts(rows);
  DeviceBuffer<tcc_cuda::acc_t<T>> ws(parts * tcc::kern::normGradSlots(sum != DxSum::none) * c);
  DeviceBuffer<T> dSum(c);
  DeviceBuffer<C> dCastSum(c);
  dX.upload(x);
  dW.upload(w);
  dB.upload(b);
  dG.upload(g);
  dA.upload(addend);
  dY.poison();
  tcc_cuda::launch_layer_norm<T, Y>(dX.p, affine ? dW.p : nullptr, bias ? dB.p : nullptr, dY.p,
                                    rows, c, eps, rms, 0);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
  check(std::string(label) + ": y", dY.download(), ref.y);

  std::vector<T> first[3];
  std::vector<T> firstSum;
  std::vector<C> firstCastSum;
  // Same arithmetic in the same order in every variant: all bit-identical,
  // but the one compiled for the call (NormGradFixed), which is checked
  // against the reference instead: with its constants nvcc may schedule
  // and contract (FMA) the same sums differently. On an H100 (2026-12-06)
  // the f32-grad cases differed in their last bits, the bf16-grad ones
  // (GPT-2's) did not.
  struct Variant {
    bool cacheGrad;
    const char *name;
    bool fixed = false; // through withFixed (skipped for cases it has none for)
  };
  const Variant variants[] = {{true, "defaults"},
                              {true, "defaults again"},
                              {false, "grad (and addend) read per chunk"},
                              {true, "compiled for the call (NormGradFixed)", true}};
  for (int run = 0; run < static_cast<int>(sizeof variants / sizeof variants[0]); ++run) {
    dDx.poison();
    dDw.poison();
    dDb.poison();
    dCast.poison();
    dSum.poison();
    dCastSum.poison();
    const bool sums = affine || bias || sum != DxSum::none;
    // The launch every variant makes, compiled for FixedTag's type.
    auto launch = [&](auto tag, bool cacheGrad) {
      using Fixed = typename decltype(tag)::type;
      if (sum == DxSum::cast)
        CUDA_CHECK((tcc_cuda::launch_layer_norm_backward<G, T, Fixed>(
            dG.p, dX.p, affine ? dW.p : nullptr, residual ? dA.p : nullptr, dDx.p, dCast.p,
            affine ? dDw.p : nullptr, bias ? dDb.p : nullptr, dCastSum.p, true, ws.p, parts,
            rows, c, eps, rms, 0, cacheGrad)));
      else
        CUDA_CHECK((tcc_cuda::launch_layer_norm_backward<G, T, Fixed>(
            dG.p, dX.p, affine ? dW.p : nullptr, residual ? dA.p : nullptr, dDx.p,
            castDx ? dCast.p : static_cast<C *>(nullptr), affine ? dDw.p : nullptr,
            bias ? dDb.p : nullptr, sum == DxSum::stored ? dSum.p : static_cast<T *>(nullptr),
            false, sums ? ws.p : nullptr, parts, rows, c, eps, rms, 0, cacheGrad)));
    };
    if (variants[run].fixed) {
      if (!withFixed(c, affine, bias, sum, rms, [&](auto tag) { launch(tag, true); }))
        continue;
    } else {
      launch(FixedTag<tcc_cuda::detail::NormGradRuntime>{}, variants[run].cacheGrad);
    }
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<T> got[3] = {dDx.download(), dDw.download(), dDb.download()};
    if (sum != DxSum::none) {
      std::vector<T> gotSum = dSum.download();
      std::vector<C> gotCastSum = dCastSum.download();
      if (run == 0 || variants[run].fixed) {
        const std::string what = std::string(label) + (variants[run].fixed ? " fixed" : "");
        if (sum == DxSum::stored)
          checkColumnSums(what + ": dx column sum", gotSum, ref.dx, rows, c, tolerance<T>());
        else
          checkColumnSums(what + ": dx cast column sum", gotCastSum, ref.dx, rows, c,
                          tolerance<T>() + tolerance<C>());
        if (run == 0) {
          firstSum = gotSum;
          firstCastSum = gotCastSum;
        }
      } else {
        bool same = sum == DxSum::stored
                        ? std::memcmp(firstSum.data(), gotSum.data(), c * sizeof(T)) == 0
                        : std::memcmp(firstCastSum.data(), gotCastSum.data(),
                                      c * sizeof(C)) == 0;
        if (!same)
          ++gFailures;
        std::printf("%s %-58s column sum bit-identical: %s\n", same ? "ok  " : "FAIL", label,
                    variants[run].name);
      }
    }
    if (castDx) {
      std::vector<C> want = castOnHost<C>(got[0]), cast = dCast.download();
      bool same = std::memcmp(want.data(), cast.data(), want.size() * sizeof(C)) == 0;
      if (!same)
        ++gFailures;
      std::printf("%s %-58s dx cast: %s\n", same ? "ok  " : "FAIL", label,
                  same ? "the bits of dx converted" : "differs from dx converted");
    }
    if (run == 0 || variants[run].fixed) {
      const std::string what = std::string(label) + (variants[run].fixed ? " fixed" : "");
      check(what + ": dx", got[0], ref.dx);
      if (affine)
        check(what + ": dweight", got[1], ref.dw);
      if (bias)
        check(what + ": dbias", got[2], ref.db);
      if (run == 0)
        for (int k = 0; k < 3; ++k)
          first[k] = got[k];
    } else {
      const bool compared[3] = {true, affine, bias};
      bool same = true;
      for (int k = 0; k < 3; ++k)
        if (compared[k])
          same = same && std::memcmp(first[k].data(), got[k].data(),
                                     got[k].size() * sizeof(T)) == 0;
      if (!same)
        ++gFailures;
      std::printf("%s %-58s bit-identical: %s\n", same ? "ok  " : "FAIL", label,
                  variants[run].name);
    }
  }
}

// ms and GB/s of GPT-2's shapes (B 16 x T 1024 rows of C 768): the
// forward x f32 -> y bf16 with weight and bias (25 per step), the backward
// grad bf16, x f32 -> dx f32, dweight, dbias plus a distinct f32 residual
// gradient (24 per step) and without it (ln_f, 1 per step). Bytes: each
// tensor once, plus the workspace written and read.
// Also (rows 8192, c 2048) the 1B LLaMA-style decoder's RMSNorm backward
// (bench/fp8: B 4 x T 2048 rows of C 2048): grad bf16, x f32 -> dx f32
// plus the f32 residual gradient, also cast to bf16 (39 per step), dweight
// only (no bias sum: one shared-memory slice per warp).
void bench(int64_t rows, int64_t c) {
  std::mt19937_64 rng(gSeed);
  std::vector<float> x = randomRows<float>(rng, rows, c), w = randomRows<float>(rng, 1, c),
                     a = randomRows<float>(rng, rows, c);
  std::vector<bf16> g = randomRows<bf16>(rng, rows, c);
  DeviceBuffer<float> dX(rows * c), dA(rows * c), dW(c), dB(c), dDx(rows * c), dDw(c), dDb(c);
  DeviceBuffer<bf16> dY(rows * c), dG(rows * c), dCastSum(c);
  const int64_t parts = tcc::kern::normGradParts(rows);
  const int64_t maxSweptParts = 1024; // the parts sweep below
  DeviceBuffer<float> ws(std::max(parts, maxSweptParts) * 3 * c);
  dX.upload(x);
  dA.upload(a);
  dW.upload(w);
  dB.upload(w);
  dG.upload(g);
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  const int iters = 200;
  auto time = [&](auto &&launch) {
    for (int i = 0; i < 10; ++i)
      launch();
    CUDA_CHECK(cudaEventRecord(start));
    for (int i = 0; i < iters; ++i)
      launch();
    CUDA_CHECK(cudaEventRecord(stop));
    CUDA_CHECK(cudaEventSynchronize(stop));
    CUDA_CHECK(cudaGetLastError());
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    return static_cast<double>(ms) / iters;
  };
  const double n = static_cast<double>(rows) * c, wsBytes = 2.0 * parts * 2 * c * 4;
  auto report = [&](const char *what, double ms, double bytes) {
    std::printf("bench %lldx%lld %-62s %.4f ms %6.1f MB %5.0f GB/s\n",
                static_cast<long long>(rows), static_cast<long long>(c), what, ms, bytes / 1e6,
                bytes / (ms * 1e-3) / 1e9);
  };
  DeviceBuffer<bf16> dCast(rows * c);
  if (c == 2048) {
    report("rms backward + residual, dx also cast to bf16, dweight", time([&] {
             CUDA_CHECK((tcc_cuda::launch_layer_norm_backward<bf16, float>(
                 dG.p, dX.p, dW.p, dA.p, dDx.p, dCast.p, dDw.p, static_cast<float *>(nullptr),
                 static_cast<float *>(nullptr), false, ws.p, parts, rows, c, 1e-6, true, 0)));
           }),
           n * (2 + 4 + 4 + 4 + 2) + wsBytes);
    report("  the same compiled for the call (NormGradFixed, as tcc emits it)", time([&] {
             CUDA_CHECK((tcc_cuda::launch_layer_norm_backward<
                         bf16, float,
                         tcc_cuda::NormGradFixed<2048, true, false, false, false, true>>(
                 dG.p, dX.p, dW.p, dA.p, dDx.p, dCast.p, dDw.p, static_cast<float *>(nullptr),
                 static_cast<float *>(nullptr), false, ws.p, parts, rows, c, 1e-6, true, 0)));
           }),
           n * (2 + 4 + 4 + 4 + 2) + wsBytes);
    return;
  }
  report("forward x f32 -> y bf16, weight, bias", time([&] {
           tcc_cuda::launch_layer_norm<float, bf16>(dX.p, dW.p, dB.p, dY.p, rows, c, 1e-5, false,
                                                    0);
         }),
         n * (4 + 2));
  auto backward = [&](const float *addend, bool sums, bool cacheGrad, bool cast = false,
                      bool castSum = false, int64_t useParts = 0) {
    return time([&] {
      CUDA_CHECK((tcc_cuda::launch_layer_norm_backward<bf16, float>(
          dG.p, dX.p, dW.p, addend, dDx.p, cast ? dCast.p : static_cast<bf16 *>(nullptr),
          sums ? dDw.p : nullptr, sums ? dDb.p : nullptr,
          castSum ? dCastSum.p : static_cast<bf16 *>(nullptr), castSum,
          sums ? ws.p : nullptr, useParts ? useParts : parts, rows, c, 1e-5, false, 0,
          cacheGrad)));
    });
  };
  const double plain = n * (2 + 4 + 4) + wsBytes, plus = plain + n * 4;
  report("backward + residual (defaults: rows in registers)", backward(dA.p, true, true), plus);
  report("backward + residual, dx also cast to bf16", backward(dA.p, true, true, true),
         plus + n * 2);
  // GPT-2's residual-stream backward since the bias gradients moved here:
  // the cast's column sum too (a third part row).
  report("backward + residual, dx cast to bf16, the cast's column sum",
         backward(dA.p, true, true, true, true), plus + n * 2 + wsBytes / 2);
  // As the generated step calls it: compiled for width 768 and these sums.
  report("  the same compiled for the call (NormGradFixed, as tcc emits it)", time([&] {
           CUDA_CHECK((tcc_cuda::launch_layer_norm_backward<
                       bf16, float, tcc_cuda::NormGradFixed<768, true, true, true, true, false>>(
               dG.p, dX.p, dW.p, dA.p, dDx.p, dCast.p, dDw.p, dDb.p, dCastSum.p, true, ws.p,
               parts, rows, c, 1e-5, false, 0)));
         }),
         plus + n * 2 + wsBytes / 2);
  // The same with other part counts than normGradParts' (the backward runs
  // one block per part: 264 is one wave of two blocks per SM on a 132-SM
  // GPU), for choosing that constant; the workspace bytes scale with it.
  for (int64_t p : {int64_t{132}, int64_t{264}, int64_t{396}, maxSweptParts}) {
    char label[96];
    std::snprintf(label, sizeof label, "  the same with %lld parts", static_cast<long long>(p));
    report(label, backward(dA.p, true, true, true, true, p),
           plus - wsBytes + n * 2 + 1.5 * wsBytes * static_cast<double>(p) / parts);
  }

  report("backward + residual, grad and addend read per chunk", backward(dA.p, true, false),
         plus);
  report("backward, no residual (defaults)", backward(nullptr, true, true), plain);
  // The two kernels apart: dx alone (no weight or bias gradient: no
  // workspace), and the parts' sum alone.
  report("backward + residual, dx only (no sums)", backward(dA.p, false, true),
         plus - wsBytes);
  char sumLabel[64];
  std::snprintf(sumLabel, sizeof sumLabel, "sum of the %lld parts (second kernel alone)",
                static_cast<long long>(parts));
  report(sumLabel, time([&] {
           tcc_cuda::detail::layer_norm_sum_parts_kernel<float, float>
               <<<static_cast<unsigned>(tcc_cuda::grid_for(2 * c, 32)),
                  tcc_cuda::detail::kNormSumWarps * 32>>>(ws.p, parts, c, 2, dDw.p, dDb.p,
                                                          static_cast<float *>(nullptr));
         }),
         wsBytes / 2);
}

// A NormGradFixed launch whose arguments say otherwise (another row
// length, a sum it does not name, rms) is refused with
// cudaErrorInvalidValue before anything runs, never computed wrong.
void checkFixedMismatch() {
  const int64_t rows = 64, c = 768, parts = tcc::kern::normGradParts(rows);
  DeviceBuffer<float> dX(rows * c), dG(rows * c), dDx(rows * c), dW(c), dDw(c), dDb(c),
      ws(parts * 2 * c);
  using Fixed = tcc_cuda::NormGradFixed<768, true, true, false, false, false>;
  struct Case {
    const char *what;
    int64_t c;
    bool dbias, rms;
  };
  for (const Case &k : {Case{"another row length", 512, true, false},
                        Case{"no bias sum", c, false, false}, Case{"rms", c, true, true}}) {
    cudaError_t e = tcc_cuda::launch_layer_norm_backward<float, float, Fixed>(
        dG.p, dX.p, dW.p, static_cast<const float *>(nullptr), dDx.p,
        static_cast<float *>(nullptr), dDw.p, k.dbias ? dDb.p : nullptr,
        static_cast<float *>(nullptr), false, ws.p, parts, rows, k.c, 1e-5, k.rms, 0);
    const bool ok = e == cudaErrorInvalidValue;
    if (!ok)
      ++gFailures;
    std::printf("%s NormGradFixed<768, dweight, dbias> given %-32s %s\n", ok ? "ok  " : "FAIL",
                k.what, ok ? "refused" : cudaGetErrorString(e));
  }
  CUDA_CHECK(cudaGetLastError());
}

} // namespace

int main(int argc, char **argv) {
  bool doBench = false;
  if (int code = tcc_cuda_test::startTest(argc, argv, "norm_kernels_test", gSeed, doBench); code >= 0)
    return code;
  std::mt19937_64 rng(gSeed);
  for (int64_t c : {768, 100, 129, 2000}) {
    for (bool rms : {false, true}) {
      runCase<float, float, float>(rng, 300, c, rms, true, 0);
      runCase<float, bf16, bf16>(rng, 300, c, rms, true, 0);
      runCase<bf16, bf16, bf16>(rng, 300, c, rms, true, 0);
    }
    runCase<float, float, float>(rng, 77, c, false, false, 0);
  }
  runCase<float, bf16, bf16>(rng, 5000, 768, false, true, 0);
  runCase<float, float, bf16>(rng, 16384, 768, false, true, 0, /*residual=*/true);
  runCase<float, bf16, bf16>(rng, 300, 768, false, true, 0, /*residual=*/true);
  runCase<float, float, float>(rng, 300, 129, true, true, 0, /*residual=*/true);
  runCase<bf16, bf16, bf16>(rng, 300, 2000, false, false, 0, /*residual=*/true);
  // The addend cached for the row's first chunks, read for the rest.
  runCase<float, bf16, bf16>(rng, 300, 2000, false, true, 0, /*residual=*/true);
  // The folded cast of dx (f32 -> bf16 as GPT-2's residual gradient, and
  // bf16 -> f32), on the vector and scalar paths, with and without plus.
  runCase<float, float, bf16>(rng, 16384, 768, false, true, 0, /*residual=*/true, /*cast=*/true);
  runCase<float, bf16, bf16>(rng, 300, 768, false, true, 0, /*residual=*/false, /*cast=*/true);
  runCase<float, float, float>(rng, 300, 129, false, true, 0, /*residual=*/true, /*cast=*/true);
  runCase<bf16, bf16, bf16>(rng, 300, 2000, true, true, 0, /*residual=*/true, /*cast=*/true);
  runCase<float, bf16, bf16>(rng, 64, 768, false, true, 1, /*residual=*/false, /*cast=*/true);
  runCase<float, bf16, bf16>(rng, 64, 768, false, true, 1);
  runCase<float, float, float>(rng, 1, 768, false, true, 0);
  // dx's column sum (the bias gradient of the products writing the
  // residual stream): of the bf16 cast as GPT-2 (16384 x 768, 512 parts),
  // of dx itself, without weight / bias sums, scalar path, misaligned, and
  // at width 2000 (three slices: fewer warps per block).
  runCase<float, float, bf16>(rng, 16384, 768, false, true, 0, true, true, DxSum::cast);
  runCase<float, float, float>(rng, 300, 768, false, true, 0, true, false, DxSum::stored);
  runCase<float, float, float>(rng, 300, 129, false, false, 0, false, false, DxSum::stored);
  runCase<float, bf16, bf16>(rng, 64, 768, false, true, 1, true, true, DxSum::cast);
  runCase<bf16, bf16, bf16>(rng, 300, 2000, false, true, 0, true, true, DxSum::cast);
  runCase<float, float, float>(rng, 300, 2000, true, true, 0, true, false, DxSum::stored);
  // RMSNorm at the 1B decoder's width: dweight's slice only, 8 warps.
  runCase<float, float, bf16>(rng, 8192, 2048, true, true, 0, /*residual=*/true, /*cast=*/true);
  checkFixedMismatch();
  if (doBench) {
    bench(16384, 768);
    bench(8192, 2048);
  }
  std::printf("%s: %d failure(s)\n", gFailures ? "FAILED" : "PASSED", gFailures);
  return gFailures ? 1 : 0;
}
