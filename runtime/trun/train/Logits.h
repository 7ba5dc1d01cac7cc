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

// How a token is drawn (trun --temperature, --top-k, --top-p).
struct SamplingParams {
  double temperature = 1.0; // 0: greedy (ArgMax)
  int64_t top_k = 0;        // > 0: only the k likeliest ids
  double top_p = 1.0;       // in (0, 1]: only the fewest likeliest ids whose
                            // probabilities add up to at least top_p
};

// PickToken after top-k / top-p filtering: the ids ranked by logit (ties:
// the lower id first), the first top_k kept, then the shortest prefix of
// those whose tempered softmax probabilities (over all n ids) add up to at
// least top_p; the draw is PickToken's inverse CDF over the kept ids in id
// order. Without filtering (top_k 0 or >= n, top_p 1) it is PickToken
// exactly; top_k 1 is ArgMax at any temperature.
int64_t PickTokenFiltered(const float *logits, int64_t n,
                          const SamplingParams &params, double u);

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_TRAIN_LOGITS_H
