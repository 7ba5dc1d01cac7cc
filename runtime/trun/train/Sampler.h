// Text generation with a token model: rows of (prompt, sample) generated
// together, on the step's KV-cache entries when it has them, else on its
// eval entry point (the reference, and the fallback).
//
// Rows: prompt p's sample k is row r = p * K + k (K = num_samples); rows are
// generated in groups of the step's batch size B (a last group of fewer is
// padded with copies of its first row, whose tokens are dropped). Token i
// (0-based) of row r is drawn with
//   u = unit_double(key_bits(stream_key(seed, TCC_RNG_DOMAIN_SAMPLE, r), i))
// (tcc/counter_rng.h) by PickTokenFiltered (Logits.h): temperature, top-k,
// top-p, inverse CDF over ids in order; temperature 0 takes the argmax (the
// lowest id on ties). Row 0 draws what the single-row sampler always drew.
//
// KV cache ("prefill" and "decode" entries, made by tcc's
// tg-derive-generate; docs/abi.md): prefill takes every row's prompt (at
// most the context T; longer is an error), right-padded with id 0, and its
// length; its logits (B, V) are each row's next-token logits. Each further
// token is one decode call: the row's last token at its position. A row
// whose sequence outgrows T continues on a window of its last T tokens: that
// step is a prefill of every row's window (the eval path's context), so the
// tokens equal the eval path's, at the price of a prefill per token past
// the context. With context_keep K (0 < K < T) the caches instead restart
// from each row's last K tokens when a row outgrows T (one prefill, at
// positions from 0), and decoding continues: one prefill per T - K tokens;
// the tokens after the first restart then differ from the eval path's.
// Sampling is on the host from the (B, V) logits (a GPU step downloads
// B * V floats per step).
//
// Eval path (no entries, or --sampler eval): per token, each row's window
// (its last min(len, T) tokens, right-padded with 0) is a row of the eval
// batch; a causal model's logits at the last real position do not depend on
// the padding. Prompts longer than T are cut to their last T tokens.
#ifndef TCC_RUNTIME_TRUN_TRAIN_SAMPLER_H
#define TCC_RUNTIME_TRUN_TRAIN_SAMPLER_H

#include "runtime/trun/data/BatchSource.h"
#include "runtime/trun/data/StepBinding.h"
#include "runtime/trun/train/Logits.h"
#include "tcc/step_abi.h"

#include "absl/status/statusor.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tcc::trun {

class Trainer; // Trainer.h (a reference is all the sampler keeps)

struct GenerateRequest {
  std::vector<std::vector<int64_t>> prompts; // each non-empty
  int64_t num_samples = 1;                   // K rows per prompt
  int64_t count = 0;                         // new tokens per row
  int64_t allowed = 0; // ids drawn from [0, allowed), allowed <= V
  SamplingParams params;
  uint64_t seed = 0;
  // Cache path, past the context T: 0 re-prefills each row's last T tokens
  // for every token (the eval path's tokens); K in [1, T) restarts the
  // caches from each row's last K tokens once per T - K tokens.
  int64_t context_keep = 0;
};

struct GenerateResult {
  std::vector<std::vector<int64_t>> rows; // the new tokens of each row
  double seconds = 0;                     // all calls and sampling
  int64_t prefill_calls = 0, decode_calls = 0, eval_calls = 0;
  double prefill_seconds = 0, decode_seconds = 0;
};

class Sampler {
public:
  // Samples with `trainer`'s parameters and buffers (it must outlive the
  // sampler). The binding must be a token model with a "logits" output.
  // `use_cache`: the KV-cache entries when the step has both (else the eval
  // path); false: always the eval path.
  static absl::StatusOr<std::unique_ptr<Sampler>>
  Create(const tcc_step_descriptor &descriptor, const StepBinding &binding,
         Trainer &trainer, bool use_cache = true);

  // True when Generate runs on prefill + decode.
  bool uses_cache() const { return prefill_ >= 0; }

  absl::StatusOr<GenerateResult> Generate(const GenerateRequest &request);

  // One row, the eval path's original interface: appends `count` tokens to
  // `context`; returns only the new tokens.
  absl::StatusOr<std::vector<int64_t>>
  Generate(const std::vector<int64_t> &context, int64_t count,
           int64_t allowed, double temperature, uint64_t seed);

private:
  Sampler(const tcc_step_descriptor &descriptor, const StepBinding &binding,
          Trainer &trainer)
      : descriptor_(descriptor), binding_(binding), trainer_(trainer),
        batch_(binding) {}

  absl::Status CheckCacheEntries();
  // Next-token logits (B, V) of each row's sequence `seqs[b]` (its last
  // T tokens) by the eval entry point.
  absl::Status EvalLogits(const std::vector<std::vector<int64_t>> &seqs,
                          std::vector<float> &logits, GenerateResult &result);
  // The same through prefill (writes the caches) of each row's tokens from
  // cache_start[b] on (at most T of them).
  absl::Status PrefillLogits(const std::vector<std::vector<int64_t>> &seqs,
                             const std::vector<int64_t> &cache_start,
                             std::vector<float> &logits, GenerateResult &result);
  // One decode call: each row's last token at position len - 1 -
  // cache_start[b] (its place in the cache, which holds the row from
  // cache_start[b] on).
  absl::Status DecodeLogits(const std::vector<std::vector<int64_t>> &seqs,
                            const std::vector<int64_t> &cache_start,
                            std::vector<float> &logits, GenerateResult &result);
  absl::Status GenerateGroup(std::vector<std::vector<int64_t>> &seqs,
                             const std::vector<int64_t> &row_ids,
                             const GenerateRequest &request,
                             GenerateResult &result);

  const tcc_step_descriptor &descriptor_;
  StepBinding binding_;
  Trainer &trainer_;
  HostBatch batch_; // the eval path's batch (tokens (B, T), targets zeros)
  int32_t prefill_ = -1, decode_ = -1; // entry indices, -1: eval path
  // The entries' inputs, in each entry's order: which is the tokens and
  // which the lengths / positions.
  int32_t prefill_tokens_ = 0, decode_tokens_ = 0;
};

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_TRAIN_SAMPLER_H
