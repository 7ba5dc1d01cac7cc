#include "runtime/trun/Trainer.h"

#include "runtime/trun/Initializers.h"
#include "runtime/trun/StepDescriptor.h"
#include "runtime/trun/Stopwatch.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace tcc::trun {
namespace {

const char *StatusName(int32_t status) {
  switch (status) {
  case TCC_STATUS_BAD_ARGS:
    return "TCC_STATUS_BAD_ARGS";
  case TCC_STATUS_RUNTIME_ERROR:
    return "TCC_STATUS_RUNTIME_ERROR";
  default:
    return "unknown status";
  }
}

absl::Status AllocateTensors(int32_t count, const tcc_tensor_desc *tensors,
                             std::vector<AlignedBuffer> &buffers,
                             std::vector<void *> &pointers) {
  for (int32_t i = 0; i < count; ++i) {
    buffers.emplace_back(static_cast<size_t>(tensors[i].size_bytes));
    if (!buffers.back().ok())
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot allocate ", tensors[i].size_bytes,
                       " bytes for '", tensors[i].name, "'"));
    pointers.push_back(buffers.back().data());
  }
  return absl::OkStatus();
}

absl::Status InitializeTensors(int32_t count, const tcc_tensor_desc *tensors,
                               std::vector<AlignedBuffer> &buffers,
                               uint64_t seed) {
  for (int32_t i = 0; i < count; ++i)
    if (absl::Status s = InitializeTensor(tensors[i], seed, buffers[i].data());
        !s.ok())
      return s;
  return absl::OkStatus();
}

// Index of the largest of `n` values; the first one on ties.
int64_t ArgMax(const float *values, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (values[i] > values[best])
      best = i;
  return best;
}

} // namespace

absl::StatusOr<std::unique_ptr<Trainer>>
Trainer::Create(const tcc_step_descriptor &descriptor,
                const StepBinding &binding, uint64_t seed) {
  std::unique_ptr<Trainer> t(new Trainer(descriptor, binding));
  const tcc_step_descriptor &d = descriptor;
  if (absl::Status s =
          AllocateTensors(d.num_params, d.params, t->params_, t->param_ptrs_);
      !s.ok())
    return s;
  if (absl::Status s = AllocateTensors(d.num_optimizer_state, d.optimizer_state,
                                       t->optimizer_state_, t->state_ptrs_);
      !s.ok())
    return s;
  if (absl::Status s = AllocateTensors(d.num_outputs, d.outputs, t->outputs_,
                                       t->output_ptrs_);
      !s.ok())
    return s;
  if (absl::Status s =
          AllocateTensors(d.num_train_outputs, d.train_outputs,
                          t->train_outputs_, t->train_output_ptrs_);
      !s.ok())
    return s;
  t->grad_norm_output_ = FindTrainOutput(d, "grad_norm");
  t->workspace_ = AlignedBuffer(static_cast<size_t>(d.workspace_bytes));
  if (!t->workspace_.ok())
    return absl::ResourceExhaustedError(absl::StrCat(
        "cannot allocate ", d.workspace_bytes, " bytes of workspace"));
  if (absl::Status s =
          InitializeTensors(d.num_params, d.params, t->params_, seed);
      !s.ok())
    return s;
  if (absl::Status s = InitializeTensors(
          d.num_optimizer_state, d.optimizer_state, t->optimizer_state_, seed);
      !s.ok())
    return s;
  t->input_ptrs_.assign(d.num_inputs, nullptr);
  t->args_.params = t->param_ptrs_.data();
  t->args_.optimizer_state = t->state_ptrs_.data();
  t->args_.inputs = t->input_ptrs_.data();
  t->args_.workspace = t->workspace_.data();
  t->args_.loss = &t->loss_;
  t->args_.train_outputs =
      t->train_output_ptrs_.empty() ? nullptr : t->train_output_ptrs_.data();
  // Dropout masks are a function of (rng_seed, step, op): the run's seed.
  t->args_.rng_seed = seed;
  return t;
}

void Trainer::BindBatch(HostBatch &batch, bool with_outputs) {
  input_ptrs_[binding_.data_input] = batch.data.data();
  input_ptrs_[binding_.target_input] = batch.targets.data();
  args_.outputs = with_outputs ? output_ptrs_.data() : nullptr;
  args_.step = steps_done_;
  // A step that forgets to write the loss must not pass as finite.
  loss_ = std::numeric_limits<float>::quiet_NaN();
}

absl::Status Trainer::CheckCall(const char *entry, int32_t status, float loss,
                                int64_t index) const {
  // "train step 17" / "eval batch 3": train steps count from 1 like the
  // progress line, the metrics and the checkpoints (step 17 is the call
  // with args.step 16); eval counts batches of the pass from 0.
  std::string where = absl::StrCat(
      entry, std::string(entry) == "train" ? " step " : " batch ", index);
  if (status != TCC_STATUS_OK)
    return absl::InternalError(absl::StrFormat(
        "step '%s': %s failed: returned %d (%s)", descriptor_.model_name, where,
        status, StatusName(status)));
  if (!std::isfinite(loss))
    return absl::InternalError(
        absl::StrFormat("step '%s': non-finite loss %g at %s",
                        descriptor_.model_name, loss, where));
  return absl::OkStatus();
}

std::vector<const void *> Trainer::params() const {
  return std::vector<const void *>(param_ptrs_.begin(), param_ptrs_.end());
}
std::vector<void *> Trainer::mutable_params() { return param_ptrs_; }
std::vector<const void *> Trainer::optimizer_state() const {
  return std::vector<const void *>(state_ptrs_.begin(), state_ptrs_.end());
}
std::vector<void *> Trainer::mutable_optimizer_state() { return state_ptrs_; }

absl::Status Trainer::Snapshot() {
  std::vector<AlignedBuffer *> sources;
  for (AlignedBuffer &b : params_)
    sources.push_back(&b);
  for (AlignedBuffer &b : optimizer_state_)
    sources.push_back(&b);
  if (snapshot_.empty()) {
    for (AlignedBuffer *b : sources) {
      snapshot_.emplace_back(b->size());
      if (!snapshot_.back().ok())
        return absl::ResourceExhaustedError(absl::StrCat(
            "--on-nan skip: cannot allocate ", b->size(),
            " bytes for a copy of the weights and optimizer state"));
    }
  }
  for (size_t i = 0; i < sources.size(); ++i)
    std::memcpy(snapshot_[i].data(), sources[i]->data(), sources[i]->size());
  return absl::OkStatus();
}

void Trainer::RestoreSnapshot() {
  size_t i = 0;
  for (AlignedBuffer &b : params_)
    std::memcpy(b.data(), snapshot_[i++].data(), b.size());
  for (AlignedBuffer &b : optimizer_state_)
    std::memcpy(b.data(), snapshot_[i++].data(), b.size());
}

absl::StatusOr<TrainSummary> Trainer::Train(BatchLoader &loader,
                                            const TrainConfig &config) {
  TrainSummary summary;
  Clock::time_point loop_start = Clock::now();
  double epoch_loss = 0;
  int64_t epoch_steps = 0, consecutive_skips = 0;
  Clock::time_point epoch_start = loop_start;
  while (steps_done_ < config.steps) {
    if (config.stop_requested && config.stop_requested->load()) {
      summary.interrupted = true;
      break;
    }
    HostBatch *batch = loader.Take();
    double wait = loader.ConsumeWaitSeconds();
    summary.data_wait_seconds += wait;
    if (!batch)
      return loader.slots_allocated()
                 ? absl::InternalError("training data ran out")
                 : absl::ResourceExhaustedError(
                       "cannot allocate the batch loader's buffers");
    if (config.on_nan == OnNan::kSkip)
      if (absl::Status s = Snapshot(); !s.ok())
        return s;
    BindBatch(*batch, /*with_outputs=*/false);
    // The schedule continues from steps_done_, also across runs (resume).
    args_.learning_rate = static_cast<float>(LearningRateAt(
        descriptor_.lr_schedule, config.learning_rate, steps_done_));
    Clock::time_point step_start = Clock::now();
    int32_t status = descriptor_.train(&args_);
    double step_seconds = SecondsSince(step_start);
    if (status != TCC_STATUS_OK)
      return CheckCall("train", status, loss_, steps_done_ + 1);
    ++summary.steps;
    StepRecord record;
    record.step = steps_done_ + 1;
    record.loss = loss_;
    record.learning_rate = args_.learning_rate;
    if (grad_norm_output_ != -1)
      record.grad_norm = *train_outputs_[grad_norm_output_].as<float>();
    record.step_seconds = step_seconds;
    record.data_wait_seconds = wait;
    record.items = config.items_per_step;
    bool finite = std::isfinite(loss_) &&
                  (!record.grad_norm || std::isfinite(*record.grad_norm));
    if (!finite) {
      std::string what = absl::StrFormat(
          "step '%s': non-finite %s at train step %d (loss %g%s)",
          descriptor_.model_name,
          std::isfinite(loss_) ? "gradient norm" : "loss", steps_done_ + 1,
          loss_,
          record.grad_norm ? absl::StrFormat(", grad norm %g", *record.grad_norm)
                           : "");
      if (config.on_nan == OnNan::kStop)
        return absl::DataLossError(what);
      RestoreSnapshot();
      record.skipped = true;
      ++summary.skipped;
      if (++consecutive_skips >= kMaxConsecutiveSkips)
        return absl::DataLossError(absl::StrCat(
            what, "; ", consecutive_skips,
            " steps in a row skipped (--on-nan skip), giving up"));
      if (config.progress)
        config.progress->Message(
            absl::StrCat("warning: ", what, "; update undone (--on-nan skip)"));
    } else {
      consecutive_skips = 0;
    }
    ++steps_done_;
    if (config.progress)
      config.progress->OnStep(record);
    if (config.metrics)
      if (absl::Status s = config.metrics->WriteStep(record, config.unit);
          !s.ok())
        return s;
    if (!record.skipped) {
      epoch_loss += loss_;
      ++epoch_steps;
    }
    if (config.steps_per_epoch > 0 &&
        steps_done_ % config.steps_per_epoch == 0 && config.progress) {
      double seconds = SecondsSince(epoch_start);
      config.progress->Message(absl::StrFormat(
          "epoch %d done: mean loss %.4f  %d steps in %.2f s  %.0f %s/s",
          steps_done_ / config.steps_per_epoch,
          epoch_steps ? epoch_loss / epoch_steps : 0.0, epoch_steps, seconds,
          seconds > 0 ? epoch_steps * config.items_per_step / seconds : 0.0,
          config.unit));
      epoch_loss = 0;
      epoch_steps = 0;
      epoch_start = Clock::now();
    }
    if (config.after_step)
      if (absl::Status s = config.after_step(steps_done_); !s.ok())
        return s;
  }
  summary.seconds = SecondsSince(loop_start);
  return summary;
}

absl::StatusOr<EvalResult> Trainer::Evaluate(BatchSource &source) {
  HostBatch batch(binding_);
  EvalResult result;
  result.has_accuracy = binding_.logits_output != -1;
  double weighted_loss = 0;
  for (int64_t index = 0; source.Next(batch); ++index) {
    BindBatch(batch, /*with_outputs=*/true);
    int32_t status = descriptor_.eval(&args_);
    if (absl::Status s = CheckCall("eval", status, loss_, index); !s.ok())
      return s;
    // The step's loss is a mean over all B rows, padding included: weight it
    // by the real rows so a padded batch counts as much as its real data.
    weighted_loss += static_cast<double>(loss_) * batch.real_rows;
    result.samples += batch.real_rows;
    if (!result.has_accuracy)
      continue;
    const float *logits =
        outputs_[binding_.logits_output].as<float>();   // (B, classes)
    const int32_t *labels = batch.targets.as<int32_t>(); // (B)
    for (int64_t row = 0; row < batch.real_rows; ++row)
      if (ArgMax(logits + row * binding_.num_classes, binding_.num_classes) ==
          labels[row])
        ++result.correct;
  }
  result.mean_loss = result.samples ? weighted_loss / result.samples : 0.0;
  return result;
}

} // namespace tcc::trun
