// Choosing among logits: the argmax (greedy sampling, classifier accuracy)
// and a draw from the tempered softmax (sampling). Used by both the Trainer
// and the Sampler, so neither includes the other.
#ifndef TCC_RUNTIME_TRUN_TRAIN_LOGITS_H
#define TCC_RUNTIME_TRUN_TRAIN_LOGITS_H

#include <cstdint>

namespace tcc::trun {

// Index of the largest of `n` values; the first one on ties (greedy
// sampling, and the classifier accuracy of Trainer::Evaluate).
int64_t ArgMax(const float *values, int64_t n);

// The token among the first `n` logits for uniform draw `u` in [0, 1):
// inverse CDF of softmax(logits / temperature) over ids 0, 1, ...;
// temperature 0 takes ArgMax.
int64_t PickToken(const float *logits, int64_t n, double temperature,
                  double u);

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_TRAIN_LOGITS_H
