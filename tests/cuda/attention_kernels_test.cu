// Device test of the CUDA prelude's flash-attention launchers
// (compiler/codegen/cuda/prelude/attention_*.cuh: launch_attention_forward,
// launch_attention_backward) against a float64 CPU reference of the same
// math (out, lse, dq, dk, dv). A standalone program like
// kernel_families_test (no gtest).
//
//   attention_kernels_test [--seed N] [--filter SUBSTRING]
//
// Inputs are fresh random numbers every run (uniform in [-1, 1], rounded to
// the element type; the reference reads the rounded values exactly); the
// seed is printed and --seed N reproduces a run; --filter runs the cases
// whose name contains SUBSTRING. Every output is poisoned with 0xFF bytes
// (NaN in every type) before each launch, so an element never written
// fails. Exit 0 when every case passes, 1 on any failure, 77 (skipped)
// without a GPU.
//
// Cases: bf16, f16 and float; D 64 and 128; causal or not; T != S with odd
// sizes that are no multiple of any tile (T 100 / S 333, T 129 / S 257),
// T > S causal (the first T - S rows fully masked: out 0, lse -inf),
// grouped (H 8, Hkv 2) and multi-query (Hkv 1) heads, dropout 0.1 with a
// fixed key (the reference applies the exact mask of counter_rng.h's
// tcc_rng_bits, computed independently on the host). The backward runs
// three times (deterministic false, true, true): the first two are checked
// against the reference, and all three must be bit-identical (the
// launchers use no atomics in either mode). Unsupported D (96), H % Hkv != 0 and rate 1 must return
// cudaErrorInvalidValue.
//
// Strided layouts (launch_attention_*_strided, what kern-fold-attention-
// layout emits): every case runs again with q, k, v read from and dq, dk,
// dv written into one packed (B, T, (H + 2 Hkv) D) buffer when T == S
// (GPT-2's c_attn output and its gradient), else each tensor in its own
// (B, N, Hx D + 8) buffer (rows with gaps), out and dout (B, T, H, D). The
// results must equal the contiguous launch's bit for bit, and every element
// outside the tensors must keep its poison.
//
//   attention_kernels_test --bench   times GPT-2's shape (B16 H12 T1024
//   D64 causal bf16), contiguous vs packed, forward and backward.
//
// Tolerances, per tensor: err = max |got - want| / max |want| (lse: max
// |got - want|, an absolute error since lse is a log). Scores use scale
// 4 / sqrt(D), so s has a standard deviation near 1.3 and the softmax is
// far from flat: dropping or misplacing one key moves an output by several
// percent of the tensor's largest element.
// - float (SIMT, fp32 throughout): 2e-5 (sums of <= 333 fp32 products,
//   expf / logf within 2 ulp: errors near 1e-6).
// - f16: 2^-9 (2e-3), bf16: 2^-7 (7.8e-3). The tensor-core path rounds
//   P (forward) and dS, Z (backward) to the element type before the next
//   product (relative 2^-11 f16 / 2^-8 bf16, random signs, so they add up
//   like a random walk far below the tensor maximum), plus the final
//   rounding of each output (at most half an ulp of the maximum: 2^-12 /
//   2^-9 relative); four times that bound keeps margin for the delta term,
//   which reads the rounded forward output. lse: 1e-5 float, 1e-3 16-bit
//   (computed in fp32 from rounded-input products of fp32 accumulation).
#include "compiler/codegen/cuda/cuda_prelude.cuh" // generated: the pieces, concatenated
#include "runtime/include/tcc/counter_rng.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "tests/cuda/cuda_check.cuh"

namespace {

using tcc_cuda::bf16;
using tcc_cuda::f16;

#include "tests/cuda/attention_reference.cuh"
#include "tests/cuda/attention_layouts.cuh"

// The strided launches against the contiguous results (bit for bit); no
// element outside the tensors written. Returns "" or what differs.
template <class T>
std::string stridedRun(const Shape &sh, const std::vector<T> &hq, const std::vector<T> &hk,
                       const std::vector<T> &hv, const std::vector<T> &hdo, float scale,
                       uint64_t seed_key, uint64_t step, const std::vector<T> &out,
                       const std::vector<float> &lse, const std::vector<T> (&grads)[3]) {
  const StridedPlan p = stridedPlan(sh);
  std::vector<T> poison(p.inputElems);
  std::memset(poison.data(), 0xFF, poison.size() * sizeof(T));
  std::vector<T> inputs = poison, hdo_s(p.outElems);
  scatter(hq, sh.B, sh.H, sh.T, sh.D, p.q, inputs);
  scatter(hk, sh.B, sh.Hkv, sh.S, sh.D, p.k, inputs);
  scatter(hv, sh.B, sh.Hkv, sh.S, sh.D, p.v, inputs);
  scatter(hdo, sh.B, sh.H, sh.T, sh.D, p.o, hdo_s);
  DeviceBuf<T> in(p.inputElems), grad(p.inputElems), o(p.outElems), g(p.outElems);
  DeviceBuf<float> l(sh.B * sh.H * sh.T);
  DeviceBuf<float> ws(tcc_cuda::attention_backward_workspace_floats(
      sh.B, sh.H, sh.Hkv, sh.T, sh.S, sh.D, false));
  in.upload(inputs);
  g.upload(hdo_s);
  o.poison();
  l.poison();
  grad.poison();
  const tcc_cuda::AttnLayout layout = layoutOf(p);
  CUDA_CHECK(tcc_cuda::launch_attention_forward_strided<T>(
      in.ptr + p.q.offset, in.ptr + p.k.offset, in.ptr + p.v.offset, o.ptr, l.ptr, sh.B,
      sh.H, sh.Hkv, sh.T, sh.S, sh.D, layout, scale, sh.causal, sh.rate, seed_key, step,
      nullptr));
  CUDA_CHECK(tcc_cuda::launch_attention_backward_strided<T>(
      in.ptr + p.q.offset, in.ptr + p.k.offset, in.ptr + p.v.offset, o.ptr, l.ptr, g.ptr,
      grad.ptr + p.q.offset, grad.ptr + p.k.offset, grad.ptr + p.v.offset, ws.ptr, sh.B,
      sh.H, sh.Hkv, sh.T, sh.S, sh.D, layout, scale, sh.causal, sh.rate, seed_key, step,
      true, nullptr));
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
  std::string why;
  if (!sameBits(gather(o.download(), sh.B, sh.H, sh.T, sh.D, p.o), out))
    why += " out";
  if (!sameBits(l.download(), lse))
    why += " lse";
  const std::vector<T> gr = grad.download();
  if (!sameBits(gather(gr, sh.B, sh.H, sh.T, sh.D, p.q), grads[0]))
    why += " dq";
  if (!sameBits(gather(gr, sh.B, sh.Hkv, sh.S, sh.D, p.k), grads[1]))
    why += " dk";
  if (!sameBits(gather(gr, sh.B, sh.Hkv, sh.S, sh.D, p.v), grads[2]))
    why += " dv";
  // Everything outside dq, dk, dv still poison.
  std::vector<T> expect = poison;
  scatter(grads[0], sh.B, sh.H, sh.T, sh.D, p.q, expect);
  scatter(grads[1], sh.B, sh.Hkv, sh.S, sh.D, p.k, expect);
  scatter(grads[2], sh.B, sh.Hkv, sh.S, sh.D, p.v, expect);
  if (!sameBits(gr, expect))
    why += " (written outside dq/dk/dv)";
  return why;
}

template <class T> void runCase(const Shape &sh) {
  char name[200];
  if (!selectCase<T>(sh, name))
    return;
  const size_t nq = sh.B * sh.H * sh.T * sh.D, nk = sh.B * sh.Hkv * sh.S * sh.D;
  const CaseInputs<T> drawn = caseInputs<T>(sh, name);
  const std::vector<T> &hq = drawn.q, &hk = drawn.k, &hv = drawn.v, &hdo = drawn.dout;
  const std::vector<double> &rq = drawn.rq, &rk = drawn.rk, &rv = drawn.rv,
                            &rdo = drawn.rdo;
  const float scale = 4.0f / std::sqrt(static_cast<float>(sh.D));
  const uint64_t seed_key = 0x1234abcd5678ef01ull ^ tcc_rng_mix64(42), step = 7;
  const Reference want = reference(sh, rq, rk, rv, rdo, scale, seed_key, step);

  DeviceBuf<T> q(nq), k(nk), v(nk), out(nq), dout(nq), dq(nq), dk(nk), dv(nk);
  DeviceBuf<float> lse(sh.B * sh.H * sh.T);
  DeviceBuf<float> ws(tcc_cuda::attention_backward_workspace_floats(
      sh.B, sh.H, sh.Hkv, sh.T, sh.S, sh.D, false));
  q.upload(hq);
  k.upload(hk);
  v.upload(hv);
  dout.upload(hdo);
  out.poison();
  lse.poison();
  std::string why;
  cudaError_t e = tcc_cuda::launch_attention_forward<T>(
      q.ptr, k.ptr, v.ptr, out.ptr, lse.ptr, sh.B, sh.H, sh.Hkv, sh.T, sh.S,
      sh.D, scale, sh.causal, sh.rate, seed_key, step, nullptr);
  CUDA_CHECK(e);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
  const double tol = tolOf<T>();
  const double lse_tol = std::is_same<T, float>::value ? 1e-5 : 1e-3;
  const double e_out = compare(out.download(), want.out, false);
  const double e_lse = compare(lse.download(), want.lse, true);
  std::vector<T> grads[3][3];
  for (int run = 0; run < 3; ++run) {
    dq.poison();
    dk.poison();
    dv.poison();
    ws.poison();
    CUDA_CHECK(tcc_cuda::launch_attention_backward<T>(
        q.ptr, k.ptr, v.ptr, out.ptr, lse.ptr, dout.ptr, dq.ptr, dk.ptr, dv.ptr,
        ws.ptr, sh.B, sh.H, sh.Hkv, sh.T, sh.S, sh.D, scale, sh.causal, sh.rate,
        seed_key, step, /*deterministic=*/run > 0, nullptr));
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaDeviceSynchronize());
    grads[run][0] = dq.download();
    grads[run][1] = dk.download();
    grads[run][2] = dv.download();
  }
  // Runs 0 and 1 against the reference; all three bit for bit.
  double e_dq = 0, e_dk = 0, e_dv = 0;
  for (int run = 0; run < 2; ++run) {
    e_dq = std::max(e_dq, compare(grads[run][0], want.dq, false));
    e_dk = std::max(e_dk, compare(grads[run][1], want.dk, false));
    e_dv = std::max(e_dv, compare(grads[run][2], want.dv, false));
  }
  bool same = true;
  for (int t = 0; t < 3; ++t)
    same = same && sameBits(grads[0][t], grads[1][t]) &&
           sameBits(grads[1][t], grads[2][t]);
  const std::string strided =
      stridedRun<T>(sh, hq, hk, hv, hdo, scale, seed_key, step, out.download(),
                    lse.download(), grads[1]);
  const bool ok = e_out <= tol && e_lse <= lse_tol && e_dq <= tol &&
                  e_dk <= tol && e_dv <= tol && same && strided.empty();
  gPassed += ok;
  std::printf("[%s] %-58s out %.2e lse %.2e dq %.2e dk %.2e dv %.2e (tol %.1e)%s%s%s\n",
              ok ? "PASS" : "FAIL", name, e_out, e_lse, e_dq, e_dk, e_dv, tol,
              same ? "" : " backward NOT bit-identical across runs",
              strided.empty() ? (sh.T == sh.S ? " packed=" : " padded=") : " STRIDED DIFFERS:",
              strided.empty() ? "same" : strided.c_str());
}

template <class T> void unsupported() {
  if (!gFilter.empty() && std::string("unsupported").find(gFilter) == std::string::npos)
    return;
  DeviceBuf<T> buf(8 * 128);
  DeviceBuf<float> f(64);
  struct Bad {
    int64_t H, Hkv, D;
    float rate;
    const char *what;
  } bads[] = {{2, 1, 96, 0.f, "D=96"},
              {3, 2, 64, 0.f, "H=3 Hkv=2"},
              {2, 0, 64, 0.f, "Hkv=0"},
              {2, 2, 64, 1.f, "rate=1"}};
  for (const Bad &b : bads) {
    ++gCases;
    const cudaError_t fe = tcc_cuda::launch_attention_forward<T>(
        buf.ptr, buf.ptr, buf.ptr, buf.ptr, f.ptr, 1, b.H, b.Hkv, 2, 2, b.D,
        1.f, false, b.rate, 0, 0, nullptr);
    const cudaError_t be = tcc_cuda::launch_attention_backward<T>(
        buf.ptr, buf.ptr, buf.ptr, buf.ptr, f.ptr, buf.ptr, buf.ptr, buf.ptr,
        buf.ptr, f.ptr, 1, b.H, b.Hkv, 2, 2, b.D, 1.f, false, b.rate, 0, 0,
        true, nullptr);
    const bool ok = fe == cudaErrorInvalidValue && be == cudaErrorInvalidValue;
    gPassed += ok;
    std::printf("[%s] %s unsupported %s -> forward %s, backward %s\n",
                ok ? "PASS" : "FAIL", typeName<T>(), b.what,
                cudaGetErrorName(fe), cudaGetErrorName(be));
  }
  CUDA_CHECK(cudaGetLastError());
}

// GPT-2's attention (B16 H12 T1024 D64 causal bf16): contiguous vs packed
// launches, median of 20 timed after 3 warm-up, forward and backward.
void bench() {
  const Shape sh{16, 12, 12, 1024, 1024, 64, true, 0.f};
  const StridedPlan p = stridedPlan(sh);
  const int64_t n = sh.B * sh.H * sh.T * sh.D;
  DeviceBuf<bf16> q(n), k(n), v(n), o(n), g(n), dq(n), dk(n), dv(n);
  DeviceBuf<bf16> in(p.inputElems), grad(p.inputElems), po(n), pg(n);
  DeviceBuf<float> l(sh.B * sh.H * sh.T), ws(sh.B * sh.H * sh.T);
  std::vector<bf16> h(p.inputElems);
  Rng rng{42};
  for (bf16 &x : h)
    x = fromD<bf16>(rng.uniform());
  in.upload(h);
  h.resize(n);
  for (DeviceBuf<bf16> *b : {&q, &k, &v, &g, &pg})
    b->upload(h);
  const tcc_cuda::AttnLayout layout = layoutOf(p);
  const float scale = 0.125f;
  auto fwd = [&] {
    return tcc_cuda::launch_attention_forward<bf16>(q.ptr, k.ptr, v.ptr, o.ptr, l.ptr, 16,
                                                    12, 12, 1024, 1024, 64, scale, true,
                                                    0.f, 0, 0, nullptr);
  };
  auto fwdPacked = [&] {
    return tcc_cuda::launch_attention_forward_strided<bf16>(
        in.ptr + p.q.offset, in.ptr + p.k.offset, in.ptr + p.v.offset, po.ptr, l.ptr, 16, 12,
        12, 1024, 1024, 64, layout, scale, true, 0.f, 0, 0, nullptr);
  };
  auto bwd = [&] {
    return tcc_cuda::launch_attention_backward<bf16>(
        q.ptr, k.ptr, v.ptr, o.ptr, l.ptr, g.ptr, dq.ptr, dk.ptr, dv.ptr, ws.ptr, 16, 12, 12,
        1024, 1024, 64, scale, true, 0.f, 0, 0, true, nullptr);
  };
  auto bwdPacked = [&] {
    return tcc_cuda::launch_attention_backward_strided<bf16>(
        in.ptr + p.q.offset, in.ptr + p.k.offset, in.ptr + p.v.offset, po.ptr, l.ptr, pg.ptr,
        grad.ptr + p.q.offset, grad.ptr + p.k.offset, grad.ptr + p.v.offset, ws.ptr, 16, 12,
        12, 1024, 1024, 64, layout, scale, true, 0.f, 0, 0, true, nullptr);
  };
  CUDA_CHECK(fwd());
  CUDA_CHECK(fwdPacked());
  auto timed = [](auto &&launch) { return medianMs([&] { CUDA_CHECK(launch()); }); };
  const float f0 = timed(fwd), f1 = timed(fwdPacked), b0 = timed(bwd),
              b1 = timed(bwdPacked);
  std::printf("bench B16 H12 T1024 D64 causal bf16 (median of 20):\n"
              "  forward  contiguous %.3f ms  packed %.3f ms  (%.3fx)\n"
              "  backward contiguous %.3f ms  packed %.3f ms  (%.3fx)\n",
              f0, f1, f1 / f0, b0, b1, b1 / b0);
}

template <class T> void allCases() {
  for (int64_t D : {64, 128})
    for (bool causal : {false, true}) {
      runCase<T>({2, 4, 4, 100, 333, D, causal, 0.f});
      runCase<T>({1, 8, 2, 129, 257, D, causal, 0.f}); // GQA
      runCase<T>({2, 3, 1, 150, 70, D, causal, 0.f});  // MQA, T > S
      runCase<T>({1, 8, 2, 129, 257, D, causal, 0.1f}); // dropout
    }
  runCase<T>({1, 2, 2, 256, 256, 64, true, 0.f}); // whole tiles
  unsupported<T>();
}

} // namespace

int main(int argc, char **argv) {
  bool benchOnly = false;
  if (int rc = parseTestArgs(argc, argv, "attention_kernels_test", benchOnly))
    return rc;
  if (!haveGpu("attention_kernels_test"))
    return 77;
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s (sm_%d%d, %d SMs)\nseed %" PRIu64
              " (reproduce with --seed %" PRIu64 ")\n",
              prop.name, prop.major, prop.minor, prop.multiProcessorCount, gSeed,
              gSeed);
  if (benchOnly) {
    bench();
    return 0;
  }
  allCases<bf16>();
  allCases<f16>();
  allCases<float>();
  std::printf("%d of %d cases passed: %s (seed %" PRIu64 ")\n", gPassed, gCases,
              gPassed == gCases ? "ALL PASSED" : "FAILED", gSeed);
  return gPassed == gCases ? 0 : 1;
}
