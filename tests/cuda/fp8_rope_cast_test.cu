// Device test of the FP8 cast that applies rotary embeddings while it reads
// (prelude Fp8RopeSource, issue 37).
//
//   fp8_rope_cast_test [--seed N] [--bench]
//
// A packed (B*T x Cols) bf16 buffer as attention's backward leaves it: its
// v columns written, its q and k columns to be written by kern.rope from
// dq and dk (B, H, T, D). Each case runs two ways: the unfused step
// (launch_rope of each band into the buffer, then launch_fp8_quantize_delayed
// or _current of the whole buffer) and one cast whose Fp8RopeSource computes
// the bands from dq / dk (the fused buffer's band columns are poisoned
// first, so a byte read from them shows). The FP8 bytes (out and out_t),
// the scale and its inverse, the amax and the saturated and flushed counts,
// and (delayed scaling) the scaling record after each of three casts must be
// the same, byte for byte. The rope outputs the unfused step wrote are also
// checked against a float64 rotation: within bf16's rounding (2^-8
// relative) plus 2^-20 of the row's scale.
//
// Cases: the 1B decoder's backward (H16, D128: q and k bands transposed,
// delayed e5m2; a smaller T), GQA (8 q heads, 2 kv heads, D64), a forward
// (plain) band into e4m3 with current scaling, one band only (the other
// rope launched into the buffer first), and strides that are not multiples
// of 8 (the scalar cast).
//
// --bench: the 1B decoder's shape (8192 x 6144, D128, 16 + 16 heads; the
// rows are B4 x T2048): the two ropes and the cast against the fused cast,
// ms and GB/s of the bytes each must move, and the buffer's plain cast
// (the floor: no rotation).
#include "compiler/codegen/cuda/cuda_prelude.cuh" // generated: the pieces, concatenated
#include "tests/cuda/device_buffer.cuh"
#include "tests/cuda/fp8_test_support.cuh"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

using tcc_cuda::bf16;
using tcc_cuda::e4m3;
using tcc_cuda::e5m2;
using tcc_cuda::RopeStrides;
using tcc_cuda_test::DeviceBuffer;
using tcc_cuda_test::fail;
using tcc_cuda_test::Format;
using tcc_cuda_test::gFailures;
using tcc_cuda_test::sameBytes;
using tcc_cuda_test::Host;
using tcc_cuda_test::randomRows;
using tcc_cuda_test::ScaleBlock;
using tcc_cuda_test::timeMs;
using tcc_cuda_test::widen;

namespace {

uint64_t gSeed = 0;
// Cos / sin tables (T, D) of LLaMA's rotary angles, as float.
void ropeTables(int64_t t, int64_t d, std::vector<float> &cos, std::vector<float> &sin) {
  cos.resize(t * d);
  sin.resize(t * d);
  for (int64_t i = 0; i < t; ++i)
    for (int64_t j = 0; j < d; ++j) {
      const double angle = i * std::pow(10000.0, -2.0 * (j % (d / 2)) / d);
      cos[i * d + j] = static_cast<float>(std::cos(angle));
      sin[i * d + j] = static_cast<float>(std::sin(angle));
    }
}

// One band as the test builds it: x (B, heads, T, D) contiguous after
// `pad` elements, into columns [col, col + heads * D); `fused`: computed by
// the cast (else launched into the buffer as the unfused step does).
struct Band {
  int32_t col, heads;
  bool transposed, fused;
};

// A case: B x Positions rows of Cols columns, heads D wide; the columns no
// band covers hold random values (attention's dv).
template <class F8, int64_t Cols, int D, int64_t Positions, int N>
void runCase(std::mt19937_64 &rng, const std::string &name, int64_t batch,
             const Band (&bands)[N], bool delayed, int64_t pad) {
  using Src = tcc_cuda::Fp8RopeSource<bf16, float, Cols, D, Positions, N>;
  const std::string what = name + " -> " + Format<F8>::name() +
                           (delayed ? " delayed" : " current") + " (" + std::to_string(batch) +
                           "x" + std::to_string(Positions) + " rows of " + std::to_string(Cols) +
                           ")";
  const int64_t rows = batch * Positions, n = rows * Cols;
  std::vector<float> hcos, hsin;
  ropeTables(Positions, D, hcos, hsin);
  DeviceBuffer<float> cos(Positions * D), sin(Positions * D);
  cos.upload(hcos);
  sin.upload(hsin);
  std::vector<std::unique_ptr<DeviceBuffer<bf16>>> xs; // (DeviceBuffer frees in its destructor)
  for (const Band &band : bands)
    xs.push_back(std::make_unique<DeviceBuffer<bf16>>(pad + batch * band.heads * Positions * D));
  DeviceBuffer<bf16> buf0(n), buf1(n);
  DeviceBuffer<F8> out0(n), outT0(n), out1(n), outT1(n);
  DeviceBuffer<tcc_cuda::Fp8ScalingRecord> rec0(1), rec1(1);
  CUDA_CHECK(cudaMemset(rec0.p, 0, sizeof(tcc_cuda::Fp8ScalingRecord)));
  CUDA_CHECK(cudaMemset(rec1.p, 0, sizeof(tcc_cuda::Fp8ScalingRecord)));
  ScaleBlock q0, q1;
  std::vector<std::vector<bf16>> hx(N);
  std::vector<bf16> hbuf;
  for (int cast = 0; cast < (delayed ? 3 : 1); ++cast) {
    hbuf = randomRows<bf16>(rng, rows, Cols, 1e-3);
    for (int k = 0; k < N; ++k) {
      hx[k] = randomRows<bf16>(rng, 1, xs[k]->n, cast == 2 ? 3e-3 : 1e-3);
      xs[k]->upload(hx[k]);
    }
    buf0.upload(hbuf);
    buf1.upload(hbuf);
    Src src{buf1.p, {}};
    for (int k = 0; k < N; ++k) {
      const Band &band = bands[k];
      const RopeStrides xst{pad, band.heads * Positions * D, Positions * D, D};
      const RopeStrides os{band.col, Positions * Cols, D, Cols};
      src.band[k] = {xs[k]->p, xst, cos.p, sin.p, band.col, band.heads, band.transposed};
      // The unfused step: every band's rope into buf0; into buf1 only the
      // bands the cast does not compute (the others' columns poisoned).
      tcc_cuda::launch_rope<bf16, float>(xs[k]->p, xst, cos.p, sin.p, buf0.p, os, batch,
                                         band.heads, Positions, D, band.transposed, 0);
      if (!band.fused) {
        tcc_cuda::launch_rope<bf16, float>(xs[k]->p, xst, cos.p, sin.p, buf1.p, os, batch,
                                           band.heads, Positions, D, band.transposed, 0);
        src.band[k].heads = 0; // an empty band: its columns read from the buffer
      } else {
        for (int64_t r = 0; r < rows; ++r)
          CUDA_CHECK(cudaMemset(buf1.p + r * Cols + band.col, 0xFF, band.heads * D * 2));
      }
    }
    for (auto *o : {&out0, &outT0, &out1, &outT1})
      o->poison();
    if (delayed) {
      tcc_cuda::launch_fp8_quantize_delayed<bf16, F8>(rows, Cols, buf0.p, out0.p, outT0.p,
                                                      q0.p(), rec0.p, 0);
      tcc_cuda::launch_fp8_quantize_delayed<bf16, F8, Src>(rows, Cols, src, out1.p, outT1.p,
                                                           q1.p(), rec1.p, 0);
    } else {
      tcc_cuda::launch_fp8_quantize_current<bf16, F8>(rows, Cols, buf0.p, out0.p, outT0.p,
                                                      q0.p(), 0);
      tcc_cuda::launch_fp8_quantize_current<bf16, F8, Src>(rows, Cols, src, out1.p, outT1.p,
                                                           q1.p(), 0);
    }
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaDeviceSynchronize());
    const std::string at = what + " cast " + std::to_string(cast + 1);
    if (!sameBytes(out1.download(), out0.download()))
      fail(at, "out differs from the ropes and cast's bytes");
    if (!sameBytes(outT1.download(), outT0.download()))
      fail(at, "out_t differs from the ropes and cast's bytes");
    const tcc_cuda::Fp8TensorScale wantQ = q0.get();
    if (std::string why = tcc_cuda_test::scaleDifference(q1.get(), wantQ); !why.empty())
      fail(at, why);
    if (delayed && !sameBytes(rec1.download(), rec0.download()))
      fail(at, "the scaling record differs from the unfused cast's");
  }
  // The last cast's rotated columns (the unfused step's) against float64.
  const std::vector<bf16> got = buf0.download();
  double worst = 0;
  for (int k = 0; k < N; ++k) {
    const Band &band = bands[k];
    const std::vector<double> x = widen(hx[k]);
    const int64_t h = D / 2;
    for (int64_t bi = 0; bi < batch; ++bi)
      for (int64_t hh = 0; hh < band.heads; ++hh)
        for (int64_t i = 0; i < Positions; ++i) {
          const double *row = &x[pad + ((bi * band.heads + hh) * Positions + i) * D];
          double scale = 0;
          for (int64_t j = 0; j < D; ++j)
            scale = std::fmax(scale, std::fabs(row[j]));
          for (int64_t j = 0; j < D; ++j) {
            const bool first = j < h;
            const double own = row[j], partner = row[first ? j + h : j - h];
            const double c = hcos[i * D + j];
            // sin at the element (plain) or at its partner (transposed).
            const double s = hsin[i * D + (band.transposed ? (first ? j + h : j - h) : j)];
            const double want = own * c + ((first != band.transposed) ? -1 : 1) * partner * s;
            const double have = Host<bf16>::get(got[(bi * Positions + i) * Cols + band.col +
                                                         hh * D + j]);
            const double bound = std::fabs(want) / 256 + scale / 1048576;
            worst = std::fmax(worst, std::fabs(have - want) / bound);
            if (!(std::fabs(have - want) <= bound)) {
              char why[200];
              std::snprintf(why, sizeof why, "rope of band %d at (%lld, %lld, %lld, %lld) = %g, "
                            "float64 %g", k, static_cast<long long>(bi),
                            static_cast<long long>(hh), static_cast<long long>(i),
                            static_cast<long long>(j), have, want);
              fail(what, why);
              return;
            }
          }
        }
  }
  std::printf("ok   %s: bytes, scale and statistics as the ropes and cast; rope worst %.2f of "
              "the float64 bound\n",
              what.c_str(), worst);
}

void bench(std::mt19937_64 &rng) {
  constexpr int64_t Cols = 6144, Positions = 2048;
  constexpr int D = 128;
  const int64_t batch = 4, heads = 16, rows = batch * Positions, n = rows * Cols;
  using Src = tcc_cuda::Fp8RopeSource<bf16, float, Cols, D, Positions, 2>;
  std::vector<float> hcos, hsin;
  ropeTables(Positions, D, hcos, hsin);
  DeviceBuffer<float> cos(Positions * D), sin(Positions * D);
  cos.upload(hcos);
  sin.upload(hsin);
  DeviceBuffer<bf16> dq(batch * heads * Positions * D), dk(batch * heads * Positions * D), buf(n);
  dq.upload(randomRows<bf16>(rng, 1, dq.n, 1e-3));
  dk.upload(randomRows<bf16>(rng, 1, dk.n, 1e-3));
  buf.upload(randomRows<bf16>(rng, rows, Cols, 1e-3));
  DeviceBuffer<e5m2> out(n), outT(n);
  DeviceBuffer<tcc_cuda::Fp8ScalingRecord> rec(1);
  CUDA_CHECK(cudaMemset(rec.p, 0, sizeof(tcc_cuda::Fp8ScalingRecord)));
  ScaleBlock q;
  const RopeStrides xst{0, heads * Positions * D, Positions * D, D};
  const RopeStrides qs{0, Positions * Cols, D, Cols}, ks{heads * D, Positions * Cols, D, Cols};
  auto unfused = [&] {
    tcc_cuda::launch_rope<bf16, float>(dk.p, xst, cos.p, sin.p, buf.p, ks, batch, heads,
                                       Positions, D, true, 0);
    tcc_cuda::launch_rope<bf16, float>(dq.p, xst, cos.p, sin.p, buf.p, qs, batch, heads,
                                       Positions, D, true, 0);
    tcc_cuda::launch_fp8_quantize_delayed<bf16, e5m2>(rows, Cols, buf.p, out.p, outT.p, q.p(),
                                                      rec.p, 0);
  };
  const Src src{buf.p,
                {{dq.p, xst, cos.p, sin.p, 0, static_cast<int32_t>(heads), true},
                 {dk.p, xst, cos.p, sin.p, static_cast<int32_t>(heads * D),
                  static_cast<int32_t>(heads), true}}};
  unfused(); // a first cast sets the record's scale: later ones are delayed casts
  CUDA_CHECK(cudaDeviceSynchronize());
  const float tUnfused = timeMs(unfused);
  const float tFused = timeMs([&] {
    tcc_cuda::launch_fp8_quantize_delayed<bf16, e5m2, Src>(rows, Cols, src, out.p, outT.p, q.p(),
                                                           rec.p, 0);
  });
  // Bytes each must move: the ropes read dq, dk and write their columns
  // (2 bytes each way), the cast reads the buffer (2) and writes both FP8
  // layouts (1 + 1); fused: dq, dk and dv read once, the two layouts.
  const double bandBytes = 2.0 * rows * heads * D * 2;
  const double unfusedBytes = 2 * bandBytes + n * (2.0 + 2.0), fusedBytes = n * (2.0 + 2.0);
  std::printf("bench 8192x6144 (B4 T2048, q and k 16 heads of 128, v), bf16 -> e5m2, delayed, "
              "both layouts:\n");
  std::printf("  two ropes + cast  %.4f ms  %6.0f GB/s\n", tUnfused,
              unfusedBytes / tUnfused / 1e6);
  std::printf("  fused cast        %.4f ms  %6.0f GB/s  (%.2fx)\n", tFused,
              fusedBytes / tFused / 1e6, tUnfused / tFused);
  // The floor: the cast of the buffer alone (no rotation).
  const float tPlain = timeMs([&] {
    tcc_cuda::launch_fp8_quantize_delayed<bf16, e5m2>(rows, Cols, buf.p, out.p, outT.p, q.p(),
                                                      rec.p, 0);
  });
  std::printf("  the buffer's cast  %.4f ms  %6.0f GB/s  (no rotation)\n", tPlain,
              fusedBytes / tPlain / 1e6);
}

} // namespace

int main(int argc, char **argv) {
  bool doBench = false;
  if (int code = tcc_cuda_test::startTest(argc, argv, "fp8_rope_cast_test", gSeed, doBench);
      code >= 0)
    return code;
  std::mt19937_64 rng(gSeed);
  // The 1B decoder's backward: q then k (16 heads of 128), v; a smaller T.
  const Band llama[2] = {{0, 16, true, true}, {2048, 16, true, true}};
  runCase<e5m2, 6144, 128, 256, 2>(rng, "q, k transposed (16 heads of 128) + v", 2, llama, true,
                                   0);
  // GQA: 8 q heads, 2 k heads of 64, 2 v heads; k's band before q's.
  const Band gqa[2] = {{512, 2, true, true}, {0, 8, true, true}};
  runCase<e5m2, 768, 64, 128, 2>(rng, "GQA q (8 heads of 64), k (2) transposed + v", 3, gqa,
                                 true, 0);
  // A forward (plain) rotation into e4m3 with current scaling.
  const Band forward[2] = {{0, 4, false, true}, {256, 4, false, true}};
  runCase<e4m3, 768, 64, 64, 2>(rng, "q, k plain (4 heads of 64) + v", 4, forward, false, 0);
  // One band computed, the other launched into the buffer first.
  const Band one[2] = {{0, 16, true, true}, {2048, 16, true, false}};
  runCase<e5m2, 6144, 128, 64, 2>(rng, "q computed, k launched", 2, one, true, 0);
  // x's rows at an offset of 3 elements: not 16-byte aligned, the scalar cast.
  const Band scalar[1] = {{64, 2, true, true}};
  runCase<e5m2, 256, 64, 32, 1>(rng, "one band, x at an odd offset (scalar)", 2, scalar, true,
                                3);
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
