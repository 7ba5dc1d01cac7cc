#include "runtime/trun/train/Sampler.h"

#include "runtime/trun/step/StepEntries.h"
#include "runtime/trun/train/Trainer.h"
#include "tcc/counter_rng.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

namespace tcc::trun {
namespace {

double Now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Input `name` of entry `e`, or -1.
int32_t InputOf(const tcc_step_entry &e, absl::string_view name) {
  for (int32_t i = 0; i < e.num_inputs; ++i)
    if (name == e.inputs[i].name)
      return i;
  return -1;
}

bool IsShape(const tcc_tensor_desc &t, int32_t dtype,
             std::initializer_list<int64_t> shape) {
  if (t.dtype != dtype || t.rank != static_cast<int32_t>(shape.size()))
    return false;
  int32_t i = 0;
  for (int64_t d : shape)
    if (t.shape[i++] != d)
      return false;
  return true;
}

} // namespace

absl::StatusOr<std::unique_ptr<Sampler>>
Sampler::Create(const tcc_step_descriptor &d, const StepBinding &binding,
                Trainer &trainer, bool use_cache) {
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
  if (use_cache && FindEntry(d, "prefill") && FindEntry(d, "decode"))
    if (absl::Status st = s->CheckCacheEntries(); !st.ok())
      return st;
  return s;
}

// The entries as tg-derive-generate makes them (docs/abi.md): prefill
// (tokens (B, T), lengths (B)) and decode (tokens (B), pos (B)), i32, each
// with an output "logits" (B, V) f32 and one state table.
absl::Status Sampler::CheckCacheEntries() {
  const int64_t B = binding_.batch_size, T = binding_.context_length(),
                V = binding_.vocab_size;
  int32_t p = EntryIndex(descriptor_, "prefill"), q = EntryIndex(descriptor_, "decode");
  const tcc_step_entry &pe = descriptor_.entries[p], &de = descriptor_.entries[q];
  auto bad = [&](const tcc_step_entry &e, const std::string &what) {
    return absl::FailedPreconditionError(absl::StrCat(
        "step '", descriptor_.model_name, "': entry '", e.name, "' ", what));
  };
  int32_t pt = InputOf(pe, "tokens"), pl = InputOf(pe, "lengths");
  int32_t dt = InputOf(de, "tokens"), dp = InputOf(de, "pos");
  if (pe.num_inputs != 2 || pt < 0 || pl < 0 ||
      !IsShape(pe.inputs[pt], TCC_DTYPE_I32, {B, T}) ||
      !IsShape(pe.inputs[pl], TCC_DTYPE_I32, {B}))
    return bad(pe, absl::StrFormat("must take tokens (%d, %d) and lengths (%d), int32", B, T, B));
  if (de.num_inputs != 2 || dt < 0 || dp < 0 ||
      !IsShape(de.inputs[dt], TCC_DTYPE_I32, {B}) ||
      !IsShape(de.inputs[dp], TCC_DTYPE_I32, {B}))
    return bad(de, absl::StrFormat("must take tokens (%d) and pos (%d), int32", B, B));
  for (const tcc_step_entry *e : {&pe, &de})
    if (e->num_outputs != 1 || std::string(e->outputs[0].name) != "logits" ||
        !IsShape(e->outputs[0], TCC_DTYPE_F32, {B, V}))
      return bad(*e, absl::StrFormat("must return logits (%d, %d) f32", B, V));
  bool same_state = pe.num_state == de.num_state;
  for (int32_t i = 0; same_state && i < pe.num_state; ++i)
    same_state = std::string(pe.state[i].name) == de.state[i].name &&
                 pe.state[i].size_bytes == de.state[i].size_bytes;
  if (!same_state)
    return bad(de, "has another state (KV cache) than entry 'prefill'");
  prefill_ = p;
  decode_ = q;
  prefill_tokens_ = pt;
  decode_tokens_ = dt;
  return absl::OkStatus();
}

absl::Status Sampler::EvalLogits(const std::vector<std::vector<int64_t>> &seqs,
                                 std::vector<float> &logits, GenerateResult &result) {
  const int64_t T = binding_.context_length(), V = binding_.vocab_size;
  int32_t *rows = batch_.data.as<int32_t>(); // (B, T)
  std::vector<int64_t> lengths(seqs.size());
  for (size_t b = 0; b < seqs.size(); ++b) {
    const std::vector<int64_t> &all = seqs[b];
    int64_t length = std::min<int64_t>(static_cast<int64_t>(all.size()), T);
    lengths[b] = length;
    for (int64_t t = 0; t < T; ++t)
      rows[b * T + t] = t < length ? static_cast<int32_t>(all[all.size() - length + t]) : 0;
  }
  if (absl::Status s = trainer_.EvalBatch(
          batch_, absl::StrCat("eval while sampling (call ", result.eval_calls + 1, ")"));
      !s.ok())
    return s;
  ++result.eval_calls;
  for (size_t b = 0; b < seqs.size(); ++b)
    if (absl::Status s = trainer_.ReadOutput(
            binding_.token_logits_output,
            ((b * T) + lengths[b] - 1) * V * static_cast<int64_t>(sizeof(float)),
            V * static_cast<int64_t>(sizeof(float)), logits.data() + b * V);
        !s.ok())
      return s;
  return absl::OkStatus();
}

absl::Status Sampler::PrefillLogits(const std::vector<std::vector<int64_t>> &seqs,
                                    const std::vector<int64_t> &cache_start,
                                    std::vector<float> &logits, GenerateResult &result) {
  const int64_t B = binding_.batch_size, T = binding_.context_length();
  std::vector<int32_t> tokens(B * T, 0), lengths(B, 1);
  for (size_t b = 0; b < seqs.size(); ++b) {
    const std::vector<int64_t> &all = seqs[b];
    int64_t length = static_cast<int64_t>(all.size()) - cache_start[b]; // <= T
    lengths[b] = static_cast<int32_t>(length);
    for (int64_t t = 0; t < length; ++t)
      tokens[b * T + t] = static_cast<int32_t>(all[cache_start[b] + t]);
  }
  std::vector<const void *> inputs(2);
  inputs[prefill_tokens_] = tokens.data();
  inputs[1 - prefill_tokens_] = lengths.data();
  double start = Now();
  if (absl::Status s = trainer_.CallEntry(prefill_, inputs, {logits.data()}, 0.0f,
                                          "prefill while sampling");
      !s.ok())
    return s;
  result.prefill_seconds += Now() - start;
  ++result.prefill_calls;
  return absl::OkStatus();
}

absl::Status Sampler::DecodeLogits(const std::vector<std::vector<int64_t>> &seqs,
                                   const std::vector<int64_t> &cache_start,
                                   std::vector<float> &logits, GenerateResult &result) {
  const int64_t B = binding_.batch_size;
  std::vector<int32_t> tokens(B, 0), pos(B, 0);
  for (size_t b = 0; b < seqs.size(); ++b) {
    tokens[b] = static_cast<int32_t>(seqs[b].back());
    pos[b] = static_cast<int32_t>(static_cast<int64_t>(seqs[b].size()) - 1 - cache_start[b]);
  }
  std::vector<const void *> inputs(2);
  inputs[decode_tokens_] = tokens.data();
  inputs[1 - decode_tokens_] = pos.data();
  double start = Now();
  if (absl::Status s = trainer_.CallEntry(decode_, inputs, {logits.data()}, 0.0f,
                                          "decode while sampling");
      !s.ok())
    return s;
  result.decode_seconds += Now() - start;
  ++result.decode_calls;
  return absl::OkStatus();
}

// `seqs`: B rows (prompt so far), of which the first row_ids.size() are
// real; appends request.count tokens to each.
absl::Status Sampler::GenerateGroup(std::vector<std::vector<int64_t>> &seqs,
                                    const std::vector<int64_t> &row_ids,
                                    const GenerateRequest &request,
                                    GenerateResult &result) {
  const int64_t T = binding_.context_length(), V = binding_.vocab_size;
  std::vector<float> logits(seqs.size() * V);
  std::vector<uint64_t> keys;
  for (int64_t r : row_ids)
    keys.push_back(tcc_rng_stream_key(request.seed, TCC_RNG_DOMAIN_SAMPLE,
                                      static_cast<uint64_t>(r)));
  bool cached = false; // the caches hold every row's tokens but its last
  // Cache path: row b's cache holds its tokens from cache_start[b] on.
  std::vector<int64_t> cache_start(seqs.size(), 0);
  for (int64_t i = 0; i < request.count; ++i) {
    absl::Status s;
    bool outgrown = false;
    for (size_t b = 0; b < seqs.size(); ++b)
      outgrown |= static_cast<int64_t>(seqs[b].size()) - cache_start[b] > T;
    if (!uses_cache()) {
      s = EvalLogits(seqs, logits, result);
    } else if (!cached || outgrown) {
      // The prompts, or past the context: each row's last T tokens (the
      // eval path's window, again for every token), or with context_keep
      // its last K, after which decoding continues.
      const int64_t window = outgrown && request.context_keep > 0 ? request.context_keep : T;
      for (size_t b = 0; b < seqs.size(); ++b)
        cache_start[b] = std::max<int64_t>(0, static_cast<int64_t>(seqs[b].size()) - window);
      s = PrefillLogits(seqs, cache_start, logits, result);
    } else {
      s = DecodeLogits(seqs, cache_start, logits, result);
    }
    if (!s.ok())
      return s;
    cached = true;
    for (size_t b = 0; b < seqs.size(); ++b) {
      double u = b < keys.size()
                     ? tcc_rng_unit_double(tcc_rng_key_bits(keys[b], static_cast<uint64_t>(i)))
                     : 0.0;
      seqs[b].push_back(
          PickTokenFiltered(logits.data() + b * V, request.allowed, request.params, u));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<GenerateResult> Sampler::Generate(const GenerateRequest &request) {
  const int64_t B = binding_.batch_size, T = binding_.context_length(),
                V = binding_.vocab_size;
  if (request.prompts.empty() || request.num_samples < 1)
    return absl::InvalidArgumentError("sampling needs a prompt and at least one sample");
  for (const std::vector<int64_t> &prompt : request.prompts) {
    if (prompt.empty())
      return absl::InvalidArgumentError("sampling needs at least one context token");
    for (int64_t id : prompt)
      if (id < 0 || id >= V)
        return absl::InvalidArgumentError(absl::StrCat(
            "context token ", id, " is out of range for 'logits' width ", V));
    if (uses_cache() && static_cast<int64_t>(prompt.size()) > T)
      return absl::InvalidArgumentError(absl::StrCat(
          "prompt of ", prompt.size(), " tokens; step '", descriptor_.model_name,
          "' has a context of ", T));
  }
  if (request.allowed < 1 || request.allowed > V)
    return absl::InvalidArgumentError(
        absl::StrCat("sampling among ", request.allowed, " ids of 'logits' width ", V));
  if (request.context_keep != 0) {
    if (!uses_cache())
      return absl::InvalidArgumentError(
          "--context-keep applies to the KV cache path (prefill / decode entries: tcc "
          "compile --generate); the eval path always runs the last context tokens");
    if (request.context_keep < 1 || request.context_keep >= T)
      return absl::InvalidArgumentError(absl::StrCat(
          "--context-keep ", request.context_keep, ": expected 1 to ", T - 1, " (step '",
          descriptor_.model_name, "' has a context of ", T, ")"));
  }
  GenerateResult result;
  const int64_t rows = static_cast<int64_t>(request.prompts.size()) * request.num_samples;
  result.rows.resize(rows);
  double start = Now();
  for (int64_t first = 0; first < rows; first += B) {
    std::vector<int64_t> row_ids;
    std::vector<std::vector<int64_t>> seqs;
    for (int64_t r = first; r < std::min(rows, first + B); ++r) {
      row_ids.push_back(r);
      seqs.push_back(request.prompts[r / request.num_samples]);
    }
    while (static_cast<int64_t>(seqs.size()) < B)
      seqs.push_back(seqs.front()); // padding rows, dropped
    std::vector<size_t> prompt_size;
    for (const auto &q : seqs)
      prompt_size.push_back(q.size());
    if (absl::Status s = GenerateGroup(seqs, row_ids, request, result); !s.ok())
      return s;
    for (size_t k = 0; k < row_ids.size(); ++k)
      result.rows[row_ids[k]].assign(seqs[k].begin() + prompt_size[k], seqs[k].end());
  }
  result.seconds = Now() - start;
  return result;
}

absl::StatusOr<std::vector<int64_t>>
Sampler::Generate(const std::vector<int64_t> &context, int64_t count,
                  int64_t allowed, double temperature, uint64_t seed) {
  GenerateRequest request;
  request.prompts = {context};
  request.count = count;
  request.allowed = allowed;
  request.params.temperature = temperature;
  request.seed = seed;
  absl::StatusOr<GenerateResult> r = Generate(request);
  if (!r.ok())
    return r.status();
  return r->rows.front();
}

} // namespace tcc::trun
