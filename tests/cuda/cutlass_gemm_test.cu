// Device test of the CUTLASS Hopper GEMMs with fused epilogues
// (compiler/codegen/cuda/cutlass/gemm_sm90_epilogues.h) against a float64
// reference on fresh random inputs, every configuration; --bench times them
// beside cuBLASLt's epilogues (tcc's host_support gemm_epilogue, searched as
// in a step) on GPT-2 124M's c_fc shapes in one run. Standalone (no gtest):
//
//   cutlass_gemm_test [--seed N] [--bench]
//
// gelu_aux_bias: pre = sum_k a b + bias (exact doubles of the bf16 inputs),
//   aux = pre, D = gelu_tanh(pre).
// dgelu:         D = gelu_tanh'(aux) sum_k a b^T.
// bias_residual_f32: D = residual + sum_k a b + bias, f32 D in place over
//   the residual (u = 2^-22 there).
// Tolerance per element: u |want| (u = 2^-8, the bf16 output's rounding) +
// 1e-5 scale (scale = sum_k |a b| + |bias|: the fp32 accumulation) + the
// approximate tanh's error (tanh.approx.f32, |error| <= 2^-10.98): GELU
// moves by 0.5 |pre| 2^-10, GELU' by (0.5 + |x| k (1 + 3c x^2)) 2^-10 times
// |product|. Outputs are
// poisoned with NaN bytes first, so an unwritten element fails. Shapes
// include rows (tcc's m, CUTLASS's N') that are not a multiple of a tile.
// The kernels are built with every instance (gemm_sm90_epilogues.cu
// without TCC_CUTLASS_INSTANCE). Each case runs every configuration
// directly, then once through tcc_cuda_host::gemm_epilogue with
// TCC_GEMM_CUTLASS=force (the step's path: gemm.h maps its operands onto a
// CUTLASS instance), which must have chosen CUTLASS.
// Exit 0 pass, 1 fail, 77 no GPU.
#include "tcc/step_abi.h"
#define TCC_STEP_ARCH "sm_90"
#define TCC_STEP_CUTLASS_SM90 1 // gemm_epilogue's CUTLASS candidates (gemm_cutlass.h)
#include "compiler/codegen/cuda/cuda_host_support.h"
#include "compiler/codegen/cuda/cutlass/gemm_sm90_epilogues.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

#include "tests/cuda/gemm_test_arrays.h"

constexpr size_t kWorkspace = 32u << 20;
const double kTanhError = std::ldexp(1.0, -10); // tanh.approx.f32, rounded up
const double kGeluK = std::sqrt(2.0 / 3.14159265358979323846), kGeluC = 0.044715;

double geluTanh(double x) {
  return 0.5 * x * (1.0 + std::tanh(kGeluK * (x + kGeluC * x * x * x)));
}
double geluTanhDerivative(double x) {
  double t = std::tanh(kGeluK * (x + kGeluC * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * kGeluK * (1.0 + 3.0 * kGeluC * x * x);
}
// How far GELU' moves when tanh is off by kTanhError.
double geluDerivativeTanhError(double x) {
  return (0.5 + std::fabs(x) * kGeluK * (1.0 + 3.0 * kGeluC * x * x)) * kTanhError;
}

void fillRandom(HostArray &h, std::mt19937_64 &rng, double scale) {
  std::normal_distribution<double> normal(0.0, scale);
  for (size_t i = 0; i < h.size(); ++i)
    h.set(i, normal(rng));
}

void upload(const HostArray &h, Device &d) {
  cudaMemcpy(d.p, h.bytes.data(), h.bytes.size(), cudaMemcpyHostToDevice);
}
void download(Device &d, HostArray &h) {
  cudaMemcpy(h.bytes.data(), d.p, h.bytes.size(), cudaMemcpyDeviceToHost);
}

struct Check {
  const char *what;
  double worst = 0; // max |error| / bound
  size_t bad = 0, first = 0;
  void add(size_t i, double got, double want, double bound) {
    double ratio = std::isfinite(got) ? std::fabs(got - want) / bound : INFINITY;
    if (!(ratio <= 1.0)) {
      if (!bad)
        first = i;
      ++bad;
    }
    if (!(ratio <= worst))
      worst = ratio;
  }
  bool report(const std::string &name) const {
    std::printf("%s %-60s %-5s worst %.3f of the bound%s\n", bad ? "FAIL" : "ok  ",
                name.c_str(), what, worst,
                bad ? (", " + std::to_string(bad) + " out of bound, first at " +
                       std::to_string(first))
                          .c_str()
                    : "");
    return bad == 0;
  }
};

// Row-major A (m x k), B (k x n) or (n x k) when bT: exact dot products and
// their magnitude sums.
void reference(const HostArray &A, const HostArray &B, bool bT, int64_t m, int64_t n,
               int64_t k, std::vector<double> &dot, std::vector<double> &mag) {
  std::vector<double> a(A.size()), b(B.size());
  for (size_t i = 0; i < a.size(); ++i)
    a[i] = A.get(i);
  for (size_t i = 0; i < b.size(); ++i)
    b[i] = B.get(i);
  dot.assign(m * n, 0.0);
  mag.assign(m * n, 0.0);
  std::vector<double> bRow(k);
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t kk = 0; kk < k; ++kk)
      bRow[kk] = bT ? b[j * k + kk] : b[kk * n + j];
    for (int64_t i = 0; i < m; ++i) {
      const double *ai = &a[i * k];
      double s = 0, t = 0;
      for (int64_t kk = 0; kk < k; ++kk) {
        double p = ai[kk] * bRow[kk];
        s += p;
        t += std::fabs(p);
      }
      dot[i * n + j] = s;
      mag[i * n + j] = t;
    }
  }
}

std::string caseName(tcc_cutlass::Sm90Epilogue e, int config, int64_t m, int64_t n,
                     int64_t k) {
  char name[160];
  std::snprintf(name, sizeof name, "%s %s %lldx%lldx%lld", tcc_cutlass::sm90_epilogue_name(e),
                config < 0 ? "via gemm_epilogue" : tcc_cutlass::sm90_config_name(config), static_cast<long long>(m),
                static_cast<long long>(n), static_cast<long long>(k));
  return name;
}

// Runs one instance (config >= 0) or the product through gemm_epilogue
// (config < 0, TCC_GEMM_CUTLASS=force) and waits; false (and a message)
// on failure.
bool launch(tcc_cutlass::Sm90Epilogue e, int config, const tcc_cutlass::Sm90GemmArgs &a,
            const std::string &name) {
  const char *why = "";
  if (config < 0) {
    using namespace tcc_cuda_host;
    GemmPlan plan;
    setenv("TCC_GEMM_CUTLASS", "force", 1);
    bool dgelu = e == tcc_cutlass::kSm90DGelu, residual = e == tcc_cutlass::kSm90BiasResidualF32;
    int32_t rc = gemm_epilogue(
        plan, nullptr, 0, kGemmBF16, residual ? kGemmF32 : kGemmBF16, false, false, dgelu, a.m,
        a.n, a.k,
        dgelu ? kEpilogueDGelu : residual ? kEpilogueBias : kEpilogueGeluAuxBias, a.A, a.B,
        a.bias, a.residual, a.D, a.aux, a.workspace, a.workspace_bytes);
    unsetenv("TCC_GEMM_CUTLASS");
    bool cutlass = plan.cutlass != nullptr;
    destroy_plan(plan);
    if (rc || !cutlass) {
      std::printf("FAIL %s: %s\n", name.c_str(),
                  rc ? state().error.c_str() : "gemm_epilogue did not choose CUTLASS when forced");
      return false;
    }
  } else if (tcc_cutlass::sm90_gemm_bf16(e, config, a, nullptr, &why)) {
    std::printf("FAIL %s: %s\n", name.c_str(), why);
    return false;
  }
  if (cudaError_t err = cudaDeviceSynchronize(); err != cudaSuccess) {
    std::printf("FAIL %s: %s\n", name.c_str(), cudaGetErrorString(err));
    return false;
  }
  return true;
}

bool geluAuxBiasCase(int config, int64_t m, int64_t n, int64_t k, std::mt19937_64 &rng) {
  using tcc_cuda_host::kGemmBF16;
  HostArray A(kGemmBF16, m * k), B(kGemmBF16, k * n), bias(kGemmBF16, n);
  fillRandom(A, rng, 1.0);
  fillRandom(B, rng, 1.0 / std::sqrt(static_cast<double>(k)));
  fillRandom(bias, rng, 0.5);
  Device dA(A.bytes.size()), dB(B.bytes.size()), dBias(bias.bytes.size()), dD(m * n * 2),
      dAux(m * n * 2), workspace(kWorkspace);
  upload(A, dA);
  upload(B, dB);
  upload(bias, dBias);
  cudaMemset(dD.p, 0xff, m * n * 2);
  cudaMemset(dAux.p, 0xff, m * n * 2);
  std::string name = caseName(tcc_cutlass::kSm90GeluAuxBias, config, m, n, k);
  tcc_cutlass::Sm90GemmArgs a;
  a.m = m, a.n = n, a.k = k, a.A = dA.p, a.B = dB.p, a.bias = dBias.p, a.aux = dAux.p,
  a.D = dD.p, a.workspace = workspace.p, a.workspace_bytes = kWorkspace;
  if (!launch(tcc_cutlass::kSm90GeluAuxBias, config, a, name))
    return false;
  HostArray D(kGemmBF16, m * n), aux(kGemmBF16, m * n);
  download(dD, D);
  download(dAux, aux);
  std::vector<double> dot, mag;
  reference(A, B, false, m, n, k, dot, mag);
  const double u = unitRoundoff(kGemmBF16);
  Check cAux{"aux"}, cD{"D"};
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      size_t e = i * n + j;
      double pre = dot[e] + bias.get(j), scale = mag[e] + std::fabs(bias.get(j));
      cAux.add(e, aux.get(e), pre, u * std::fabs(pre) + 1e-5 * scale + 1e-30);
      double want = geluTanh(pre);
      cD.add(e, D.get(e), want,
             u * std::fabs(want) + 1.2e-5 * scale + 0.5 * std::fabs(pre) * kTanhError + 1e-30);
    }
  bool ok = cAux.report(name);
  return cD.report(name) && ok;
}

bool dgeluCase(int config, int64_t m, int64_t n, int64_t k, std::mt19937_64 &rng) {
  using tcc_cuda_host::kGemmBF16;
  HostArray A(kGemmBF16, m * k), B(kGemmBF16, n * k), aux(kGemmBF16, m * n);
  fillRandom(A, rng, 1.0);
  fillRandom(B, rng, 1.0 / std::sqrt(static_cast<double>(k)));
  fillRandom(aux, rng, 1.5);
  Device dA(A.bytes.size()), dB(B.bytes.size()), dAux(aux.bytes.size()), dD(m * n * 2),
      workspace(kWorkspace);
  upload(A, dA);
  upload(B, dB);
  upload(aux, dAux);
  cudaMemset(dD.p, 0xff, m * n * 2);
  std::string name = caseName(tcc_cutlass::kSm90DGelu, config, m, n, k);
  tcc_cutlass::Sm90GemmArgs a;
  a.m = m, a.n = n, a.k = k, a.A = dA.p, a.B = dB.p, a.aux = dAux.p, a.D = dD.p,
  a.workspace = workspace.p, a.workspace_bytes = kWorkspace;
  if (!launch(tcc_cutlass::kSm90DGelu, config, a, name))
    return false;
  HostArray D(kGemmBF16, m * n);
  download(dD, D);
  std::vector<double> dot, mag;
  reference(A, B, true, m, n, k, dot, mag);
  const double u = unitRoundoff(kGemmBF16);
  Check cD{"D"};
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      size_t e = i * n + j;
      double x = aux.get(e), g = geluTanhDerivative(x);
      double want = g * dot[e];
      double bound = u * std::fabs(want) + 1e-5 * mag[e] * (std::fabs(g) + 0.1) +
                     geluDerivativeTanhError(x) * std::fabs(dot[e]);
      cD.add(e, D.get(e), want, bound + 1e-30);
    }
  return cD.report(name);
}

// D = residual + (A B + bias), f32 bias, residual and D, in place (D is the
// residual's buffer, as GPT-2's c_proj products write the residual stream).
bool biasResidualCase(int config, int64_t m, int64_t n, int64_t k, std::mt19937_64 &rng) {
  using tcc_cuda_host::kGemmBF16;
  using tcc_cuda_host::kGemmF32;
  HostArray A(kGemmBF16, m * k), B(kGemmBF16, k * n), bias(kGemmF32, n), res(kGemmF32, m * n);
  fillRandom(A, rng, 1.0);
  fillRandom(B, rng, 1.0 / std::sqrt(static_cast<double>(k)));
  fillRandom(bias, rng, 0.5);
  fillRandom(res, rng, 2.0);
  Device dA(A.bytes.size()), dB(B.bytes.size()), dBias(bias.bytes.size()),
      dD(res.bytes.size()), workspace(kWorkspace);
  upload(A, dA);
  upload(B, dB);
  upload(bias, dBias);
  upload(res, dD);
  std::string name = caseName(tcc_cutlass::kSm90BiasResidualF32, config, m, n, k);
  tcc_cutlass::Sm90GemmArgs a;
  a.m = m, a.n = n, a.k = k, a.A = dA.p, a.B = dB.p, a.bias = dBias.p, a.residual = dD.p,
  a.D = dD.p, a.workspace = workspace.p, a.workspace_bytes = kWorkspace;
  if (!launch(tcc_cutlass::kSm90BiasResidualF32, config, a, name))
    return false;
  HostArray D(kGemmF32, m * n);
  download(dD, D);
  std::vector<double> dot, mag;
  reference(A, B, false, m, n, k, dot, mag);
  const double u = unitRoundoff(kGemmF32);
  Check cD{"D"};
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      size_t e = i * n + j;
      double want = res.get(e) + dot[e] + bias.get(j);
      double scale = mag[e] + std::fabs(bias.get(j)) + std::fabs(res.get(e));
      cD.add(e, D.get(e), want, u * std::fabs(want) + 1e-5 * scale + 1e-30);
    }
  return cD.report(name);
}

// Milliseconds per call, 20 calls after 3 warm-ups.
template <class F> float timeIt(cudaStream_t s, F &&call) {
  cudaEvent_t t0, t1;
  cudaEventCreate(&t0);
  cudaEventCreate(&t1);
  for (int i = 0; i < 3; ++i)
    call();
  cudaEventRecord(t0, s);
  for (int i = 0; i < 20; ++i)
    call();
  cudaEventRecord(t1, s);
  cudaEventSynchronize(t1);
  float ms = 0;
  cudaEventElapsedTime(&ms, t0, t1);
  cudaEventDestroy(t0);
  cudaEventDestroy(t1);
  return ms / 20;
}

// GPT-2 124M's c_fc at B16 T1024 (m = 16384 rows): the forward's
// bias+GELU with aux (NN), and the GELU derivative on mlp.c_proj's input
// gradient (NT), each beside cuBLASLt's epilogue (searched as in a step)
// and cuBLASLt's plain product of the same shape.
bool bench(void *workspace) {
  using namespace tcc_cuda_host;
  const int64_t m = 16384, n = 3072, k = 768;
  cudaStream_t s;
  cudaStreamCreate(&s);
  Device x(m * k * 2), w(k * n * 2), bias(n * 2), d(m * n * 2), aux(m * n * 2);
  cudaMemset(x.p, 0, m * k * 2);
  cudaMemset(w.p, 0, k * n * 2);
  cudaMemset(bias.p, 0, n * 2);
  cudaMemset(aux.p, 0, m * n * 2);
  double flops = 2.0 * m * n * k;
  auto tflops = [&](float ms) { return flops / (ms * 1e-3) / 1e12; };
  GemmPlan plainNN, plainNT, gelu, dgelu, geluAuto, dgeluAuto;
  setenv("TCC_GEMM_CUTLASS", "0", 1); // cuBLASLt's epilogues alone first
  float tPlainNN = timeIt(s, [&] {
    gemm(plainNN, s, 0, kGemmBF16, false, false, false, m, n, k, 1, 0, 0, 0, 1.0, 0.0, x.p,
         w.p, d.p, workspace, kWorkspace);
  });
  float tPlainNT = timeIt(s, [&] {
    gemm(plainNT, s, 0, kGemmBF16, false, false, true, m, n, k, 1, 0, 0, 0, 1.0, 0.0, x.p,
         w.p, d.p, workspace, kWorkspace);
  });
  float tGelu = timeIt(s, [&] {
    gemm_epilogue(gelu, s, 0, kGemmBF16, kGemmBF16, false, false, false, m, n, k,
                  kEpilogueGeluAuxBias, x.p, w.p, bias.p, nullptr, d.p, aux.p, workspace,
                  kWorkspace);
  });
  float tDGelu = timeIt(s, [&] {
    gemm_epilogue(dgelu, s, 0, kGemmBF16, kGemmBF16, false, false, true, m, n, k,
                  kEpilogueDGelu, x.p, w.p, nullptr, nullptr, d.p, aux.p, workspace,
                  kWorkspace);
  });
  unsetenv("TCC_GEMM_CUTLASS"); // then gemm_epilogue's own choice (timed)
  float tGeluAuto = timeIt(s, [&] {
    gemm_epilogue(geluAuto, s, 0, kGemmBF16, kGemmBF16, false, false, false, m, n, k,
                  kEpilogueGeluAuxBias, x.p, w.p, bias.p, nullptr, d.p, aux.p, workspace,
                  kWorkspace);
  });
  float tDGeluAuto = timeIt(s, [&] {
    gemm_epilogue(dgeluAuto, s, 0, kGemmBF16, kGemmBF16, false, false, true, m, n, k,
                  kEpilogueDGelu, x.p, w.p, nullptr, nullptr, d.p, aux.p, workspace,
                  kWorkspace);
  });
  std::printf("bench c_fc %lldx%lldx%lld bf16 on %s (ms per call, TFLOP/s)\n",
              static_cast<long long>(m), static_cast<long long>(n), static_cast<long long>(k),
              gemm_selection().gpu.c_str());
  std::printf("bench   cuBLASLt product NN           %.4f %6.1f\n", tPlainNN, tflops(tPlainNN));
  std::printf("bench   cuBLASLt product NT           %.4f %6.1f\n", tPlainNT, tflops(tPlainNT));
  std::printf("bench   cuBLASLt gelu_aux_bias NN     %.4f %6.1f  (%s)\n", tGelu, tflops(tGelu),
              gelu.choice->algorithm.c_str());
  std::printf("bench   cuBLASLt dgelu NT             %.4f %6.1f  (%s)\n", tDGelu,
              tflops(tDGelu), dgelu.choice->algorithm.c_str());
  bool ok = true;
  for (tcc_cutlass::Sm90Epilogue e : {tcc_cutlass::kSm90GeluAuxBias, tcc_cutlass::kSm90DGelu})
    for (int c = 0; c < tcc_cutlass::kSm90Configs; ++c) {
      tcc_cutlass::Sm90GemmArgs a;
      a.m = m, a.n = n, a.k = k, a.A = x.p, a.B = w.p, a.bias = bias.p, a.aux = aux.p,
      a.D = d.p, a.workspace = workspace, a.workspace_bytes = kWorkspace, a.stream = s;
      const char *why = "";
      int rc = 0;
      float t = timeIt(s, [&] { rc |= tcc_cutlass::sm90_gemm_bf16(e, c, a, nullptr, &why); });
      float cublas = e == tcc_cutlass::kSm90GeluAuxBias ? tGelu : tDGelu;
      if (rc) {
        std::printf("bench   CUTLASS %s %s: failed: %s\n", tcc_cutlass::sm90_epilogue_name(e),
                    tcc_cutlass::sm90_config_name(c), why);
        ok = false;
        continue;
      }
      std::printf("bench   CUTLASS %-13s %-26s %.4f %6.1f  %.3fx cuBLASLt's epilogue\n",
                  tcc_cutlass::sm90_epilogue_name(e), tcc_cutlass::sm90_config_name(c), t,
                  tflops(t), cublas / t);
    }
  // GPT-2's two c_proj products onto the f32 residual stream, in place.
  for (int64_t kk : {int64_t(768), int64_t(3072)}) {
    const int64_t nn = 768;
    Device x2(m * kk * 2), w2(kk * nn * 2), b32(nn * 4), r32(m * nn * 4), o16(m * nn * 2);
    cudaMemset(x2.p, 0, m * kk * 2);
    cudaMemset(w2.p, 0, kk * nn * 2);
    cudaMemset(b32.p, 0, nn * 4);
    cudaMemset(r32.p, 0, m * nn * 4);
    double f2 = 2.0 * m * nn * kk;
    GemmPlan plainR, cublasR;
    float tPlain = timeIt(s, [&] {
      gemm(plainR, s, 0, kGemmBF16, false, false, false, m, nn, kk, 1, 0, 0, 0, 1.0, 0.0, x2.p,
           w2.p, o16.p, workspace, kWorkspace);
    });
    setenv("TCC_GEMM_CUTLASS", "0", 1);
    float tCublas = timeIt(s, [&] {
      gemm_epilogue(cublasR, s, 0, kGemmBF16, kGemmF32, false, false, false, m, nn, kk,
                    kEpilogueBias, x2.p, w2.p, b32.p, r32.p, r32.p, nullptr, workspace,
                    kWorkspace);
    });
    unsetenv("TCC_GEMM_CUTLASS");
    tcc_cutlass::Sm90GemmArgs a;
    a.m = m, a.n = nn, a.k = kk, a.A = x2.p, a.B = w2.p, a.bias = b32.p, a.residual = r32.p,
    a.D = r32.p, a.workspace = workspace, a.workspace_bytes = kWorkspace, a.stream = s;
    const char *why = "";
    int rc = 0;
    float tCut = timeIt(s, [&] {
      rc |= tcc_cutlass::sm90_gemm_bf16(tcc_cutlass::kSm90BiasResidualF32, 0, a, nullptr, &why);
    });
    if (rc) {
      std::printf("bench   CUTLASS bias_residual_f32 %lldx%lldx%lld: failed: %s\n",
                  static_cast<long long>(m), static_cast<long long>(nn),
                  static_cast<long long>(kk), why);
      ok = false;
    } else {
      std::printf("bench c_proj %lldx%lldx%lld bf16 -> f32 + residual: cuBLASLt product %.4f "
                  "(%.1f TFLOP/s, bf16 out), bias+residual %.4f (%.1f); CUTLASS %s %.4f "
                  "(%.1f): %.3fx cuBLASLt's epilogue\n",
                  static_cast<long long>(m), static_cast<long long>(nn),
                  static_cast<long long>(kk), tPlain, f2 / (tPlain * 1e-3) / 1e12, tCublas,
                  f2 / (tCublas * 1e-3) / 1e12, tcc_cutlass::sm90_config_name(0), tCut,
                  f2 / (tCut * 1e-3) / 1e12, tCublas / tCut);
    }
    destroy_plan(plainR);
    destroy_plan(cublasR);
  }
  for (GemmPlan *p : {&geluAuto, &dgeluAuto})
    std::printf("bench   gemm_epilogue's choice %.4f ms: %s\n",
                p == &geluAuto ? tGeluAuto : tDGeluAuto,
                (p->cutlass ? p->cutlass : p->choice)->algorithm.c_str());
  std::printf("bench   %s\n", gemm_selection_note());
  for (GemmPlan *p : {&plainNN, &plainNT, &gelu, &dgelu, &geluAuto, &dgeluAuto})
    destroy_plan(*p);
  cudaStreamDestroy(s);
  return ok;
}

} // namespace

int main(int argc, char **argv) {
  TestArgs args = parseTestArgs(argc, argv);
  uint64_t seed = args.seed;
  bool doBench = args.bench;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no GPU: skipped\n");
    return 77;
  }
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  if (prop.major != 9) {
    std::printf("%s is not sm_90: skipped (the kernels are Hopper's)\n", prop.name);
    return 77;
  }
  if (cublasLtCreate(&tcc_cuda_host::state().lt) != CUBLAS_STATUS_SUCCESS) {
    std::printf("cublasLtCreate failed\n");
    return 1;
  }
  setenv("TCC_GEMM_CACHE", "0", 1); // the bench searches afresh, never the user's file
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  bool ok = true;
  struct Shape { int64_t m, n, k; };
  // Rows not a multiple of any tile; GPT-2's c_fc widths with fewer rows.
  const Shape shapes[] = {{200, 136, 64}, {1000, 384, 256}, {777, 3072, 768}};
  for (int c = -1; c < tcc_cutlass::kSm90Configs; ++c) // -1: through gemm_epilogue
    for (const Shape &sh : shapes) {
      ok &= geluAuxBiasCase(c, sh.m, sh.n, sh.k, rng);
      ok &= dgeluCase(c, sh.m, sh.n, sh.k, rng);
      ok &= biasResidualCase(c, sh.m, sh.n, sh.k, rng);
    }
  // A shape the kernels refuse gets a message, not a launch.
  const char *why = "";
  tcc_cutlass::Sm90GemmArgs bad;
  bad.m = 64, bad.n = 100, bad.k = 64;
  bool refused =
      tcc_cutlass::sm90_gemm_bf16(tcc_cutlass::kSm90GeluAuxBias, 0, bad, nullptr, &why) != 0;
  std::printf("%s n = 100 (not a multiple of 8) refused: %s\n", refused ? "ok  " : "FAIL", why);
  ok &= refused;
  if (doBench) {
    Device workspace(kWorkspace);
    ok &= bench(workspace.p);
  }
  std::printf("%s\n", ok ? "all passed" : "FAILED");
  return ok ? 0 : 1;
}
