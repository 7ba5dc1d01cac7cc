// The phases of a CUDA reduction over any axes (see ReducePlan.h).
#include "compiler/codegen/cuda/ReducePlan.h"

#include <algorithm>

namespace tcc::codegen::cuda {
namespace {

int64_t product(const std::vector<std::pair<bool, int64_t>> &runs, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i)
    p *= runs[i].second;
  return p;
}

// Drops run `i` and merges the neighbours it separated.
void removeRun(std::vector<std::pair<bool, int64_t>> &runs, size_t i) {
  runs.erase(runs.begin() + static_cast<std::ptrdiff_t>(i));
  if (i > 0 && i < runs.size() && runs[i - 1].first == runs[i].first) {
    runs[i - 1].second *= runs[i].second;
    runs.erase(runs.begin() + static_cast<std::ptrdiff_t>(i));
  }
}

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

} // namespace

std::string ReducePhase::describe() const {
  if (strided)
    return "strided(" + std::to_string(outer) + " x " + std::to_string(reduced) + " x " +
           std::to_string(inner) + " x " + std::to_string(cols) + ")";
  std::string s = rows ? "rows(" + std::to_string(outer) + " x " + std::to_string(reduced)
                       : "middle(" + std::to_string(outer) + " x " + std::to_string(reduced) +
                             " x " + std::to_string(inner);
  if (segs > 1)
    s += ", " + std::to_string(segs) + " segments of " + std::to_string(chunk);
  if (cluster > 1)
    s += ", clusters of " + std::to_string(cluster);
  return s + ")";
}

int64_t ReducePlan::slotOffset(int slot, int64_t accBytes) const {
  return slot == 0 ? 0 : (slotElements[0] * accBytes + 255) / 256 * 256;
}

int64_t ReducePlan::scratchBytes(int64_t accBytes) const {
  return slotElements[1] ? slotOffset(1, accBytes) + slotElements[1] * accBytes
                         : slotElements[0] * accBytes;
}

std::vector<std::pair<bool, int64_t>> reduceRuns(const std::vector<int64_t> &shape,
                                                 const std::vector<int64_t> &axes) {
  std::vector<std::pair<bool, int64_t>> runs;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    if (shape[d] == 1)
      continue;
    bool reduced = std::find(axes.begin(), axes.end(), d) != axes.end();
    if (!runs.empty() && runs.back().first == reduced)
      runs.back().second *= shape[d];
    else
      runs.push_back({reduced, shape[d]});
  }
  return runs;
}

ReducePlan planReduce(const std::vector<std::pair<bool, int64_t>> &input, int64_t elemBytes) {
  ReducePlan plan;
  std::vector<std::pair<bool, int64_t>> runs = input;
  auto reducedRuns = [&] {
    return std::count_if(runs.begin(), runs.end(), [](auto &r) { return r.first; });
  };
  for (auto &r : runs)
    if (r.first)
      plan.count *= r.second;
  if (reducedRuns() == 0) { // nothing to fold: a copy (or cast) of every element
    ReducePhase p;
    p.rows = true;
    p.outer = product(runs, 0, runs.size());
    p.reduced = p.chunk = 1;
    p.finishes = true;
    p.outElements = p.outer;
    plan.phases.push_back(p);
    return plan;
  }
  int src = -1;
  // Appends `p`, its runs already folded: where it reads and writes (the
  // output when nothing is left to reduce, else the slot `src` is not),
  // and the slots it needs.
  auto addPhase = [&](ReducePhase &p) {
    p.finishes = reducedRuns() == 0;
    p.src = src;
    p.dst = p.finishes ? -1 : (src == 0 ? 1 : 0);
    p.outElements = product(runs, 0, runs.size());
    if (!p.finishes)
      plan.slotElements[p.dst] = std::max(plan.slotElements[p.dst], p.outElements);
    if (p.cluster > 1) { // the two launches' partials where clusters are missing
      p.fallback = src == 0 ? 1 : 0;
      plan.slotElements[p.fallback] =
          std::max(plan.slotElements[p.fallback], p.outer * p.cluster * p.inner);
    }
    plan.phases.push_back(p);
    src = p.dst;
  };
  while (reducedRuns() > 0) {
    // [.. reduced][kept][reduced] with enough outputs and rows of whole
    // 16-byte loads: both reduced runs in one strided phase.
    const size_t n = runs.size();
    const int64_t srcBytes = src < 0 ? elemBytes : (elemBytes == 8 ? 8 : 4);
    if (n >= 3 && runs[n - 1].first && !runs[n - 2].first && runs[n - 3].first &&
        runs[n - 1].second * srcBytes % 16 == 0 &&
        product(runs, 0, n - 3) * runs[n - 2].second >= kStridedMinOutputs) {
      ReducePhase p;
      p.strided = true;
      p.outer = product(runs, 0, n - 3);
      p.reduced = p.chunk = runs[n - 3].second;
      p.inner = runs[n - 2].second;
      p.cols = runs[n - 1].second;
      runs.pop_back();
      removeRun(runs, n - 3);
      addPhase(p);
      continue;
    }
    // Which run this phase folds: the innermost when it is reduced and long
    // enough for whole rows (or the only one left), else the longest other.
    size_t idx = runs.size() - 1;
    bool rows = runs.back().first && (runs.back().second >= kRowsMinCols || reducedRuns() == 1);
    if (!rows) {
      idx = 0;
      int64_t best = 0;
      for (size_t i = 0; i + 1 < runs.size(); ++i)
        if (runs[i].first && runs[i].second > best)
          best = runs[i].second, idx = i;
    }
    ReducePhase p;
    p.rows = rows;
    p.outer = product(runs, 0, idx);
    p.reduced = runs[idx].second;
    p.inner = rows ? 1 : product(runs, idx + 1, runs.size());
    p.chunk = p.reduced;
    // Too few independent outputs (rows, or tiles of a 128-byte line of
    // columns, the narrowest launch_reduce_phase_middle makes) for the GPU
    // and a long reduction: split it into segments.
    int64_t bytes = src < 0 ? elemBytes : (elemBytes == 8 ? 8 : 4); // partials: acc_t
    int64_t parallel = rows ? p.outer : p.outer * ceilDiv(p.inner, std::max<int64_t>(128 / bytes, 1));
    const int64_t minParallel = rows ? kMinParallel : kMinParallelMiddle;
    if (parallel < minParallel && p.reduced >= kSplitMinReduced) {
      int64_t want = ceilDiv(2 * minParallel, parallel); // two waves
      int64_t minChunk = rows ? 8192 : 256;
      int64_t chunk = std::max(minChunk, ceilDiv(p.reduced, want));
      if (rows) // whole 1024-element groups keep segments 16-byte aligned
        chunk = ceilDiv(chunk, 1024) * 1024;
      int64_t segs = ceilDiv(p.reduced, chunk);
      if (segs > 1)
        p.segs = segs, p.chunk = chunk;
    }
    // The last fold of a middle phase: split it over the blocks of a
    // cluster instead, combined in the same launch, when tiles of whole
    // 128-byte lines give the clusters enough blocks (narrower tiles were
    // slower than the two launches: bf16 16384 x 768 over rows, 13.0 ->
    // 14.3 us, docs/performance.md session 10).
    const int64_t lineTiles = p.outer * ceilDiv(p.inner * bytes, 128);
    if (p.segs > 1 && !rows && reducedRuns() == 1 && kMaxCluster > 1 &&
        lineTiles * kMaxCluster >= kClusterMinBlocks) {
      p.cluster = std::min<int64_t>(kMaxCluster, p.segs);
      p.segs = 1;
      p.chunk = p.reduced;
    }
    if (p.segs > 1)
      runs[idx].second = p.segs; // the run remains, shorter, as partials
    else
      removeRun(runs, idx);
    addPhase(p);
  }
  return plan;
}

} // namespace tcc::codegen::cuda
