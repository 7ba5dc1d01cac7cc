// Device test of cuDNN attention (compiler/codegen/cuda/cudnn/: what a cuda
// step runs for kern.attention / kern.attention_grad when libcudnn.so.9
// loads) against the float64 reference of attention_kernels_test, in the
// strided layouts the steps use (GPT-2's packed q, k, v and dq, dk, dv when
// T == S; padded rows otherwise; out / dout (B, T, H, D)).
//
//   cudnn_attention_test [--seed N] [--filter SUBSTRING] [--bench]
//
// Per case (bf16 and f16; D 64 and 128; causal or not; T != S; grouped and
// multi-query heads): cuDNN's out, lse, dq, dk, dv against the reference
// with attention_kernels_test's tolerances, the backward both in cuDNN's
// deterministic mode (bit-identical over two runs) and its default one; nothing written outside dq, dk,
// dv in the packed gradient buffer; and the mixes a step can run into when
// one site falls back: tcc's flash backward from cuDNN's forward (out, lse)
// and cuDNN's backward from tcc's forward, both against the reference (this
// is what makes the two log-sum-exps interchangeable). A case cuDNN rejects
// is reported with its reason and counts as passed (the step falls back),
// except GPT-style cases (T == S, H == Hkv, D 64 or 128, bf16), which must
// run on cuDNN. Exit 0 all passed, 1 any failure, 77 skipped (no GPU or no
// loadable libcudnn.so.9: set TCC_CUDNN_LIBRARY or LD_LIBRARY_PATH).
//
//   --bench   GPT-2's shape (B16 H12 T1024 D64 causal bf16, packed): cuDNN
//             vs tcc's flash kernels, forward and backward, median of 20.
#include "compiler/codegen/cuda/cuda_prelude.cuh" // generated: the pieces, concatenated
#include "compiler/codegen/cuda/cudnn/cudnn_attention.h"
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

// Device workspace of at least `bytes`.
struct Workspace {
  void *ptr = nullptr;
  int64_t bytes = 0;
  void reserve(int64_t n) {
    if (n <= bytes)
      return;
    cudaFree(ptr);
    CUDA_CHECK(cudaMalloc(&ptr, n));
    bytes = n;
  }
  ~Workspace() { cudaFree(ptr); }
};
Workspace gWorkspace;

template <class T> void runCase(const Shape &sh) {
  char name[200];
  if (!selectCase<T>(sh, name))
    return;
  const CaseInputs<T> drawn = caseInputs<T>(sh, name);
  const std::vector<T> &hq = drawn.q, &hk = drawn.k, &hv = drawn.v, &hdo = drawn.dout;
  const std::vector<double> &rq = drawn.rq, &rk = drawn.rk, &rv = drawn.rv,
                            &rdo = drawn.rdo;
  const float scale = 4.0f / std::sqrt(static_cast<float>(sh.D));
  const Reference want = reference(sh, rq, rk, rv, rdo, scale, 0, 0);

  const bool f16 = std::is_same<T, tcc_cuda::f16>::value;
  const bool required = sh.T == sh.S && sh.H == sh.Hkv && !f16;
  const StridedPlan p = stridedPlan(sh);
  tcc_cudnn::Site fs = siteOf(sh, p, f16, false, scale), bs = siteOf(sh, p, f16, true, scale);
  tcc_cudnn::Plan fp, bp;
  char why[512] = "";
  if (tcc_cudnn::prepare(fs, fp, why, sizeof why) != 0 ||
      tcc_cudnn::prepare(bs, bp, why, sizeof why) != 0) {
    gPassed += !required;
    std::printf("[%s] %-52s cuDNN does not run it: %s%s\n", required ? "FAIL" : "PASS", name,
                why, required ? " (a GPT-style case must run on cuDNN)" : " (the step falls back)");
    return;
  }
  gWorkspace.reserve(std::max(fp.workspace_bytes, bp.workspace_bytes));

  std::vector<T> poison(p.inputElems);
  std::memset(poison.data(), 0xFF, poison.size() * sizeof(T));
  std::vector<T> inputs = poison, hdo_s(p.outElems);
  scatter(hq, sh.B, sh.H, sh.T, sh.D, p.q, inputs);
  scatter(hk, sh.B, sh.Hkv, sh.S, sh.D, p.k, inputs);
  scatter(hv, sh.B, sh.Hkv, sh.S, sh.D, p.v, inputs);
  scatter(hdo, sh.B, sh.H, sh.T, sh.D, p.o, hdo_s);
  DeviceBuf<T> in(p.inputElems), grad(p.inputElems), o(p.outElems), g(p.outElems),
      o2(p.outElems);
  DeviceBuf<float> l(sh.B * sh.H * sh.T), l2(sh.B * sh.H * sh.T);
  DeviceBuf<float> ws(tcc_cuda::attention_backward_workspace_floats(sh.B, sh.H, sh.Hkv, sh.T,
                                                                    sh.S, sh.D, false));
  in.upload(inputs);
  g.upload(hdo_s);
  const T *q = in.ptr + p.q.offset, *k = in.ptr + p.k.offset, *v = in.ptr + p.v.offset;
  T *dq = grad.ptr + p.q.offset, *dk = grad.ptr + p.k.offset, *dv = grad.ptr + p.v.offset;
  const tcc_cuda::AttnLayout layout = layoutOf(p);
  const double tol = tolOf<T>(), lse_tol = 1e-3;
  std::string bad;
  auto check = [&](const char *what, double err, double limit) {
    if (!(err <= limit))
      bad += std::string(" ") + what + "=" + std::to_string(err);
    return err;
  };
  auto grads = [&](const char *tag) {
    const std::vector<T> gr = grad.download();
    double e = 0;
    e = std::max(e, check((std::string(tag) + ".dq").c_str(),
                          compare(gather(gr, sh.B, sh.H, sh.T, sh.D, p.q), want.dq, false), tol));
    e = std::max(e, check((std::string(tag) + ".dk").c_str(),
                          compare(gather(gr, sh.B, sh.Hkv, sh.S, sh.D, p.k), want.dk, false),
                          tol));
    e = std::max(e, check((std::string(tag) + ".dv").c_str(),
                          compare(gather(gr, sh.B, sh.Hkv, sh.S, sh.D, p.v), want.dv, false),
                          tol));
    std::vector<T> expect = poison; // nothing outside dq, dk, dv written
    scatter(gather(gr, sh.B, sh.H, sh.T, sh.D, p.q), sh.B, sh.H, sh.T, sh.D, p.q, expect);
    scatter(gather(gr, sh.B, sh.Hkv, sh.S, sh.D, p.k), sh.B, sh.Hkv, sh.S, sh.D, p.k, expect);
    scatter(gather(gr, sh.B, sh.Hkv, sh.S, sh.D, p.v), sh.B, sh.Hkv, sh.S, sh.D, p.v, expect);
    if (!sameBits(gr, expect))
      bad += std::string(" ") + tag + ":written-outside-dq/dk/dv";
    return e;
  };
  auto run = [&](int32_t rc) {
    if (rc != 0)
      bad += std::string(" cuDNN-call-failed:") + why;
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaDeviceSynchronize());
  };

  // cuDNN forward and backward.
  o.poison();
  l.poison();
  run(tcc_cudnn::forward(fp, nullptr, q, k, v, o.ptr, l.ptr, gWorkspace.ptr, why, sizeof why));
  const double e_out =
      check("out", compare(gather(o.download(), sh.B, sh.H, sh.T, sh.D, p.o), want.out, false),
            tol);
  const double e_lse = check("lse", compare(l.download(), want.lse, true), lse_tol);
  grad.upload(poison);
  run(tcc_cudnn::backward(bp, nullptr, q, k, v, o.ptr, g.ptr, l.ptr, dq, dk, dv,
                          gWorkspace.ptr, why, sizeof why));
  const double e_grad = grads("cudnn");
  const std::vector<T> first = grad.download();
  grad.upload(poison);
  run(tcc_cudnn::backward(bp, nullptr, q, k, v, o.ptr, g.ptr, l.ptr, dq, dk, dv,
                          gWorkspace.ptr, why, sizeof why));
  if (!sameBits(first, grad.download()))
    bad += " backward-not-bit-identical-across-runs";
  // The default (no --deterministic) backward: cuDNN's faster algorithm.
  tcc_cudnn::Site ns = siteOf(sh, p, f16, true, scale, /*deterministic=*/false);
  tcc_cudnn::Plan np;
  if (tcc_cudnn::prepare(ns, np, why, sizeof why) != 0) {
    bad += std::string(" non-deterministic-backward-unsupported:") + why;
  } else {
    gWorkspace.reserve(np.workspace_bytes);
    grad.upload(poison);
    run(tcc_cudnn::backward(np, nullptr, q, k, v, o.ptr, g.ptr, l.ptr, dq, dk, dv,
                            gWorkspace.ptr, why, sizeof why));
    grads("cudnn-non-deterministic");
  }
  // tcc's flash backward from cuDNN's forward.
  grad.upload(poison);
  CUDA_CHECK(tcc_cuda::launch_attention_backward_strided<T>(
      q, k, v, o.ptr, l.ptr, g.ptr, dq, dk, dv, ws.ptr, sh.B, sh.H, sh.Hkv, sh.T, sh.S, sh.D,
      layout, scale, sh.causal, 0.f, 0, 0, true, nullptr));
  run(0);
  const double e_mix1 = grads("tcc-bwd-of-cudnn-fwd");
  // cuDNN's backward from tcc's forward.
  CUDA_CHECK(tcc_cuda::launch_attention_forward_strided<T>(
      q, k, v, o2.ptr, l2.ptr, sh.B, sh.H, sh.Hkv, sh.T, sh.S, sh.D, layout, scale, sh.causal,
      0.f, 0, 0, nullptr));
  grad.upload(poison);
  run(tcc_cudnn::backward(bp, nullptr, q, k, v, o2.ptr, g.ptr, l2.ptr, dq, dk, dv,
                          gWorkspace.ptr, why, sizeof why));
  const double e_mix2 = grads("cudnn-bwd-of-tcc-fwd");
  const bool ok = bad.empty();
  gPassed += ok;
  std::printf("[%s] %-52s out %.2e lse %.2e grads %.2e, mixed %.2e / %.2e (tol %.1e)%s\n",
              ok ? "PASS" : "FAIL", name, e_out, e_lse, e_grad, e_mix1, e_mix2, tol,
              ok ? "" : (" FAILED:" + bad).c_str());
}

// GPT-2's attention, packed: cuDNN vs tcc's flash kernels.
void bench() {
  const Shape sh{16, 12, 12, 1024, 1024, 64, true, 0.f};
  const StridedPlan p = stridedPlan(sh);
  const int64_t n = sh.B * sh.H * sh.T * sh.D;
  DeviceBuf<bf16> in(p.inputElems), grad(p.inputElems), o(n), g(n);
  DeviceBuf<float> l(sh.B * sh.H * sh.T), ws(sh.B * sh.H * sh.T);
  std::vector<bf16> h(p.inputElems);
  Rng rng{42};
  for (bf16 &x : h)
    x = fromD<bf16>(rng.uniform());
  in.upload(h);
  h.resize(n);
  g.upload(h);
  const float scale = 0.125f;
  tcc_cudnn::Site fs = siteOf(sh, p, false, false, scale), bs = siteOf(sh, p, false, true, scale);
  tcc_cudnn::Site bn = siteOf(sh, p, false, true, scale, /*deterministic=*/false);
  tcc_cudnn::Plan fp, bp, bnp;
  char why[512] = "";
  if (tcc_cudnn::prepare(fs, fp, why, sizeof why) || tcc_cudnn::prepare(bs, bp, why, sizeof why) ||
      tcc_cudnn::prepare(bn, bnp, why, sizeof why)) {
    std::printf("bench: cuDNN does not run GPT-2's attention: %s\n", why);
    return;
  }
  gWorkspace.reserve(std::max({fp.workspace_bytes, bp.workspace_bytes, bnp.workspace_bytes}));
  const bf16 *q = in.ptr + p.q.offset, *k = in.ptr + p.k.offset, *v = in.ptr + p.v.offset;
  bf16 *dq = grad.ptr + p.q.offset, *dk = grad.ptr + p.k.offset, *dv = grad.ptr + p.v.offset;
  const tcc_cuda::AttnLayout layout = layoutOf(p);
  const float tf = medianMs([&] {
    CUDA_CHECK(tcc_cuda::launch_attention_forward_strided<bf16>(
        q, k, v, o.ptr, l.ptr, 16, 12, 12, 1024, 1024, 64, layout, scale, true, 0.f, 0, 0,
        nullptr));
  });
  const float tb = medianMs([&] {
    CUDA_CHECK(tcc_cuda::launch_attention_backward_strided<bf16>(
        q, k, v, o.ptr, l.ptr, g.ptr, dq, dk, dv, ws.ptr, 16, 12, 12, 1024, 1024, 64, layout,
        scale, true, 0.f, 0, 0, true, nullptr));
  });
  const float cf = medianMs([&] {
    if (tcc_cudnn::forward(fp, nullptr, q, k, v, o.ptr, l.ptr, gWorkspace.ptr, why, sizeof why))
      std::printf("cuDNN forward failed: %s\n", why);
  });
  const float cb = medianMs([&] {
    if (tcc_cudnn::backward(bp, nullptr, q, k, v, o.ptr, g.ptr, l.ptr, dq, dk, dv,
                            gWorkspace.ptr, why, sizeof why))
      std::printf("cuDNN backward failed: %s\n", why);
  });
  const float cbn = medianMs([&] {
    if (tcc_cudnn::backward(bnp, nullptr, q, k, v, o.ptr, g.ptr, l.ptr, dq, dk, dv,
                            gWorkspace.ptr, why, sizeof why))
      std::printf("cuDNN backward failed: %s\n", why);
  });
  std::printf("bench B16 H12 T1024 D64 causal bf16 packed (median of 20), cuDNN %s, "
              "workspace fwd %" PRId64 " bwd %" PRId64 " (non-deterministic %" PRId64 ") bytes:\n"
              "  forward  tcc %.3f ms  cuDNN %.3f ms  (%.2fx)\n"
              "  backward tcc %.3f ms  cuDNN deterministic %.3f ms  (%.2fx)  "
              "non-deterministic %.3f ms (%.2fx)\n",
              tcc_cudnn::version(), fp.workspace_bytes, bp.workspace_bytes, bnp.workspace_bytes,
              tf, cf, tf / cf, tb, cb, tb / cb, cbn, tb / cbn);
}

template <class T> void allCases() {
  for (int64_t D : {64, 128})
    for (bool causal : {false, true}) {
      runCase<T>({2, 4, 4, 256, 256, D, causal, 0.f});  // GPT-style, packed
      runCase<T>({2, 4, 4, 100, 333, D, causal, 0.f});  // T != S, padded rows
      runCase<T>({1, 8, 2, 129, 129, D, causal, 0.f});  // GQA, packed
      runCase<T>({2, 3, 1, 150, 70, D, causal, 0.f});   // MQA, T > S
    }
}

} // namespace

int main(int argc, char **argv) {
  bool benchOnly = false;
  if (int rc = parseTestArgs(argc, argv, "cudnn_attention_test", benchOnly))
    return rc;
  if (!haveGpu("cudnn_attention_test"))
    return 77;
  CUDA_CHECK(cudaSetDevice(0));
  char why[512] = "";
  if (tcc_cudnn::load(TCC_CUDA_LIB_DIR, why, sizeof why) != 0) {
    std::printf("SKIP: cuDNN does not load: %s\n", why);
    return 77;
  }
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s (sm_%d%d, %d SMs), cuDNN %s\nseed %" PRIu64
              " (reproduce with --seed %" PRIu64 ")\n",
              prop.name, prop.major, prop.minor, prop.multiProcessorCount, tcc_cudnn::version(),
              gSeed, gSeed);
  if (benchOnly) {
    bench();
    return 0;
  }
  allCases<bf16>();
  allCases<f16>();
  std::printf("%d of %d cases passed: %s (seed %" PRIu64 ")\n", gPassed, gCases,
              gPassed == gCases ? "ALL PASSED" : "FAILED", gSeed);
  return gPassed == gCases ? 0 : 1;
}
