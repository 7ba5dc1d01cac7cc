#include "runtime/trun/Sampler.h"

#include "runtime/trun/CounterRng.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include <cmath>
#include <algorithm>
#include <cstring>
#include <tuple>

namespace tcc::trun {

int64_t PickToken(const float *logits, int64_t n, double temperature,
                  double u) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (logits[i] > logits[best])
      best = i;
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

absl::StatusOr<std::unique_ptr<Sampler>>
Sampler::Create(const tcc_step_descriptor &d, const StepBinding &binding,
                const std::vector<const void *> &params) {
  if (!binding.is_token_model() || binding.token_logits_output == -1)
    return absl::FailedPreconditionError(absl::StrCat(
        "step '", d.model_name,
        "' cannot sample: it needs inputs 'tokens' and 'targets' and an eval "
        "output 'logits' [batch, context, vocab]"));
  std::unique_ptr<Sampler> s(new Sampler(d, binding));
  auto allocate = [](int64_t bytes, const char *what) -> absl::StatusOr<AlignedBuffer> {
    AlignedBuffer buffer(static_cast<size_t>(bytes));
    if (!buffer.ok())
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot allocate ", bytes, " bytes for ", what));
    return buffer;
  };
  for (int32_t i = 0; i < d.num_params; ++i) {
    absl::StatusOr<AlignedBuffer> buffer =
        allocate(d.params[i].size_bytes, d.params[i].name);
    if (!buffer.ok())
      return buffer.status();
    std::memcpy(buffer->data(), params[i],
                static_cast<size_t>(d.params[i].size_bytes));
    s->params_.push_back(std::move(*buffer));
    s->param_ptrs_.push_back(s->params_.back().data());
  }
  for (int32_t i = 0; i < d.num_outputs; ++i) {
    absl::StatusOr<AlignedBuffer> buffer =
        allocate(d.outputs[i].size_bytes, d.outputs[i].name);
    if (!buffer.ok())
      return buffer.status();
    s->outputs_.push_back(std::move(*buffer));
    s->output_ptrs_.push_back(s->outputs_.back().data());
  }
  const tcc_tensor_desc &tokens = d.inputs[binding.data_input];
  for (auto [buffer, bytes, what] :
       {std::make_tuple(&s->tokens_, tokens.size_bytes, "tokens"),
        std::make_tuple(&s->targets_, tokens.size_bytes, "targets"),
        std::make_tuple(&s->workspace_, d.workspace_bytes, "workspace")}) {
    absl::StatusOr<AlignedBuffer> allocated = allocate(bytes, what);
    if (!allocated.ok())
      return allocated.status();
    *buffer = std::move(*allocated);
  }
  s->input_ptrs_.assign(d.num_inputs, nullptr);
  s->input_ptrs_[binding.data_input] = s->tokens_.data();
  s->input_ptrs_[binding.target_input] = s->targets_.data();
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
  uint64_t key = rng::StreamKey(seed, rng::kSampleDomain, 0);
  float loss = 0;
  tcc_step_args args{};
  args.params = param_ptrs_.data();
  args.inputs = input_ptrs_.data();
  args.outputs = output_ptrs_.data();
  args.workspace = workspace_.data();
  args.loss = &loss;
  args.rng_seed = seed;
  const float *logits = outputs_[binding_.token_logits_output].as<float>();
  for (int64_t i = 0; i < count; ++i) {
    // Row 0: the last min(len, T) tokens, then padding 0.
    int64_t length = std::min<int64_t>(static_cast<int64_t>(all.size()), T);
    int32_t *row = tokens_.as<int32_t>(); // (B, T), only row 0 used
    for (int64_t t = 0; t < T; ++t)
      row[t] = t < length ? static_cast<int32_t>(all[all.size() - length + t])
                          : 0;
    int32_t status = descriptor_.eval(&args);
    if (status != TCC_STATUS_OK)
      return absl::InternalError(absl::StrFormat(
          "step '%s': eval failed while sampling token %d: returned %d",
          descriptor_.model_name, i, status));
    const float *last = logits + (length - 1) * V; // (V) of row 0
    double u = rng::UnitDouble(rng::Bits(key, static_cast<uint64_t>(i)));
    int64_t next = PickToken(last, allowed, temperature, u);
    all.push_back(next);
    generated.push_back(next);
  }
  return generated;
}

} // namespace tcc::trun
