// Device test of tcc_cuda_host::gemm_epilogue (host_support/gemm.h, the
// cuBLASLt epilogues of kern.gemm_epilogue) against a float64 reference on
// fresh random inputs. A standalone program (no gtest):
//
//   gemm_epilogue_test [--seed N] [--bench]
//
// Cases: BIAS, GELU_BIAS and GELU_AUX_BIAS (tanh GELU; aux = the
// pre-activation), DGELU (out = gelu'(aux) * product, aux read), BIAS
// with a residual C (beta = 1), and the bias-gradient epilogues that write
// the bias vector: BGRADB (tcc's kEpilogueBGradB, cuBLASLt's BGRADA: the
// product plus bias[j] = sum_k b[k][j], the weight gradient's dY summed
// over its rows) and DGELU_BGRAD (DGELU plus bias[j] = sum_i out[i][j]), in
// bf16, f16 and
// f32, the residual form also with 16-bit A/B and f32 C/D (GPT-2's c_proj),
// transposed and plain operands, odd M. The reference reads the same
// (rounded) inputs as exact doubles: pre = sum_k a b + bias,
// out = gelu_tanh(pre) [+ residual].
// Tolerance per element: |got - want| <= u * |want| + 1e-5 * scale, u the
// output's unit roundoff (2^-8 bf16, 2^-11 f16, 2^-22 f32; 2u for 16-bit
// DGELU, which rounds the product before the derivative) and scale =
// sum_k |a b| + |bias| + |residual| (the float accumulation's error bound
// is far below 1e-5 scale for K <= 3072 in typical sums; a wrong bias,
// missing residual or missed GELU moves an element by O(scale)). GELU's
// own error (cuBLASLt may use a fast tanh) is covered by the same term.
// A bias gradient: the same bound with scale = the sum of its terms'
// magnitudes (and, for DGELU_BGRAD in 16 bits, u times the sum of |out|:
// cuBLASLt may sum the rounded D); a missing row or column or a sum over
// the wrong axis moves it by O(scale).
// Outputs are poisoned with NaN bytes first, so unwritten elements fail.
// gemm_epilogue picks its algorithm by gemm_search.h's search (a cache file
// of this run's own, in /tmp); each case then also runs every heuristic
// candidate a search could pick against the same reference, and the cache
// file is read back (same algorithm, source "cache") and, corrupted,
// ignored. The f32 residual case is in place (C = D), as in GPT-2.
// --bench times GPT-2's forward shapes (16384 rows): the product alone,
// and the product with each epilogue; and the backward's: DGELU_BGRAD, and
// the weight gradient (K x N over the 16384 rows) alone and with BGRADB.
// Exit 0 pass, 1 fail, 77 no GPU.
// The host support is pasted after the step ABI into a host unit that
// names its kernels' arch.
#include "tcc/step_abi.h"
#define TCC_STEP_ARCH "sm_90"
#include "compiler/codegen/cuda/cuda_host_support.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

#include "tests/cuda/gemm_test_arrays.h"

double geluTanh(double x) {
  const double k = std::sqrt(2.0 / 3.14159265358979323846);
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}
double geluTanhDerivative(double x) {
  const double k = std::sqrt(2.0 / 3.14159265358979323846);
  double t = std::tanh(k * (x + 0.044715 * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * 0.044715 * x * x);
}

const char *epilogueName(tcc_cuda_host::GemmEpilogue e) {
  return e == tcc_cuda_host::kEpilogueBias          ? "BIAS"
         : e == tcc_cuda_host::kEpilogueGeluBias    ? "GELU_BIAS"
         : e == tcc_cuda_host::kEpilogueGeluAuxBias ? "GELU_AUX_BIAS"
         : e == tcc_cuda_host::kEpilogueDGelu       ? "DGELU"
         : e == tcc_cuda_host::kEpilogueBGradB      ? "BGRADB"
         : e == tcc_cuda_host::kEpilogueNone        ? "DEFAULT"
                                                    : "DGELU_BGRAD";
}

struct Case {
  GemmType in, out;
  tcc_cuda_host::GemmEpilogue epilogue;
  bool residual, ta, tb;
  int64_t m, n, k;
  // cuBLASLt had no algorithm for it on the H200 (2026-11-25) and
  // tg-fuse-matmul-epilogue never asks for it: a clean error passes, and a
  // result (a newer cuBLASLt) is checked like any other.
  bool unsupportedOnH200 = false;
};

constexpr size_t kWorkspace = 32u << 20;

// The float64 reference of one case: per element the wanted output, the
// pre-activation and the error scale (computed once, checked per candidate).
struct Reference {
  std::vector<double> want, pre, scale;
  // Bias-gradient epilogues: per column the wanted sum, the sum of its
  // terms' magnitudes and (DGELU_BGRAD) the sum of |out|.
  std::vector<double> gradWant, gradScale, gradAbs;
};
bool check(const Case &c, const Reference &ref, const HostArray &out, const HostArray &aux,
           const HostArray &grad, const char *name, const tcc_cuda_host::GemmChoice *choice,
           bool quiet = false);
Reference reference(const Case &c, const HostArray &a, const HostArray &b,
                    const HostArray &bias, const HostArray &residual, const HostArray &aux);

// One case through gemm_epilogue (its algorithm searched, or from the
// cache), then through every heuristic candidate; `chosen`: the plan's.
bool runCase(const Case &c, std::mt19937_64 &rng, void *workspace,
             const tcc_cuda_host::GemmChoice **chosen = nullptr) {
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  HostArray a(c.in, c.m * c.k), b(c.in, c.k * c.n), bias(c.out, c.n),
      residual(c.out, c.residual ? c.m * c.n : 0), out(c.out, c.m * c.n),
      aux(c.out, c.m * c.n);
  for (size_t i = 0; i < a.size(); ++i) a.set(i, uniform(rng));
  for (size_t i = 0; i < b.size(); ++i) b.set(i, uniform(rng) * 0.1);
  for (size_t i = 0; i < bias.size(); ++i) bias.set(i, uniform(rng));
  for (size_t i = 0; i < residual.size(); ++i) residual.set(i, uniform(rng) * 4);
  bool dgelu = tcc_cuda_host::epilogue_reads_aux(c.epilogue);
  // The bias-gradient epilogues write `bias` instead of reading it.
  bool biasGrad = c.epilogue == tcc_cuda_host::kEpilogueBGradB ||
                  c.epilogue == tcc_cuda_host::kEpilogueDGeluBGrad;
  if (dgelu) // aux is the pre-activation input
    for (size_t i = 0; i < aux.size(); ++i) aux.set(i, uniform(rng) * 3);
  Device da(a.bytes.size()), db(b.bytes.size()), dbias(bias.bytes.size()),
      dres(residual.bytes.size()), dout(out.bytes.size()), daux(aux.bytes.size());
  cudaMemcpy(da.p, a.bytes.data(), a.bytes.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(db.p, b.bytes.data(), b.bytes.size(), cudaMemcpyHostToDevice);
  if (biasGrad)
    cudaMemset(dbias.p, 0xff, bias.bytes.size());
  else
    cudaMemcpy(dbias.p, bias.bytes.data(), bias.bytes.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(dres.p, residual.bytes.data(), residual.bytes.size(), cudaMemcpyHostToDevice);
  cudaMemset(dout.p, 0xff, out.bytes.size());
  if (dgelu)
    cudaMemcpy(daux.p, aux.bytes.data(), aux.bytes.size(), cudaMemcpyHostToDevice);
  else
    cudaMemset(daux.p, 0xff, aux.bytes.size());
  bool withAux = c.epilogue == tcc_cuda_host::kEpilogueGeluAuxBias;
  // An f32 residual is C = D, in place (GPT-2's residual stream; the search
  // must time into a scratch D). A 16-bit one is a buffer of its own: in
  // place, every candidate of the 37x64x96 BIAS+residual cases was off by
  // up to 36x the tolerance on the H200 (cuBLASLt 13.1).
  bool inPlace = c.residual && c.out == tcc_cuda_host::kGemmF32;
  void *C = inPlace ? dout.p : dres.p;
  if (inPlace)
    cudaMemcpy(dout.p, dres.p, residual.bytes.size(), cudaMemcpyDeviceToDevice);
  tcc_cuda_host::GemmPlan plan;
  int32_t rc = tcc_cuda_host::gemm_epilogue(
      plan, nullptr, 0, c.in, c.out, false, c.ta, c.tb, c.m, c.n, c.k, c.epilogue, da.p,
      db.p, (dgelu && !biasGrad) || c.epilogue == tcc_cuda_host::kEpilogueNone ? nullptr : dbias.p,
      c.residual ? C : nullptr, dout.p,
      withAux || dgelu ? daux.p : nullptr,
      workspace, kWorkspace);
  cudaDeviceSynchronize();
  char name[160];
  std::snprintf(name, sizeof name, "%s%s %s->%s %lldx%lldx%lld%s%s", epilogueName(c.epilogue),
                c.residual ? "+residual" : "", typeName(c.in), typeName(c.out),
                static_cast<long long>(c.m), static_cast<long long>(c.n),
                static_cast<long long>(c.k), c.ta ? " ta" : "", c.tb ? " tb" : "");
  if (rc != 0) {
    std::printf("%s %s: rc %d: %s\n", c.unsupportedOnH200 ? "ok  " : "FAIL", name, rc,
                tcc_cuda_host::state().error.c_str());
    tcc_cuda_host::destroy_plan(plan);
    return c.unsupportedOnH200;
  }
  if (chosen)
    *chosen = plan.choice;
  cudaMemcpy(out.bytes.data(), dout.p, out.bytes.size(), cudaMemcpyDeviceToHost);
  if (withAux)
    cudaMemcpy(aux.bytes.data(), daux.p, aux.bytes.size(), cudaMemcpyDeviceToHost);
  Reference ref = reference(c, a, b, bias, residual, aux); // aux: DGELU's input
  HostArray grad(c.out, biasGrad ? c.n : 0); // the bias gradient written
  if (biasGrad)
    cudaMemcpy(grad.bytes.data(), dbias.p, grad.bytes.size(), cudaMemcpyDeviceToHost);
  bool ok = check(c, ref, out, aux, grad, name, plan.choice);
  // Every candidate a search could pick, run with the plan's descriptors
  // (bias / aux pointers set by the call above) on the same inputs.
  cublasLtMatmulHeuristicResult_t results[tcc_cuda_host::kGemmCandidates];
  int found = heuristicCandidates(plan, kWorkspace, results);
  int candidatesOk = 0, skipped = 0;
  for (int i = 0; i < found; ++i) {
    if (inPlace)
      cudaMemcpy(dout.p, dres.p, residual.bytes.size(), cudaMemcpyDeviceToDevice);
    else
      cudaMemset(dout.p, 0xff, out.bytes.size());
    if (withAux)
      cudaMemset(daux.p, 0xff, aux.bytes.size());
    if (biasGrad)
      cudaMemset(dbias.p, 0xff, bias.bytes.size());
    float one = 1.0f, beta = c.residual ? 1.0f : 0.0f;
    cublasStatus_t st = cublasLtMatmul(
        tcc_cuda_host::state().lt, plan.op, &one, db.p, plan.a, da.p, plan.b, &beta,
        c.residual ? C : dout.p, plan.c, dout.p, plan.c, &results[i].algo, workspace,
        kWorkspace, nullptr);
    if (cudaDeviceSynchronize() != cudaSuccess) {
      std::printf("FAIL %s: candidate %d (%s) failed on the GPU\n", name, i,
                  tcc_cuda_host::describe_gemm_algo(results[i].algo).c_str());
      ok = false;
      break;
    }
    if (st != CUBLAS_STATUS_SUCCESS)
      continue; // cuBLASLt refused it at launch: a search skips it too
    cudaMemcpy(out.bytes.data(), dout.p, out.bytes.size(), cudaMemcpyDeviceToHost);
    if (withAux)
      cudaMemcpy(aux.bytes.data(), daux.p, aux.bytes.size(), cudaMemcpyDeviceToHost);
    if (biasGrad)
      cudaMemcpy(grad.bytes.data(), dbias.p, grad.bytes.size(), cudaMemcpyDeviceToHost);
    // The first is cuBLASLt's own answer (used without a search); a search
    // also skips split-K candidates that round partial sums to 16 bits.
    bool searchable =
        i == 0 || tcc_cuda_host::gemm_algo_keeps_precision(
                      results[i].algo, c.out != tcc_cuda_host::kGemmF32);
    std::string label = std::string(name) + " candidate " + std::to_string(i) + " (" +
                        tcc_cuda_host::describe_gemm_algo(results[i].algo) +
                        (searchable ? ")" : ", never searched)");
    if (check(c, ref, out, aux, grad, label.c_str(), nullptr, /*quiet=*/true))
      ++candidatesOk;
    else if (searchable)
      ok = false;
    else
      ++skipped;
  }
  std::printf("%s %s: %d of %d heuristic candidates within tolerance%s\n",
              candidatesOk + skipped == found ? "ok  " : "FAIL", name, candidatesOk, found,
              skipped ? (", " + std::to_string(skipped) + " outside it never searched").c_str()
                      : "");
  tcc_cuda_host::destroy_plan(plan);
  return ok;
}

Reference reference(const Case &c, const HostArray &a, const HostArray &b,
                    const HostArray &bias, const HostArray &residual, const HostArray &aux) {
  bool dgelu = tcc_cuda_host::epilogue_reads_aux(c.epilogue);
  bool biasGrad = c.epilogue == tcc_cuda_host::kEpilogueBGradB ||
                  c.epilogue == tcc_cuda_host::kEpilogueDGeluBGrad;
  bool gelu = c.epilogue == tcc_cuda_host::kEpilogueGeluBias ||
              c.epilogue == tcc_cuda_host::kEpilogueGeluAuxBias;
  Reference r;
  r.want.resize(c.m * c.n);
  r.pre.resize(c.m * c.n);
  r.scale.resize(c.m * c.n);
  r.gradWant.assign(c.n, 0.0);
  r.gradScale.assign(c.n, 0.0);
  r.gradAbs.assign(c.n, 0.0);
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = 0; j < c.n; ++j) {
      double sum = 0, scale = 0;
      for (int64_t p = 0; p < c.k; ++p) {
        double x = a.get(c.ta ? p * c.m + i : i * c.k + p);
        double y = b.get(c.tb ? j * c.k + p : p * c.n + j);
        sum += x * y;
        scale += std::fabs(x * y);
      }
      bool readsBias = !dgelu && !biasGrad && c.epilogue != tcc_cuda_host::kEpilogueNone;
      double pre = readsBias ? sum + bias.get(j) : sum;
      if (readsBias)
        scale += std::fabs(bias.get(j));
      double want = dgelu ? geluTanhDerivative(aux.get(i * c.n + j)) * sum
                    : gelu ? geluTanh(pre)
                           : pre;
      if (dgelu) // gelu' is at most 1.13: the product's error bound carries over
        scale *= 1.13;
      if (c.residual) {
        want += residual.get(i * c.n + j);
        scale += std::fabs(residual.get(i * c.n + j));
      }
      r.want[i * c.n + j] = want;
      r.pre[i * c.n + j] = pre;
      r.scale[i * c.n + j] = scale;
      if (c.epilogue == tcc_cuda_host::kEpilogueDGeluBGrad) {
        r.gradWant[j] += want;
        r.gradScale[j] += scale;
        r.gradAbs[j] += std::fabs(want);
      }
    }
  if (c.epilogue == tcc_cuda_host::kEpilogueBGradB)
    for (int64_t j = 0; j < c.n; ++j)
      for (int64_t p = 0; p < c.k; ++p) {
        double y = b.get(c.tb ? j * c.k + p : p * c.n + j);
        r.gradWant[j] += y;
        r.gradScale[j] += std::fabs(y);
      }
  return r;
}

// The product in `out` (and `aux`, and the bias gradient in `grad`) against
// the float64 reference.
bool check(const Case &c, const Reference &ref, const HostArray &out, const HostArray &aux,
           const HostArray &grad, const char *name, const tcc_cuda_host::GemmChoice *choice,
           bool quiet) {
  bool dgelu = tcc_cuda_host::epilogue_reads_aux(c.epilogue);
  bool biasGrad = c.epilogue == tcc_cuda_host::kEpilogueBGradB ||
                  c.epilogue == tcc_cuda_host::kEpilogueDGeluBGrad;
  bool withAux = c.epilogue == tcc_cuda_host::kEpilogueGeluAuxBias;
  double u = unitRoundoff(c.out), worst = 0, worstAux = 0, worstGrad = 0;
  int64_t bad = 0;
  for (int64_t e = 0; e < c.m * c.n; ++e) {
    double want = ref.want[e], pre = ref.pre[e], scale = ref.scale[e];
    double got = out.get(e);
    // DGELU rounds twice in 16 bits (the product to D's type, then the
    // derivative times it), as the unfused gelu_grad of a stored product.
    double rounding = dgelu && c.out != tcc_cuda_host::kGemmF32 ? 2 * u : u;
    double err = std::fabs(got - want) / (rounding * std::fabs(want) + 1e-5 * scale);
    if (!(err <= 1.0))
      ++bad;
    worst = std::max(worst, std::isnan(err) ? 1e30 : err);
    if (withAux) {
      double ea = std::fabs(aux.get(e) - pre) / (u * std::fabs(pre) + 1e-5 * scale);
      if (!(ea <= 1.0))
        ++bad;
      worstAux = std::max(worstAux, std::isnan(ea) ? 1e30 : ea);
    }
  }
  if (biasGrad)
    for (int64_t j = 0; j < c.n; ++j) {
      double sumOfRounded = c.epilogue == tcc_cuda_host::kEpilogueDGeluBGrad &&
                                    c.out != tcc_cuda_host::kGemmF32
                                ? u * ref.gradAbs[j]
                                : 0.0;
      double e = std::fabs(grad.get(j) - ref.gradWant[j]) /
                 (u * std::fabs(ref.gradWant[j]) + 1e-5 * ref.gradScale[j] + sumOfRounded);
      if (!(e <= 1.0))
        ++bad;
      worstGrad = std::max(worstGrad, std::isnan(e) ? 1e30 : e);
    }
  if (!quiet || bad)
    std::printf("%s %s: worst error / tolerance %.3f%s%s%s%s\n",
                !bad ? "ok  " : std::strstr(name, "never searched") ? "note" : "FAIL", name,
                worst, withAux ? (" (aux " + std::to_string(worstAux) + ")").c_str() : "",
                biasGrad ? (" (bias gradient " + std::to_string(worstGrad) + ")").c_str() : "",
                choice ? ", " : "",
                choice ? (choice->algorithm + " (" +
                          tcc_cuda_host::gemm_source_name(choice->source) + ")")
                             .c_str()
                       : "");
  return bad == 0;
}

// The cache file the searches wrote, read by a fresh process state: the
// same algorithm, from the cache, still within tolerance; a corrupt file is
// ignored with a warning and the product searched again.
bool cacheRoundTrip(const Case &c, std::mt19937_64 &rng, void *workspace) {
  using tcc_cuda_host::gemm_selection;
  if (!gemm_selection().search) {
    std::printf("skip cache round trip (TCC_GEMM_SEARCH=0)\n");
    return true;
  }
  std::string path = gemm_selection().cache_path;
  const tcc_cuda_host::GemmChoice *searched = nullptr, *cached = nullptr, *again = nullptr;
  // The case's own choice in this process (searched above, or now).
  bool ok = runCase(c, rng, workspace, &searched);
  cublasLtMatmulAlgo_t searchedAlgo = searched->algo;
  gemm_selection() = tcc_cuda_host::GemmSelection{}; // as a new process
  ok &= runCase(c, rng, workspace, &cached);
  bool fromCache = cached->source == tcc_cuda_host::kGemmFromCache &&
                   std::memcmp(&cached->algo, &searchedAlgo, sizeof searchedAlgo) == 0;
  std::printf("%s cache round trip (%s): %s\n", fromCache ? "ok  " : "FAIL", path.c_str(),
              tcc_cuda_host::gemm_source_name(cached->source));
  if (FILE *f = std::fopen(path.c_str(), "w")) {
    std::fputs("tcc-gemm-cache 1\ngpu something else\n", f);
    std::fclose(f);
  }
  gemm_selection() = tcc_cuda_host::GemmSelection{};
  ok &= runCase(c, rng, workspace, &again);
  bool researched = again->source == tcc_cuda_host::kGemmFromSearch &&
                    !gemm_selection().cache_problem.empty();
  std::printf("%s corrupt cache ignored and searched again: %s\n", researched ? "ok  " : "FAIL",
              gemm_selection().cache_problem.c_str());
  return ok && fromCache && researched;
}

// Milliseconds per call of gemm_epilogue (or the plain product with
// epilogue < 0) on GPT-2's 16384-row shapes, bf16.
void bench(void *workspace) {
  struct Shape { const char *name; int64_t n, k; };
  const Shape shapes[] = {{"c_attn", 2304, 768}, {"attn.c_proj", 768, 768},
                          {"c_fc", 3072, 768}, {"mlp.c_proj", 768, 3072}};
  const int64_t m = 16384;
  cudaStream_t s;
  cudaStreamCreate(&s);
  cudaEvent_t t0, t1;
  cudaEventCreate(&t0);
  cudaEventCreate(&t1);
  for (const Shape &sh : shapes) {
    Device a(m * sh.k * 2), b(sh.k * sh.n * 2), bias(sh.n * 4), c(m * sh.n * 4), aux(m * sh.n * 2);
    cudaMemset(a.p, 0, m * sh.k * 2);
    cudaMemset(b.p, 0, sh.k * sh.n * 2);
    cudaMemset(bias.p, 0, sh.n * 4);
    cudaMemset(c.p, 0, m * sh.n * 4);
    cudaMemset(aux.p, 0, m * sh.n * 2);
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
    tcc_cuda_host::GemmPlan p0, p1, p2, p3;
    float plain = time([&] {
      tcc_cuda_host::gemm(p0, s, 0, tcc_cuda_host::kGemmBF16, false, false, false, m, sh.n,
                          sh.k, 1, 0, 0, 0, 1.0, 0.0, a.p, b.p, aux.p, workspace, kWorkspace);
    });
    float biasOnly = time([&] {
      tcc_cuda_host::gemm_epilogue(p1, s, 0, tcc_cuda_host::kGemmBF16, tcc_cuda_host::kGemmBF16,
                                   false, false, false, m, sh.n, sh.k,
                                   tcc_cuda_host::kEpilogueBias, a.p, b.p, bias.p, nullptr,
                                   aux.p, nullptr, workspace, kWorkspace);
    });
    float geluAux = time([&] {
      tcc_cuda_host::gemm_epilogue(p2, s, 0, tcc_cuda_host::kGemmBF16, tcc_cuda_host::kGemmBF16,
                                   false, false, false, m, sh.n, sh.k,
                                   tcc_cuda_host::kEpilogueGeluAuxBias, a.p, b.p, bias.p,
                                   nullptr, c.p, aux.p, workspace, kWorkspace);
    });
    float residual = time([&] {
      tcc_cuda_host::gemm_epilogue(p3, s, 0, tcc_cuda_host::kGemmBF16, tcc_cuda_host::kGemmF32,
                                   false, false, false, m, sh.n, sh.k,
                                   tcc_cuda_host::kEpilogueBias, a.p, b.p, bias.p, c.p, c.p,
                                   nullptr, workspace, kWorkspace);
    });
    tcc_cuda_host::GemmPlan p4;
    float dgelu = time([&] {
      tcc_cuda_host::gemm_epilogue(p4, s, 0, tcc_cuda_host::kGemmBF16, tcc_cuda_host::kGemmBF16,
                                   false, false, false, m, sh.n, sh.k,
                                   tcc_cuda_host::kEpilogueDGelu, a.p, b.p, nullptr, nullptr,
                                   c.p, aux.p, workspace, kWorkspace);
    });
    std::printf("bench %-12s %lldx%lldx%lld bf16: product %.3f ms, +bias %.3f, +gelu_aux %.3f, "
                "+bias+residual(f32 C/D) %.3f, dgelu %.3f\n",
                sh.name, static_cast<long long>(m), static_cast<long long>(sh.n),
                static_cast<long long>(sh.k), plain, biasOnly, geluAux, residual, dgelu);
    // The backward: dX = dY W^T with DGELU vs DGELU_BGRAD ((m, k) x (n, k)^T
    // reusing the buffers), and dW = X^T dY (k x n over m rows) plain vs BGRADB.
    tcc_cuda_host::GemmPlan p5, p6, p7;
    float dgeluGrad = time([&] {
      tcc_cuda_host::gemm_epilogue(p5, s, 0, tcc_cuda_host::kGemmBF16, tcc_cuda_host::kGemmBF16,
                                   false, false, true, m, sh.n, sh.k,
                                   tcc_cuda_host::kEpilogueDGeluBGrad, a.p, b.p, bias.p,
                                   nullptr, c.p, aux.p, workspace, kWorkspace);
    });
    float weightGrad = time([&] {
      tcc_cuda_host::gemm(p6, s, 0, tcc_cuda_host::kGemmBF16, false, true, false, sh.k, sh.n, m,
                          1, 0, 0, 0, 1.0, 0.0, a.p, aux.p, c.p, workspace, kWorkspace);
    });
    float weightBiasGrad = time([&] {
      tcc_cuda_host::gemm_epilogue(p7, s, 0, tcc_cuda_host::kGemmBF16, tcc_cuda_host::kGemmBF16,
                                   false, true, false, sh.k, sh.n, m,
                                   tcc_cuda_host::kEpilogueBGradB, a.p, aux.p, bias.p, nullptr,
                                   c.p, nullptr, workspace, kWorkspace);
    });
    std::printf("bench %-12s backward: dgelu_bgrad (tb) %.3f ms; dW %lldx%lldx%lld product %.3f, "
                "+bgradb %.3f\n",
                sh.name, dgeluGrad, static_cast<long long>(sh.k), static_cast<long long>(sh.n),
                static_cast<long long>(m), weightGrad, weightBiasGrad);
    for (auto *p : {&p0, &p1, &p2, &p3, &p4, &p5, &p6, &p7})
      std::printf("  %s: %s (%s; search %.3f ms, first answer %.3f ms)\n",
                  p->choice->descriptor.c_str(), p->choice->algorithm.c_str(),
                  tcc_cuda_host::gemm_source_name(p->choice->source), p->choice->best_ms,
                  p->choice->heuristic_ms);
    for (auto *p : {&p0, &p1, &p2, &p3, &p4, &p5, &p6, &p7})
      tcc_cuda_host::destroy_plan(*p);
  }
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
  if (cublasLtCreate(&tcc_cuda_host::state().lt) != CUBLAS_STATUS_SUCCESS) {
    std::printf("cublasLtCreate failed\n");
    return 1;
  }
  // The searches of this run write a cache file of their own (read back by
  // cacheRoundTrip), never the user's; TCC_GEMM_SEARCH=0 tests cuBLASLt's
  // first answers alone (and --bench then times them).
  char cacheDir[] = "/tmp/tcc_gemm_epilogue_test_XXXXXX";
  if (!mkdtemp(cacheDir)) {
    std::printf("cannot create a temporary folder\n");
    return 1;
  }
  std::string cacheFile = std::string(cacheDir) + "/gemm.txt";
  setenv("TCC_GEMM_CACHE", cacheFile.c_str(), 1);
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  Device workspace(kWorkspace);
  using namespace tcc_cuda_host;
  std::vector<Case> cases;
  for (GemmType t : {kGemmBF16, kGemmF16, kGemmF32}) {
    for (GemmEpilogue e : {kEpilogueBias, kEpilogueGeluBias, kEpilogueGeluAuxBias})
      cases.push_back({t, t, e, false, false, false, 37, 64, 96});
    cases.push_back({t, t, kEpilogueBias, true, false, false, 37, 64, 96});
    // Transposed A and B: f32 only. On the H200 (2026-11-24) GELU_AUX_BIAS
    // with a transposed 16-bit A and B was off by up to 22x the tolerance
    // (aux 38x), so tg-fuse-matmul-epilogue fuses no transposed operand for
    // cuda's forward epilogues.
    if (t == kGemmF32)
      cases.push_back({t, t, kEpilogueGeluAuxBias, false, true, true, 29, 40, 72});
    cases.push_back({t, t, kEpilogueDGelu, false, false, false, 37, 64, 96});
    cases.push_back({t, t, kEpilogueDGelu, false, false, true, 29, 40, 72});
  }
  cases.push_back({kGemmBF16, kGemmF32, kEpilogueBias, true, false, false, 37, 64, 96});
  cases.push_back({kGemmF16, kGemmF32, kEpilogueBias, true, false, true, 37, 64, 96});
  // No bias, only the residual (kEpilogueNone: a bias-free layer onto the
  // f32 residual stream, in place; the sum of two bf16 input gradients,
  // apart): plain and transposed B, and LLaMA's o_proj width.
  cases.push_back({kGemmBF16, kGemmF32, kEpilogueNone, true, false, false, 37, 64, 96});
  cases.push_back({kGemmBF16, kGemmF32, kEpilogueNone, true, false, true, 37, 64, 96});
  cases.push_back({kGemmBF16, kGemmBF16, kEpilogueNone, true, false, true, 29, 40, 72});
  cases.push_back({kGemmF32, kGemmF32, kEpilogueNone, true, false, false, 29, 40, 72});
  cases.push_back({kGemmBF16, kGemmF32, kEpilogueNone, true, false, false, 129, 2048, 512});
  // GPT-2 shapes, fewer rows (the float64 reference is on the CPU).
  cases.push_back({kGemmBF16, kGemmBF16, kEpilogueBias, false, false, false, 129, 2304, 768});
  cases.push_back({kGemmBF16, kGemmBF16, kEpilogueGeluAuxBias, false, false, false, 129, 3072, 768});
  cases.push_back({kGemmBF16, kGemmF32, kEpilogueBias, true, false, false, 129, 768, 3072});
  cases.push_back({kGemmBF16, kGemmBF16, kEpilogueDGelu, false, false, true, 129, 3072, 768});
  // Bias gradients. BGRADB: the weight gradient dW = X^T dY (transposed A)
  // in every type, plus plain and transposed-B layouts to learn which
  // cuBLASLt takes; DGELU_BGRAD in GPT-2's c_fc backward layout (dY W^T).
  for (GemmType t : {kGemmBF16, kGemmF16, kGemmF32}) {
    cases.push_back({t, t, kEpilogueBGradB, false, true, false, 40, 64, 97});
    cases.push_back({t, t, kEpilogueBGradB, false, false, false, 40, 64, 96});
    cases.push_back({t, t, kEpilogueBGradB, false, true, true, 40, 64, 96, true});
    cases.push_back({t, t, kEpilogueDGeluBGrad, false, false, true, 37, 64, 96});
    cases.push_back({t, t, kEpilogueDGeluBGrad, false, false, false, 37, 64, 96});
  }
  // GPT-2's weight gradients (768 x 2304 and 3072 x 768, fewer rows of dY).
  cases.push_back({kGemmBF16, kGemmBF16, kEpilogueBGradB, false, true, false, 768, 2304, 512});
  cases.push_back({kGemmBF16, kGemmBF16, kEpilogueBGradB, false, true, false, 3072, 768, 256});
  cases.push_back({kGemmBF16, kGemmBF16, kEpilogueDGeluBGrad, false, false, true, 256, 3072, 768});
  bool ok = true;
  for (const Case &c : cases)
    ok &= runCase(c, rng, workspace.p);
  ok &= cacheRoundTrip(cases.back(), rng, workspace.p);
  if (doBench)
    bench(workspace.p);
  std::remove(cacheFile.c_str());
  rmdir(cacheDir);
  std::printf("%s\n", ok ? "all passed" : "FAILED");
  return ok ? 0 : 1;
}
