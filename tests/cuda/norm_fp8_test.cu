// Device test of the normalization cast to FP8 in one pass (prelude
// norm_fp8_*.cuh: launch_layer_norm_fp8_quantize, issue 37).
//
//   norm_fp8_test [--seed N] [--bench]
//
// Each case normalizes fresh random rows (uniform in [-1, 1] plus a per-row
// offset, a random weight, sometimes a bias) two ways: the unfused pair
// (launch_layer_norm into a 16-bit y, then launch_fp8_quantize_current or
// _delayed of y) and the fused launcher. The fused result must be the
// same, byte for byte: out and out_t, the scale and its inverse, the amax,
// saturated and flushed counts, and (delayed scaling) the whole scaling
// record after each of three casts (the first scales by its own amax, the
// next by the history). The dequantized bytes are also checked against a
// float64 norm: |out / scale - y| <= 2^-4 |y| (half an e4m3 ulp; 2^-3 for
// e5m2) + 2^-8 |y| (y's 16-bit rounding) + half the format's smallest
// subnormal / scale. Outputs are poisoned (0xFF) first, so a byte never
// written fails. Every band height (4, 8, 16, 32 rows) gives the same
// bytes. Exit 0 when every case passes, 1 on any failure, 77 without a GPU.
//
// Cases: RMSNorm of f32 rows into bf16 (LLaMA's residual stream: V = 4),
// 8192 x 2048 (the 1B decoder) and 1000 x 768 (rows % 32 != 0: a partial
// last band), 130 x 512 (rows % 4 != 0: the transposed bytes one by one);
// layer norm with a bias; bf16 rows (V = 8); e5m2; out only and out_t
// only; delayed scaling; a scale that saturates (the weight times 1e6 under
// a delayed scale taken from the smaller outputs before); and the refusals (a width
// that is not a multiple of V, a misaligned x: cudaErrorInvalidValue, no
// launch).
//
// --bench: at 8192 x 2048 (f32 x, bf16 y, e4m3, both layouts, delayed
// scaling as steps run it) the unfused pair against the fused launcher per
// band height, and against the row-major pass followed by
// launch_fp8_transpose (the norm backward cast's way to both layouts),
// whose row-major pass is also timed at smaller bands (more blocks):
// ms and GB/s of the bytes each must move.
#include "compiler/codegen/cuda/cuda_prelude.cuh" // generated: the pieces, concatenated
#include "tests/cuda/device_buffer.cuh"
#include "tests/cuda/fp8_test_support.cuh"
#include "tests/reference/norm_reference.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using tcc_cuda::bf16;
using tcc_cuda::e4m3;
using tcc_cuda::e5m2;
using tcc_cuda_test::DeviceBuffer;
using tcc_cuda_test::fail;
using tcc_cuda_test::Format;
using tcc_cuda_test::gFailures;
using tcc_cuda_test::decode;
using tcc_cuda_test::Host;
using tcc_cuda_test::randomRows;
using tcc_cuda_test::ScaleBlock;
using tcc_cuda_test::timeMs;
using tcc_cuda_test::widen;

namespace {

uint64_t gSeed = 0;
struct Options {
  bool plain = true, transposed = true, delayed = false, bias = false, rms = true;
  double weightScale = 1.0; // the third delayed cast's weight times this (y scales with it)
};

// One case: x (rows x c of T), y of Y, cast to F8; the fused launcher at
// every band against the unfused pair, then against float64.
template <class T, class Y, class F8>
void runCase(std::mt19937_64 &rng, int64_t rows, int64_t c, const Options &o) {
  const std::string what = std::string(o.rms ? "rms" : "layer") + " norm " + Host<T>::name() +
                           " -> " + Host<Y>::name() + " -> " + Format<F8>::name() + " " +
                           std::to_string(rows) + "x" + std::to_string(c) +
                           (o.plain ? "" : " (out_t only)") + (o.transposed ? "" : " (out only)") +
                           (o.delayed ? " delayed" : " current") + (o.bias ? " bias" : "") +
                           (o.weightScale != 1.0 ? " saturating" : "");
  const int64_t n = rows * c;
  DeviceBuffer<T> x(n), w(c), b(c);
  DeviceBuffer<Y> y(n);
  std::vector<T> hw = randomRows<T>(rng, 1, c, 1.0), hb = randomRows<T>(rng, 1, c, 0.5);
  w.upload(hw);
  b.upload(hb);
  const T *bias = o.bias ? b.p : nullptr;
  const double eps = 1e-5;
  // Unfused and fused outputs, records (delayed) and scale blocks.
  DeviceBuffer<F8> out0(n), outT0(n), out1(n), outT1(n);
  DeviceBuffer<tcc_cuda::Fp8ScalingRecord> rec0(1), rec1(1);
  CUDA_CHECK(cudaMemset(rec0.p, 0, sizeof(tcc_cuda::Fp8ScalingRecord)));
  CUDA_CHECK(cudaMemset(rec1.p, 0, sizeof(tcc_cuda::Fp8ScalingRecord)));
  ScaleBlock q0, q1;
  const int casts = o.delayed ? 3 : 1;
  std::vector<T> hx;
  for (int cast = 0; cast < casts; ++cast) {
    hx = randomRows<T>(rng, rows, c, 1.0);
    x.upload(hx);
    if (cast == 2 && o.weightScale != 1.0) {
      for (T &v : hw)
        v = Host<T>::make(Host<T>::get(v) * o.weightScale);
      w.upload(hw);
    }
    F8 *p0 = o.plain ? out0.p : nullptr, *t0 = o.transposed ? outT0.p : nullptr;
    F8 *p1 = o.plain ? out1.p : nullptr, *t1 = o.transposed ? outT1.p : nullptr;
    out0.poison();
    outT0.poison();
    y.poison();
    tcc_cuda::launch_layer_norm<T, Y>(x.p, w.p, bias, y.p, rows, c, eps, o.rms, 0);
    if (o.delayed)
      tcc_cuda::launch_fp8_quantize_delayed<Y, F8>(rows, c, y.p, p0, t0, q0.p(), rec0.p, 0);
    else
      tcc_cuda::launch_fp8_quantize_current<Y, F8>(rows, c, y.p, p0, t0, q0.p(), 0);
    CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<F8> want = out0.download(), wantT = outT0.download();
    const tcc_cuda::Fp8TensorScale wantQ = q0.get();
    std::vector<tcc_cuda::Fp8ScalingRecord> wantRecord = rec0.download();
    // The fused launcher at each band height, from the same record.
    std::vector<tcc_cuda::Fp8ScalingRecord> before = rec1.download();
    for (int band : {4, 8, 16, 32, 0}) {
      rec1.upload(before);
      out1.poison();
      outT1.poison();
      cudaError_t err = tcc_cuda::launch_layer_norm_fp8_quantize<T, Y, F8>(
          x.p, w.p, bias, rows, c, eps, o.rms, p1, t1, q1.p(), o.delayed ? rec1.p : nullptr, 0,
          band);
      if (err != cudaSuccess) {
        fail(what, std::string("band ") + std::to_string(band) + ": " + cudaGetErrorString(err));
        return;
      }
      CUDA_CHECK(cudaDeviceSynchronize());
      const std::string at = what + " cast " + std::to_string(cast + 1) + " band " +
                             std::to_string(band);
      const std::vector<F8> got = out1.download(), gotT = outT1.download();
      if (o.plain && std::memcmp(got.data(), want.data(), n) != 0)
        fail(at, "out differs from the unfused pair's bytes");
      if (o.transposed && std::memcmp(gotT.data(), wantT.data(), n) != 0)
        fail(at, "out_t differs from the unfused pair's bytes");
      if (std::string why = tcc_cuda_test::scaleDifference(q1.get(), wantQ); !why.empty())
        fail(at, why);
      if (o.delayed && std::memcmp(rec1.download().data(), wantRecord.data(),
                                   sizeof(tcc_cuda::Fp8ScalingRecord)) != 0)
        fail(at, "the scaling record differs from the unfused pair's");
    }
    if (o.weightScale != 1.0 && cast == 2 && wantQ.stats.overflows == 0)
      fail(what, "the saturating case saturated nothing");
  }
  // The last cast's bytes against a float64 norm of the same x.
  const std::vector<double> xd = widen(hx), wd = widen(hw), bd = widen(hb);
  const std::vector<double> none(n, 0.0);
  const tcc_test::NormReference ref =
      tcc_test::normReference(xd, none, &wd, o.bias ? &bd : nullptr, rows, c, eps, o.rms);
  const tcc_cuda::Fp8TensorScale q = q1.get();
  const double s = q.scale, top = tcc_cuda::Fp8Format<F8>::kMax;
  const std::vector<F8> got = out1.download(), gotT = outT1.download();
  double worst = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < c; ++j) {
      const double want = ref.y[r * c + j];
      if (std::fabs(want * s) > top * (1 + Format<F8>::kHalfUlp))
        continue; // saturated: counted, not compared
      const double bound =
          (Format<F8>::kHalfUlp + 1.0 / 256) * std::fabs(want) + Format<F8>::kSmallest / 2 / s;
      for (int layout = 0; layout < 2; ++layout) {
        if ((layout == 0 && !o.plain) || (layout == 1 && !o.transposed))
          continue;
        const uint8_t byte = layout == 0 ? got[r * c + j].bits : gotT[j * rows + r].bits;
        const double err = std::fabs(decode<F8>(byte) / s - want);
        worst = std::fmax(worst, err / bound);
        if (!(err <= bound)) {
          char why[200];
          std::snprintf(why, sizeof why, "%s[%lld][%lld] = %g, float64 %g (bound %g)",
                        layout == 0 ? "out" : "out_t", static_cast<long long>(r),
                        static_cast<long long>(j), decode<F8>(byte) / s, want, bound);
          fail(what, why);
          return;
        }
      }
    }
  std::printf("ok   %s: bytes, scale and statistics as the unfused pair at bands 4-32; "
              "worst error %.2f of the float64 bound\n",
              what.c_str(), worst);
}

// Shapes the fused launcher refuses: cudaErrorInvalidValue, nothing written.
void refusals() {
  DeviceBuffer<float> x(64 * 100 + 8), w(100);
  DeviceBuffer<e4m3> out(64 * 100);
  ScaleBlock q;
  out.poison();
  cudaError_t a = tcc_cuda::launch_layer_norm_fp8_quantize<float, bf16, e4m3>(
      x.p, w.p, nullptr, 64, 98, 1e-5, true, out.p, nullptr, q.p(), nullptr, 0);
  cudaError_t b = tcc_cuda::launch_layer_norm_fp8_quantize<float, bf16, e4m3>(
      x.p + 1, w.p, nullptr, 64, 100, 1e-5, true, out.p, nullptr, q.p(), nullptr, 0);
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<e4m3> h = out.download();
  bool untouched = true;
  for (const e4m3 &v : h)
    untouched &= v.bits == 0xFF;
  if (a != cudaErrorInvalidValue || b != cudaErrorInvalidValue || !untouched)
    fail("refusals", "a width not a multiple of 4 or a misaligned x was taken");
  else
    std::printf("ok   refusals: width 98 (not a multiple of V = 4) and a misaligned x\n");
}

void bench(std::mt19937_64 &rng) {
  const int64_t rows = 8192, c = 2048, n = rows * c;
  DeviceBuffer<float> x(n), w(c);
  DeviceBuffer<bf16> y(n);
  DeviceBuffer<e4m3> out(n), outT(n);
  DeviceBuffer<tcc_cuda::Fp8ScalingRecord> rec(1);
  ScaleBlock q;
  x.upload(randomRows<float>(rng, rows, c, 1.0));
  w.upload(randomRows<float>(rng, 1, c, 1.0));
  CUDA_CHECK(cudaMemset(rec.p, 0, sizeof(tcc_cuda::Fp8ScalingRecord)));
  // A first cast sets the record's scale: later ones are delayed casts.
  tcc_cuda::launch_layer_norm<float, bf16>(x.p, w.p, nullptr, y.p, rows, c, 1e-5, true, 0);
  tcc_cuda::launch_fp8_quantize_delayed<bf16, e4m3>(rows, c, y.p, out.p, outT.p, q.p(), rec.p, 0);
  CUDA_CHECK(cudaDeviceSynchronize());
  const double pairBytes = n * (4.0 + 2.0) + n * (2.0 + 2.0), fusedBytes = n * (4.0 + 2.0);
  const float norm = timeMs([&] {
    tcc_cuda::launch_layer_norm<float, bf16>(x.p, w.p, nullptr, y.p, rows, c, 1e-5, true, 0);
  });
  const float pair = timeMs([&] {
    tcc_cuda::launch_layer_norm<float, bf16>(x.p, w.p, nullptr, y.p, rows, c, 1e-5, true, 0);
    tcc_cuda::launch_fp8_quantize_delayed<bf16, e4m3>(rows, c, y.p, out.p, outT.p, q.p(), rec.p,
                                                      0);
  });
  std::printf("bench 8192x2048 f32 -> bf16 -> e4m3, delayed, both layouts:\n");
  std::printf("  rms_norm alone                 %.4f ms  %6.0f GB/s\n", norm,
              n * 6.0 / norm / 1e6);
  std::printf("  rms_norm + cast (unfused pair) %.4f ms  %6.0f GB/s\n", pair,
              pairBytes / pair / 1e6);
  for (int band : {4, 8, 16, 32}) {
    const float fused = timeMs([&] {
      tcc_cuda::launch_layer_norm_fp8_quantize<float, bf16, e4m3>(
          x.p, w.p, nullptr, rows, c, 1e-5, true, out.p, outT.p, q.p(), rec.p, 0, band);
    });
    std::printf("  fused, band %2d                 %.4f ms  %6.0f GB/s  (%.2fx the pair)\n", band,
                fused, fusedBytes / fused / 1e6, pair / fused);
  }
  // The other way to the transposed layout, which the norm backward's
  // cast takes (norm_fp8_launchers.cuh): the row-major bytes alone, then
  // launch_fp8_transpose of them.
  auto rowMajor = [&] {
    tcc_cuda::launch_layer_norm_fp8_quantize<float, bf16, e4m3>(
        x.p, w.p, nullptr, rows, c, 1e-5, true, out.p, nullptr, q.p(), rec.p, 0);
  };
  auto transpose = [&] { tcc_cuda::launch_fp8_transpose<e4m3>(rows, c, out.p, outT.p, 0); };
  const float alone = timeMs(rowMajor), moved = timeMs(transpose);
  const float split = timeMs([&] {
    rowMajor();
    transpose();
  });
  std::printf("  fused, row-major bytes only    %.4f ms  %6.0f GB/s\n", alone,
              n * 5.0 / alone / 1e6);
  // The row-major pass needs no band: a band only sets a block's rows
  // (the grid: rows / band blocks, at most kFp8GridBlocks).
  for (int band : {4, 8, 16}) {
    const float t = timeMs([&] {
      tcc_cuda::launch_layer_norm_fp8_quantize<float, bf16, e4m3>(
          x.p, w.p, nullptr, rows, c, 1e-5, true, out.p, nullptr, q.p(), rec.p, 0, band);
    });
    std::printf("  row-major bytes only, band %2d  %.4f ms  %6.0f GB/s\n", band, t,
                n * 5.0 / t / 1e6);
  }
  std::printf("  launch_fp8_transpose           %.4f ms  %6.0f GB/s\n", moved,
              n * 2.0 / moved / 1e6);
  std::printf("  the two                        %.4f ms  %6.0f GB/s  (%.2fx the pair)\n", split,
              fusedBytes / split / 1e6, pair / split);
}

} // namespace

int main(int argc, char **argv) {
  bool doBench = false;
  if (int code = tcc_cuda_test::startTest(argc, argv, "norm_fp8_test", gSeed, doBench); code >= 0)
    return code;
  std::mt19937_64 rng(gSeed);
  Options current, delayed, bias, plainOnly, transOnly, saturating;
  delayed.delayed = true;
  bias.bias = true;
  bias.rms = false;
  plainOnly.transposed = false;
  transOnly.plain = false;
  saturating.delayed = true;
  saturating.weightScale = 1e6;
  runCase<float, bf16, e4m3>(rng, 8192, 2048, current);
  runCase<float, bf16, e4m3>(rng, 8192, 2048, delayed);
  runCase<float, bf16, e4m3>(rng, 1000, 768, delayed);
  runCase<float, bf16, e4m3>(rng, 130, 512, current);
  runCase<float, bf16, e4m3>(rng, 300, 768, bias);
  runCase<bf16, bf16, e4m3>(rng, 300, 1024, current);
  runCase<float, bf16, e5m2>(rng, 300, 768, current);
  runCase<float, bf16, e4m3>(rng, 256, 512, plainOnly);
  runCase<float, bf16, e4m3>(rng, 256, 512, transOnly);
  runCase<float, bf16, e4m3>(rng, 512, 768, saturating);
  refusals();
  if (doBench)
    bench(rng);
  if (gFailures) {
    std::printf("FAIL: %d check(s) failed (seed %llu)\n", gFailures,
                static_cast<unsigned long long>(gSeed));
    return 1;
  }
  std::printf("PASS\n");
  return 0;
}
