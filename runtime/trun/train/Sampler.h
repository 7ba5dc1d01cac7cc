// Text generation with a token model's eval entry point.
//
// For each new token: row 0 of `tokens` holds the context (the last T tokens
// so far), right-padded with id 0; every other row and `targets` are 0. The
// logits at the last real position of row 0 pick the next token; a causal
// model's logits there do not depend on the padding. Token i (0-based) of a
// run is drawn with
//   u = unit_double(key_bits(stream_key(seed, TCC_RNG_DOMAIN_SAMPLE, 0), i))
// (tcc/counter_rng.h) from softmax(logits / temperature) by inverse CDF over
// ids 0, 1, ...; temperature 0 takes the argmax (the lowest id on ties)
// (PickToken, Logits.h).
//
// The eval calls run through the Trainer, on its buffers (on a GPU step: its
// device memory; only the V logits of the chosen position are downloaded).
#ifndef TCC_RUNTIME_TRUN_TRAIN_SAMPLER_H
#define TCC_RUNTIME_TRUN_TRAIN_SAMPLER_H

#include "runtime/trun/data/BatchSource.h"
#include "runtime/trun/data/StepBinding.h"
#include "tcc/step_abi.h"

#include "absl/status/statusor.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace tcc::trun {

class Trainer; // Trainer.h (a reference is all the sampler keeps)

class Sampler {
public:
  // Samples with `trainer`'s parameters and buffers (it must outlive the
  // sampler). The binding must be a token model with a "logits" output.
  static absl::StatusOr<std::unique_ptr<Sampler>>
  Create(const tcc_step_descriptor &descriptor, const StepBinding &binding,
         Trainer &trainer);

  // Appends `count` tokens to `context` (non-empty, ids below the logits
  // width), choosing among ids below `allowed` (<= the logits width).
  // Returns only the new tokens.
  absl::StatusOr<std::vector<int64_t>>
  Generate(const std::vector<int64_t> &context, int64_t count,
           int64_t allowed, double temperature, uint64_t seed);

private:
  Sampler(const tcc_step_descriptor &descriptor, const StepBinding &binding,
          Trainer &trainer)
      : descriptor_(descriptor), binding_(binding), trainer_(trainer),
        batch_(binding) {}

  const tcc_step_descriptor &descriptor_;
  StepBinding binding_;
  Trainer &trainer_;
  HostBatch batch_; // row 0 of tokens: the context; the rest zeros
};

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_TRAIN_SAMPLER_H
