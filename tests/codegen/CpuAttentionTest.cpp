// The CPU flash-attention kernels (compiler/codegen/cpu/cpu_attention.h)
// against a float64 reference that writes out the T x S matrices, on fresh
// random inputs: odd sizes, grouped heads, causal with T != S (T > S gives
// fully masked rows), dropout (the mask from tcc_dropout_keep, i.e.
// tg.dropout's), and float / double / bf16 / f16. The backward must also be
// bit-identical across thread counts.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "compiler/codegen/cpu/cpu_prelude.h"
#include "compiler/codegen/cpu/cpu_attention.h"
#include "dialects/kern/AttentionWorkspace.h"
#include "gtest/gtest.h"

namespace {

struct Case {
  int64_t batch, heads, kvHeads, queries, keys, dim;
  bool causal;
  double rate;
};

struct Reference {
  std::vector<double> out, lse, dq, dk, dv;
};

constexpr uint64_t kRngSeed = 0x1234abcdull, kOpId = 0x9e3779b97f4a7c15ull, kStep = 7;

// Float64 reference with explicit p (T x S), the mask from tcc_dropout_keep.
Reference reference(const Case &c, const std::vector<double> &q, const std::vector<double> &k,
                    const std::vector<double> &v, const std::vector<double> &g, double scale) {
  const int64_t T = c.queries, S = c.keys, D = c.dim, group = c.heads / c.kvHeads;
  Reference r;
  r.out.assign(c.batch * c.heads * T * D, 0);
  r.lse.assign(c.batch * c.heads * T, 0);
  r.dq.assign(q.size(), 0);
  r.dk.assign(k.size(), 0);
  r.dv.assign(v.size(), 0);
  const double neg_inf = -std::numeric_limits<double>::infinity();
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t h = 0; h < c.heads; ++h) {
      const int64_t bh = b * c.heads + h, kvh = b * c.kvHeads + h / group;
      std::vector<double> p(T * S, 0), kept(T * S, 0);
      for (int64_t i = 0; i < T; ++i) {
        std::vector<double> s(S, neg_inf);
        double mx = neg_inf;
        for (int64_t j = 0; j < S; ++j) {
          if (c.causal && j > i + (S - T))
            continue;
          double dot = 0;
          for (int64_t d = 0; d < D; ++d)
            dot += q[(bh * T + i) * D + d] * k[(kvh * S + j) * D + d];
          s[j] = scale * dot;
          mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j < S; ++j)
          sum += s[j] == neg_inf ? 0 : std::exp(s[j] - mx);
        r.lse[bh * T + i] = sum > 0 ? mx + std::log(sum) : neg_inf;
        for (int64_t j = 0; j < S; ++j) {
          p[i * S + j] = s[j] == neg_inf ? 0 : std::exp(s[j] - mx) / sum;
          uint64_t index = (static_cast<uint64_t>(bh) * T + i) * S + j;
          bool keep = c.rate == 0 || tcc_dropout_keep(kRngSeed, kOpId, kStep, index, c.rate);
          kept[i * S + j] = keep ? 1.0 / (1.0 - c.rate) : 0.0;
        }
      }
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < S; ++j)
          for (int64_t d = 0; d < D; ++d)
            r.out[(bh * T + i) * D + d] += p[i * S + j] * kept[i * S + j] * v[(kvh * S + j) * D + d];
      // dP' = g v^T, dp = kept dP', ds = p (dp - sum_j p dp).
      for (int64_t i = 0; i < T; ++i) {
        std::vector<double> dp(S, 0);
        double rowsum = 0;
        for (int64_t j = 0; j < S; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d)
            dot += g[(bh * T + i) * D + d] * v[(kvh * S + j) * D + d];
          dp[j] = kept[i * S + j] * dot;
          rowsum += p[i * S + j] * dp[j];
        }
        for (int64_t j = 0; j < S; ++j) {
          double ds = p[i * S + j] * (dp[j] - rowsum);
          double pk = p[i * S + j] * kept[i * S + j];
          for (int64_t d = 0; d < D; ++d) {
            r.dv[(kvh * S + j) * D + d] += pk * g[(bh * T + i) * D + d];
            r.dq[(bh * T + i) * D + d] += scale * ds * k[(kvh * S + j) * D + d];
            r.dk[(kvh * S + j) * D + d] += scale * ds * q[(bh * T + i) * D + d];
          }
        }
      }
    }
  return r;
}

template <typename T> std::vector<T> toElements(const std::vector<double> &x) {
  std::vector<T> out;
  for (double e : x)
    out.push_back(tcc_cpu::Elem<T>::store(static_cast<tcc_cpu::acc_t<T>>(e)));
  return out;
}
template <typename T> std::vector<double> toDoubles(const std::vector<T> &x) {
  std::vector<double> out;
  for (const T &e : x)
    out.push_back(static_cast<double>(tcc_cpu::Elem<T>::load(e)));
  return out;
}

// |got - want| <= tol * (1 + max |want|) element by element.
void expectClose(const std::vector<double> &got, const std::vector<double> &want, double tol,
                 const char *what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 1;
  for (double w : want)
    if (std::isfinite(w))
      scale = std::max(scale, std::abs(w));
  double worst = 0;
  size_t worstAt = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isinf(want[i])) {
      EXPECT_EQ(got[i], want[i]) << what << " at " << i;
      continue;
    }
    double err = std::abs(got[i] - want[i]);
    if (!(err <= worst)) {
      worst = err;
      worstAt = i;
    }
  }
  EXPECT_LE(worst, tol * scale) << what << ": worst at " << worstAt << ", got "
                                << got[worstAt] << ", want " << want[worstAt];
}

template <typename T> void checkCase(const Case &c, double tol, uint32_t seed) {
  using A = tcc_cpu::acc_t<T>;
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  auto random = [&](int64_t n) {
    std::vector<double> x(n);
    for (double &e : x)
      e = normal(rng);
    return x;
  };
  const int64_t qn = c.batch * c.heads * c.queries * c.dim;
  const int64_t kn = c.batch * c.kvHeads * c.keys * c.dim;
  // Inputs rounded to T first, so the reference sees the kernel's inputs.
  std::vector<T> q = toElements<T>(random(qn)), k = toElements<T>(random(kn)),
                 v = toElements<T>(random(kn)), g = toElements<T>(random(qn));
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.dim));
  Reference want = reference(c, toDoubles(q), toDoubles(k), toDoubles(v), toDoubles(g), scale);

  tcc_cpu::AttentionShape shape{c.batch, c.heads, c.kvHeads, c.queries, c.keys, c.dim};
  const uint64_t seedKey = kRngSeed ^ tcc_rng_mix64(kOpId);
  std::vector<T> out(qn);
  std::vector<A> lse(c.batch * c.heads * c.queries);
  ASSERT_EQ(tcc_cpu::attention_forward(q.data(), k.data(), v.data(), out.data(), lse.data(),
                                       shape, scale, c.causal, c.rate, seedKey, kStep),
            tcc_cpu::kKernelOk);
  expectClose(toDoubles(out), want.out, tol, "out");
  std::vector<double> lseD(lse.begin(), lse.end());
  expectClose(lseD, want.lse, tol, "lse");

  std::vector<T> dq(qn), dk(kn), dv(kn);
  // As much workspace as kern.attention_grad provides.
  std::vector<float> workspace(tcc::kern::attentionBackwardWorkspaceFloats(
      c.batch, c.heads, c.kvHeads, c.queries, c.keys, c.dim, /*deterministic=*/false));
  ASSERT_EQ(tcc_cpu::attention_backward(q.data(), k.data(), v.data(), out.data(), lse.data(),
                                        g.data(), dq.data(), dk.data(), dv.data(),
                                        workspace.data(), shape, scale, c.causal, c.rate,
                                        seedKey, kStep),
            tcc_cpu::kKernelOk);
  // The backward reads the kernel's rounded out; the reference its own:
  // 16-bit types get the tolerance of that rounding too.
  expectClose(toDoubles(dq), want.dq, tol, "dq");
  expectClose(toDoubles(dk), want.dk, tol, "dk");
  expectClose(toDoubles(dv), want.dv, tol, "dv");

#ifdef _OPENMP
  // Bit-identical on one thread.
  int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  std::vector<T> dq1(qn), dk1(kn), dv1(kn);
  ASSERT_EQ(tcc_cpu::attention_backward(q.data(), k.data(), v.data(), out.data(), lse.data(),
                                        g.data(), dq1.data(), dk1.data(), dv1.data(),
                                        workspace.data(), shape, scale, c.causal, c.rate,
                                        seedKey, kStep),
            tcc_cpu::kKernelOk);
  omp_set_num_threads(threads);
  EXPECT_EQ(toDoubles(dq1), toDoubles(dq));
  EXPECT_EQ(toDoubles(dk1), toDoubles(dk));
  EXPECT_EQ(toDoubles(dv1), toDoubles(dv));
#endif
}

// Odd sizes crossing the 32-query and 64-key blocks.
const Case kGroupedCausal{2, 4, 2, 37, 70, 13, true, 0.0};
// T > S: the first T - S queries see no key (out 0, lse -inf).
const Case kFullyMaskedRows{1, 3, 3, 75, 41, 16, true, 0.0};
const Case kMultiQueryDropout{2, 4, 1, 33, 65, 8, false, 0.3};
const Case kCausalDropoutSquare{1, 2, 2, 67, 67, 24, true, 0.15};

TEST(CpuAttention, FloatMatchesFloat64Reference) {
  for (const Case &c : {kGroupedCausal, kFullyMaskedRows, kMultiQueryDropout, kCausalDropoutSquare})
    checkCase<float>(c, 2e-5, 11);
}

TEST(CpuAttention, DoubleMatchesFloat64Reference) {
  for (const Case &c : {kGroupedCausal, kFullyMaskedRows, kMultiQueryDropout, kCausalDropoutSquare})
    checkCase<double>(c, 1e-12, 12);
}

TEST(CpuAttention, Bf16AndF16ComputeInFloatAndRoundOnce) {
  for (const Case &c : {kGroupedCausal, kFullyMaskedRows, kMultiQueryDropout}) {
    checkCase<tcc_cpu::bf16>(c, 2e-2, 13);
    checkCase<tcc_cpu::f16>(c, 3e-3, 14);
  }
}

TEST(CpuAttention, FullyMaskedRowsGiveZeroAndMinusInfinity) {
  const Case &c = kFullyMaskedRows;
  std::vector<float> q(c.batch * c.heads * c.queries * c.dim, 0.5f),
      k(c.batch * c.kvHeads * c.keys * c.dim, 0.25f), v = k, out(q.size());
  std::vector<float> lse(c.batch * c.heads * c.queries);
  tcc_cpu::AttentionShape shape{c.batch, c.heads, c.kvHeads, c.queries, c.keys, c.dim};
  ASSERT_EQ(tcc_cpu::attention_forward(q.data(), k.data(), v.data(), out.data(), lse.data(),
                                       shape, 0.25, true, 0.0, 0, 0),
            tcc_cpu::kKernelOk);
  const int64_t masked = c.queries - c.keys;
  for (int64_t h = 0; h < c.heads; ++h)
    for (int64_t i = 0; i < c.queries; ++i) {
      float l = lse[h * c.queries + i];
      if (i < masked) {
        EXPECT_EQ(l, -std::numeric_limits<float>::infinity()) << i;
        for (int64_t d = 0; d < c.dim; ++d)
          EXPECT_EQ(out[(h * c.queries + i) * c.dim + d], 0.0f);
      } else {
        // Equal scores: uniform over the i - masked + 1 visible keys.
        EXPECT_NEAR(l, 0.25 * 0.125 * c.dim + std::log(i - masked + 1.0), 1e-5) << i;
        EXPECT_NEAR(out[(h * c.queries + i) * c.dim], 0.25f, 1e-6);
      }
    }
}

} // namespace
