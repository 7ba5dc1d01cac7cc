#include "runtime/trun/cli/RunArrays.h"

#include "runtime/trun/cli/RunRanks.h"
#include "runtime/trun/data/NamedArrays.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include <algorithm>
#include <optional>

namespace tcc::trun {

absl::Status RunNamedArrays(const Options &options,
                            const tcc_step_descriptor &d,
                            const StepBinding &binding, Trainer &trainer,
                            TrainingSession &session, RankGroup *ranks,
                            std::ostream &out) {
  // Data parallel: each rank reads its rows of each shuffled global batch.
  absl::StatusOr<RankRows> rank_rows = RankRowsOf(ranks, binding.batch_size);
  if (!rank_rows.ok())
    return rank_rows.status();
  const int64_t world = rank_rows->world, G = rank_rows->global;
  // Read and check all data before training, so bad test data fails fast.
  absl::StatusOr<NamedArrays> train =
      NamedArrays::Load(options.data, "--data", d, binding);
  if (!train.ok())
    return train.status();
  if (train->count() < G)
    return absl::InvalidArgumentError(absl::StrCat(
        "--data: ", train->count(), " samples, fewer than the ",
        ranks ? absl::StrCat("global batch (", world, " ranks x ",
                             binding.batch_size, ") ")
              : std::string("step's batch size "),
        G));
  std::optional<NamedArrays> test;
  if (options.test) {
    absl::StatusOr<NamedArrays> loaded =
        NamedArrays::Load(*options.test, "--test", d, binding);
    if (!loaded.ok())
      return loaded.status();
    test = std::move(*loaded);
  }

  ShuffledBatches batches(train->count(), train->copier(), G, options.seed,
                          rank_rows->slice);
  absl::StatusOr<TrainingPlan> base =
      BasePlan(options, d, &batches, batches.batches_per_epoch());
  if (!base.ok())
    return base.status();
  TrainingPlan &plan = *base;
  plan.data_order = "shuffled";
  plan.unit = "samples";
  plan.items_per_step = G; // all ranks' samples

  out << absl::StrFormat("step: %s (%s), batch %s%d, lr %g, seed %u\n",
                         d.model_name, options.step_path,
                         ranks ? absl::StrCat(world, " ranks x ") : "",
                         binding.batch_size, plan.learning_rate, options.seed);
  out << TargetLine(d, options);
  out << absl::StrFormat("train: %d samples of named arrays (%d steps per "
                         "epoch, %d steps)\n",
                         train->count(), plan.steps_per_epoch, plan.steps);
  out << train->BindingLines(d, binding);
  if (test)
    out << test->BindingLines(d, binding, "test input");

  if (absl::Status s =
          TrainAndSaveOutputs(options, d, trainer, session, plan, out);
      !s.ok())
    return s;

  if (!test) {
    out << "note: no test data (pass --test with named arrays like --data); "
           "skipping evaluation\n";
    return absl::OkStatus();
  }
  const int64_t tested =
      options.test_batches > 0
          ? std::min<int64_t>(test->count(), options.test_batches * binding.batch_size)
          : test->count();
  out << absl::StrFormat("test: %d samples", test->count());
  if (tested < test->count())
    out << absl::StrFormat(" (the first %d: --test-batches %d)", tested, options.test_batches);
  out << "\n";
  if (binding.logits_output == -1)
    out << "note: reporting test loss only (accuracy needs an output "
           "'logits' [batch, classes] and an integer input [batch] that the "
           "loss reads as class labels)\n";
  // Every rank evaluates the whole test split (the same weights, the same
  // result; rank 0 reports it).
  SequentialBatches test_batches(tested, test->copier(), binding.batch_size);
  absl::StatusOr<EvalResult> result = trainer.Evaluate(test_batches);
  if (!result.ok())
    return result.status();
  if (result->has_accuracy)
    out << absl::StrFormat("test accuracy: %.4f (%d/%d)\n",
                           result->accuracy(), result->correct,
                           result->samples);
  out << absl::StrFormat("test loss: %.6g\n", result->mean_loss);
  EvalRecord record;
  record.step = trainer.steps_done();
  record.split = "test";
  record.loss = result->mean_loss;
  if (result->has_accuracy)
    record.accuracy = result->accuracy();
  record.batches = test_batches.total_batches();
  return session.ReportEval(record);
}

} // namespace tcc::trun
