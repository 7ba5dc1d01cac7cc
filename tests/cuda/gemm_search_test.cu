// Device test of the cuBLASLt algorithm search (host_support/gemm_search.h)
// on plain products (tcc_cuda_host::gemm, kern.gemm): each case runs once
// through gemm with a fresh plan (its algorithm searched), then through
// every heuristic candidate a search could take, each against a float64
// reference on the same random inputs. A standalone program (no gtest):
//
//   gemm_search_test [--seed N]
//
// Cases: bf16 / f16 / f32, transposed and plain operands, odd sizes, the
// long-K weight-gradient form (A transposed, K 8192: where cuBLASLt offers
// split-K), accumulation into the output (beta = 1, C = D: the search
// times into a scratch D, so the result must be the one-call result), and
// a strided batch. Tolerance per element: |got - want| <= u |want| +
// 1e-5 scale, u the output's unit roundoff (2^-8 bf16, 2^-11 f16, 2^-22
// f32) and scale = sum_k |a b| + |beta c|. A split-K candidate that adds
// partial sums in a 16-bit output type is never searched; it is reported
// ("note") when it misses the tolerance, not failed. Outputs are poisoned
// with NaN bytes first (or hold C), so unwritten elements fail.
// Exit 0 pass, 1 fail, 77 no GPU.
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

constexpr size_t kWorkspace = 32u << 20;

struct Case {
  GemmType type;
  bool ta, tb;
  int64_t m, n, k, batch;
  double beta;
};

// Row-major out[b] = op(A[b]) op(B[b]) + beta * C[b], in float64.
struct Reference {
  std::vector<double> want, scale;
};

Reference reference(const Case &c, const HostArray &a, const HostArray &b,
                    const HostArray &cin) {
  Reference r;
  size_t per = c.m * c.n;
  r.want.resize(per * c.batch);
  r.scale.resize(per * c.batch);
  for (int64_t q = 0; q < c.batch; ++q)
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t j = 0; j < c.n; ++j) {
        double sum = 0, scale = 0;
        for (int64_t p = 0; p < c.k; ++p) {
          double x = a.get(q * c.m * c.k + (c.ta ? p * c.m + i : i * c.k + p));
          double y = b.get(q * c.k * c.n + (c.tb ? j * c.k + p : p * c.n + j));
          sum += x * y;
          scale += std::fabs(x * y);
        }
        size_t e = q * per + i * c.n + j;
        r.want[e] = sum + c.beta * cin.get(e);
        r.scale[e] = scale + std::fabs(c.beta * cin.get(e));
      }
  return r;
}

// Elements off the tolerance; `worst` the largest error / tolerance.
int64_t misses(const Case &c, const Reference &r, const HostArray &out, double &worst) {
  double u = unitRoundoff(c.type);
  int64_t bad = 0;
  worst = 0;
  for (size_t e = 0; e < r.want.size(); ++e) {
    double err = std::fabs(out.get(e) - r.want[e]) / (u * std::fabs(r.want[e]) + 1e-5 * r.scale[e]);
    if (!(err <= 1.0))
      ++bad;
    worst = std::max(worst, std::isnan(err) ? 1e30 : err);
  }
  return bad;
}

bool runCase(const Case &c, std::mt19937_64 &rng, void *workspace) {
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  size_t outCount = c.m * c.n * c.batch;
  HostArray a(c.type, c.m * c.k * c.batch), b(c.type, c.k * c.n * c.batch),
      cin(c.type, outCount), out(c.type, outCount);
  for (size_t i = 0; i < a.size(); ++i) a.set(i, uniform(rng));
  for (size_t i = 0; i < b.size(); ++i) b.set(i, uniform(rng) * 0.1);
  for (size_t i = 0; i < cin.size(); ++i) cin.set(i, uniform(rng) * 4);
  Device da(a.bytes.size()), db(b.bytes.size()), dout(out.bytes.size());
  cudaMemcpy(da.p, a.bytes.data(), a.bytes.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(db.p, b.bytes.data(), b.bytes.size(), cudaMemcpyHostToDevice);
  // The output starts as C (beta != 0: read and overwritten in place) or
  // as NaN bytes.
  auto resetOutput = [&] {
    if (c.beta != 0)
      cudaMemcpy(dout.p, cin.bytes.data(), cin.bytes.size(), cudaMemcpyHostToDevice);
    else
      cudaMemset(dout.p, 0xff, out.bytes.size());
  };
  char name[160];
  std::snprintf(name, sizeof name, "%s %lldx%lldx%lld%s%s%s%s", typeName(c.type),
                static_cast<long long>(c.m), static_cast<long long>(c.n),
                static_cast<long long>(c.k), c.ta ? " ta" : "", c.tb ? " tb" : "",
                c.batch > 1 ? (" x" + std::to_string(c.batch)).c_str() : "",
                c.beta != 0 ? " beta 1 (in place)" : "");
  Reference ref = reference(c, a, b, cin);

  resetOutput();
  tcc_cuda_host::GemmPlan plan;
  int32_t rc = tcc_cuda_host::gemm(plan, nullptr, 0, c.type, false, c.ta, c.tb, c.m, c.n, c.k,
                                   c.batch, c.m * c.k, c.k * c.n, c.m * c.n, 1.0, c.beta,
                                   da.p, db.p, dout.p, workspace, kWorkspace);
  cudaDeviceSynchronize();
  if (rc != 0) {
    std::printf("FAIL %s: rc %d: %s\n", name, rc, tcc_cuda_host::state().error.c_str());
    tcc_cuda_host::destroy_plan(plan);
    return false;
  }
  cudaMemcpy(out.bytes.data(), dout.p, out.bytes.size(), cudaMemcpyDeviceToHost);
  double worst = 0;
  bool ok = misses(c, ref, out, worst) == 0;
  std::printf("%s %s: worst error / tolerance %.3f, %s (%s)\n", ok ? "ok  " : "FAIL", name,
              worst, plan.choice->algorithm.c_str(),
              tcc_cuda_host::gemm_source_name(plan.choice->source));

  // Every candidate, with the plan's descriptors.
  cublasLtMatmulHeuristicResult_t results[tcc_cuda_host::kGemmCandidates];
  int found = heuristicCandidates(plan, kWorkspace, results);
  int passed = 0, skipped = 0;
  for (int i = 0; i < found; ++i) {
    resetOutput();
    float one = 1.0f, beta = static_cast<float>(c.beta);
    cublasStatus_t st = cublasLtMatmul(tcc_cuda_host::state().lt, plan.op, &one, db.p, plan.a,
                                       da.p, plan.b, &beta, dout.p, plan.c, dout.p, plan.c,
                                       &results[i].algo, workspace, kWorkspace, nullptr);
    if (cudaDeviceSynchronize() != cudaSuccess) {
      std::printf("FAIL %s: candidate %d (%s) failed on the GPU\n", name, i,
                  tcc_cuda_host::describe_gemm_algo(results[i].algo).c_str());
      tcc_cuda_host::destroy_plan(plan);
      return false;
    }
    if (st != CUBLAS_STATUS_SUCCESS) { // refused at launch: a search skips it too
      ++skipped;
      continue;
    }
    cudaMemcpy(out.bytes.data(), dout.p, out.bytes.size(), cudaMemcpyDeviceToHost);
    bool searchable = i == 0 || tcc_cuda_host::gemm_algo_keeps_precision(
                                    results[i].algo, c.type != tcc_cuda_host::kGemmF32);
    if (misses(c, ref, out, worst) == 0) {
      ++passed;
      continue;
    }
    std::printf("%s %s candidate %d (%s%s): worst error / tolerance %.3f\n",
                searchable ? "FAIL" : "note", name, i,
                tcc_cuda_host::describe_gemm_algo(results[i].algo).c_str(),
                searchable ? "" : ", never searched", worst);
    if (searchable)
      ok = false;
    else
      ++skipped;
  }
  std::printf("%s %s: %d of %d heuristic candidates within tolerance%s\n",
              passed + skipped == found ? "ok  " : "FAIL", name, passed, found,
              skipped ? (", " + std::to_string(skipped) + " others never searched").c_str()
                      : "");
  tcc_cuda_host::destroy_plan(plan);
  return ok && passed + skipped == found;
}

} // namespace

int main(int argc, char **argv) {
  uint64_t seed = parseTestArgs(argc, argv).seed; // (no --bench here)
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no GPU: skipped\n");
    return 77;
  }
  if (cublasLtCreate(&tcc_cuda_host::state().lt) != CUBLAS_STATUS_SUCCESS) {
    std::printf("cublasLtCreate failed\n");
    return 1;
  }
  setenv("TCC_GEMM_CACHE", "0", 1); // search every case, write no file
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  Device workspace(kWorkspace);
  using namespace tcc_cuda_host;
  const Case cases[] = {
      {kGemmBF16, false, false, 129, 768, 3072, 1, 0}, // GPT-2 c_proj forward, fewer rows
      {kGemmBF16, false, true, 129, 3072, 768, 1, 0},  // an activation gradient (NT)
      {kGemmBF16, true, false, 96, 64, 8192, 1, 0},    // a weight gradient (TN, long K)
      {kGemmBF16, true, false, 64, 96, 4096, 1, 1},    // accumulated into C = D
      {kGemmF16, true, false, 64, 64, 8192, 1, 0},
      {kGemmF16, false, false, 37, 64, 96, 1, 0},
      {kGemmF32, false, false, 65, 33, 517, 1, 0},
      {kGemmF32, true, true, 29, 40, 72, 1, 1},
      {kGemmBF16, false, false, 64, 64, 128, 4, 0},    // strided batch
  };
  bool ok = true;
  for (const Case &c : cases)
    ok &= runCase(c, rng, workspace.p);
  std::printf("%s\n", ok ? "all passed" : "FAILED");
  return ok ? 0 : 1;
}
