#include "runtime/trun/cli/RunTokens.h"

#include "runtime/trun/cli/RunCommon.h"
#include "runtime/trun/cli/RunRanks.h"
#include "runtime/trun/data/TokenBatches.h"
#include "runtime/trun/data/TokenShards.h"
#include "runtime/trun/data/Vocab.h"
#include "runtime/trun/data/VocabLookup.h"
#include "runtime/trun/train/Sampler.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

namespace tcc::trun {
namespace {

// Opens shards for a token model and checks they fit it: at least one batch
// of windows, and (when the logits width is known) every id below it.
absl::StatusOr<TokenDataset> LoadShards(const std::string &pattern,
                                        const StepBinding &binding) {
  absl::StatusOr<TokenDataset> dataset = TokenDataset::Open(pattern);
  if (!dataset.ok())
    return dataset.status();
  TokenWindows windows(*dataset, binding.context_length());
  if (windows.aligned_count() < binding.batch_size)
    return absl::InvalidArgumentError(absl::StrCat(
        dataset->Describe(), ": ", dataset->total_tokens(), " tokens make ",
        windows.aligned_count(), " windows of ", binding.context_length(),
        "+1 tokens, fewer than the step's batch of ", binding.batch_size));
  if (binding.vocab_size > 0)
    if (absl::Status s = dataset->CheckTokensBelow(
            binding.vocab_size,
            absl::StrCat("'logits' width ", binding.vocab_size));
        !s.ok())
      return s;
  return dataset;
}

// The vocabulary of a token model's run (VocabLookup.h says where from).
absl::StatusOr<std::optional<FoundVocab>>
FindRunVocab(const Options &options, const tcc_step_descriptor &d,
             const StepBinding &binding) {
  std::vector<VocabCandidate> candidates;
  if (options.vocab)
    candidates.push_back({*options.vocab, "--vocab", /*required=*/true});
  for (const std::string *shards :
       {options.data.empty() ? nullptr : &options.data,
        options.val ? &*options.val : nullptr})
    if (shards)
      if (std::optional<std::string> beside = VocabBesideShards(*shards))
        candidates.push_back({*beside, "beside the shards"});
  if (options.ckpt_dir)
    candidates.push_back(
        {VocabInCheckpointDir(*options.ckpt_dir), "beside the checkpoints"});
  if (options.init_from)
    candidates.push_back(
        {VocabBesideWeights(*options.init_from), "beside the --init-from weights"});
  return FindVocab(candidates, binding.vocab_size, d.model_name);
}

// Keeps the run's vocabulary with what it writes, so a later --sample from
// the checkpoints or the weights decodes with it.
absl::Status StoreRunVocab(const Options &options,
                           const std::optional<FoundVocab> &vocab,
                           bool after_training) {
  if (!vocab)
    return absl::OkStatus();
  if (!after_training && options.ckpt_dir) {
    std::error_code ec;
    std::filesystem::create_directories(*options.ckpt_dir, ec);
    if (ec)
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot create --ckpt-dir ", *options.ckpt_dir, ": ", ec.message()));
    return StoreVocab(*vocab, VocabInCheckpointDir(*options.ckpt_dir));
  }
  if (after_training && options.save_weights)
    return StoreVocab(*vocab, VocabBesideWeights(*options.save_weights));
  return absl::OkStatus();
}

absl::Status Sample(const Options &options, const tcc_step_descriptor &d,
                    const StepBinding &binding, Trainer &trainer,
                    const std::optional<FoundVocab> &found, std::ostream &out) {
  absl::StatusOr<std::unique_ptr<Sampler>> sampler =
      Sampler::Create(d, binding, trainer, !options.eval_sampler);
  if (!sampler.ok())
    return sampler.status();
  absl::StatusOr<Vocab> text_vocab =
      VocabForText(found, binding.vocab_size, d.model_name);
  if (!text_vocab.ok())
    return text_vocab.status();
  const Vocab &vocab = *text_vocab;
  GenerateRequest request;
  for (const std::string &prompt : options.prompts) {
    absl::StatusOr<std::vector<int64_t>> ids = vocab.Encode(prompt);
    if (!ids.ok())
      return absl::InvalidArgumentError(
          absl::StrCat("--prompt: ", ids.status().message()));
    if (ids->empty())
      return absl::InvalidArgumentError("--prompt: empty text");
    request.prompts.push_back(std::move(*ids));
  }
  if (request.prompts.empty()) {
    // A newline starts a fresh "document"; token 0 if there is none.
    absl::StatusOr<std::vector<int64_t>> newline = vocab.Encode("\n");
    request.prompts.push_back(newline.ok() ? *newline : std::vector<int64_t>{0});
  }
  for (const std::vector<int64_t> &context : request.prompts)
    for (int64_t id : context)
      if (id >= binding.vocab_size)
        return absl::InvalidArgumentError(absl::StrCat(
            "--prompt: token ", id, " is out of range for 'logits' width ",
            binding.vocab_size));
  request.num_samples = options.num_samples;
  request.count = options.sample;
  request.allowed = std::min(vocab.size(), binding.vocab_size);
  request.params.temperature = options.temperature;
  request.params.top_k = options.top_k;
  request.params.top_p = options.top_p;
  request.seed = options.seed;
  request.context_keep = options.context_keep;
  absl::StatusOr<GenerateResult> generated = (*sampler)->Generate(request);
  if (!generated.ok())
    return generated.status();
  const GenerateResult &g = *generated;
  const int64_t rows = static_cast<int64_t>(g.rows.size());
  const double tokens = static_cast<double>(rows * options.sample);
  if ((*sampler)->uses_cache())
    out << absl::StrFormat(
        "generate: kv cache (prefill + decode), %d rows in batches of %d: %d "
        "tokens in %.3f s, %.1f tokens/s (%d prefill calls, %.3f ms each; %d "
        "decode calls, %.3f ms each)\n",
        rows, binding.batch_size, static_cast<int64_t>(tokens), g.seconds,
        tokens / std::max(g.seconds, 1e-9), g.prefill_calls,
        1e3 * g.prefill_seconds / std::max<int64_t>(g.prefill_calls, 1), g.decode_calls,
        1e3 * g.decode_seconds / std::max<int64_t>(g.decode_calls, 1));
  else
    out << absl::StrFormat(
        "generate: eval path (the eval entry point per token), %d rows in "
        "batches of %d: %d tokens in %.3f s, %.1f tokens/s (%d eval calls)%s\n",
        rows, binding.batch_size, static_cast<int64_t>(tokens), g.seconds,
        tokens / std::max(g.seconds, 1e-9), g.eval_calls,
        options.eval_sampler ? ""
                             : "; the step has no prefill / decode entries: tcc compile "
                               "--generate adds a KV cache where the model allows (its dump "
                               "report says why not)");
  std::string filters;
  if (options.top_k)
    filters += absl::StrFormat(", top-k %d", options.top_k);
  if (options.top_p < 1)
    filters += absl::StrFormat(", top-p %g", options.top_p);
  out << absl::StrFormat("sample: %d tokens, temperature %g, seed %u%s\n",
                         options.sample, options.temperature, options.seed, filters);
  for (int64_t r = 0; r < rows; ++r) {
    if (rows > 1)
      out << absl::StrFormat("--- prompt %d, sample %d\n", r / options.num_samples + 1,
                             r % options.num_samples + 1);
    out << vocab.Decode(request.prompts[r / options.num_samples])
        << vocab.Decode(g.rows[r]) << "\n";
  }
  return absl::OkStatus();
}

} // namespace

absl::Status RunTokenModel(const Options &options,
                           const tcc_step_descriptor &d,
                           const StepBinding &binding, Trainer &trainer,
                           TrainingSession &session, RankGroup *ranks,
                           std::ostream &out) {
  const int64_t B = binding.batch_size, T = binding.context_length();
  // Data parallel: this rank reads its slice of each global batch.
  absl::StatusOr<RankRows> rank_rows = RankRowsOf(ranks, B);
  if (!rank_rows.ok())
    return rank_rows.status();
  const int64_t world = rank_rows->world, G = rank_rows->global;
  const RowSlice slice = rank_rows->slice;
  // Read and check all data before training.
  std::optional<TokenDataset> train, val;
  if (!options.data.empty()) {
    absl::StatusOr<TokenDataset> loaded = LoadShards(options.data, binding);
    if (!loaded.ok())
      return loaded.status();
    train = std::move(*loaded);
  }
  if (options.val) {
    absl::StatusOr<TokenDataset> loaded = LoadShards(*options.val, binding);
    if (!loaded.ok())
      return loaded.status();
    val = std::move(*loaded);
  }
  if (options.sample && binding.token_logits_output == -1)
    return absl::FailedPreconditionError(
        absl::StrCat("--sample: step '", d.model_name,
                     "' has no eval output 'logits' [batch, context, vocab]"));
  absl::StatusOr<std::optional<FoundVocab>> found_vocab =
      FindRunVocab(options, d, binding);
  if (!found_vocab.ok())
    return found_vocab.status();
  const std::optional<FoundVocab> &vocab = *found_vocab;
  if (vocab)
    out << absl::StrFormat("vocab: %d tokens (%s level) from %s (%s)\n",
                           vocab->vocab.size(),
                           vocab->vocab.level() == Vocab::Level::kChar ? "char"
                                                                       : "byte",
                           vocab->path, vocab->origin);
  // Before any training: a run stopped at any point has it with its
  // checkpoints.
  if (absl::Status s = StoreRunVocab(options, vocab, /*after_training=*/false);
      !s.ok())
    return s;

  float learning_rate = BaseLearningRate(options, d);
  out << absl::StrFormat("step: %s (%s), batch %s%dx%d tokens, lr %g, seed %u\n",
                         d.model_name, options.step_path, RanksTimes(ranks), B, T, learning_rate,
                         options.seed);
  out << TargetLine(d, options);
  if (binding.token_logits_output == -1)
    out << "note: step has no 'logits' output; token ids are not checked "
           "against its vocabulary\n";

  // Validation: the first eval_batches batches of sequential windows, the
  // same ones every time, so reports are comparable.
  std::optional<TokenWindows> val_windows;
  int64_t val_batches = 0;
  if (val) {
    val_windows.emplace(*val, T);
    val_batches = std::min(options.eval_batches, val_windows->aligned_count() / G);
    out << absl::StrFormat("val: %d tokens in %s (%d batches of %dx%d)\n",
                           val->total_tokens(), val->Describe(), val_batches,
                           G, T);
  }
  auto validate = [&]() -> absl::StatusOr<EvalRecord> {
    SequentialTokenBatches batches(*val_windows, G, val_batches, slice);
    absl::StatusOr<EvalResult> result = trainer.Evaluate(batches);
    if (!result.ok())
      return result.status();
    double mean_loss = result->mean_loss;
    if (ranks) { // equal slices: the global mean is the mean of the ranks'
      std::vector<double> sum = {mean_loss};
      if (absl::Status s = ranks->SumOnHost(sum); !s.ok())
        return s;
      mean_loss = sum[0] / world;
    }
    EvalRecord record;
    record.step = trainer.steps_done();
    record.split = "val";
    record.loss = mean_loss;
    record.batches = val_batches;
    return record;
  };

  std::optional<TokenWindows> windows;
  std::optional<RandomTokenBatches> random;
  std::optional<SequentialTokenBatches> in_order;
  if (train) {
    windows.emplace(*train, T);
    bool sequential = options.data_order == DataOrder::kSequential;
    random.emplace(*windows, G, options.seed, slice);
    in_order.emplace(*windows, G, -1, slice);
    absl::StatusOr<TrainingPlan> base = BasePlan(
        options, d,
        sequential ? static_cast<BatchSource *>(&*in_order)
                   : static_cast<BatchSource *>(&*random),
        in_order->batches_per_epoch());
    if (!base.ok())
      return base.status();
    TrainingPlan &plan = *base;
    plan.data_order = sequential ? "sequential" : "random";
    plan.unit = "tokens";
    plan.items_per_step = G * T; // all ranks' tokens
    if (val)
      plan.validate = validate;
    out << absl::StrFormat(
        "train: %d tokens in %s, %s windows of %d+1 tokens (%d steps per "
        "epoch, %d steps)\n",
        train->total_tokens(), train->Describe(), plan.data_order, T,
        plan.steps_per_epoch, plan.steps);
    out << BindingLine(d, binding,
                       absl::StrCat(train->Describe(), " (window tokens 0..",
                                    T - 1, ")"),
                       absl::StrCat("the same windows (tokens 1..", T, ")"));
    if (absl::Status s =
            TrainAndSaveOutputs(options, d, trainer, session, plan, out);
        !s.ok())
      return s;
  }
  if (val && session.last_validated_step() != trainer.steps_done()) {
    absl::StatusOr<EvalRecord> record = validate();
    if (!record.ok())
      return record.status();
    if (absl::Status s = session.ReportEval(*record); !s.ok())
      return s;
  }
  if (absl::Status s = SaveAtEnd(options, d, trainer, ranks, out); !s.ok())
    return s;
  if (absl::Status s = StoreRunVocab(options, vocab, /*after_training=*/true);
      !s.ok())
    return s;
  if (options.sample)
    return Sample(options, d, binding, trainer, vocab, out);
  return absl::OkStatus();
}

} // namespace tcc::trun
