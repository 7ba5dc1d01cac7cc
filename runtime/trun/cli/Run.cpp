#include "runtime/trun/cli/Run.h"
#include "runtime/trun/cli/RunArrays.h"
#include "runtime/trun/cli/RunCommon.h"
#include "runtime/trun/cli/RunTokens.h"
#include "runtime/trun/cli/RunRanks.h"

#include "runtime/trun/data/BatchSource.h"
#include "runtime/trun/data/ArrayFiles.h"
#include "runtime/trun/data/DataFiles.h"
#include "runtime/trun/data/IdxDataset.h"
#include "runtime/trun/data/StepBinding.h"
#include "runtime/trun/dist/LaunchEnvironment.h"
#include "runtime/trun/dist/RankGroup.h"
#include "runtime/trun/io/PathLock.h"
#include "runtime/trun/io/Safetensors.h"
#include "runtime/trun/io/Weights.h"
#include "runtime/trun/step/DeviceMemory.h"
#include "runtime/trun/step/Diagnose.h"
#include "runtime/trun/step/StepDescriptor.h"
#include "runtime/trun/step/StepLibrary.h"
#include "runtime/trun/step/WithBuffers.h"
#include "runtime/trun/train/Trainer.h"
#include "runtime/trun/train/EncodeCache.h"
#include "absl/strings/str_split.h"
#include <algorithm>
#include <filesystem>
#include "runtime/trun/train/ShardedTrainingState.h"
#include "runtime/trun/train/TrainingSession.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

#include <cstdlib>
#include <limits>
#include <optional>

namespace tcc::trun {
namespace {

// Reads a split (IDX or .npy files) and checks it against the step's inputs
// and logits.
absl::StatusOr<LabeledImages> LoadSplit(const SplitFiles &files,
                                        const StepBinding &binding,
                                        const tcc_step_descriptor &d) {
  absl::StatusOr<LabeledImages> split = ReadSplit(files);
  if (!split.ok())
    return split.status();
  if (split->count == 0)
    return absl::InvalidArgumentError(
        absl::StrCat(files.images, ": no samples"));
  if (absl::Status s = CheckDataFits(binding, d, *split); !s.ok())
    return s;
  return split;
}

// Train and test images must be alike: after float32 training, u8 test
// images would get a normalization the model never saw; after u8 training,
// float32 test images would miss the one it did.
absl::Status CheckSameImageType(const LabeledImages &train,
                                const std::optional<LabeledImages> &test) {
  if (!test || train.float_pixels.empty() == test->float_pixels.empty())
    return absl::OkStatus();
  auto type = [](const LabeledImages &set) {
    return set.float_pixels.empty() ? "uint8" : "float32";
  };
  return absl::InvalidArgumentError(absl::StrCat(
      test->images_path, ": ", type(*test), " images but the training images ",
      train.images_path, " are ", type(train),
      "; train and test images must have the same dtype"));
}

// "normalization: ..." and, per float32 images file, a note that it is fed
// as stored (CheckSameImageType made test and train alike).
std::string NormalizationLines(const PixelNormalizer &normalizer,
                               const LabeledImages &train,
                               const std::optional<LabeledImages> &test) {
  if (train.float_pixels.empty())
    return absl::StrFormat("normalization: mean %.4f, std %.4f (of x/255 over "
                           "the training images)\n",
                           normalizer.mean, normalizer.stddev);
  std::string lines = "normalization: none (float32 images)\n";
  auto note = [&](const std::string &file) {
    absl::StrAppend(&lines, "images: float32 from ", file,
                    ", fed as stored (no normalization)\n");
  };
  note(train.images_path);
  if (test && test->images_path != train.images_path)
    note(test->images_path);
  return lines;
}

void PrintEvalResult(const EvalResult &result, std::ostream &out) {
  if (result.has_accuracy)
    out << absl::StrFormat("test accuracy: %.4f (%d/%d)\n", result.accuracy(),
                           result.correct, result.samples);
  out << absl::StrFormat("test loss: %.4f\n", result.mean_loss);
}

// Flags that belong to the other kind of step are errors, not no-ops.
absl::Status CheckFlagsFitStep(const Options &options,
                               const StepBinding &binding,
                               const tcc_step_descriptor &d) {
  auto wrong = [&](absl::string_view flag, absl::string_view hint) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, " is for ",
        binding.is_token_model() ? "image classifiers" : "token models",
        "; step '", d.model_name, "' is ",
        binding.is_token_model()    ? "a token model"
        : binding.is_named_arrays() ? "fed named arrays"
                                    : "an image classifier",
        hint));
  };
  if (binding.is_token_model()) {
    if (options.test)
      return wrong("--test", " (use --val SHARDS)");
    return absl::OkStatus();
  }
  const bool arrays = binding.is_named_arrays();
  const char *hint =
      arrays ? "" : " (inputs 'tokens' and 'targets' make a token model)";
  if (options.val)
    return wrong("--val", arrays ? " (use --test NAMED_ARRAYS)" : hint);
  if (options.data_order)
    return wrong("--data-order", hint);
  if (options.sample)
    return wrong("--sample", hint);
  if (options.data.empty())
    return absl::InvalidArgumentError("missing --data (see trun --help)");
  return absl::OkStatus();
}

// --gpu and --profile need a cuda step, --threads a cpu step: refused
// before anything is read.
absl::Status CheckCudaOnlyFlags(const Options &options, const tcc_step_descriptor &d) {
  if (d.device) {
    if (options.threads)
      return absl::InvalidArgumentError(
          absl::StrCat("--threads applies to cpu steps; this step is ", d.target));
    return absl::OkStatus();
  }
  if (options.gpu)
    return absl::InvalidArgumentError(
        absl::StrCat("--gpu applies to cuda steps; this step is ", d.target));
  if (options.profile)
    return absl::InvalidArgumentError(absl::StrCat(
        "--profile applies to cuda steps; this step is ", d.target,
        ": compile it with tcc compile --profile, and it prints its kernels' "
        "times at exit"));
  return absl::OkStatus();
}

absl::Status InitFrom(const Options &options, const tcc_step_descriptor &step,
                      Trainer &trainer, int rank, std::ostream &out) {
  if (!options.init_from)
    return absl::OkStatus();
  LoadedWeights loaded;
  // ZeRO-3: the file holds whole parameters; this rank keeps its shards.
  std::unique_ptr<ShardedTrainingState> sharded =
      ShardParameterRanks(step) ? ShardedTrainingState::ForStep(step) : nullptr;
  // Model buffers (batch norm's running statistics) are read like parameters.
  WithBuffers view(sharded ? sharded->whole_descriptor() : step);
  const tcc_step_descriptor &d = view.descriptor();
  if (absl::Status s = LoadWeights(
          *options.init_from, d,
          WithBuffers::Join(sharded ? sharded->mutable_whole_params() : trainer.mutable_params(),
                            trainer.mutable_model_buffers()),
          {options.init_from_ignore_extra}, &loaded);
      !s.ok())
    return s;
  if (sharded)
    sharded->Scatter(rank, trainer.mutable_params(), {});
  std::vector<std::string> notes;
  if (loaded.permuted)
    notes.push_back(absl::StrFormat("%d permuted from PyTorch's layout", loaded.permuted));
  if (loaded.from_alias)
    notes.push_back(absl::StrFormat("%d found under an alias", loaded.from_alias));
  if (loaded.converted)
    notes.push_back(absl::StrFormat("%d converted to the parameter's dtype", loaded.converted));
  if (!loaded.ignored.empty())
    notes.push_back(absl::StrFormat("%d extra tensors ignored: %s", loaded.ignored.size(),
                                    absl::StrJoin(loaded.ignored, ", ")));
  // What could be verified (issue 36): trun's own files carry a checksum;
  // a file from elsewhere had its structure and values checked only.
  notes.push_back(loaded.checksummed
                      ? "checksum verified"
                      : "no checksum (not written by trun): structure and finite values "
                        "checked, changed bytes not detectable");
  int32_t buffers = d.num_params - step.num_params;
  out << absl::StrFormat("init: %d parameters%s from %s (%s names and layouts%s%s)\n",
                         step.num_params,
                         buffers ? absl::StrFormat(" and %d buffers", buffers) : "",
                         *options.init_from,
                         loaded.torch_layout ? "PyTorch" : "tcc",
                         notes.empty() ? "" : "; ", absl::StrJoin(notes, "; "));
  return absl::OkStatus();
}

// --save-train-outputs: the loss and train outputs of the last train step.
// The PyTorch parity test reads the gradients of a step compiled with
// --emit-gradients and the loss at full precision.
absl::Status SaveTrainOutputs(const Options &options,
                              const tcc_step_descriptor &d,
                              const Trainer &trainer, float loss,
                              int64_t steps, std::ostream &out) {
  if (!options.save_train_outputs)
    return absl::OkStatus();
  if (steps == 0)
    return absl::InvalidArgumentError(
        "--save-train-outputs needs at least one train step");
  std::vector<TensorToWrite> tensors = {
      {"loss", TCC_DTYPE_F32, {}, &loss, sizeof(float)}};
  for (int32_t i = 0; i < d.num_train_outputs; ++i) {
    const tcc_tensor_desc &t = d.train_outputs[i];
    if (std::string(t.name) == "loss")
      return absl::InvalidArgumentError(
          "--save-train-outputs: step has a train output named 'loss'");
    tensors.push_back(TensorToWriteOf(t, trainer.train_output(i)));
  }
  if (absl::Status s = WriteSafetensors(
          *options.save_train_outputs, tensors,
          {{"model", d.model_name}, {"producer", "trun"},
           {"step", std::to_string(trainer.steps_done() - 1)}});
      !s.ok())
    return s;
  out << absl::StrFormat("saved train outputs of step %d: %s (loss and %d "
                         "tensors)\n",
                         trainer.steps_done(), *options.save_train_outputs,
                         d.num_train_outputs);
  return absl::OkStatus();
}

} // namespace

// What every kind of step shares in a plan: the source, the base lr and the
// step count (--steps, else --epochs (default 1) of steps_per_epoch).
absl::StatusOr<TrainingPlan> BasePlan(const Options &options,
                                      const tcc_step_descriptor &d,
                                      BatchSource *source,
                                      int64_t steps_per_epoch) {
  TrainingPlan plan;
  plan.source = source;
  plan.data = options.data;
  plan.learning_rate = BaseLearningRate(options, d);
  plan.steps_per_epoch = steps_per_epoch;
  int64_t epochs = options.epochs.value_or(1);
  if (epochs > std::numeric_limits<int64_t>::max() / steps_per_epoch)
    return absl::InvalidArgumentError(
        absl::StrCat("--epochs ", epochs, " is too many steps"));
  plan.steps = options.steps.value_or(epochs * steps_per_epoch);
  return plan;
}

// Trains per `plan`, then writes --save-train-outputs (before any final
// evaluation overwrites the step's loss).
absl::Status TrainAndSaveOutputs(const Options &options,
                                 const tcc_step_descriptor &d,
                                 const Trainer &trainer,
                                 TrainingSession &session, TrainingPlan &plan,
                                 std::ostream &out) {
  if (absl::Status s = session.Train(plan); !s.ok())
    return s;
  return SaveTrainOutputs(options, d, trainer, session.last_train_loss(),
                          session.steps_trained(), out);
}

// "target: cpu (x86_64)" (and the threads line under trun's main) or
// "target: cuda (sm_90), GPU 0".
std::string TargetLine(const tcc_step_descriptor &d, const Options &options) {
  std::string line = absl::StrCat("target: ", d.target, " (",
                                  d.arch ? d.arch : "unknown arch", ")");
  if (d.device)
    absl::StrAppend(&line, ", GPU ", options.gpu.value_or(0));
  else if (!options.threads_line.empty())
    absl::StrAppend(&line, "\n", options.threads_line);
  return line + "\n";
}

// "2 ranks x " before the per-rank batch in the run's header; "" for one
// process.
std::string RanksTimes(const RankGroup *ranks) {
  return ranks ? absl::StrCat(ranks->world_size(), " ranks x ") : std::string();
}

// The schedule's base learning rate: --lr, else the step's default.
float BaseLearningRate(const Options &options, const tcc_step_descriptor &d) {
  return static_cast<float>(
      options.learning_rate.value_or(d.default_learning_rate));
}

absl::Status SaveAtEnd(const Options &options, const tcc_step_descriptor &step,
                       const Trainer &trainer, RankGroup *ranks, std::ostream &out) {
  if (!options.save_weights)
    return absl::OkStatus();
  // GPU steps: the weights come from the device; a failed copy is an error
  // here, not stale weights in the file.
  if (absl::Status s = trainer.SyncToHost(); !s.ok())
    return s;
  // ZeRO-3: every rank sends its shards; rank 0 writes the whole tensors.
  std::unique_ptr<ShardedTrainingState> sharded =
      ShardParameterRanks(step) ? ShardedTrainingState::ForStep(step) : nullptr;
  if (sharded) {
    if (absl::Status s = sharded->Gather(ranks, trainer.params(), {}); !s.ok())
      return absl::Status(s.code(), absl::StrCat("--save-weights: ", s.message()));
    if (ranks && !ranks->is_lead())
      return absl::OkStatus();
  }
  WithBuffers view(sharded ? sharded->whole_descriptor() : step); // buffers under their keys too
  const tcc_step_descriptor &d = view.descriptor();
  if (absl::Status s = SaveWeights(
          *options.save_weights, d,
          WithBuffers::Join(sharded ? sharded->whole_params() : trainer.params(),
                            trainer.model_buffers()));
      !s.ok())
    return s;
  int32_t tensors = d.num_params; // aliases are written too
  for (int32_t i = 0; i < d.num_params; ++i)
    tensors += static_cast<int32_t>(TorchTensorOf(d, i).aliases.size());
  out << absl::StrFormat("saved weights: %s (%d tensors)\n", *options.save_weights, tensors);
  return absl::OkStatus();
}

// One line saying which file feeds which step input, e.g.
//   inputs: 'image' f32 [64, 784] <- x.gz (normalized), 'label' i32 [64] <- y.gz
std::string BindingLine(const tcc_step_descriptor &d, const StepBinding &b,
                        absl::string_view data_from,
                        absl::string_view targets_from) {
  auto input = [&](int32_t index) {
    const tcc_tensor_desc &t = d.inputs[index];
    return absl::StrCat("'", t.name, "' ", DtypeName(t.dtype), " ",
                        ShapeString(t));
  };
  return absl::StrCat("inputs: ", input(b.data_input), " <- ", data_from, ", ",
                      input(b.target_input), " <- ", targets_from, "\n");
}

namespace {

absl::Status RunImageClassifier(const Options &options,
                                const tcc_step_descriptor &d,
                                const StepBinding &binding, Trainer &trainer,
                                TrainingSession &session, RankGroup *ranks,
                                std::ostream &out) {
  // Data parallel: each rank reads its rows of each shuffled global batch.
  absl::StatusOr<RankRows> rank_rows = RankRowsOf(ranks, binding.batch_size);
  if (!rank_rows.ok())
    return rank_rows.status();
  const int64_t world = rank_rows->world, G = rank_rows->global;
  const RowSlice slice = rank_rows->slice;
  // Read and check all data before training, so a bad test file fails fast.
  absl::StatusOr<DataFiles> files =
      ResolveDataFiles(options.data, options.test);
  if (!files.ok())
    return files.status();
  absl::StatusOr<LabeledImages> train = LoadSplit(files->train, binding, d);
  if (!train.ok())
    return train.status();
  if (train->count < G)
    return absl::InvalidArgumentError(absl::StrCat(
        files->train.images, ": ", train->count, " samples, fewer than the ",
        ranks ? absl::StrCat("global batch (", world, " ranks x ", binding.batch_size, ") ")
              : std::string("step's batch size "),
        G));
  std::optional<LabeledImages> test;
  if (files->test) {
    absl::StatusOr<LabeledImages> loaded = LoadSplit(*files->test, binding, d);
    if (!loaded.ok())
      return loaded.status();
    test = std::move(*loaded);
  }

  if (absl::Status s = CheckSameImageType(*train, test); !s.ok())
    return s;
  PixelNormalizer normalizer = PixelNormalizer::FromTrainingImages(*train);
  ShuffledBatches batches(*train, normalizer, G, options.seed, slice);
  absl::StatusOr<TrainingPlan> base =
      BasePlan(options, d, &batches, batches.batches_per_epoch());
  if (!base.ok())
    return base.status();
  TrainingPlan &plan = *base;
  plan.data_order = "shuffled";
  plan.unit = "samples";
  plan.items_per_step = G; // all ranks' samples

  out << absl::StrFormat("step: %s (%s), batch %s%d, lr %g, seed %u\n", d.model_name,
                         options.step_path, RanksTimes(ranks), binding.batch_size,
                         plan.learning_rate, options.seed);
  out << TargetLine(d, options);
  out << absl::StrFormat(
      "train: %d samples from %s (%d steps per epoch, %d steps)\n",
      train->count, files->train.images, plan.steps_per_epoch, plan.steps);
  out << NormalizationLines(normalizer, *train, test);
  out << BindingLine(d, binding,
                     absl::StrCat(files->train.images,
                                  train->float_pixels.empty() ? " (normalized)"
                                                              : " (as stored)"),
                     files->train.labels);

  if (absl::Status s =
          TrainAndSaveOutputs(options, d, trainer, session, plan, out);
      !s.ok())
    return s;

  if (!test) {
    out << "note: no test data (pass --test IMAGES,LABELS); skipping "
           "evaluation\n";
  } else {
    const int64_t tested =
        options.test_batches > 0
            ? std::min<int64_t>(test->count, options.test_batches * binding.batch_size)
            : test->count;
    out << absl::StrFormat("test: %d samples from %s", test->count, files->test->images);
    if (tested < test->count)
      out << absl::StrFormat(" (the first %d: --test-batches %d)", tested,
                             options.test_batches);
    out << "\n";
    if (binding.logits_output == -1)
      out << "note: step has no 'logits' output; reporting test loss only\n";
    // Every rank evaluates the whole test split (the same weights, the same
    // result; rank 0 reports it): no exchange needed.
    SequentialBatches test_batches(*test, normalizer, binding.batch_size,
                                   options.test_batches > 0 ? tested : -1);
    absl::StatusOr<EvalResult> result = trainer.Evaluate(test_batches);
    if (!result.ok())
      return result.status();
    PrintEvalResult(*result, out);
    EvalRecord record;
    record.step = trainer.steps_done();
    record.split = "test";
    record.loss = result->mean_loss;
    if (result->has_accuracy)
      record.accuracy = result->accuracy();
    record.batches = (result->samples + binding.batch_size - 1) /
                     binding.batch_size;
    if (absl::Status s = session.ReportEval(record); !s.ok())
      return s;
  }
  return SaveAtEnd(options, d, trainer, ranks, out);
}

absl::Status TrainOnThisRank(const Options &options, const tcc_step_descriptor &d,
                             const StepBinding &binding, Trainer &trainer, RankGroup *ranks,
                             std::ostream &out);

} // namespace

absl::Status RunTrun(const Options &options, std::ostream &out) {
  if (options.diagnose && options.step_path.empty()) {
    PrintDiagnosis(ProbeMachine(), nullptr, out);
    return absl::OkStatus();
  }
  absl::StatusOr<std::unique_ptr<StepLibrary>> library =
      StepLibrary::Open(options.step_path);
  if (!library.ok())
    return library.status();
  const tcc_step_descriptor &d = (*library)->descriptor();
  if (options.diagnose) {
    if (absl::Status s = CheckCudaOnlyFlags(options, d); !s.ok())
      return s;
    if (!PrintDiagnosis(ProbeMachine(), &d, out, options.gpu.value_or(0)))
      return absl::FailedPreconditionError(absl::StrCat(
          "step '", d.model_name, "' cannot run here (see above)"));
    return absl::OkStatus();
  }
  if (options.info) {
    PrintDescriptorInfo(d, out);
    return absl::OkStatus();
  }
  // Started by trun --nproc, torchrun, srun or mpirun as one of several
  // ranks (docs/distributed.md).
  absl::StatusOr<RankInfo> rank = ReadLaunchEnvironment(ProcessEnvironment());
  if (!rank.ok())
    return absl::InvalidArgumentError(absl::StrCat("launch environment: ", rank.status().message()));
  // Named arrays given by the user bind any step that way (ArrayFiles.h).
  absl::StatusOr<StepBinding> binding = BindStep(
      d, IsNamedArraysValue(options.data) ||
             (options.test && IsNamedArraysValue(*options.test)));
  if (!binding.ok())
    return binding.status();
  if (absl::Status s = CheckFlagsFitStep(options, *binding, d); !s.ok())
    return s;
  if (absl::Status s = CheckCudaOnlyFlags(options, d); !s.ok())
    return s;
  // A launcher's job of one rank runs a data-parallel step through its
  // back end too (NCCL or MPI with one rank: what --nproc 1 checks).
  const bool join = rank->distributed() || (rank->launcher != Launcher::kNone && IsDataParallel(d));
  if (absl::Status s =
          join ? CheckRanksCanTrain(absl::StrCat("started as ", rank->Describe()), d,
                                    rank->world_size)
               : CheckShardRanks("started as one process", d, 1);
      !s.ok())
    return s;
  if (absl::Status s = CheckGlobalBatch(options, rank->world_size, binding->batch_size); !s.ok())
    return s;
  // Each local rank drives its own GPU unless --gpu says otherwise.
  const int32_t gpu = options.gpu.value_or(rank->distributed() ? rank->local_rank : 0);
  // A cuda step built before the device API had release_graphs keeps its
  // CUDA graphs to the process's end, and ncclCommDestroy waits for every
  // graph holding the communicator's collectives (issue 34: no rank ever
  // exited). Joined, such a step runs without graphs (read at its init).
  if (join && d.device && !tcc_device_api_has_release_graphs(d.device)) {
    ::setenv("TCC_CUDA_GRAPHS", "0", 1);
    if (rank->rank == 0)
      out << "note: step.so predates the device API's release_graphs: CUDA graphs off across "
             "ranks, so that they can exit (rebuild it with this tcc to keep them)\n";
  }

  // A cuda step that cannot fit the GPU's free memory stops here, saying
  // so, rather than at a cudaMalloc half way through the allocations.
  if (std::string(d.target) == "cuda")
    if (absl::Status s = CheckGpuMemory(ProbeMachine(gpu), d, gpu, out); !s.ok())
      return s;
  // Parameters first: an unsupported init or a bad weights file fails before
  // any data is read. A GPU step selects its GPU and allocates here.
  absl::StatusOr<std::unique_ptr<Trainer>> trainer =
      Trainer::Create(d, *binding, options.seed, gpu, rank->rank);
  if (!trainer.ok())
    return trainer.status();
  // The other ranks: joined after the GPU is selected (NCCL binds to it),
  // and only the lead rank speaks and writes; the others run the same
  // steps quietly. Every rank starts from the same seeded weights.
  std::unique_ptr<RankGroup> ranks;
  std::ostream quiet(nullptr);
  Options rank_options = options;
  if (join) {
    absl::StatusOr<double> timeout = DistTimeoutSeconds();
    if (!timeout.ok())
      return WithRank(*rank, timeout.status());
    absl::StatusOr<std::unique_ptr<RankGroup>> joined = JoinRanks(*rank, d, gpu);
    if (!joined.ok())
      return WithRank(*rank, joined.status());
    ranks = std::move(*joined);
    SetActiveRankGroup(ranks.get());
    ranks->StartWatchdog(*timeout);
    absl::Status same = CheckSameStepLibrary(*ranks, options.step_path);
    if (same.ok())
      same = CheckSameFlags(*ranks, options);
    if (!same.ok()) {
      (void)ranks.release(); // for main()'s AbortAll, as below
      return WithRank(*rank, same);
    }
    (*trainer)->set_collectives(ranks->step_collectives());
    if (ranks->is_lead())
      out << absl::StrFormat("ranks: %d, %s; this output is rank 0's\n", ranks->world_size(),
                             ranks->Describe());
    // Launchers interleave the ranks' output: plain progress lines.
    rank_options.live_progress = false;
    // Exports and samples are rank 0's (the session keeps checkpoints and
    // metrics to it). A ZeRO-3 step's functions gather the parameters, so
    // there every rank takes part in --save-weights and samples too (rank
    // 0 alone writes and prints).
    if (!ranks->is_lead()) {
      if (!ShardParameterRanks(d)) {
        rank_options.save_weights.reset();
        rank_options.sample = 0;
      }
      rank_options.save_train_outputs.reset();
    }
  }
  std::ostream &say = !ranks || ranks->is_lead() ? out : quiet;
  // The file written at the end is claimed now: a second run with the same
  // --save-weights stops here rather than replacing this one's weights.
  std::unique_ptr<PathLock> weights_lock;
  absl::Status status = absl::OkStatus();
  if (rank_options.save_weights && (!ranks || ranks->is_lead())) {
    absl::StatusOr<std::unique_ptr<PathLock>> lock =
        PathLock::Acquire(*rank_options.save_weights, "--save-weights");
    if (lock.ok())
      weights_lock = std::move(*lock);
    else
      status = lock.status();
  }
  if (status.ok())
    status = TrainOnThisRank(rank_options, d, *binding, **trainer, ranks.get(), say);
  // The communicator's end waits for the CUDA graphs that captured its
  // collectives: they go first (else every rank waited forever at exit).
  if (ranks && (status.ok() || absl::IsCancelled(status)))
    if (absl::Status released = (*trainer)->ReleaseGraphs(); !released.ok())
      status = released;
  if (ranks && absl::IsCancelled(status)) {
    // Every rank agreed to stop after the same step: end together.
    SetActiveRankGroup(nullptr);
    (void)ranks->Finish();
    return status;
  }
  if (!status.ok() && ranks) {
    // main() prints the error, then ends the other ranks through the group
    // (ActiveRankGroup), which must outlive this function: it is left to
    // the process's end on purpose.
    (void)ranks.release();
    return WithRank(*rank, status);
  }
  if (!status.ok())
    return status;
  if (ranks) {
    SetActiveRankGroup(nullptr);
    return ranks->Finish();
  }
  return absl::OkStatus();
}

namespace {

absl::Status TrainOnThisRank(const Options &options, const tcc_step_descriptor &d,
                             const StepBinding &binding, Trainer &trainer, RankGroup *ranks,
                             std::ostream &out) {
  if (absl::Status s = InitFrom(options, d, trainer, ranks ? ranks->rank() : 0, out); !s.ok())
    return s;
  // Checkpoints, resume and metrics; a resumed checkpoint may fix the
  // seed, lr and data order of the run.
  absl::StatusOr<std::unique_ptr<TrainingSession>> session =
      TrainingSession::Open(options, d, trainer, out, ranks);
  if (!session.ok())
    return session.status();
  if (ranks)
    if (absl::Status s = CheckSameStart(*ranks, trainer.steps_done()); !s.ok())
      return s;
  const Options &effective = (*session)->options();
  // --cache-frozen steps: train through encode / train_cached (after
  // --init-from and resume, so the frozen weights are final).
  std::unique_ptr<EncodeCache> cache;
  if (!options.no_encode_cache) {
    EncodeCacheOptions cache_options;
    cache_options.dir = options.encode_cache_dir;
    cache_options.limit_bytes = options.encode_cache_limit;
    // The data files (a directory's, sorted) are part of the cache's key.
    for (absl::string_view part : absl::StrSplit(options.data, ',')) {
      size_t eq = part.find('=');
      std::string path(eq == absl::string_view::npos ? part : part.substr(eq + 1));
      std::error_code ec;
      if (!std::filesystem::is_directory(path, ec)) {
        cache_options.data_files.push_back(path);
        continue;
      }
      std::vector<std::string> files;
      for (const auto &e : std::filesystem::directory_iterator(path, ec))
        if (e.is_regular_file())
          files.push_back(e.path().string());
      std::sort(files.begin(), files.end());
      cache_options.data_files.insert(cache_options.data_files.end(), files.begin(), files.end());
    }
    absl::StatusOr<std::unique_ptr<EncodeCache>> made =
        EncodeCache::Create(d, binding, trainer, cache_options, out);
    if (!made.ok())
      return made.status();
    cache = std::move(*made);
    if (cache)
      cache->Attach(trainer);
    else if (options.encode_cache_dir)
      out << "note: --encode-cache " << *options.encode_cache_dir
          << " is not used: this step has no encode entry (compile it with tcc compile "
             "--cache-frozen to cache a frozen encoder's outputs)\n";
  } else if (options.encode_cache_dir) {
    out << "note: --encode-cache " << *options.encode_cache_dir
        << " is not used: --no-encode-cache trains through the whole step\n";
  }
  absl::Status status =
      binding.is_token_model()
          ? RunTokenModel(effective, d, binding, trainer, **session, ranks, out)
      : binding.is_named_arrays()
          ? RunNamedArrays(effective, d, binding, trainer, **session, ranks, out)
          : RunImageClassifier(effective, d, binding, trainer, **session, ranks, out);
  if (status.ok() && cache)
    status = cache->Finish(out);
  // The named-arrays run leaves --save-weights to here.
  if (status.ok() && binding.is_named_arrays())
    status = SaveAtEnd(effective, d, trainer, ranks, out);
  if (!status.ok())
    return status;
  if (std::optional<GpuMemory> memory = trainer.gpu_memory())
    out << absl::StrFormat("gpu memory: %s allocated, peak %s (planned %s)\n",
                           FormatBytes(memory->allocated_bytes),
                           FormatBytes(memory->peak_allocated_bytes),
                           FormatBytes(static_cast<uint64_t>(TrainingBytes(d))));
  return (*session)->Finish();
}

} // namespace

} // namespace tcc::trun
