#include "runtime/trun/Run.h"

#include "runtime/trun/BatchSource.h"
#include "runtime/trun/DataFiles.h"
#include "runtime/trun/IdxDataset.h"
#include "runtime/trun/StepBinding.h"
#include "runtime/trun/StepDescriptor.h"
#include "runtime/trun/StepLibrary.h"
#include "runtime/trun/Trainer.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include <limits>
#include <optional>

namespace tcc::trun {
namespace {

// Reads a split and checks it against the step's inputs and logits.
absl::StatusOr<LabeledImages> LoadSplit(const SplitFiles &files,
                                        const StepBinding &binding,
                                        const tcc_step_descriptor &d) {
  absl::StatusOr<LabeledImages> split =
      LoadLabeledImages(files.images, files.labels);
  if (!split.ok())
    return split.status();
  if (split->count == 0)
    return absl::InvalidArgumentError(
        absl::StrCat(files.images, ": no samples"));
  if (absl::Status s = CheckDataFits(binding, d, *split); !s.ok())
    return s;
  return split;
}

void PrintEvalResult(const EvalResult &result, std::ostream &out) {
  if (result.has_accuracy)
    out << absl::StrFormat("test accuracy: %.4f (%d/%d)\n", result.accuracy(),
                           result.correct, result.samples);
  out << absl::StrFormat("test loss: %.4f\n", result.mean_loss);
}

} // namespace

absl::Status RunTrun(const Options &options, std::ostream &out) {
  absl::StatusOr<std::unique_ptr<StepLibrary>> library =
      StepLibrary::Open(options.step_path);
  if (!library.ok())
    return library.status();
  const tcc_step_descriptor &d = (*library)->descriptor();
  if (options.info) {
    PrintDescriptorInfo(d, out);
    return absl::OkStatus();
  }
  absl::StatusOr<StepBinding> binding = BindStep(d);
  if (!binding.ok())
    return binding.status();

  // Parameters first: an unsupported init fails before any data is read.
  absl::StatusOr<std::unique_ptr<Trainer>> trainer =
      Trainer::Create(d, *binding, options.seed);
  if (!trainer.ok())
    return trainer.status();

  // Read and check all data before training, so a bad test file fails fast.
  absl::StatusOr<DataFiles> files =
      ResolveDataFiles(options.data, options.test);
  if (!files.ok())
    return files.status();
  absl::StatusOr<LabeledImages> train = LoadSplit(files->train, *binding, d);
  if (!train.ok())
    return train.status();
  if (train->count < binding->batch_size)
    return absl::InvalidArgumentError(absl::StrCat(
        files->train.images, ": ", train->count,
        " samples, fewer than the step's batch size ", binding->batch_size));
  std::optional<LabeledImages> test;
  if (files->test) {
    absl::StatusOr<LabeledImages> loaded = LoadSplit(*files->test, *binding, d);
    if (!loaded.ok())
      return loaded.status();
    test = std::move(*loaded);
  }

  PixelNormalizer normalizer = PixelNormalizer::FromTrainingImages(*train);
  ShuffledBatches batches(*train, normalizer, binding->batch_size,
                          options.seed);
  TrainConfig config;
  config.learning_rate = static_cast<float>(
      options.learning_rate.value_or(d.default_learning_rate));
  config.steps_per_epoch = batches.batches_per_epoch();
  int64_t epochs = options.epochs.value_or(1);
  if (epochs > std::numeric_limits<int64_t>::max() / config.steps_per_epoch)
    return absl::InvalidArgumentError(
        absl::StrCat("--epochs ", epochs, " is too many steps"));
  config.steps = options.steps.value_or(epochs * config.steps_per_epoch);
  config.log_every = options.log_every;

  out << absl::StrFormat("step: %s (%s), batch %d, lr %g, seed %u\n",
                         d.model_name, options.step_path, binding->batch_size,
                         config.learning_rate, options.seed);
  out << absl::StrFormat(
      "train: %d samples from %s (%d steps per epoch, %d steps)\n",
      train->count, files->train.images, config.steps_per_epoch, config.steps);
  out << absl::StrFormat("normalization: mean %.4f, std %.4f (of x/255 over "
                         "the training images)\n",
                         normalizer.mean, normalizer.stddev);

  if (absl::Status s = (*trainer)->Train(batches, config, out); !s.ok())
    return s;

  if (!test) {
    out << "note: no test data (pass --test IMAGES,LABELS); skipping "
           "evaluation\n";
    return absl::OkStatus();
  }
  out << absl::StrFormat("test: %d samples from %s\n", test->count,
                         files->test->images);
  if (binding->logits_output == -1)
    out << "note: step has no 'logits' output; reporting test loss only\n";
  SequentialBatches test_batches(*test, normalizer, binding->batch_size);
  absl::StatusOr<EvalResult> result = (*trainer)->Evaluate(test_batches);
  if (!result.ok())
    return result.status();
  PrintEvalResult(*result, out);
  return absl::OkStatus();
}

} // namespace tcc::trun
