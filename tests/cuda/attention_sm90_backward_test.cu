// Device test of tcc's Hopper attention backward
// (compiler/codegen/cuda/sm90/attention_backward_sm90.cu) against the
// float64 reference of attention_kernels_test, in the strided layouts the
// steps use (packed q, k, v and dq, dk, dv when T == S; padded rows
// otherwise; out and dout (B, T, H, D)).
//
//   attention_sm90_backward_test [--seed N] [--filter SUBSTRING] [--bench]
//
// Per case (bf16 and f16; D 64 and 128; causal or not; T != S, T > S with
// fully masked rows; grouped and multi-query heads; several tiles with
// ragged ends; no keys at all): the backward of the sm90 forward's out and
// lse; dq, dk, dv against the reference with attention_kernels_test's
// tolerances, nothing written outside them (the buffer between the rows is
// poisoned), and a second run on the same workspace: dq right again, dk
// and dv the same bits. First, on any machine, the arguments it must
// refuse, each with its reason. Exit 0 all passed, 1 any failure, 77
// skipped (refusals passed, no sm_90 GPU).
//
//   --bench   issue 37's shapes (B16 H12 T1024 D64 and B8 H16 T2048 D128,
//             causal, bf16, packed): this backward beside cuDNN's
//             (deterministic, as steps run it by default, and not) and the
//             prelude's flash backward, median of 20, and the largest
//             difference from cuDNN's gradients.
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

namespace {

using tcc_cuda::bf16;
using tcc_cuda::f16;

#include "tests/cuda/attention_reference.cuh"
#include "tests/cuda/attention_layouts.cuh"
#include "tests/cuda/cudnn_site.cuh"
#include "tests/cuda/attention_sm90_cases.cuh"

tcc_sm90::AttnSm90Strides st(const Placement &p) { return {p.st.b, p.st.h, p.st.r}; }

// The backward's workspace: grows to the largest request, poisoned (NaN)
// when allocated: the launch must initialize what it reads.
struct Scratch {
  void *ptr = nullptr;
  size_t bytes = 0;
  void *reserve(size_t n) {
    if (n > bytes) {
      CUDA_CHECK(cudaFree(ptr));
      CUDA_CHECK(cudaMalloc(&ptr, n));
      CUDA_CHECK(cudaMemset(ptr, 0xFF, n));
      bytes = n;
    }
    return ptr;
  }
  ~Scratch() { cudaFree(ptr); }
};
Scratch gWorkspace;
int *gScheduler = nullptr;

// The sm90 forward of the case (out, lse: what the backward is given).
template <class T>
void forward(const Shape &sh, const StridedPlan &p, const T *in, T *out, float *lse,
             float scale) {
  if (gScheduler == nullptr) { // zeroed once; every launch leaves it zero
    CUDA_CHECK(cudaMalloc(&gScheduler, 2 * sizeof(int)));
    CUDA_CHECK(cudaMemset(gScheduler, 0, 2 * sizeof(int)));
  }
  tcc_sm90::AttnSm90Forward a;
  a.B = sh.B, a.H = sh.H, a.Hkv = sh.Hkv, a.T = sh.T, a.S = sh.S, a.D = sh.D;
  a.q = in + p.q.offset, a.k = in + p.k.offset, a.v = in + p.v.offset;
  a.out = out, a.lse = lse;
  a.qs = st(p.q), a.ks = st(p.k), a.vs = st(p.v), a.os = st(p.o);
  a.scale = scale;
  a.causal = sh.causal;
  a.f16 = std::is_same<T, f16>::value;
  a.scheduler = gScheduler;
  const char *why = "";
  if (tcc_sm90::attention_forward_sm90(a, &why)) {
    std::printf("sm90 forward refused: %s\n", why);
    std::exit(1);
  }
}

// Backward arguments: q, k, v in `in`, dq, dk, dv at the same places in
// `grad`; out and dout in the (B, T, H, D) layout.
template <class T>
tcc_sm90::AttnSm90Backward backwardArgs(const Shape &sh, const StridedPlan &p, const T *in,
                                        const T *out, const T *dout, const float *lse, T *grad,
                                        float scale, void *workspace) {
  tcc_sm90::AttnSm90Backward a;
  a.B = sh.B, a.H = sh.H, a.Hkv = sh.Hkv, a.T = sh.T, a.S = sh.S, a.D = sh.D;
  a.q = in + p.q.offset, a.k = in + p.k.offset, a.v = in + p.v.offset;
  a.out = out, a.dout = dout, a.lse = lse;
  a.dq = grad + p.q.offset, a.dk = grad + p.k.offset, a.dv = grad + p.v.offset;
  a.qs = a.dqs = st(p.q), a.ks = a.dks = st(p.k), a.vs = a.dvs = st(p.v);
  a.os = a.dos = st(p.o);
  a.scale = scale;
  a.causal = sh.causal;
  a.f16 = std::is_same<T, f16>::value;
  a.workspace = workspace;
  if (workspace == nullptr)
    a.workspace = gWorkspace.reserve(std::max<int64_t>(
        16, tcc_sm90::attention_backward_sm90_workspace(a)));
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
  std::vector<T> poison(p.inputElems), dout(p.outElems);
  std::memset(poison.data(), 0xFF, poison.size() * sizeof(T)); // NaN between the rows
  std::vector<T> inputs = poison;
  scatter(drawn.q, sh.B, sh.H, sh.T, sh.D, p.q, inputs);
  scatter(drawn.k, sh.B, sh.Hkv, sh.S, sh.D, p.k, inputs);
  scatter(drawn.v, sh.B, sh.Hkv, sh.S, sh.D, p.v, inputs);
  scatter(drawn.dout, sh.B, sh.H, sh.T, sh.D, p.o, dout);
  DeviceBuf<T> in(p.inputElems), grad(p.inputElems), o(p.outElems), g(p.outElems);
  DeviceBuf<float> l(sh.B * sh.H * sh.T);
  in.upload(inputs);
  g.upload(dout);
  forward<T>(sh, p, in.ptr, o.ptr, l.ptr, scale);

  std::string bad;
  auto run = [&]() {
    grad.upload(poison);
    const char *why = "";
    if (tcc_sm90::attention_backward_sm90(
            backwardArgs<T>(sh, p, in.ptr, o.ptr, g.ptr, l.ptr, grad.ptr, scale, nullptr), &why))
      bad += std::string(" refused: ") + why;
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaDeviceSynchronize());
    return grad.download();
  };
  const std::vector<T> gr = run();
  const std::vector<T> dq = gather(gr, sh.B, sh.H, sh.T, sh.D, p.q),
                       dk = gather(gr, sh.B, sh.Hkv, sh.S, sh.D, p.k),
                       dv = gather(gr, sh.B, sh.Hkv, sh.S, sh.D, p.v);
  const double e_dq = compare(dq, want.dq, false), e_dk = compare(dk, want.dk, false),
               e_dv = compare(dv, want.dv, false);
  const double tol = tolOf<T>();
  if (!(e_dq <= tol))
    bad += " dq=" + std::to_string(e_dq);
  if (!(e_dk <= tol))
    bad += " dk=" + std::to_string(e_dk);
  if (!(e_dv <= tol))
    bad += " dv=" + std::to_string(e_dv);
  std::vector<T> expect = poison; // nothing outside dq, dk, dv written
  scatter(dq, sh.B, sh.H, sh.T, sh.D, p.q, expect);
  scatter(dk, sh.B, sh.Hkv, sh.S, sh.D, p.k, expect);
  scatter(dv, sh.B, sh.Hkv, sh.S, sh.D, p.v, expect);
  if (!sameBits(gr, expect))
    bad += " written-outside-dq/dk/dv";
  // A second run on the workspace the first left: dq right again, dk and
  // dv the same bits (sums in a fixed order; dq's tile sums are added by
  // atomics in any order).
  const std::vector<T> again = run();
  const double e_dq2 = compare(gather(again, sh.B, sh.H, sh.T, sh.D, p.q), want.dq, false);
  if (!(e_dq2 <= tol))
    bad += " second-run-dq=" + std::to_string(e_dq2);
  if (!sameBits(gather(again, sh.B, sh.Hkv, sh.S, sh.D, p.k), dk) ||
      !sameBits(gather(again, sh.B, sh.Hkv, sh.S, sh.D, p.v), dv))
    bad += " dk/dv-differ-between-runs";
  const bool ok = bad.empty();
  gPassed += ok;
  std::printf("[%s] %-52s dq %.2e dk %.2e dv %.2e (tol %.1e)%s\n", ok ? "PASS" : "FAIL", name,
              e_dq, e_dk, e_dv, tol, ok ? "" : (" FAILED:" + bad).c_str());
}

// Arguments the backward must refuse, each with a reason, launching
// nothing (checked before any CUDA call, so this part runs without a GPU
// too: the pointers are aligned stand-ins, never dereferenced).
void refusals() {
  const Shape sh{1, 2, 2, 64, 64, 64, false, 0.f};
  const StridedPlan p = stridedPlan(sh);
  bf16 *const in = reinterpret_cast<bf16 *>(uintptr_t{1} << 20);
  bf16 *const o = reinterpret_cast<bf16 *>(uintptr_t{2} << 20);
  bf16 *const g = reinterpret_cast<bf16 *>(uintptr_t{3} << 20);
  bf16 *const grad = reinterpret_cast<bf16 *>(uintptr_t{4} << 20);
  float *const l = reinterpret_cast<float *>(uintptr_t{5} << 20);
  void *const ws = reinterpret_cast<void *>(uintptr_t{6} << 20);
  using A = tcc_sm90::AttnSm90Backward;
  struct Bad {
    const char *what;
    void (*mutate)(A &);
  };
  const Bad bads[] = {
      {"head size 80", [](A &a) { a.D = 80; }},
      {"H not a multiple of Hkv", [](A &a) { a.Hkv = 3; }},
      {"negative scale", [](A &a) { a.scale = -1.f; }},
      {"infinite scale", [](A &a) { a.scale = INFINITY; }},
      {"dout misaligned", [](A &a) { a.dout = static_cast<const bf16 *>(a.dout) + 4; }},
      {"dk row stride 36", [](A &a) { a.dks.r = 36; }},
      {"negative S", [](A &a) { a.S = -5; }},
      {"no workspace", [](A &a) { a.workspace = nullptr; }},
      {"workspace misaligned", [](A &a) { a.workspace = static_cast<char *>(a.workspace) + 8; }},
  };
  for (const Bad &b : bads) {
    if (!gFilter.empty() && std::string("refuse ").append(b.what).find(gFilter) ==
                                std::string::npos)
      continue;
    ++gCases;
    A a = backwardArgs<bf16>(sh, p, in, o, g, l, grad, 0.125f, ws);
    b.mutate(a);
    const char *why = nullptr;
    const int rc = tcc_sm90::attention_backward_sm90(a, &why);
    const bool ok = rc == 1 && why != nullptr && *why != '\0';
    gPassed += ok;
    std::printf("[%s] refuse %-45s %s\n", ok ? "PASS" : "FAIL", b.what,
                rc == 1 && why ? why : "(accepted)");
  }
}

// One issue shape, packed q, k, v: this backward, cuDNN's and the
// prelude's, from the same forward's out and lse.
void benchShape(const Shape &sh, bool haveCudnn) {
  const StridedPlan p = stridedPlan(sh);
  const int64_t n = sh.B * sh.H * sh.T * sh.D;
  DeviceBuf<bf16> in(p.inputElems), grad(p.inputElems), grad2(p.inputElems), o(n), g(n);
  DeviceBuf<float> l(sh.B * sh.H * sh.T);
  std::vector<bf16> h(p.inputElems), hg(n);
  Rng rng{42};
  for (bf16 &x : h)
    x = fromD<bf16>(rng.uniform());
  for (bf16 &x : hg)
    x = fromD<bf16>(rng.uniform());
  in.upload(h);
  g.upload(hg);
  const float scale = 1.0f / std::sqrt(static_cast<float>(sh.D));
  forward<bf16>(sh, p, in.ptr, o.ptr, l.ptr, scale);
  const tcc_sm90::AttnSm90Backward a =
      backwardArgs<bf16>(sh, p, in.ptr, o.ptr, g.ptr, l.ptr, grad.ptr, scale, nullptr);
  const float ours = medianMs([&] {
    const char *why = "";
    if (tcc_sm90::attention_backward_sm90(a, &why))
      std::printf("sm90 backward refused: %s\n", why);
  });
  const bf16 *q = in.ptr + p.q.offset, *k = in.ptr + p.k.offset, *v = in.ptr + p.v.offset;
  bf16 *dq = grad2.ptr + p.q.offset, *dk = grad2.ptr + p.k.offset, *dv = grad2.ptr + p.v.offset;
  DeviceBuf<float> fws(tcc_cuda::attention_backward_workspace_floats(sh.B, sh.H, sh.Hkv, sh.T,
                                                                     sh.S, sh.D, false));
  const float flash = medianMs([&] {
    CUDA_CHECK(tcc_cuda::launch_attention_backward_strided<bf16>(
        q, k, v, o.ptr, l.ptr, g.ptr, dq, dk, dv, fws.ptr, sh.B, sh.H, sh.Hkv, sh.T, sh.S, sh.D,
        layoutOf(p), scale, sh.causal, 0.f, 0, 0, true, nullptr));
  });
  float cudnn[2] = {NAN, NAN};
  double diff = NAN;
  if (haveCudnn) {
    for (int det = 1; det >= 0; --det) {
      const tcc_cudnn::Site s = siteOf(sh, p, false, true, scale, det == 1);
      tcc_cudnn::Plan plan;
      char cwhy[512] = "";
      if (tcc_cudnn::prepare(s, plan, cwhy, sizeof cwhy) != 0) {
        std::printf("cuDNN does not run this shape: %s\n", cwhy);
        continue;
      }
      void *ws = nullptr;
      CUDA_CHECK(cudaMalloc(&ws, std::max<int64_t>(plan.workspace_bytes, 1)));
      cudnn[det] = medianMs([&] {
        if (tcc_cudnn::backward(plan, nullptr, q, k, v, o.ptr, g.ptr, l.ptr, dq, dk, dv, ws,
                                cwhy, sizeof cwhy))
          std::printf("cuDNN backward failed: %s\n", cwhy);
      });
      CUDA_CHECK(cudaFree(ws));
    }
    // grad2 holds cuDNN's gradients (the last run), grad ours.
    const std::vector<bf16> x = grad.download(), y = grad2.download();
    diff = 0;
    for (size_t i = 0; i < x.size(); ++i)
      diff = std::max(diff, std::fabs(toD(x[i]) - toD(y[i])));
  }
  // Causal: half the T x S products; the backward's five products to the
  // forward's two.
  const double flops = 10.0 * sh.B * sh.H * sh.T * sh.S * sh.D * (sh.causal ? 0.5 : 1.0);
  auto tf = [&](float ms) { return flops / (ms * 1e-3) / 1e12; };
  std::printf("bench B%" PRId64 " H%" PRId64 " T%" PRId64 " D%" PRId64 " %s bf16 packed, "
              "backward (median of 20):\n"
              "  tcc sm90              %.3f ms  %.0f TFLOP/s\n"
              "  cuDNN deterministic   %.3f ms  %.0f TFLOP/s   (tcc sm90 / cuDNN time %.2fx)\n"
              "  cuDNN nondeterministic %.3f ms %.0f TFLOP/s   (tcc sm90 / cuDNN time %.2fx)\n"
              "  tcc flash             %.3f ms  %.0f TFLOP/s\n"
              "  max |grad - cuDNN's grad| %.3e\n",
              sh.B, sh.H, sh.T, sh.D, sh.causal ? "causal" : "", ours, tf(ours), cudnn[1],
              tf(cudnn[1]), ours / cudnn[1], cudnn[0], tf(cudnn[0]), ours / cudnn[0], flash,
              tf(flash), diff);
}

template <class T> void allCases() {
  sm90Cases<T>([](const Shape &sh) { runCase<T>(sh); });
  runCase<T>({1, 2, 2, 70, 0, 64, false, 0.f}); // no keys: dq = 0
}

} // namespace

int main(int argc, char **argv) {
  bool benchOnly = false;
  if (int rc = parseTestArgs(argc, argv, "attention_sm90_backward_test", benchOnly))
    return rc;
  if (!benchOnly)
    refusals();
  if (gPassed != gCases) {
    std::printf("%d of %d refusals passed: FAILED\n", gPassed, gCases);
    return 1;
  }
  bool haveCudnn = false;
  if (!sm90Device("attention_sm90_backward_test", haveCudnn))
    return 77;
  if (benchOnly) {
    benchShape({16, 12, 12, 1024, 1024, 64, true, 0.f}, haveCudnn);
    benchShape({8, 16, 16, 2048, 2048, 128, true, 0.f}, haveCudnn);
    return 0;
  }
  allCases<bf16>();
  allCases<f16>();
  std::printf("%d of %d cases passed: %s (seed %" PRIu64 ")\n", gPassed, gCases,
              gPassed == gCases ? "ALL PASSED" : "FAILED", gSeed);
  return gPassed == gCases ? 0 : 1;
}
