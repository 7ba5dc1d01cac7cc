#include "runtime/trun/train/Logits.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace tcc::trun {

int64_t ArgMax(const float *values, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (values[i] > values[best])
      best = i;
  return best;
}

int64_t PickToken(const float *logits, int64_t n, double temperature,
                  double u) {
  int64_t best = ArgMax(logits, n);
  if (temperature == 0)
    return best;
  // softmax(logits / temperature), shifted by the max for range.
  std::vector<double> weights(n);
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    weights[i] = std::exp((logits[i] - logits[best]) / temperature);
    total += weights[i];
  }
  double target = u * total;
  double cumulative = 0;
  for (int64_t i = 0; i < n; ++i) {
    cumulative += weights[i];
    if (target < cumulative)
      return i;
  }
  return best; // only reachable through rounding at u close to 1
}

int64_t PickTokenFiltered(const float *logits, int64_t n,
                          const SamplingParams &params, double u) {
  const bool by_k = params.top_k > 0 && params.top_k < n;
  if ((!by_k && params.top_p >= 1.0) || params.temperature == 0)
    return PickToken(logits, n, params.temperature, u);
  int64_t best = ArgMax(logits, n);
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return logits[a] > logits[b]; });
  std::vector<double> weights(n);
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    weights[i] = std::exp((logits[i] - logits[best]) / params.temperature);
    total += weights[i];
  }
  int64_t keep = by_k ? params.top_k : n;
  if (params.top_p < 1.0) {
    double mass = 0;
    for (int64_t r = 0; r < keep; ++r) {
      mass += weights[order[r]] / total;
      if (mass >= params.top_p) {
        keep = r + 1;
        break;
      }
    }
  }
  std::vector<bool> kept(n, false);
  double kept_total = 0;
  for (int64_t r = 0; r < keep; ++r) {
    kept[order[r]] = true;
    kept_total += weights[order[r]];
  }
  double target = u * kept_total, cumulative = 0;
  for (int64_t i = 0; i < n; ++i)
    if (kept[i]) {
      cumulative += weights[i];
      if (target < cumulative)
        return i;
    }
  return best;
}

} // namespace tcc::trun
