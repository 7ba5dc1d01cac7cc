#include "runtime/trun/train/Logits.h"

#include <cmath>
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

} // namespace tcc::trun
