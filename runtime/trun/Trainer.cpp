#include "runtime/trun/Trainer.h"

#include "runtime/trun/Initializers.h"
#include "runtime/trun/StepDescriptor.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include <chrono>
#include <cmath>
#include <limits>

namespace tcc::trun {
namespace {

using Clock = std::chrono::steady_clock;

// Mean loss and throughput over consecutive train steps (wall time, batch
// assembly included).
struct StepWindow {
  double loss_sum = 0, grad_norm_sum = 0;
  int64_t steps = 0;
  Clock::time_point start = Clock::now();

  void Add(float loss, float grad_norm) {
    loss_sum += loss;
    grad_norm_sum += grad_norm;
    ++steps;
  }
  double MeanLoss() const { return steps ? loss_sum / steps : 0.0; }
  double MeanGradNorm() const { return steps ? grad_norm_sum / steps : 0.0; }
  double Seconds() const {
    return std::chrono::duration<double>(Clock::now() - start).count();
  }
  double SamplesPerSecond(int64_t batch_size) const {
    double seconds = Seconds();
    return seconds > 0 ? steps * batch_size / seconds : 0.0;
  }
};

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
  // "train step 17" / "eval batch 3": train counts optimizer steps, eval
  // counts batches of the test pass.
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

absl::Status Trainer::Train(BatchSource &source, const TrainConfig &config,
                            std::ostream &log) {
  HostBatch batch(binding_);
  const int64_t batch_size = binding_.batch_size;
  StepWindow since_log, since_epoch, whole_run;
  for (int64_t i = 0; i < config.steps; ++i) {
    if (!source.Next(batch))
      return absl::InternalError("training data ran out");
    BindBatch(batch, /*with_outputs=*/false);
    // The schedule continues from steps_done_, also across Train calls.
    args_.learning_rate = static_cast<float>(LearningRateAt(
        descriptor_.lr_schedule, config.learning_rate, steps_done_));
    int32_t status = descriptor_.train(&args_);
    if (absl::Status s = CheckCall("train", status, loss_, steps_done_);
        !s.ok())
      return s;
    ++steps_done_;
    float grad_norm =
        grad_norm_output_ == -1
            ? 0.0f
            : *train_outputs_[grad_norm_output_].as<float>();
    for (StepWindow *window : {&since_log, &since_epoch, &whole_run})
      window->Add(loss_, grad_norm);
    if (config.log_every > 0 && (i + 1) % config.log_every == 0) {
      // lr: this step's; grad norm (before clipping): the window's mean.
      std::string norm =
          grad_norm_output_ == -1
              ? ""
              : absl::StrFormat("  grad norm %.3g", since_log.MeanGradNorm());
      log << absl::StrFormat("step %d/%d  loss %.4f  lr %.3g%s  %.0f samples/s\n",
                             i + 1, config.steps, since_log.MeanLoss(),
                             args_.learning_rate, norm,
                             since_log.SamplesPerSecond(batch_size))
          << std::flush;
      since_log = StepWindow();
    }
    if (config.steps_per_epoch > 0 && (i + 1) % config.steps_per_epoch == 0) {
      log << absl::StrFormat(
                 "epoch %d done: mean loss %.4f  %d steps in %.2f s  %.0f "
                 "samples/s\n",
                 (i + 1) / config.steps_per_epoch, since_epoch.MeanLoss(),
                 since_epoch.steps, since_epoch.Seconds(),
                 since_epoch.SamplesPerSecond(batch_size))
          << std::flush;
      since_epoch = StepWindow();
    }
    if (config.after_step)
      if (absl::Status s = config.after_step(i + 1); !s.ok())
        return s;
  }
  log << absl::StrFormat("trained %d steps in %.2f s (%.0f samples/s)\n",
                         whole_run.steps, whole_run.Seconds(),
                         whole_run.SamplesPerSecond(batch_size));
  return absl::OkStatus();
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
