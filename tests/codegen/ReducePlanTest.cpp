// The CUDA reduction plan (compiler/codegen/cuda/ReducePlan.h) on the CPU:
// every phase executed with the semantics of the prelude's launchers
// (launch_reduce_phase_rows / _middle), in double, must give what a direct
// reduction over the axes gives, for random shapes and axis sets; and the
// plan takes the shapes it was made for (batch norm's statistics, few
// outputs over a long reduction) the way ReducePlan.h says. The kernels
// themselves are checked on a GPU by tests/cuda/kernel_families_test.
#include "compiler/codegen/cuda/ReducePlan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

namespace tcc::codegen::cuda {
namespace {

using Runs = std::vector<std::pair<bool, int64_t>>;

// One phase as the launchers compute it (sum, or max for kind 2).
std::vector<double> runPhase(const ReducePhase &p, const std::vector<double> &in, bool isMax) {
  std::vector<double> out(p.outElements, isMax ? -INFINITY : 0.0);
  auto fold = [&](double &acc, double v) { acc = isMax ? std::max(acc, v) : acc + v; };
  if (p.strided) {
    EXPECT_EQ(static_cast<int64_t>(in.size()), p.outer * p.reduced * p.inner * p.cols)
        << p.describe();
    EXPECT_EQ(p.outElements, p.outer * p.inner) << p.describe();
    EXPECT_EQ(p.segs, 1) << p.describe();
    for (int64_t o = 0; o < p.outer; ++o)
      for (int64_t r = 0; r < p.reduced; ++r)
        for (int64_t k = 0; k < p.inner; ++k)
          for (int64_t c = 0; c < p.cols; ++c)
            fold(out[o * p.inner + k], in[((o * p.reduced + r) * p.inner + k) * p.cols + c]);
  } else if (p.rows) {
    EXPECT_EQ(static_cast<int64_t>(in.size()), p.outer * p.reduced) << p.describe();
    EXPECT_EQ(p.outElements, p.outer * p.segs) << p.describe();
    for (int64_t r = 0; r < p.outer; ++r)
      for (int64_t c = 0; c < p.reduced; ++c)
        fold(out[r * p.segs + c / p.chunk], in[r * p.reduced + c]);
  } else {
    EXPECT_EQ(static_cast<int64_t>(in.size()), p.outer * p.reduced * p.inner) << p.describe();
    EXPECT_EQ(p.outElements, p.outer * p.segs * p.inner) << p.describe();
    for (int64_t o = 0; o < p.outer; ++o)
      for (int64_t r = 0; r < p.reduced; ++r)
        for (int64_t i = 0; i < p.inner; ++i)
          fold(out[(o * p.segs + r / p.chunk) * p.inner + i],
               in[(o * p.reduced + r) * p.inner + i]);
  }
  return out;
}

// The direct reduction of `x` (shape) over `axes`, in row-major output order.
std::vector<double> direct(const std::vector<double> &x, const std::vector<int64_t> &shape,
                           const std::vector<int64_t> &axes, bool isMax) {
  int64_t outN = 1;
  for (size_t d = 0; d < shape.size(); ++d)
    if (std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) == axes.end())
      outN *= shape[d];
  std::vector<double> out(outN, isMax ? -INFINITY : 0.0);
  std::vector<int64_t> idx(shape.size(), 0);
  for (size_t flat = 0; flat < x.size(); ++flat) {
    int64_t o = 0;
    for (size_t d = 0; d < shape.size(); ++d)
      if (std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) == axes.end())
        o = o * shape[d] + idx[d];
    out[o] = isMax ? std::max(out[o], x[flat]) : out[o] + x[flat];
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d)
      if (++idx[d] < shape[d])
        break;
      else
        idx[d] = 0;
  }
  return out;
}

void checkPlan(const std::vector<int64_t> &shape, const std::vector<int64_t> &axes,
               std::mt19937_64 &rng, int64_t elemBytes = 4) {
  std::string what = "shape";
  for (int64_t s : shape)
    what += " " + std::to_string(s);
  what += " axes";
  for (int64_t a : axes)
    what += " " + std::to_string(a);
  ReducePlan plan = planReduce(reduceRuns(shape, axes), elemBytes);
  int64_t n = 1;
  for (int64_t s : shape)
    n *= s;
  std::vector<double> x(n);
  std::uniform_real_distribution<double> u(-1, 1);
  for (double &v : x)
    v = u(rng);
  for (bool isMax : {false, true}) {
    std::vector<double> cur = x;
    int slot = -1;
    ASSERT_FALSE(plan.phases.empty()) << what;
    for (size_t k = 0; k < plan.phases.size(); ++k) {
      const ReducePhase &p = plan.phases[k];
      EXPECT_EQ(p.src, slot) << what << ": phase " << k << " reads what the last wrote";
      EXPECT_EQ(p.finishes, k + 1 == plan.phases.size()) << what;
      if (p.dst >= 0) {
        EXPECT_NE(p.dst, p.src) << what << ": a phase reads and writes one slot";
        EXPECT_LE(p.outElements, plan.slotElements[p.dst]) << what;
      }
      EXPECT_GE(p.segs, 1);
      EXPECT_EQ(p.segs, (p.reduced + p.chunk - 1) / p.chunk) << what << " " << p.describe();
      if (p.cluster > 1) {
        EXPECT_FALSE(p.rows || p.strided) << what << ": clusters are middle phases";
        EXPECT_TRUE(p.finishes) << what;
        EXPECT_LE(p.cluster, kMaxCluster) << what;
        EXPECT_EQ(p.segs, 1) << what;
        ASSERT_GE(p.fallback, 0) << what;
        EXPECT_NE(p.fallback, p.src) << what << ": the fallback's partials overwrite the input";
        EXPECT_GE(plan.slotElements[p.fallback], p.outer * p.cluster * p.inner) << what;
      }
      if (p.rows && p.segs > 1) {
        EXPECT_EQ(p.chunk % 1024, 0) << what << ": split rows keep 16-byte alignment";
      }
      cur = runPhase(p, cur, isMax);
      slot = p.dst;
    }
    std::vector<double> want = direct(x, shape, axes, isMax);
    ASSERT_EQ(cur.size(), want.size()) << what;
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(cur[i], want[i], 1e-9 * (1 + std::fabs(want[i]))) << what << " at " << i;
  }
  int64_t count = 1;
  for (int64_t a : axes)
    count *= shape[a];
  EXPECT_EQ(plan.count, count) << what;
}

TEST(ReducePlanTest, EveryAxisSetOfRandomShapesReducesLikeTheDirectSum) {
  std::mt19937_64 rng(20261128);
  std::uniform_int_distribution<int> rank(1, 5), size(1, 9), coin(0, 1);
  for (int trial = 0; trial < 400; ++trial) {
    std::vector<int64_t> shape(rank(rng)), axes;
    for (int64_t &s : shape)
      s = size(rng);
    for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d)
      if (coin(rng))
        axes.push_back(d);
    checkPlan(shape, axes, rng);
  }
}

TEST(ReducePlanTest, LongReductionsAndSplitsReduceLikeTheDirectSum) {
  std::mt19937_64 rng(7);
  // Few outputs over long reductions (split into segments), rows that are
  // short (middle first) and long (rows first), batch norm's layouts.
  checkPlan({100003}, {0}, rng);
  checkPlan({3, 70000}, {1}, rng);
  checkPlan({5000, 3}, {0}, rng);
  checkPlan({20000, 64}, {0}, rng);
  checkPlan({16, 8, 5, 5}, {0, 2, 3}, rng);
  checkPlan({16, 8, 20, 20}, {0, 2, 3}, rng);
  checkPlan({64, 3, 4, 4}, {0, 2, 3}, rng);
  checkPlan({2, 3, 4, 5, 6}, {0, 2, 4}, rng);
  checkPlan({2, 3, 4, 5, 6}, {1, 3}, rng);
  checkPlan({4096, 2, 3}, {0, 2}, rng);
  checkPlan({3000, 70}, {0}, rng, 2); // bf16: tiles of 64 columns
  checkPlan({3000, 70}, {0}, rng, 8);
  // Strided phases: finishing, and leaving partials for a later phase.
  checkPlan({4, 200, 4}, {0, 2}, rng);
  checkPlan({2, 3, 130, 8}, {1, 3}, rng);
  checkPlan({3, 2, 140, 4, 5}, {1, 3, 4}, rng);
  checkPlan({7, 3, 9, 130, 4}, {0, 2, 4}, rng);
  checkPlan({3, 130, 1000}, {0, 2}, rng);
  checkPlan({3, 127, 4}, {0, 2}, rng); // one output short of a strided phase
  checkPlan({3, 200, 5}, {0, 2}, rng); // rows of 20 bytes
}

TEST(ReducePlanTest, BatchNormStatisticsAreOneOrTwoCoalescedPhases) {
  // (N, C, H, W) = (128, 64, 32, 32) over {0, 2, 3}: whole rows of H*W
  // first, then the (N, C) partials down N.
  ReducePlan plan = planReduce(reduceRuns({128, 64, 32, 32}, {0, 2, 3}), 4);
  ASSERT_EQ(plan.phases.size(), 2u);
  EXPECT_EQ(plan.phases[0].describe(), "rows(8192 x 1024)");
  EXPECT_EQ(plan.phases[1].describe(), "middle(1 x 128 x 64)");
  EXPECT_EQ(plan.count, 128 * 32 * 32);
  EXPECT_EQ(plan.scratchBytes(4), 128 * 64 * 4);
  // Late layers (4 x 4 maps, 512 channels): never rows of 16; N and H*W
  // fold at once, one launch, no partials.
  plan = planReduce(reduceRuns({128, 512, 4, 4}, {0, 2, 3}), 4);
  ASSERT_EQ(plan.phases.size(), 1u);
  EXPECT_EQ(plan.phases[0].describe(), "strided(1 x 128 x 512 x 16)");
  EXPECT_EQ(plan.scratchBytes(4), 0);
  // Too few channels for a strided phase: down N first over contiguous
  // C*H*W columns, then rows of H*W.
  plan = planReduce(reduceRuns({128, 64, 8, 8}, {0, 2, 3}), 4);
  ASSERT_EQ(plan.phases.size(), 2u);
  EXPECT_EQ(plan.phases[0].describe(), "middle(1 x 128 x 4096)");
  EXPECT_EQ(plan.phases[1].describe(), "rows(64 x 64)");
  // A kept outer run: (8, 512, 16, 64) over {1, 3} gives 128 outputs.
  plan = planReduce(reduceRuns({8, 512, 16, 64}, {1, 3}), 4);
  ASSERT_EQ(plan.phases.size(), 1u);
  EXPECT_EQ(plan.phases[0].describe(), "strided(8 x 512 x 16 x 64)");
  // Long rows too, when there are enough channels: ResNet-50's 56 x 56.
  plan = planReduce(reduceRuns({64, 256, 56, 56}, {0, 2, 3}), 2);
  ASSERT_EQ(plan.phases.size(), 1u);
  EXPECT_EQ(plan.phases[0].describe(), "strided(1 x 64 x 256 x 3136)");
  // Rows that are not whole 16-byte loads (7 x 7 bf16: 98 bytes) keep the
  // coalesced phases: down N over C*H*W, then rows.
  plan = planReduce(reduceRuns({64, 2048, 7, 7}, {0, 2, 3}), 2);
  ASSERT_EQ(plan.phases.size(), 2u);
  EXPECT_EQ(plan.phases[0].describe(), "middle(1 x 64 x 100352)");
}

TEST(ReducePlanTest, FewOutputsOverALongReductionAreSplitAcrossBlocks) {
  // A bias-style gradient with few columns, 16384 rows x 64 columns: two
  // 128-byte tiles, too few blocks for clusters: split segments.
  ReducePlan plan = planReduce(reduceRuns({16384, 64}, {0}), 4);
  ASSERT_EQ(plan.phases.size(), 2u);
  EXPECT_GT(plan.phases[0].segs, 1) << plan.phases[0].describe();
  EXPECT_FALSE(plan.phases[0].finishes);
  // 4096 x 4096 down the rows: 128 tiles of 32 floats, in clusters of 8
  // blocks, one launch, finished.
  plan = planReduce(reduceRuns({4096, 4096}, {0}), 4);
  ASSERT_EQ(plan.phases.size(), 1u);
  EXPECT_EQ(plan.phases[0].describe(), "middle(1 x 4096 x 4096, clusters of 8)");
  EXPECT_TRUE(plan.phases[0].finishes);
  EXPECT_EQ(plan.phases[0].fallback, 0); // partials of the two-launch fallback
  EXPECT_EQ(plan.scratchBytes(4), 8 * 4096 * 4);
  // A whole tensor into one number: split rows, then their partials.
  plan = planReduce(reduceRuns({1 << 22}, {0}), 4);
  ASSERT_EQ(plan.phases.size(), 2u);
  EXPECT_TRUE(plan.phases[0].rows);
  EXPECT_GT(plan.phases[0].segs, 1);
  // GPT-2's bias gradient shape in bf16: 12 tiles, split segments.
  plan = planReduce(reduceRuns({16384, 768}, {0}), 2);
  ASSERT_EQ(plan.phases.size(), 2u);
  EXPECT_GT(plan.phases[0].segs, 1);
  // Enough outputs (2048 tiles of 32 floats, >= kMinParallelMiddle): one
  // phase, no scratch; 512 tiles are clustered.
  plan = planReduce(reduceRuns({1024, 65536}, {0}), 4);
  EXPECT_EQ(plan.phases.size(), 1u);
  EXPECT_EQ(plan.scratchBytes(4), 0);
  plan = planReduce(reduceRuns({4096, 16384}, {0}), 4);
  EXPECT_EQ(plan.phases.size(), 1u);
  EXPECT_GT(plan.phases[0].cluster, 1);
  // Only the last fold is clustered: (4096, 2048, 4999) over {0, 2} folds
  // rows of 4999 first (not whole 16-byte loads, so not strided), then the
  // 4096 x 2048 partials (64 tiles) in clusters.
  plan = planReduce(reduceRuns({4096, 2048, 4999}, {0, 2}), 4);
  ASSERT_EQ(plan.phases.size(), 2u);
  EXPECT_EQ(plan.phases[0].describe(), "rows(8388608 x 4999)");
  EXPECT_EQ(plan.phases[1].describe(), "middle(1 x 4096 x 2048, clusters of 8)");
  EXPECT_EQ(plan.phases[1].fallback, 1); // slot 0 holds its input
  plan = planReduce(reduceRuns({4096, 1000}, {1}), 4);
  EXPECT_EQ(plan.phases.size(), 1u);
}

TEST(ReducePlanTest, NothingToReduceIsOneCopyPhase) {
  ReducePlan plan = planReduce(reduceRuns({3, 1, 4}, {1}), 4);
  ASSERT_EQ(plan.phases.size(), 1u);
  EXPECT_EQ(plan.phases[0].describe(), "rows(12 x 1)");
  EXPECT_EQ(plan.count, 1);
  plan = planReduce(reduceRuns({1, 1}, {0, 1}), 4);
  ASSERT_EQ(plan.phases.size(), 1u);
  EXPECT_EQ(plan.phases[0].outElements, 1);
}

} // namespace
} // namespace tcc::codegen::cuda
