// Device test of tg-amp's FP8 building blocks (issue 37) against float64
// references on fresh random inputs. A standalone program (no gtest):
//
//   fp8_gemm_test [--seed N] [--bench]
//
// 1. launch_fp8_cast_transpose (prelude fp8_*.cuh), float / bf16 / f16 in,
//    E4M3 / E5M2 out, odd sizes (1 x 1 to 77 x 1000), plain and transposed
//    outputs: every byte equal to the host's conversion of the same scaled
//    value (cuda_fp8.h's __nv_cvt_float_to_fp8, nearest even, saturating),
//    the amax bit-exact, the saturated and flushed-to-zero counts exact.
//    Inputs span 2^-24 .. 2^8 in magnitude with a scale chosen so that some
//    saturate and some flush; one case holds a NaN (amax must be NaN).
//    Outputs are poisoned first (0xFF), so an element never written fails.
//    Two shapes of more tiles than the grid's blocks (partial tiles at both
//    edges) take the vector form's grid-stride loop through several tiles a
//    block, stepping its tile coordinates past a row of tiles.
// 1b. launch_fp8_quantize_current (the cast --precision fp8's products run):
//    the scale from the tensor's own amax (kMax / amax, bit-exact against
//    the host's float division; 1 for zeros and for a NaN), its inverse,
//    every byte of the plain or transposed output, and the cast's counts.
// 1c. launch_fp8_quantize_delayed (a train step's casts): one site's record
//    through four casts (the first by its own amax, then by the recorded
//    history's; one saturating, one with a NaN): bytes, scales, counts and
//    the record's history, next scale and counts against the host.
// 1d. launch_fp8_quantize_delayed_batch (a step's weights, cast together at
//    its first FP8 product): 41 operands of random shapes (two launches of
//    up to 32, and one odd shape launched alone), plain, transposed or both,
//    through three casts of one record each (the first without a scale):
//    every output byte, scale record and Fp8TensorScale equal to the same
//    casts made one by one by launch_fp8_quantize_delayed.
// 1e. a cast whose source computes its input (an elementwise result left
//    to its FP8 cast by the code generator): SwiGLU's silu(g) * u cast from
//    g and u gives every byte, scale and record of the same product written
//    out and cast (vector and scalar forms, delayed and current scaling).
// 1f. launch_fp8_quantize_multi: SwiGLU's backward dG and dU cast from one
//    read of dH, g and u give the bytes, scales and records of both written
//    out and cast one by one (vector form, and one by one when misaligned).
// 2. launch_fp8_update_scale: the next scale from an amax history, against
//    the host formula; an all-zero history keeps the scale.
// 3. tcc_cuda_host::gemm_fp8 (host_support/gemm_fp8.h): E4M3 x E4M3 and
//    E4M3 x E5M2 (the backward's dY), bf16 and f32 out, fast and precise
//    accumulation, against sum_k dq(a) dq(b) in float64 over the same FP8
//    values (the casts' error is the format's, not the product's). Per
//    element |got - want| <= u |want| + 2^-12 * sum_k |a b| (2^-10 with
//    fast accumulation), u = 2^-8 for bf16 out, 2^-22 for f32. The second
//    term is not fp32's: Hopper's FP8 tensor cores keep about 14 bits of
//    the running sum (DeepSeek-V3's report, sec. 3.3.2), so the precise mode
//    promotes partial sums to fp32 every few K-blocks and fast mode never;
//    measured on the H200 (2026-11-30): up to 2^-14.5 and 2^-12 of
//    sum |a b|. A wrong scale, layout or missing K slice moves an element
//    by O(sum |a b|), far past either.
// --bench: milliseconds and TFLOP/s of the bf16 product (gemm(), as steps
// run it today) and of the FP8 product (precise and fast accumulation) at
// GPT-2 124M's and a 1B LLaMA-style decoder's 16384-row shapes, plus the
// cast-transpose of the activation, so FP8's net gain per layer shows.
// Exit 0 pass, 1 fail, 77 no GPU (or a GPU before sm_89: no FP8 products).
#include "tcc/step_abi.h"
#define TCC_STEP_ARCH "sm_90"
#include "compiler/codegen/cuda/cuda_host_support.h"
#include "compiler/codegen/cuda/cuda_prelude.cuh"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace {

#include "tests/cuda/gemm_test_arrays.h"

constexpr size_t kWorkspace = 32u << 20;
using tcc_cuda::e4m3;
using tcc_cuda::e5m2;
using tcc_cuda::Fp8CastStats;
using tcc_cuda::Fp8Format;

template <class F8> const char *fp8Name() { return std::is_same<F8, e4m3>::value ? "e4m3" : "e5m2"; }

// The test arrays' element type of a cast's input type T.
template <class T> GemmType gemmTypeOf() {
  return std::is_same<T, float>::value            ? tcc_cuda_host::kGemmF32
         : std::is_same<T, tcc_cuda::bf16>::value ? tcc_cuda_host::kGemmBF16
                                                  : tcc_cuda_host::kGemmF16;
}

float hostFloatBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Case 1: one cast against the host conversion.
template <class T, class F8>
bool castCase(int64_t rows, int64_t cols, bool withNan, std::mt19937_64 &rng) {
  const GemmType gt = gemmTypeOf<T>();
  const size_t n = static_cast<size_t>(rows * cols);
  HostArray in(gt, n);
  std::uniform_real_distribution<double> exponent(-24.0, 8.0), unit(0.5, 1.0);
  std::bernoulli_distribution sign(0.5), zero(0.02);
  for (size_t i = 0; i < n; ++i)
    in.set(i, zero(rng) ? 0.0 : (sign(rng) ? -1 : 1) * unit(rng) * std::exp2(exponent(rng)));
  if (withNan)
    in.set(n / 2, std::nan(""));
  // A scale that puts the largest values past the format's top (saturate)
  // while the small ones fall below its bottom (flush).
  const float scale = Fp8Format<F8>::kMax / 64.0f;
  Device dIn(n * bytesOf(gt)), dOut(n), dOutT(n), dScale(4), dStats(sizeof(Fp8CastStats));
  cudaMemcpy(dIn.p, in.bytes.data(), n * bytesOf(gt), cudaMemcpyHostToDevice);
  cudaMemcpy(dScale.p, &scale, 4, cudaMemcpyHostToDevice);
  cudaMemset(dOut.p, 0xFF, n);
  cudaMemset(dOutT.p, 0xFF, n);
  cudaMemset(dStats.p, 0, sizeof(Fp8CastStats));
  tcc_cuda::launch_fp8_cast_transpose<T, F8>(rows, cols, static_cast<const T *>(dIn.p),
                                             static_cast<const float *>(dScale.p),
                                             static_cast<F8 *>(dOut.p), static_cast<F8 *>(dOutT.p),
                                             static_cast<Fp8CastStats *>(dStats.p), nullptr);
  if (cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess) {
    std::printf("FAIL cast: %s\n", cudaGetErrorString(e));
    return false;
  }
  std::vector<uint8_t> out(n), outT(n);
  Fp8CastStats stats;
  cudaMemcpy(out.data(), dOut.p, n, cudaMemcpyDeviceToHost);
  cudaMemcpy(outT.data(), dOutT.p, n, cudaMemcpyDeviceToHost);
  cudaMemcpy(&stats, dStats.p, sizeof(stats), cudaMemcpyDeviceToHost);
  int64_t bad = 0, badT = 0;
  unsigned long long over = 0, under = 0;
  float amax = 0.0f;
  bool sawNan = false;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const float x = static_cast<float>(in.get(static_cast<size_t>(r * cols + c)));
      const float y = x * scale;
      const uint8_t want = Fp8Format<F8>::from_float(y);
      bad += out[r * cols + c] != want;
      badT += outT[c * rows + r] != want;
      if (x != x)
        sawNan = true;
      else
        amax = std::max(amax, std::fabs(x));
      over += std::fabs(y) > Fp8Format<F8>::kMax && std::isfinite(x);
      under += x != 0.0f && (want & 0x7f) == 0;
    }
  const float got = hostFloatBits(stats.amax_bits);
  const bool amaxOk = sawNan ? std::isnan(got) : got == amax;
  // The inputs' range is wide enough that large casts saturate and, in
  // E4M3 (whose smallest subnormal is 2^-9), flush: the counts are tested.
  const bool big = n >= 1000;
  const bool ok = bad == 0 && badT == 0 && amaxOk && stats.overflows == over &&
                  stats.underflows == under && (!big || over > 0) &&
                  (!big || !std::is_same<F8, e4m3>::value || under > 0);
  std::printf("%s cast %-4s -> %s %lldx%lld%s: bytes wrong %lld (transposed %lld), amax %g "
              "(want %g), saturated %llu (want %llu), flushed %llu (want %llu)\n",
              ok ? "ok  " : "FAIL", typeName(gt), fp8Name<F8>(), static_cast<long long>(rows),
              static_cast<long long>(cols), withNan ? " with a NaN" : "",
              static_cast<long long>(bad), static_cast<long long>(badT), got,
              sawNan ? std::nan("") : amax, stats.overflows, over, stats.underflows, under);
  return ok;
}

// The host's view of a tensor: its amax over the non-NaN elements and
// whether a NaN is in it.
struct HostAmax {
  float amax = 0.0f;
  bool sawNan = false;
};
HostAmax hostAmax(const HostArray &in, size_t n) {
  HostAmax h;
  for (size_t i = 0; i < n; ++i) {
    const float x = static_cast<float>(in.get(i));
    if (x != x)
      h.sawNan = true;
    else
      h.amax = std::max(h.amax, std::fabs(x));
  }
  return h;
}

// The host's cast of in (rows x cols) by `scale` against the device's
// bytes `got` (as stored, or transposed): bytes that differ, and the
// saturated and flushed counts the cast must report.
template <class F8> struct HostCast {
  int64_t bad = 0;
  unsigned long long over = 0, under = 0;
};
template <class F8>
HostCast<F8> hostCast(const HostArray &in, int64_t rows, int64_t cols, float scale,
                      const std::vector<uint8_t> &got, bool transposed) {
  HostCast<F8> h;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const float x = static_cast<float>(in.get(static_cast<size_t>(r * cols + c)));
      const float y = x * scale;
      const uint8_t want = Fp8Format<F8>::from_float(y);
      h.bad += (transposed ? got[c * rows + r] : got[r * cols + c]) != want;
      h.over += std::fabs(y) > Fp8Format<F8>::kMax && std::isfinite(x);
      h.under += x != 0.0f && (want & 0x7f) == 0;
    }
  return h;
}

// Case 1b: current scaling, amax -> scale -> cast, against the host.
template <class T, class F8>
bool currentScaleCase(int64_t rows, int64_t cols, bool transposed, const char *fill,
                      std::mt19937_64 &rng) {
  const GemmType gt = gemmTypeOf<T>();
  const size_t n = static_cast<size_t>(rows * cols);
  HostArray in(gt, n);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_real_distribution<double> exponent(-12.0, 4.0);
  const bool zeros = std::strcmp(fill, "zeros") == 0, nan = std::strcmp(fill, "nan") == 0;
  for (size_t i = 0; i < n; ++i)
    in.set(i, zeros ? 0.0 : normal(rng) * std::exp2(exponent(rng)));
  if (nan)
    in.set(n / 3, std::nan(""));
  Device dIn(n * bytesOf(gt)), dOut(n), dQ(tcc_cuda::kFp8ScaleBytes); // the record and the amax partials
  cudaMemcpy(dIn.p, in.bytes.data(), n * bytesOf(gt), cudaMemcpyHostToDevice);
  cudaMemset(dOut.p, 0xFF, n);
  cudaMemset(dQ.p, 0xFF, tcc_cuda::kFp8ScaleBytes); // poisoned: all must be written
  F8 *out = static_cast<F8 *>(dOut.p);
  tcc_cuda::launch_fp8_quantize_current<T, F8>(
      rows, cols, static_cast<const T *>(dIn.p), transposed ? nullptr : out,
      transposed ? out : nullptr, static_cast<tcc_cuda::Fp8TensorScale *>(dQ.p), nullptr);
  if (cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess) {
    std::printf("FAIL current scale: %s\n", cudaGetErrorString(e));
    return false;
  }
  std::vector<uint8_t> got(n);
  tcc_cuda::Fp8TensorScale q;
  cudaMemcpy(got.data(), dOut.p, n, cudaMemcpyDeviceToHost);
  cudaMemcpy(&q, dQ.p, sizeof(q), cudaMemcpyDeviceToHost);
  const auto [amax, sawNan] = hostAmax(in, n);
  const float scale = sawNan || amax == 0.0f ? 1.0f : std::fmin(Fp8Format<F8>::kMax / amax, FLT_MAX);
  const auto [bad, over, under] = hostCast<F8>(in, rows, cols, scale, got, transposed);
  const float gotAmax = hostFloatBits(q.stats.amax_bits);
  const bool ok = bad == 0 && (sawNan ? std::isnan(gotAmax) : gotAmax == amax) &&
                  q.scale == scale && q.scale_inv == 1.0f / scale &&
                  q.stats.overflows == over && q.stats.underflows == under;
  std::printf("%s current scale %-4s -> %s %lldx%lld%s (%s): bytes wrong %lld, amax %g (want "
              "%g), scale %g (want %g), saturated %llu (want %llu), flushed %llu (want %llu)\n",
              ok ? "ok  " : "FAIL", typeName(gt), fp8Name<F8>(), static_cast<long long>(rows),
              static_cast<long long>(cols), transposed ? " transposed" : "", fill,
              static_cast<long long>(bad), gotAmax, sawNan ? std::nan("") : amax, q.scale, scale,
              q.stats.overflows, over, q.stats.underflows, under);
  return ok;
}

// Case 1c: delayed scaling (launch_fp8_quantize_delayed, what a train
// step's casts run): four casts through one site's record. The first (no
// scale yet) scales by its own amax; each later one by max / (the largest
// amax of the earlier casts), and its last block puts its amax into the
// history and sets the next scale. x, then 2x (saturates: its amax is past
// the recorded one), then x / 4 (the history keeps 2x's amax), then x with
// a NaN (left out of the history; the scale holds). Each cast's bytes,
// scale, inverse and counts are checked against the host, and the record
// after it.
template <class T, class F8>
bool delayedScaleCase(int64_t rows, int64_t cols, bool transposed, std::mt19937_64 &rng) {
  const GemmType gt = gemmTypeOf<T>();
  const size_t n = static_cast<size_t>(rows * cols);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_real_distribution<double> exponent(-10.0, 2.0);
  std::vector<double> base(n);
  for (double &x : base)
    x = normal(rng) * std::exp2(exponent(rng));
  Device dIn(n * bytesOf(gt)), dOut(n), dQ(tcc_cuda::kFp8ScaleBytes),
      dRecord(sizeof(tcc_cuda::Fp8ScalingRecord));
  cudaMemset(dQ.p, 0xFF, tcc_cuda::kFp8ScaleBytes);
  cudaMemset(dRecord.p, 0, sizeof(tcc_cuda::Fp8ScalingRecord)); // the step state starts at 0
  std::vector<float> history; // the host's record
  float hostScale = 0.0f;
  bool ok = true;
  const double factors[4] = {1.0, 2.0, 0.25, 1.0};
  for (int cast = 0; cast < 4; ++cast) {
    HostArray in(gt, n);
    for (size_t i = 0; i < n; ++i)
      in.set(i, base[i] * factors[cast]);
    if (cast == 3)
      in.set(n / 2, std::nan(""));
    cudaMemcpy(dIn.p, in.bytes.data(), n * bytesOf(gt), cudaMemcpyHostToDevice);
    cudaMemset(dOut.p, 0xFF, n);
    F8 *out = static_cast<F8 *>(dOut.p);
    tcc_cuda::launch_fp8_quantize_delayed<T, F8>(
        rows, cols, static_cast<const T *>(dIn.p), transposed ? nullptr : out,
        transposed ? out : nullptr, static_cast<tcc_cuda::Fp8TensorScale *>(dQ.p),
        static_cast<tcc_cuda::Fp8ScalingRecord *>(dRecord.p), nullptr);
    if (cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess) {
      std::printf("FAIL delayed scale: %s\n", cudaGetErrorString(e));
      return false;
    }
    std::vector<uint8_t> got(n);
    tcc_cuda::Fp8TensorScale q;
    tcc_cuda::Fp8ScalingRecord rec;
    cudaMemcpy(got.data(), dOut.p, n, cudaMemcpyDeviceToHost);
    cudaMemcpy(&q, dQ.p, sizeof(q), cudaMemcpyDeviceToHost);
    cudaMemcpy(&rec, dRecord.p, sizeof(rec), cudaMemcpyDeviceToHost);
    const auto [amax, sawNan] = hostAmax(in, n);
    // The scale this cast must use: the record's, or its own amax's.
    const float scale = hostScale > 0.0f ? hostScale
                        : sawNan || amax == 0.0f
                            ? 1.0f
                            : std::fmin(Fp8Format<F8>::kMax / amax, FLT_MAX);
    const auto [bad, over, under] = hostCast<F8>(in, rows, cols, scale, got, transposed);
    // The record after it.
    if (!sawNan)
      history.push_back(amax);
    float largest = 0.0f;
    for (float h : history)
      largest = std::max(largest, h);
    if (largest > 0.0f)
      hostScale = std::fmin(Fp8Format<F8>::kMax / largest, FLT_MAX);
    bool historyOk = rec.next == static_cast<float>(history.size() % tcc_cuda::kFp8AmaxHistory);
    for (int i = 0; i < tcc_cuda::kFp8AmaxHistory; ++i)
      historyOk &= rec.amax_history[i] == (i < static_cast<int>(history.size()) ? history[i] : 0.0f);
    const bool castOk = bad == 0 && q.scale == scale && q.scale_inv == 1.0f / scale &&
                        q.stats.overflows == over && q.stats.underflows == under &&
                        (cast != 1 || over > 0); // 2x past the recorded amax saturates
    const bool recordOk = historyOk && rec.scale == hostScale && rec.casts == cast + 1.0f &&
                          rec.elements == static_cast<float>(n) &&
                          rec.saturated == static_cast<float>(over) &&
                          rec.flushed == static_cast<float>(under) &&
                          (sawNan ? std::isnan(rec.amax) : rec.amax == amax);
    ok &= castOk && recordOk;
    std::printf("%s delayed scale %-4s -> %s %lldx%lld%s, cast %d (x%g%s): bytes wrong %lld, "
                "scale %g (want %g), saturated %llu (want %llu), flushed %llu (want %llu); "
                "record: next scale %g (want %g), casts %g, history %s\n",
                castOk && recordOk ? "ok  " : "FAIL", typeName(gt), fp8Name<F8>(),
                static_cast<long long>(rows), static_cast<long long>(cols),
                transposed ? " transposed" : "", cast + 1, factors[cast],
                cast == 3 ? ", a NaN" : "", static_cast<long long>(bad), q.scale, scale,
                q.stats.overflows, over, q.stats.underflows, under, rec.scale, hostScale,
                rec.casts, historyOk ? "as the host's" : "WRONG");
  }
  return ok;
}

// Case 1d: the batched casts against the same casts one by one. fromF32:
// the batch reads f32 tensors and rounds them to bf16 (W = float: the
// step's f32 master weights, whose bf16 copies only these casts read),
// the casts one by one read those bf16 roundings (rounded here, nearest
// even): the same bytes, scales and records.
template <bool fromF32> bool batchedDelayedCase(std::mt19937_64 &rng) {
  using T = tcc_cuda::bf16;
  using F8 = e4m3;
  constexpr int kMembers = 41;
  std::uniform_int_distribution<int> eighths(1, 65), layouts(0, 2);
  std::normal_distribution<double> normal(0.0, 1.0);
  struct Member {
    int32_t rows, cols;
    int layout; // 0 plain, 1 transposed, 2 both
    std::vector<double> x;
  };
  std::vector<Member> members(kMembers);
  for (int m = 0; m < kMembers; ++m) {
    Member &mm = members[m];
    mm.rows = m == 7 ? 36 : 8 * eighths(rng); // 36: not the vector form, launched alone
    mm.cols = 8 * eighths(rng);
    mm.layout = layouts(rng);
    mm.x.resize(static_cast<size_t>(mm.rows) * mm.cols);
    const double magnitude = std::exp2(static_cast<double>(m % 9) - 4.0);
    for (double &v : mm.x)
      v = normal(rng) * magnitude;
  }
  // Two copies of everything: [0] batched, [1] one by one.
  // (Device owns its memory and is not movable: reserve, never reallocate.)
  std::vector<Device> in[2], out[2], outT[2], q[2], rec[2];
  for (int k = 0; k < 2; ++k) {
    for (std::vector<Device> *v : {&in[k], &out[k], &outT[k], &q[k], &rec[k]})
      v->reserve(kMembers);
    for (const Member &mm : members) {
      const size_t n = mm.x.size();
      in[k].emplace_back(n * (fromF32 && k == 0 ? 4 : 2));
      out[k].emplace_back(n);
      outT[k].emplace_back(n);
      q[k].emplace_back(tcc_cuda::kFp8ScaleBytes);
      rec[k].emplace_back(sizeof(tcc_cuda::Fp8ScalingRecord));
      cudaMemset(rec[k].back().p, 0, sizeof(tcc_cuda::Fp8ScalingRecord));
    }
  }
  bool ok = true;
  const double factors[3] = {1.0, 2.0, 0.5};
  using W = std::conditional_t<fromF32, float, T>;
  for (int cast = 0; cast < 3; ++cast) {
    std::vector<const W *> ins;
    std::vector<F8 *> outs, outsT;
    std::vector<tcc_cuda::Fp8TensorScale *> qs;
    std::vector<tcc_cuda::Fp8ScalingRecord *> records;
    std::vector<int32_t> rows, cols;
    for (int m = 0; m < kMembers; ++m) {
      const Member &mm = members[m];
      // fromF32: the floats, and their bf16 roundings (a float is exact
      // in double, so HostArray rounds it once).
      std::vector<float> f(mm.x.size());
      HostArray h(tcc_cuda_host::kGemmBF16, mm.x.size());
      for (size_t i = 0; i < mm.x.size(); ++i) {
        f[i] = static_cast<float>(mm.x[i] * factors[cast]);
        h.set(i, fromF32 ? static_cast<double>(f[i]) : mm.x[i] * factors[cast]);
      }
      for (int k = 0; k < 2; ++k) {
        if (fromF32 && k == 0)
          cudaMemcpy(in[k][m].p, f.data(), f.size() * 4, cudaMemcpyHostToDevice);
        else
          cudaMemcpy(in[k][m].p, h.bytes.data(), mm.x.size() * 2, cudaMemcpyHostToDevice);
        cudaMemset(out[k][m].p, 0xFF, mm.x.size());
        cudaMemset(outT[k][m].p, 0xFF, mm.x.size());
        cudaMemset(q[k][m].p, 0xFF, tcc_cuda::kFp8ScaleBytes);
      }
      F8 *o[2], *t[2];
      for (int k = 0; k < 2; ++k) {
        o[k] = mm.layout != 1 ? static_cast<F8 *>(out[k][m].p) : nullptr;
        t[k] = mm.layout != 0 ? static_cast<F8 *>(outT[k][m].p) : nullptr;
      }
      ins.push_back(static_cast<const W *>(in[0][m].p));
      outs.push_back(o[0]);
      outsT.push_back(t[0]);
      qs.push_back(static_cast<tcc_cuda::Fp8TensorScale *>(q[0][m].p));
      records.push_back(static_cast<tcc_cuda::Fp8ScalingRecord *>(rec[0][m].p));
      rows.push_back(mm.rows);
      cols.push_back(mm.cols);
      tcc_cuda::launch_fp8_quantize_delayed<T, F8>(
          mm.rows, mm.cols, static_cast<const T *>(in[1][m].p), o[1], t[1],
          static_cast<tcc_cuda::Fp8TensorScale *>(q[1][m].p),
          static_cast<tcc_cuda::Fp8ScalingRecord *>(rec[1][m].p), nullptr);
    }
    tcc_cuda::launch_fp8_quantize_delayed_batch<T, F8, W>(kMembers, ins.data(), outs.data(),
                                                         outsT.data(), qs.data(), records.data(),
                                                         rows.data(), cols.data(), nullptr);
    if (cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess) {
      std::printf("FAIL batched delayed casts: %s\n", cudaGetErrorString(e));
      return false;
    }
    int wrong = 0;
    for (int m = 0; m < kMembers; ++m) {
      const size_t n = members[m].x.size();
      auto same = [&](std::vector<Device> *d, size_t bytes) {
        std::vector<uint8_t> a(bytes), b(bytes);
        cudaMemcpy(a.data(), d[0][m].p, bytes, cudaMemcpyDeviceToHost);
        cudaMemcpy(b.data(), d[1][m].p, bytes, cudaMemcpyDeviceToHost);
        return a == b;
      };
      // The scale record's Fp8TensorScale (scale, inverse, statistics),
      // not the amax partials behind it (left from the amax pass).
      const bool memberOk = same(out, n) && same(outT, n) &&
                            same(q, sizeof(tcc_cuda::Fp8TensorScale)) &&
                            same(rec, sizeof(tcc_cuda::Fp8ScalingRecord));
      wrong += !memberOk;
    }
    tcc_cuda::Fp8ScalingRecord first;
    cudaMemcpy(&first, rec[0][0].p, sizeof(first), cudaMemcpyDeviceToHost);
    const bool castOk = wrong == 0 && first.casts == cast + 1.0f;
    ok &= castOk;
    std::printf("%s batched delayed casts %s -> e4m3, %d operands, cast %d (x%g): %d "
                "differ from the casts one by one%s\n",
                castOk ? "ok  " : "FAIL", fromF32 ? "f32 rounded to bf16" : "bf16", kMembers,
                cast + 1, factors[cast], wrong, fromF32 ? " of the bf16 roundings" : "");
  }
  return ok;
}

// Case 1e: a cast whose source computes its input (the code generator's
// elementwise results left to their FP8 cast: Fp8CastProducers.cpp). A
// source like the generated one computes SwiGLU's silu(g) * u, rounded to
// bf16, from g and u; the same product written to a buffer by a kernel and
// cast from there must give the same bytes, Fp8TensorScale and record
// through three delayed-scaling casts (the first by its own amax), and
// one current-scaling cast. `misaligned`: u starts 2 bytes into its
// buffer, so the source takes the scalar forms.
__device__ __forceinline__ float swigluOf(uint16_t g, uint16_t u) {
  const float x = tcc_cuda::bf16_to_float(g);
  return x / (1.0f + expf(-x)) * tcc_cuda::bf16_to_float(u);
}
struct SwigluSource {
  const uint16_t *g, *u;
  static constexpr int kOutputs = 1;
  struct Raw {
    uint4 g, u;
  };
  __device__ __forceinline__ Raw fetch8(int64_t i) const {
    return {__ldg(reinterpret_cast<const uint4 *>(g + i)),
            __ldg(reinterpret_cast<const uint4 *>(u + i))};
  }
  __device__ __forceinline__ void compute8(const Raw &raw, int64_t, uint4 *out) const {
    const uint16_t *x = reinterpret_cast<const uint16_t *>(&raw.g);
    const uint16_t *y = reinterpret_cast<const uint16_t *>(&raw.u);
    alignas(16) uint16_t h[8];
#pragma unroll
    for (int k = 0; k < 8; ++k)
      h[k] = tcc_cuda::float_to_bf16(swigluOf(x[k], y[k]));
    out[0] = *reinterpret_cast<const uint4 *>(h);
  }
  __device__ __forceinline__ uint4 load8(int64_t i) const {
    uint4 out;
    compute8(fetch8(i), i, &out);
    return out;
  }
  __device__ __forceinline__ tcc_cuda::bf16 load(int64_t i) const {
    return {tcc_cuda::float_to_bf16(swigluOf(g[i], u[i]))};
  }
  __host__ __device__ bool aligned16() const {
    return (reinterpret_cast<uintptr_t>(g) | reinterpret_cast<uintptr_t>(u)) % 16 == 0;
  }
};
__global__ void swigluKernel(int64_t n, const uint16_t *g, const uint16_t *u, uint16_t *h) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    h[i] = tcc_cuda::float_to_bf16(swigluOf(g[i], u[i]));
}

template <class F8>
bool computedSourceCase(int64_t rows, int64_t cols, bool misaligned, std::mt19937_64 &rng) {
  using T = tcc_cuda::bf16;
  const size_t n = static_cast<size_t>(rows * cols);
  std::normal_distribution<double> normal(0.0, 1.0);
  Device g(n * 2), u(n * 2 + 16), h(n * 2);
  const uint16_t *gp = static_cast<const uint16_t *>(g.p);
  const uint16_t *up = static_cast<const uint16_t *>(u.p) + (misaligned ? 1 : 0);
  // [0] from the source, [1] from h.
  Device out[2] = {Device(n), Device(n)}, outT[2] = {Device(n), Device(n)};
  Device q[2] = {Device(tcc_cuda::kFp8ScaleBytes), Device(tcc_cuda::kFp8ScaleBytes)};
  Device rec[2] = {Device(sizeof(tcc_cuda::Fp8ScalingRecord)),
                   Device(sizeof(tcc_cuda::Fp8ScalingRecord))};
  for (Device &r : rec)
    cudaMemset(r.p, 0, sizeof(tcc_cuda::Fp8ScalingRecord));
  bool ok = true;
  const double factors[4] = {1.0, 3.0, 0.25, 1.0};
  for (int cast = 0; cast < 4; ++cast) {
    const bool current = cast == 3;
    HostArray hg(tcc_cuda_host::kGemmBF16, n), hu(tcc_cuda_host::kGemmBF16, n);
    for (size_t i = 0; i < n; ++i) {
      hg.set(i, normal(rng) * 3.0);
      hu.set(i, normal(rng) * factors[cast]);
    }
    cudaMemcpy(g.p, hg.bytes.data(), n * 2, cudaMemcpyHostToDevice);
    cudaMemcpy(const_cast<uint16_t *>(up), hu.bytes.data(), n * 2, cudaMemcpyHostToDevice);
    for (int k = 0; k < 2; ++k) {
      cudaMemset(out[k].p, 0xFF, n);
      cudaMemset(outT[k].p, 0xFF, n);
      cudaMemset(q[k].p, 0xFF, tcc_cuda::kFp8ScaleBytes);
    }
    swigluKernel<<<64, 256>>>(static_cast<int64_t>(n), gp, up, static_cast<uint16_t *>(h.p));
    auto qOf = [&](int k) { return static_cast<tcc_cuda::Fp8TensorScale *>(q[k].p); };
    auto recOf = [&](int k) {
      return current ? nullptr : static_cast<tcc_cuda::Fp8ScalingRecord *>(rec[k].p);
    };
    tcc_cuda::launch_fp8_quantize_current<T, F8, SwigluSource>(
        rows, cols, SwigluSource{gp, up}, static_cast<F8 *>(out[0].p),
        static_cast<F8 *>(outT[0].p), qOf(0), nullptr, recOf(0));
    tcc_cuda::launch_fp8_quantize_current<T, F8>(
        rows, cols, static_cast<const T *>(h.p), static_cast<F8 *>(out[1].p),
        static_cast<F8 *>(outT[1].p), qOf(1), nullptr, recOf(1));
    if (cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess) {
      std::printf("FAIL computed-source casts: %s\n", cudaGetErrorString(e));
      return false;
    }
    auto same = [&](Device *d, size_t bytes) {
      std::vector<uint8_t> a(bytes), b(bytes);
      cudaMemcpy(a.data(), d[0].p, bytes, cudaMemcpyDeviceToHost);
      cudaMemcpy(b.data(), d[1].p, bytes, cudaMemcpyDeviceToHost);
      return a == b;
    };
    tcc_cuda::Fp8TensorScale scale;
    cudaMemcpy(&scale, q[0].p, sizeof(scale), cudaMemcpyDeviceToHost);
    const bool castOk = same(out, n) && same(outT, n) &&
                        same(q, sizeof(tcc_cuda::Fp8TensorScale)) &&
                        same(rec, sizeof(tcc_cuda::Fp8ScalingRecord)) && scale.scale > 0.0f &&
                        scale.scale != 1.0f;
    ok &= castOk;
    std::printf("%s computed-source cast silu(g)*u -> %s, %lldx%lld%s, cast %d (%s): the same "
                "bytes, scale and record as from the written product\n",
                castOk ? "ok  " : "FAIL", fp8Name<F8>(), static_cast<long long>(rows),
                static_cast<long long>(cols), misaligned ? " (scalar forms)" : "", cast + 1,
                current ? "current scale" : "delayed scale");
  }
  return ok;
}

// Case 1f: a multi-result source (launch_fp8_quantize_multi): SwiGLU's
// backward, dG = dH * u * silu'(g) and dU = dH * silu(g) in bf16, cast from
// one read of dH, g and u, against both written out and cast one by one.
__device__ __forceinline__ void swigluGradOf(uint16_t dh, uint16_t g, uint16_t u,
                                             uint16_t &dg, uint16_t &du) {
  const float x = tcc_cuda::bf16_to_float(g), d = tcc_cuda::bf16_to_float(dh);
  const float sig = 1.0f / (1.0f + expf(-x));
  dg = tcc_cuda::float_to_bf16(d * tcc_cuda::bf16_to_float(u) * sig * (1.0f + x * (1.0f - sig)));
  du = tcc_cuda::float_to_bf16(d * x * sig);
}
struct SwigluGradSource {
  const uint16_t *dh, *g, *u;
  using Element = tcc_cuda::bf16;
  static constexpr int kOutputs = 2;
  struct Raw {
    uint4 dh, g, u;
  };
  __device__ __forceinline__ Raw fetch8(int64_t i) const {
    return {__ldg(reinterpret_cast<const uint4 *>(dh + i)),
            __ldg(reinterpret_cast<const uint4 *>(g + i)),
            __ldg(reinterpret_cast<const uint4 *>(u + i))};
  }
  __device__ __forceinline__ void compute8(const Raw &raw, int64_t, uint4 *out) const {
    const uint16_t *a = reinterpret_cast<const uint16_t *>(&raw.dh),
                   *b = reinterpret_cast<const uint16_t *>(&raw.g),
                   *c = reinterpret_cast<const uint16_t *>(&raw.u);
    alignas(16) uint16_t y0[8], y1[8];
#pragma unroll
    for (int k = 0; k < 8; ++k)
      swigluGradOf(a[k], b[k], c[k], y0[k], y1[k]);
    out[0] = *reinterpret_cast<const uint4 *>(y0);
    out[1] = *reinterpret_cast<const uint4 *>(y1);
  }
  __device__ __forceinline__ void load8(int64_t i, uint4 *out) const {
    compute8(fetch8(i), i, out);
  }
  __device__ __forceinline__ void load(int64_t i, Element *out) const {
    swigluGradOf(dh[i], g[i], u[i], out[0].bits, out[1].bits);
  }
  __host__ __device__ bool aligned16() const {
    return (reinterpret_cast<uintptr_t>(dh) | reinterpret_cast<uintptr_t>(g) |
            reinterpret_cast<uintptr_t>(u)) % 16 == 0;
  }
};
__global__ void swigluGradKernel(int64_t n, const uint16_t *dh, const uint16_t *g,
                                 const uint16_t *u, uint16_t *dg, uint16_t *du) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    swigluGradOf(dh[i], g[i], u[i], dg[i], du[i]);
}

bool multiSourceCase(int64_t rows, int64_t cols, bool misaligned, std::mt19937_64 &rng) {
  using T = tcc_cuda::bf16;
  using F8 = e5m2;
  const size_t n = static_cast<size_t>(rows * cols);
  std::normal_distribution<double> normal(0.0, 1.0);
  Device dh(n * 2 + 16), g(n * 2), u(n * 2), written(2 * n * 2);
  const uint16_t *dhp = static_cast<const uint16_t *>(dh.p) + (misaligned ? 1 : 0);
  const uint16_t *gp = static_cast<const uint16_t *>(g.p), *up = static_cast<const uint16_t *>(u.p);
  uint16_t *dgw = static_cast<uint16_t *>(written.p), *duw = dgw + n;
  // [side][result]: side 0 from the source, 1 from the written results.
  std::vector<Device> out, outT, q, rec;
  for (std::vector<Device> *v : {&out, &outT, &q, &rec})
    v->reserve(4);
  for (int k = 0; k < 4; ++k) {
    out.emplace_back(n);
    outT.emplace_back(n);
    q.emplace_back(tcc_cuda::kFp8ScaleBytes);
    rec.emplace_back(sizeof(tcc_cuda::Fp8ScalingRecord));
    cudaMemset(rec.back().p, 0, sizeof(tcc_cuda::Fp8ScalingRecord));
  }
  bool ok = true;
  for (int cast = 0; cast < 4; ++cast) {
    const bool current = cast == 3;
    HostArray a(tcc_cuda_host::kGemmBF16, n), b(tcc_cuda_host::kGemmBF16, n),
        c(tcc_cuda_host::kGemmBF16, n);
    for (size_t i = 0; i < n; ++i) {
      a.set(i, normal(rng) * std::exp2(cast - 12.0)); // gradients are small
      b.set(i, normal(rng) * 3.0);
      c.set(i, normal(rng));
    }
    cudaMemcpy(const_cast<uint16_t *>(dhp), a.bytes.data(), n * 2, cudaMemcpyHostToDevice);
    cudaMemcpy(g.p, b.bytes.data(), n * 2, cudaMemcpyHostToDevice);
    cudaMemcpy(u.p, c.bytes.data(), n * 2, cudaMemcpyHostToDevice);
    for (int k = 0; k < 4; ++k) {
      cudaMemset(out[k].p, 0xFF, n);
      cudaMemset(outT[k].p, 0xFF, n);
      cudaMemset(q[k].p, 0xFF, tcc_cuda::kFp8ScaleBytes);
    }
    swigluGradKernel<<<64, 256>>>(static_cast<int64_t>(n), dhp, gp, up, dgw, duw);
    F8 *outs[4], *outsT[4];
    tcc_cuda::Fp8TensorScale *qs[4];
    tcc_cuda::Fp8ScalingRecord *recs[4];
    for (int k = 0; k < 4; ++k) {
      outs[k] = static_cast<F8 *>(out[k].p);
      outsT[k] = k == 1 || k == 3 ? nullptr : static_cast<F8 *>(outT[k].p); // dU: plain only
      qs[k] = static_cast<tcc_cuda::Fp8TensorScale *>(q[k].p);
      recs[k] = current ? nullptr : static_cast<tcc_cuda::Fp8ScalingRecord *>(rec[k].p);
    }
    tcc_cuda::launch_fp8_quantize_multi<T, F8, SwigluGradSource>(
        rows, cols, SwigluGradSource{dhp, gp, up}, outs, outsT, qs, recs, nullptr);
    for (int k = 0; k < 2; ++k)
      tcc_cuda::launch_fp8_quantize_current<T, F8>(rows, cols,
                                                   reinterpret_cast<const T *>(k ? duw : dgw),
                                                   outs[2 + k], outsT[2 + k], qs[2 + k],
                                                   nullptr, recs[2 + k]);
    if (cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess) {
      std::printf("FAIL multi-result casts: %s\n", cudaGetErrorString(e));
      return false;
    }
    auto same = [&](std::vector<Device> &d, int k, size_t bytes) {
      std::vector<uint8_t> x(bytes), y(bytes);
      cudaMemcpy(x.data(), d[k].p, bytes, cudaMemcpyDeviceToHost);
      cudaMemcpy(y.data(), d[2 + k].p, bytes, cudaMemcpyDeviceToHost);
      return x == y;
    };
    bool castOk = true;
    for (int k = 0; k < 2; ++k)
      castOk &= same(out, k, n) && (k == 1 || same(outT, k, n)) &&
                same(q, k, sizeof(tcc_cuda::Fp8TensorScale)) &&
                same(rec, k, sizeof(tcc_cuda::Fp8ScalingRecord));
    ok &= castOk;
    std::printf("%s multi-result cast SwiGLU backward -> e5m2 x2, %lldx%lld%s, cast %d (%s): "
                "the same bytes, scales and records as from the written results\n",
                castOk ? "ok  " : "FAIL", static_cast<long long>(rows),
                static_cast<long long>(cols), misaligned ? " (one by one)" : "", cast + 1,
                current ? "current scale" : "delayed scale");
  }
  return ok;
}

// Case 2: delayed scaling's update.
bool updateScaleCase() {
  float history[4] = {3.0f, 0.0f, 7.5f, 1.0f};
  const float amax = 2.0f;
  Fp8CastStats stats{};
  std::memcpy(&stats.amax_bits, &amax, 4);
  Device dStats(sizeof(stats)), dHistory(sizeof(history)), dScale(8);
  cudaMemcpy(dStats.p, &stats, sizeof(stats), cudaMemcpyHostToDevice);
  cudaMemcpy(dHistory.p, history, sizeof(history), cudaMemcpyHostToDevice);
  float scales[2] = {1.0f, 1.0f};
  cudaMemcpy(dScale.p, scales, 8, cudaMemcpyHostToDevice);
  float *scale = static_cast<float *>(dScale.p);
  // Step 6 writes slot 2 (7.5 -> 2): the history's max is then 3.
  tcc_cuda::launch_fp8_update_scale<e4m3>(static_cast<const Fp8CastStats *>(dStats.p),
                                          static_cast<float *>(dHistory.p), 4, 6, 1, scale,
                                          scale + 1, nullptr);
  cudaMemcpy(scales, dScale.p, 8, cudaMemcpyDeviceToHost);
  const float want = 448.0f / (3.0f * 2.0f);
  bool ok = scales[0] == want && scales[1] == 1.0f / want;
  // An all-zero history keeps the scale.
  float zeros[4] = {};
  stats.amax_bits = 0;
  cudaMemcpy(dStats.p, &stats, sizeof(stats), cudaMemcpyHostToDevice);
  cudaMemcpy(dHistory.p, zeros, sizeof(zeros), cudaMemcpyHostToDevice);
  tcc_cuda::launch_fp8_update_scale<e4m3>(static_cast<const Fp8CastStats *>(dStats.p),
                                          static_cast<float *>(dHistory.p), 4, 7, 0, scale,
                                          scale + 1, nullptr);
  float kept[2];
  cudaMemcpy(kept, dScale.p, 8, cudaMemcpyDeviceToHost);
  ok &= kept[0] == scales[0] && kept[1] == scales[1];
  std::printf("%s update scale: %g (want %g), all-zero history keeps %g\n", ok ? "ok  " : "FAIL",
              scales[0], want, kept[0]);
  return ok;
}

// Case 3: one FP8 product against float64, plus a residual (cuBLASLt's C
// with beta = 1: kern.gemm_epilogue's residual-only form) in a buffer of
// its own or in out itself (accumulated in place).
enum class Residual { kNone, kApart, kInPlace };
bool gemmCase(tcc_cuda_host::Fp8Type ta, tcc_cuda_host::Fp8Type tb, GemmType outType, bool fast,
              int64_t m, int64_t n, int64_t k, std::mt19937_64 &rng, void *workspace,
              Residual residual = Residual::kNone) {
  auto from = [](tcc_cuda_host::Fp8Type t, uint8_t b) {
    return t == tcc_cuda_host::kFp8E4M3 ? Fp8Format<e4m3>::to_float(b)
                                        : Fp8Format<e5m2>::to_float(b);
  };
  auto to = [](tcc_cuda_host::Fp8Type t, float x) {
    return t == tcc_cuda_host::kFp8E4M3 ? Fp8Format<e4m3>::from_float(x)
                                        : Fp8Format<e5m2>::from_float(x);
  };
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint8_t> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(n * k));
  for (auto &x : a) x = to(ta, normal(rng) * 40.0f);
  for (auto &x : b) x = to(tb, normal(rng) * 40.0f);
  // Dequantization scales of A and B, 16 bytes apart (gemm_fp8 needs each
  // 16-byte aligned).
  const float dq[5] = {0.0125f, 0, 0, 0, 0.5f / 40.0f};
  Device dA(a.size()), dB(b.size()), dOut(static_cast<size_t>(m * n) * bytesOf(outType)), dDq(32);
  cudaMemcpy(dA.p, a.data(), a.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(dB.p, b.data(), b.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(dDq.p, dq, sizeof(dq), cudaMemcpyHostToDevice);
  cudaMemset(dOut.p, 0xFF, static_cast<size_t>(m * n) * bytesOf(outType));
  // The residual: random values of about the product's size.
  HostArray res(outType, static_cast<size_t>(m * n));
  for (size_t i = 0; i < res.size(); ++i)
    res.set(i, normal(rng) * 100.0);
  Device dRes(residual == Residual::kApart ? res.bytes.size() : 0);
  const void *residualPtr = nullptr;
  if (residual == Residual::kApart) {
    cudaMemcpy(dRes.p, res.bytes.data(), res.bytes.size(), cudaMemcpyHostToDevice);
    residualPtr = dRes.p;
  } else if (residual == Residual::kInPlace) {
    cudaMemcpy(dOut.p, res.bytes.data(), res.bytes.size(), cudaMemcpyHostToDevice);
    residualPtr = dOut.p;
  }
  tcc_cuda_host::GemmPlan plan;
  const float *dqA = static_cast<const float *>(dDq.p);
  // Twice in place would add the product twice: the first call (which
  // searches the algorithm into a scratch D) is the one checked.
  int32_t rc = tcc_cuda_host::gemm_fp8(plan, nullptr, 0, ta, tb, outType, fast, m, n, k, dqA,
                                       dqA + 4, dA.p, dB.p, residualPtr, dOut.p, workspace,
                                       kWorkspace);
  cudaError_t e = cudaDeviceSynchronize();
  const char *names[2] = {"e4m3", "e5m2"};
  if (rc != 0 || e != cudaSuccess) {
    std::printf("FAIL gemm %s x %s: rc %d, %s, %s\n", names[ta], names[tb], rc,
                cudaGetErrorString(e), tcc_cuda_host::state().error.c_str());
    return false;
  }
  HostArray out(outType, static_cast<size_t>(m * n));
  cudaMemcpy(out.bytes.data(), dOut.p, out.bytes.size(), cudaMemcpyDeviceToHost);
  const double u = unitRoundoff(outType) * (outType == tcc_cuda_host::kGemmF32 ? 1 : 1);
  double worst = 0;
  int64_t bad = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double want = residual == Residual::kNone ? 0 : res.get(static_cast<size_t>(i * n + j));
      double scale = 0;
      for (int64_t kk = 0; kk < k; ++kk) {
        double t = static_cast<double>(from(ta, a[i * k + kk])) * dq[0] *
                   static_cast<double>(from(tb, b[j * k + kk])) * dq[4];
        want += t;
        scale += std::fabs(t);
      }
      const double got = out.get(static_cast<size_t>(i * n + j));
      // The residual is added in fp32 before the one rounding to out.
      const double limit = u * std::fabs(want) + std::ldexp(scale, fast ? -10 : -12) +
                           (residual == Residual::kNone ? 0 : std::ldexp(std::fabs(want), -23));
      const double err = std::fabs(got - want);
      if (!(err <= limit))
        ++bad;
      worst = std::max(worst, limit > 0 ? err / limit : err);
    }
  const char *residualName[3] = {"", " + residual", " + residual in place"};
  std::printf("%s gemm %s x %s -> %-4s %s %lldx%lldx%lld%s: %lld elements off, worst %.3f of "
              "the limit\n",
              bad == 0 ? "ok  " : "FAIL", names[ta], names[tb], typeName(outType),
              fast ? "fast   " : "precise", static_cast<long long>(m), static_cast<long long>(n),
              static_cast<long long>(k), residualName[static_cast<int>(residual)],
              static_cast<long long>(bad), worst);
  return bad == 0;
}

void bench(void *workspace) {
  struct Shape { const char *model, *name; int64_t n, k; };
  const Shape shapes[] = {
      {"gpt2-124m", "c_attn", 2304, 768},   {"gpt2-124m", "attn.c_proj", 768, 768},
      {"gpt2-124m", "c_fc", 3072, 768},     {"gpt2-124m", "mlp.c_proj", 768, 3072},
      {"llama-1b", "qkv", 3072, 2048},      {"llama-1b", "o_proj", 2048, 2048},
      {"llama-1b", "gate_up", 16384, 2048}, {"llama-1b", "down", 2048, 8192}};
  const int64_t m = 16384;
  struct CastRow { const char *model, *name; float ms; double both, plain, copy; };
  std::vector<CastRow> casts;
  cudaStream_t s;
  cudaStreamCreate(&s);
  cudaEvent_t t0, t1;
  cudaEventCreate(&t0);
  cudaEventCreate(&t1);
  auto time = [&](auto &&call) {
    for (int i = 0; i < 3; ++i) call();
    cudaEventRecord(t0, s);
    for (int i = 0; i < 20; ++i) call();
    cudaEventRecord(t1, s);
    cudaEventSynchronize(t1);
    float ms = 0;
    cudaEventElapsedTime(&ms, t0, t1);
    return ms / 20;
  };
  std::printf("\n%-10s %-12s %6s %6s %6s | %9s %9s %9s | %8s %8s %6s %6s\n", "model", "product",
              "M", "N", "K", "bf16 ms", "fp8 ms", "fp8f ms", "bf16 TF", "fp8f TF", "cast", "net");
  for (const Shape &sh : shapes) {
    Device a(m * sh.k * 2), b(sh.k * sh.n * 2), c(m * sh.n * 2), a8(m * sh.k), b8(sh.n * sh.k),
        a8t(m * sh.k), dq(32), stats(sizeof(Fp8CastStats));
    cudaMemset(a.p, 0, m * sh.k * 2);
    cudaMemset(b.p, 0, sh.k * sh.n * 2);
    cudaMemset(a8.p, 0, m * sh.k);
    cudaMemset(b8.p, 0, sh.n * sh.k);
    const float ones[5] = {1.0f, 0, 0, 0, 1.0f};
    cudaMemcpy(dq.p, ones, sizeof(ones), cudaMemcpyHostToDevice);
    const float *dqp = static_cast<const float *>(dq.p);
    tcc_cuda_host::GemmPlan p0, p1, p2;
    int32_t failed = 0; // a failed call would time as nothing: no row then
    float bf16 = time([&] {
      failed |= tcc_cuda_host::gemm(p0, s, 0, tcc_cuda_host::kGemmBF16, false, false, false, m, sh.n, sh.k,
                          1, 0, 0, 0, 1.0, 0.0, a.p, b.p, c.p, workspace, kWorkspace);
    });
    float fp8 = time([&] {
      failed |= tcc_cuda_host::gemm_fp8(p1, s, 0, tcc_cuda_host::kFp8E4M3, tcc_cuda_host::kFp8E4M3,
                              tcc_cuda_host::kGemmBF16, false, m, sh.n, sh.k, dqp, dqp + 4, a8.p,
                              b8.p, nullptr, c.p, workspace, kWorkspace);
    });
    float fp8fast = time([&] {
      failed |= tcc_cuda_host::gemm_fp8(p2, s, 0, tcc_cuda_host::kFp8E4M3, tcc_cuda_host::kFp8E4M3,
                              tcc_cuda_host::kGemmBF16, true, m, sh.n, sh.k, dqp, dqp + 4, a8.p,
                              b8.p, nullptr, c.p, workspace, kWorkspace);
    });
    // The activation's cast (and transpose, for the weight gradient) each step.
    float cast = time([&] {
      tcc_cuda::launch_fp8_cast_transpose<tcc_cuda::bf16, e4m3>(
          m, sh.k, static_cast<const tcc_cuda::bf16 *>(a.p), dqp, static_cast<e4m3 *>(a8.p),
          static_cast<e4m3 *>(a8t.p), static_cast<Fp8CastStats *>(stats.p), s);
    });
    // The cast's bandwidth beside a plain cast (no transpose) and a
    // device-to-device copy of the same input: what the transpose costs,
    // and how far the casts are from the memory system's rate.
    float plain = time([&] {
      tcc_cuda::launch_fp8_cast_transpose<tcc_cuda::bf16, e4m3>(
          m, sh.k, static_cast<const tcc_cuda::bf16 *>(a.p), dqp, static_cast<e4m3 *>(a8.p),
          static_cast<e4m3 *>(nullptr), static_cast<Fp8CastStats *>(stats.p), s);
    });
    Device copy(m * sh.k * 2);
    float copied = time([&] { cudaMemcpyAsync(copy.p, a.p, m * sh.k * 2, cudaMemcpyDeviceToDevice, s); });
    const double elems = static_cast<double>(m) * sh.k;
    casts.push_back({sh.model, sh.name, cast, elems * 4 / (cast * 1e6), elems * 3 / (plain * 1e6),
                     elems * 4 / (copied * 1e6)});
    const double flops = 2.0 * m * sh.n * sh.k;
    if (failed || cudaDeviceSynchronize() != cudaSuccess) {
      std::printf("%-10s %-12s failed: %s\n", sh.model, sh.name,
                  tcc_cuda_host::state().error.c_str());
      continue;
    }
    std::printf("%-10s %-12s %6lld %6lld %6lld | %9.3f %9.3f %9.3f | %8.0f %8.0f %6.3f %5.2fx\n",
                sh.model, sh.name, static_cast<long long>(m), static_cast<long long>(sh.n),
                static_cast<long long>(sh.k), bf16, fp8, fp8fast, flops / bf16 / 1e9,
                flops / fp8fast / 1e9, cast, bf16 / (fp8fast + cast));
    tcc_cuda_host::destroy_plan(p0);
    tcc_cuda_host::destroy_plan(p1);
    tcc_cuda_host::destroy_plan(p2);
  }
  std::printf("(net: bf16 ms / (fp8 fast ms + the activation's cast-transpose ms))\n");
  std::printf("\n%-10s %-12s %9s %12s %12s %12s\n", "model", "activation", "cast ms",
              "cast GB/s", "plain GB/s", "copy GB/s");
  for (const CastRow &r : casts)
    std::printf("%-10s %-12s %9.4f %12.0f %12.0f %12.0f\n", r.model, r.name, r.ms, r.both,
                r.plain, r.copy);
  std::printf("(cast: bf16 in, E4M3 out in both layouts; plain: out only; copy: "
              "cudaMemcpyAsync of the bf16 input; bytes read plus written)\n");
  // The vector cast-transpose's grid: the launcher caps it at
  // kFp8GridBlocks (8 blocks per SM, a grid-stride loop over 64 x 64
  // tiles); the same kernel at other grids, on the 1B decoder's SwiGLU
  // gradient (8192 x 5632), shows whether the cap or the last wave costs.
  {
    const int64_t rows = 8192, cols = 5632, tiles = (rows / 64) * (cols / 64);
    HostArray x(tcc_cuda_host::kGemmBF16, static_cast<size_t>(rows * cols));
    std::mt19937_64 rng(1);
    std::normal_distribution<double> normal(0.0, 1.0);
    for (size_t i = 0; i < x.bytes.size() / 2; ++i)
      x.set(i, normal(rng));
    Device in(rows * cols * 2), out(rows * cols), outT(rows * cols), stats(64), scale(4);
    cudaMemcpy(in.p, x.bytes.data(), rows * cols * 2, cudaMemcpyHostToDevice);
    const float one = 1.0f;
    cudaMemcpy(scale.p, &one, 4, cudaMemcpyHostToDevice);
    std::printf("\ncast-transpose grid (8192 x 5632 bf16 -> e4m3, both layouts, %lld tiles):",
                static_cast<long long>(tiles));
    for (int64_t blocks : {int64_t{132 * 4}, int64_t{132 * 8}, int64_t{132 * 16}, tiles}) {
      float ms = time([&] {
        cudaMemsetAsync(stats.p, 0, 64, s);
        tcc_cuda::detail::fp8_cast_transpose_vec8_kernel<tcc_cuda::bf16, e4m3>
            <<<static_cast<unsigned>(blocks), 256, 0, s>>>(
                rows, cols, static_cast<const tcc_cuda::bf16 *>(in.p),
                static_cast<const float *>(scale.p), static_cast<e4m3 *>(out.p),
                static_cast<e4m3 *>(outT.p), static_cast<Fp8CastStats *>(stats.p), nullptr, 0,
                nullptr, nullptr);
      });
      std::printf(" %lld blocks %.4f ms (%.0f GB/s);", static_cast<long long>(blocks), ms,
                  rows * cols * 4.0 / (ms * 1e6));
    }
    std::printf("\n");
  }
}

} // namespace

int main(int argc, char **argv) {
  TestArgs args = parseTestArgs(argc, argv);
  uint64_t seed = args.seed;
  bool doBench = args.bench;
  int devices = 0;
  cudaDeviceProp prop{};
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0 ||
      cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
    std::printf("no GPU: skipped\n");
    return 77;
  }
  if (prop.major * 10 + prop.minor < 89) {
    std::printf("%s (sm_%d%d) has no FP8 tensor cores: skipped\n", prop.name, prop.major,
                prop.minor);
    return 77;
  }
  if (cublasLtCreate(&tcc_cuda_host::state().lt) != CUBLAS_STATUS_SUCCESS) {
    std::printf("cublasLtCreate failed\n");
    return 1;
  }
  // gemm() (the bf16 bench) searches and caches: a cache file of its own.
  char cacheDir[] = "/tmp/tcc_fp8_gemm_test_XXXXXX";
  if (!mkdtemp(cacheDir))
    return 1;
  std::string cacheFile = std::string(cacheDir) + "/gemm.txt";
  setenv("TCC_GEMM_CACHE", cacheFile.c_str(), 1);
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  Device workspace(kWorkspace);
  bool ok = true;
  using tcc_cuda::bf16;
  using tcc_cuda::f16;
  for (auto [r, c] : {std::pair<int64_t, int64_t>{1, 1}, {33, 65}, {77, 1000}, {256, 768}}) {
    ok &= castCase<bf16, e4m3>(r, c, false, rng);
    ok &= castCase<bf16, e5m2>(r, c, false, rng);
  }
  // The vector form (16-bit, multiples of 8): a partial tile, and GPT-2's.
  ok &= castCase<bf16, e4m3>(72, 136, false, rng);
  ok &= castCase<f16, e5m2>(64, 1024, false, rng);
  ok &= castCase<bf16, e4m3>(1024, 768, false, rng);
  // More 64 x 64 tiles than kFp8GridBlocks (1056): 3315 and 1755 tiles.
  ok &= castCase<bf16, e5m2>(4104, 3208, false, rng);
  ok &= castCase<f16, e4m3>(4104, 1672, false, rng);
  ok &= castCase<float, e4m3>(37, 129, false, rng);
  ok &= castCase<f16, e5m2>(64, 100, false, rng);
  ok &= castCase<bf16, e4m3>(40, 40, true, rng);
  ok &= currentScaleCase<bf16, e4m3>(256, 768, false, "normal", rng);  // the vector forms
  ok &= currentScaleCase<bf16, e5m2>(768, 256, true, "normal", rng);
  ok &= currentScaleCase<float, e4m3>(33, 65, true, "normal", rng);   // the scalar forms
  ok &= currentScaleCase<f16, e4m3>(7, 9, false, "normal", rng);
  ok &= currentScaleCase<bf16, e4m3>(64, 64, false, "zeros", rng);
  ok &= currentScaleCase<bf16, e5m2>(64, 64, true, "nan", rng);
  ok &= delayedScaleCase<bf16, e4m3>(256, 768, false, rng); // the vector form
  ok &= delayedScaleCase<bf16, e5m2>(768, 256, true, rng);
  ok &= delayedScaleCase<float, e4m3>(33, 65, true, rng);   // the scalar form
  ok &= batchedDelayedCase<false>(rng);
  ok &= batchedDelayedCase<true>(rng);
  ok &= computedSourceCase<e4m3>(256, 704, false, rng); // SwiGLU's width / 8
  ok &= computedSourceCase<e5m2>(72, 136, false, rng);
  ok &= computedSourceCase<e4m3>(40, 64, true, rng);
  ok &= computedSourceCase<e5m2>(4104, 1672, false, rng); // 1755 tiles
  ok &= multiSourceCase(256, 704, false, rng);
  ok &= multiSourceCase(72, 136, false, rng);
  ok &= multiSourceCase(40, 64, true, rng);
  ok &= multiSourceCase(4104, 1672, false, rng); // 1755 tiles
  ok &= updateScaleCase();
  using tcc_cuda_host::kFp8E4M3;
  using tcc_cuda_host::kFp8E5M2;
  for (bool fast : {false, true}) {
    ok &= gemmCase(kFp8E4M3, kFp8E4M3, tcc_cuda_host::kGemmBF16, fast, 100, 64, 96, rng, workspace.p);
    ok &= gemmCase(kFp8E4M3, kFp8E4M3, tcc_cuda_host::kGemmF32, fast, 37, 128, 768, rng, workspace.p);
    ok &= gemmCase(kFp8E5M2, kFp8E4M3, tcc_cuda_host::kGemmBF16, fast, 129, 768, 256, rng, workspace.p);
    ok &= gemmCase(kFp8E4M3, kFp8E5M2, tcc_cuda_host::kGemmBF16, fast, 64, 256, 3072, rng, workspace.p);
    // With a residual: f32 (the residual stream, in place and apart) and
    // bf16 (one input gradient added to the other).
    ok &= gemmCase(kFp8E4M3, kFp8E4M3, tcc_cuda_host::kGemmF32, fast, 96, 128, 256, rng,
                   workspace.p, Residual::kInPlace);
    ok &= gemmCase(kFp8E4M3, kFp8E4M3, tcc_cuda_host::kGemmF32, fast, 40, 64, 512, rng,
                   workspace.p, Residual::kApart);
    ok &= gemmCase(kFp8E5M2, kFp8E4M3, tcc_cuda_host::kGemmBF16, fast, 72, 256, 128, rng,
                   workspace.p, Residual::kApart);
  }
  if (doBench)
    bench(workspace.p);
  std::remove(cacheFile.c_str());
  rmdir(cacheDir);
  std::printf("%s\n", ok ? "all passed" : "FAILED");
  return ok ? 0 : 1;
}
