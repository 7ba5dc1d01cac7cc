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
#include <tuple>
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

// Strided layouts (kern.attention's `layout`, what kern-fold-attention-layout
// produces): q, k, v read from and dq, dk, dv written into one packed
// (B, T, (H + 2 Hkv) D) buffer when T == S (GPT-2's c_attn output and its
// gradient), else each tensor in its own (B, N, Hx D + 8) buffer (rows with
// gaps); out and dout (B, T, H, D). The results must be the contiguous
// kernels' bit for bit, and nothing outside the tensors may be written.
struct Placed {
  int64_t offset;
  tcc_cpu::AttentionStrides strides;
  int64_t element(int64_t b, int64_t h, int64_t i) const {
    return offset + b * strides.batch + h * strides.head + i * strides.row;
  }
};

template <typename T>
void scatterRows(const std::vector<T> &dense, int64_t B, int64_t heads, int64_t rows, int64_t D,
                 const Placed &at, std::vector<T> &buffer) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t d = 0; d < D; ++d)
          buffer[at.element(b, h, i) + d] =
              dense[((b * heads + h) * rows + i) * D + d];
}

template <typename T>
std::vector<T> gatherRows(const std::vector<T> &buffer, int64_t B, int64_t heads, int64_t rows,
                          int64_t D, const Placed &at) {
  std::vector<T> dense(B * heads * rows * D);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t d = 0; d < D; ++d)
          dense[((b * heads + h) * rows + i) * D + d] =
              buffer[at.element(b, h, i) + d];
  return dense;
}

template <typename T> std::vector<uint8_t> bytesOf(const std::vector<T> &x) {
  const auto *p = reinterpret_cast<const uint8_t *>(x.data());
  return std::vector<uint8_t>(p, p + x.size() * sizeof(T));
}

template <typename T> void checkStridedCase(const Case &c, uint32_t seed) {
  using A = tcc_cpu::acc_t<T>;
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  auto random = [&](int64_t n) {
    std::vector<double> x(n);
    for (double &e : x)
      e = normal(rng);
    return toElements<T>(x);
  };
  const int64_t B = c.batch, H = c.heads, Hkv = c.kvHeads, Tq = c.queries, S = c.keys,
                D = c.dim;
  const int64_t qn = B * H * Tq * D, kn = B * Hkv * S * D;
  std::vector<T> q = random(qn), k = random(kn), v = random(kn), g = random(qn);
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  const uint64_t seedKey = kRngSeed ^ tcc_rng_mix64(kOpId);
  tcc_cpu::AttentionShape shape{B, H, Hkv, Tq, S, D};

  // Contiguous results.
  std::vector<T> out(qn), dq(qn), dk(kn), dv(kn);
  std::vector<A> lse(B * H * Tq), lse2(B * H * Tq);
  std::vector<float> ws(1);
  ASSERT_EQ(tcc_cpu::attention_forward(q.data(), k.data(), v.data(), out.data(), lse.data(),
                                       shape, scale, c.causal, c.rate, seedKey, kStep),
            tcc_cpu::kKernelOk);
  ASSERT_EQ(tcc_cpu::attention_backward(q.data(), k.data(), v.data(), out.data(), lse.data(),
                                        g.data(), dq.data(), dk.data(), dv.data(), ws.data(),
                                        shape, scale, c.causal, c.rate, seedKey, kStep),
            tcc_cpu::kKernelOk);

  // Placements: packed when square, padded rows otherwise.
  const bool packed = Tq == S;
  Placed pq, pk, pv;
  int64_t inputElems;
  if (packed) {
    const int64_t W = (H + 2 * Hkv) * D;
    pq = {0, {Tq * W, D, W}};
    pk = {H * D, {Tq * W, D, W}};
    pv = {(H + Hkv) * D, {Tq * W, D, W}};
    inputElems = B * Tq * W;
  } else {
    const int64_t wq = H * D + 8, wk = Hkv * D + 8;
    pq = {0, {Tq * wq, D, wq}};
    pk = {B * Tq * wq, {S * wk, D, wk}};
    pv = {B * Tq * wq + B * S * wk, {S * wk, D, wk}};
    inputElems = B * Tq * wq + 2 * B * S * wk;
  }
  const Placed po{0, {Tq * H * D, D, H * D}};
  const T sentinel = toElements<T>(std::vector<double>{12345.0})[0];
  std::vector<T> inputs(inputElems, sentinel), grads(inputElems, sentinel);
  scatterRows(q, B, H, Tq, D, pq, inputs);
  scatterRows(k, B, Hkv, S, D, pk, inputs);
  scatterRows(v, B, Hkv, S, D, pv, inputs);
  std::vector<T> gs(qn, sentinel), outs(qn, sentinel);
  scatterRows(g, B, H, Tq, D, po, gs);
  tcc_cpu::AttentionLayout layout{pq.strides, pk.strides, pv.strides, po.strides,
                                  po.strides, pq.strides, pk.strides, pv.strides};
  ASSERT_EQ(tcc_cpu::attention_forward(inputs.data() + pq.offset, inputs.data() + pk.offset,
                                       inputs.data() + pv.offset, outs.data(), lse2.data(),
                                       shape, layout, scale, c.causal, c.rate, seedKey, kStep),
            tcc_cpu::kKernelOk);
  EXPECT_EQ(bytesOf(gatherRows(outs, B, H, Tq, D, po)), bytesOf(out)) << "out";
  EXPECT_EQ(bytesOf(lse2), bytesOf(lse)) << "lse";
  ASSERT_EQ(tcc_cpu::attention_backward(
                inputs.data() + pq.offset, inputs.data() + pk.offset, inputs.data() + pv.offset,
                outs.data(), lse2.data(), gs.data(), grads.data() + pq.offset,
                grads.data() + pk.offset, grads.data() + pv.offset, ws.data(), shape, layout,
                scale, c.causal, c.rate, seedKey, kStep),
            tcc_cpu::kKernelOk);
  EXPECT_EQ(bytesOf(gatherRows(grads, B, H, Tq, D, pq)), bytesOf(dq)) << "dq";
  EXPECT_EQ(bytesOf(gatherRows(grads, B, Hkv, S, D, pk)), bytesOf(dk)) << "dk";
  EXPECT_EQ(bytesOf(gatherRows(grads, B, Hkv, S, D, pv)), bytesOf(dv)) << "dv";
  // The gaps between rows (padded case) are never written.
  std::vector<T> untouched(inputElems, sentinel);
  for (const auto &[at, heads, rows] :
       {std::tuple{pq, H, Tq}, std::tuple{pk, Hkv, S}, std::tuple{pv, Hkv, S}})
    scatterRows(gatherRows(grads, B, heads, rows, D, at), B, heads, rows, D, at, untouched);
  EXPECT_EQ(bytesOf(untouched), bytesOf(grads)) << "written outside dq, dk, dv";
}

TEST(CpuAttention, StridedLayoutsGiveTheContiguousResultsBitForBit) {
  const Case gpt2Like{2, 3, 3, 70, 70, 16, true, 0.0};
  const Case groupedSquareDropout{1, 4, 2, 67, 67, 8, true, 0.15};
  for (const Case &c : {gpt2Like, groupedSquareDropout, kGroupedCausal, kMultiQueryDropout}) {
    checkStridedCase<float>(c, 21);
    checkStridedCase<double>(c, 22);
    checkStridedCase<tcc_cpu::bf16>(c, 23);
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
