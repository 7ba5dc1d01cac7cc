#include "runtime/trun/train/Sampler.h"

#include "runtime/trun/train/Logits.h"
#include "runtime/trun/train/Trainer.h"
#include "tcc/counter_rng.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include <cmath>
#include <algorithm>
#include <cstring>
#include <tuple>

namespace tcc::trun {

absl::StatusOr<std::unique_ptr<Sampler>>
Sampler::Create(const tcc_step_descriptor &d, const StepBinding &binding,
                Trainer &trainer) {
  if (!binding.is_token_model() || binding.token_logits_output == -1)
    return absl::FailedPreconditionError(absl::StrCat(
        "step '", d.model_name,
        "' cannot sample: it needs inputs 'tokens' and 'targets' and an eval "
        "output 'logits' [batch, context, vocab]"));
  std::unique_ptr<Sampler> s(new Sampler(d, binding, trainer));
  if (!s->batch_.data.ok() || !s->batch_.targets.ok())
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate ", s->batch_.data.size(),
                     " bytes for the sampling batch"));
  return s;
}

absl::StatusOr<std::vector<int64_t>>
Sampler::Generate(const std::vector<int64_t> &context, int64_t count,
                  int64_t allowed, double temperature, uint64_t seed) {
  const int64_t T = binding_.context_length();
  const int64_t V = binding_.vocab_size;
  if (context.empty())
    return absl::InvalidArgumentError("sampling needs at least one context token");
  for (int64_t id : context)
    if (id < 0 || id >= V)
      return absl::InvalidArgumentError(absl::StrCat(
          "context token ", id, " is out of range for 'logits' width ", V));
  std::vector<int64_t> all = context, generated;
  uint64_t key = tcc_rng_stream_key(seed, TCC_RNG_DOMAIN_SAMPLE, 0);
  std::vector<float> last(V); // the logits of the last real position
  for (int64_t i = 0; i < count; ++i) {
    // Row 0: the last min(len, T) tokens, then padding 0.
    int64_t length = std::min<int64_t>(static_cast<int64_t>(all.size()), T);
    int32_t *row = batch_.data.as<int32_t>(); // (B, T), only row 0 used
    for (int64_t t = 0; t < T; ++t)
      row[t] = t < length ? static_cast<int32_t>(all[all.size() - length + t])
                          : 0;
    if (absl::Status s = trainer_.EvalBatch(
            batch_, absl::StrCat("eval while sampling token ", i));
        !s.ok())
      return s;
    // (V) of row 0 at position length - 1 of logits (B, T, V).
    if (absl::Status s = trainer_.ReadOutput(
            binding_.token_logits_output,
            (length - 1) * V * static_cast<int64_t>(sizeof(float)),
            V * static_cast<int64_t>(sizeof(float)), last.data());
        !s.ok())
      return s;
    double u = tcc_rng_unit_double(tcc_rng_key_bits(key, static_cast<uint64_t>(i)));
    int64_t next = PickToken(last.data(), allowed, temperature, u);
    all.push_back(next);
    generated.push_back(next);
  }
  return generated;
}

} // namespace tcc::trun
