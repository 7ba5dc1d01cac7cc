// Device test of tcc's Hopper attention forward
// (compiler/codegen/cuda/sm90/attention_sm90.cu) against the float64
// reference of attention_kernels_test, in the strided layouts the steps use
// (packed q, k, v when T == S; padded rows otherwise; out (B, T, H, D)).
//
//   attention_sm90_test [--seed N] [--filter SUBSTRING] [--bench]
//
// Per case (bf16 and f16; D 64 and 128; causal or not; T != S, T > S with
// fully masked rows; grouped and multi-query heads; several key tiles with
// ragged ends): out and lse against the reference with
// attention_kernels_test's tolerances; the work counter left zero. First,
// on any machine, the arguments it must refuse, each with its reason. Exit
// 0 all passed, 1 any failure, 77 skipped (refusals passed, no sm_90 GPU).
//
//   --bench   issue 37's shapes (B16 H12 T1024 D64 and B8 H16 T2048 D128,
//             causal, bf16, packed): this kernel beside cuDNN's forward
//             (when libcudnn.so.9 loads) and the prelude's flash forward,
//             median of 20, and the largest difference from cuDNN's out.
#include "compiler/codegen/cuda/cuda_prelude.cuh" // generated: the pieces, concatenated
#include "compiler/codegen/cuda/cudnn/cudnn_attention.h"
#include "compiler/codegen/cuda/sm90/attention_sm90.h"
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

#ifdef TCC_SM90_TRACE
namespace tcc_sm90 {
int attention_sm90_trace(unsigned long long (*out)[12]);
}
#endif

namespace {

using tcc_cuda::bf16;
using tcc_cuda::f16;

#include "tests/cuda/attention_reference.cuh"
#include "tests/cuda/attention_layouts.cuh"
#include "tests/cuda/cudnn_site.cuh"
#include "tests/cuda/attention_sm90_cases.cuh"

int *gScheduler = nullptr;

tcc_sm90::AttnSm90Strides st(const Placement &p) { return {p.st.b, p.st.h, p.st.r}; }

template <class T>
tcc_sm90::AttnSm90Forward argsOf(const Shape &sh, const StridedPlan &p, const T *in, T *out,
                                 float *lse, float scale, int *scheduler = nullptr) {
  tcc_sm90::AttnSm90Forward a;
  a.B = sh.B, a.H = sh.H, a.Hkv = sh.Hkv, a.T = sh.T, a.S = sh.S, a.D = sh.D;
  a.q = in + p.q.offset, a.k = in + p.k.offset, a.v = in + p.v.offset;
  a.out = out, a.lse = lse;
  a.qs = st(p.q), a.ks = st(p.k), a.vs = st(p.v), a.os = st(p.o);
  a.scale = scale;
  a.causal = sh.causal;
  a.f16 = std::is_same<T, f16>::value;
  if (scheduler != nullptr) {
    a.scheduler = scheduler;
    return a;
  }
  if (gScheduler == nullptr) { // zeroed once; every launch leaves it zero
    CUDA_CHECK(cudaMalloc(&gScheduler, 2 * sizeof(int)));
    CUDA_CHECK(cudaMemset(gScheduler, 0, 2 * sizeof(int)));
  }
  a.scheduler = gScheduler;
  return a;
}

template <class T> void runCase(const Shape &sh) {
  char name[200];
  if (!selectCase<T>(sh, name))
    return;
  const CaseInputs<T> drawn = caseInputs<T>(sh, name);
  const float scale = 4.0f / std::sqrt(static_cast<float>(sh.D));
  const Reference want = reference(sh, drawn.rq, drawn.rk, drawn.rv, drawn.rdo, scale, 0, 0);

  const StridedPlan p = stridedPlan(sh);
  std::vector<T> inputs(p.inputElems);
  std::memset(inputs.data(), 0xFF, inputs.size() * sizeof(T)); // NaN between the rows
  scatter(drawn.q, sh.B, sh.H, sh.T, sh.D, p.q, inputs);
  scatter(drawn.k, sh.B, sh.Hkv, sh.S, sh.D, p.k, inputs);
  scatter(drawn.v, sh.B, sh.Hkv, sh.S, sh.D, p.v, inputs);
  DeviceBuf<T> in(p.inputElems), o(p.outElems);
  DeviceBuf<float> l(sh.B * sh.H * sh.T);
  in.upload(inputs);
  o.poison();
  l.poison();
  const char *why = "";
  std::string bad;
  if (tcc_sm90::attention_forward_sm90(argsOf<T>(sh, p, in.ptr, o.ptr, l.ptr, scale), &why))
    bad += std::string(" refused: ") + why;
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
  const double e_out = compare(gather(o.download(), sh.B, sh.H, sh.T, sh.D, p.o), want.out, false);
  const double e_lse = compare(l.download(), want.lse, true);
  const double tol = tolOf<T>(), lse_tol = 1e-3;
  if (!(e_out <= tol))
    bad += " out=" + std::to_string(e_out);
  if (!(e_lse <= lse_tol))
    bad += " lse=" + std::to_string(e_lse);
  const bool ok = bad.empty();
  gPassed += ok;
  std::printf("[%s] %-52s out %.2e lse %.2e (tol %.1e, %.0e)%s\n", ok ? "PASS" : "FAIL", name,
              e_out, e_lse, tol, lse_tol, ok ? "" : (" FAILED:" + bad).c_str());
}

// Arguments the kernel must refuse, each with a reason, launching nothing
// (checked before any CUDA call, so this part runs without a GPU too: the
// pointers are aligned stand-ins, never dereferenced).
void refusals() {
  const Shape sh{1, 2, 2, 64, 64, 64, false, 0.f};
  const StridedPlan p = stridedPlan(sh);
  bf16 *const in = reinterpret_cast<bf16 *>(uintptr_t{1} << 20);
  bf16 *const o = reinterpret_cast<bf16 *>(uintptr_t{2} << 20);
  float *const l = reinterpret_cast<float *>(uintptr_t{3} << 20);
  int *const scheduler = reinterpret_cast<int *>(uintptr_t{4} << 20);
  struct Bad {
    const char *what;
    void (*mutate)(tcc_sm90::AttnSm90Forward &);
  };
  const Bad bads[] = {
      {"head size 96", [](tcc_sm90::AttnSm90Forward &a) { a.D = 96; }},
      {"H not a multiple of Hkv", [](tcc_sm90::AttnSm90Forward &a) { a.Hkv = 3; }},
      {"zero scale", [](tcc_sm90::AttnSm90Forward &a) { a.scale = 0.f; }},
      {"NaN scale", [](tcc_sm90::AttnSm90Forward &a) { a.scale = NAN; }},
      {"q misaligned", [](tcc_sm90::AttnSm90Forward &a) {
         a.q = static_cast<const bf16 *>(a.q) + 1;
       }},
      {"row stride 100", [](tcc_sm90::AttnSm90Forward &a) { a.ks.r = 100; }},
      {"negative T", [](tcc_sm90::AttnSm90Forward &a) { a.T = -1; }},
      {"no scheduler", [](tcc_sm90::AttnSm90Forward &a) { a.scheduler = nullptr; }},
  };
  for (const Bad &b : bads) {
    if (!gFilter.empty() && std::string("refuse ").append(b.what).find(gFilter) ==
                                std::string::npos)
      continue;
    ++gCases;
    tcc_sm90::AttnSm90Forward a = argsOf<bf16>(sh, p, in, o, l, 0.125f, scheduler);
    b.mutate(a);
    const char *why = nullptr;
    const int rc = tcc_sm90::attention_forward_sm90(a, &why);
    const bool ok = rc == 1 && why != nullptr && *why != '\0';
    gPassed += ok;
    std::printf("[%s] refuse %-45s %s\n", ok ? "PASS" : "FAIL", b.what,
                rc == 1 && why ? why : "(accepted)");
  }
}

// One issue shape, packed q, k, v: this kernel, cuDNN and the prelude's.
void benchShape(const Shape &sh, bool haveCudnn) {
  const StridedPlan p = stridedPlan(sh);
  const int64_t n = sh.B * sh.H * sh.T * sh.D;
  DeviceBuf<bf16> in(p.inputElems), o(n), o2(n);
  DeviceBuf<float> l(sh.B * sh.H * sh.T);
  std::vector<bf16> h(p.inputElems);
  Rng rng{42};
  for (bf16 &x : h)
    x = fromD<bf16>(rng.uniform());
  in.upload(h);
  const float scale = 1.0f / std::sqrt(static_cast<float>(sh.D));
  tcc_sm90::AttnSm90Forward a = argsOf<bf16>(sh, p, in.ptr, o.ptr, l.ptr, scale);
  const char *why = "";
  auto time = [&] {
    return medianMs([&] {
      if (tcc_sm90::attention_forward_sm90(a, &why))
        std::printf("sm90 forward refused: %s\n", why);
    });
  };
  const float ours = time(); // the launcher's choice of heads a group
  // Heads grouped together (item order: L2 reuse of K and V against
  // longest-first balance), then the default again, last, so that the trace
  // is the default's.
  std::string sweep;
  for (int64_t g : {8, 16, 32, 64, 128, 192, 0}) {
    a.group_heads = g;
    char cell[48];
    std::snprintf(cell, sizeof cell, "  %" PRId64 ": %.3f", g, time());
    sweep += cell;
  }
  const bf16 *q = in.ptr + p.q.offset, *k = in.ptr + p.k.offset, *v = in.ptr + p.v.offset;
  const float flash = medianMs([&] {
    CUDA_CHECK(tcc_cuda::launch_attention_forward_strided<bf16>(
        q, k, v, o2.ptr, l.ptr, sh.B, sh.H, sh.Hkv, sh.T, sh.S, sh.D, layoutOf(p), scale,
        sh.causal, 0.f, 0, 0, nullptr));
  });
  float cudnn = NAN;
  double diff = NAN;
  if (haveCudnn) {
    const tcc_cudnn::Site s = siteOf(sh, p, false, false, scale);
    tcc_cudnn::Plan plan;
    char cwhy[512] = "";
    if (tcc_cudnn::prepare(s, plan, cwhy, sizeof cwhy) == 0) {
      void *ws = nullptr;
      CUDA_CHECK(cudaMalloc(&ws, std::max<int64_t>(plan.workspace_bytes, 1)));
      DeviceBuf<float> l2(sh.B * sh.H * sh.T);
      cudnn = medianMs([&] {
        if (tcc_cudnn::forward(plan, nullptr, q, k, v, o2.ptr, l2.ptr, ws, cwhy, sizeof cwhy))
          std::printf("cuDNN forward failed: %s\n", cwhy);
      });
      CUDA_CHECK(cudaFree(ws));
      const std::vector<bf16> x = o.download(), y = o2.download();
      diff = 0;
      for (size_t i = 0; i < x.size(); ++i)
        diff = std::max(diff, std::fabs(toD(x[i]) - toD(y[i])));
    } else {
      std::printf("cuDNN does not run this shape: %s\n", cwhy);
    }
  }
  // Causal: half the T x S products.
  const double flops = 4.0 * sh.B * sh.H * sh.T * sh.S * sh.D * (sh.causal ? 0.5 : 1.0);
  auto tf = [&](float ms) { return flops / (ms * 1e-3) / 1e12; };
  std::printf("bench B%" PRId64 " H%" PRId64 " T%" PRId64 " D%" PRId64 " %s bf16 packed, "
              "forward (median of 20):\n"
              "  tcc sm90   %.3f ms  %.0f TFLOP/s\n"
              "  cuDNN      %.3f ms  %.0f TFLOP/s   (tcc sm90 / cuDNN time %.2fx)\n"
              "  tcc flash  %.3f ms  %.0f TFLOP/s\n"
              "  max |out - cuDNN's out| %.3e\n"
              "  tcc sm90 ms by heads a group (0: the default):%s\n",
              sh.B, sh.H, sh.T, sh.D, sh.causal ? "causal" : "", ours, tf(ours), cudnn,
              tf(cudnn), ours / cudnn, flash, tf(flash), diff, sweep.c_str());
#ifdef TCC_SM90_TRACE
  // The last launch's first CTA, cycles per key tile and loop phase.
  unsigned long long tr[2][12];
  if (tcc_sm90::attention_sm90_trace(tr) == 0) {
    // Phases 0-6 per key tile, 7-8 per item; slot 9 the total, 10 the key
    // tiles, 11 the waits for each item's first tile (part of phase 0).
    const char *names[11] = {"tile wait", "turn wait", "issue", "S wait", "softmax",
                             "PV wait", "rescale+pack", "last P V", "epilogue",
                             "kernel total", "1st-tile waits"};
    const int slot[11] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11};
    std::printf("  trace of CTA 0 (%llu key tiles), cycles per key tile:\n", tr[0][10]);
    const double n = tr[0][10] ? double(tr[0][10]) : 1.0;
    for (int i = 0; i < 11; ++i)
      std::printf("    %-14s wg0 %8.0f  wg1 %8.0f\n", names[i], double(tr[0][slot[i]]) / n,
                  double(tr[1][slot[i]]) / n);
  }
#endif
}

template <class T> void allCases() {
  sm90Cases<T>([](const Shape &sh) { runCase<T>(sh); });
}

} // namespace

int main(int argc, char **argv) {
  bool benchOnly = false;
  if (int rc = parseTestArgs(argc, argv, "attention_sm90_test", benchOnly))
    return rc;
  if (!benchOnly)
    refusals();
  if (gPassed != gCases) {
    std::printf("%d of %d refusals passed: FAILED\n", gPassed, gCases);
    return 1;
  }
  bool haveCudnn = false;
  if (!sm90Device("attention_sm90_test", haveCudnn))
    return 77;
  if (benchOnly) {
    benchShape({16, 12, 12, 1024, 1024, 64, true, 0.f}, haveCudnn);
    benchShape({8, 16, 16, 2048, 2048, 128, true, 0.f}, haveCudnn);
    return 0;
  }
  allCases<bf16>();
  allCases<f16>();
  if (gScheduler != nullptr) { // the launches left the work counter as they found it
    int left[2] = {-1, -1};
    CUDA_CHECK(cudaMemcpy(left, gScheduler, sizeof left, cudaMemcpyDeviceToHost));
    ++gCases;
    gPassed += left[0] == 0 && left[1] == 0;
    std::printf("[%s] scheduler left zero by every launch (%d, %d)\n",
                left[0] == 0 && left[1] == 0 ? "PASS" : "FAIL", left[0], left[1]);
  }
  std::printf("%d of %d cases passed: %s (seed %" PRIu64 ")\n", gPassed, gCases,
              gPassed == gCases ? "ALL PASSED" : "FAILED", gSeed);
  return gPassed == gCases ? 0 : 1;
}
