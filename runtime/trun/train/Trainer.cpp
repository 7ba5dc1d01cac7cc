#include "runtime/trun/train/Trainer.h"

#include "runtime/trun/base/Stopwatch.h"
#include "runtime/trun/dist/RankGroup.h"
#include "runtime/trun/step/DeviceMemory.h"
#include "runtime/trun/step/StepDescriptor.h"
#include "runtime/trun/train/Logits.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include <algorithm>
#include <cmath>
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

} // namespace

absl::StatusOr<std::unique_ptr<Trainer>>
Trainer::Create(const tcc_step_descriptor &descriptor,
                const StepBinding &binding, uint64_t seed, int32_t gpu, int32_t rank) {
  std::unique_ptr<Trainer> t(new Trainer(descriptor, binding));
  const tcc_step_descriptor &d = descriptor;
  absl::StatusOr<std::unique_ptr<StepBuffers>> buffers =
      StepBuffers::Create(d, seed, gpu, rank);
  if (!buffers.ok())
    return buffers.status();
  t->buffers_ = std::move(*buffers);
  t->grad_norm_output_ = FindTrainOutput(d, "grad_norm");
  t->loss_scale_output_ = FindTrainOutput(d, "loss_scale");
  t->skipped_output_ = FindTrainOutput(d, "skipped");
  t->skipped_steps_output_ = FindTrainOutput(d, "skipped_steps");
  t->fp8_state_ = FindFp8ScalingState(d);
  t->input_ptrs_.assign(d.num_inputs, nullptr);
  t->args_.params = t->buffers_->params_for_call();
  t->args_.optimizer_state = t->buffers_->optimizer_state_for_call();
  t->args_.workspace = t->buffers_->workspace_for_call();
  t->args_.buffers = t->buffers_->buffers_for_call(); // batch norm's statistics
  t->args_.inputs = t->input_ptrs_.data();
  t->args_.loss = &t->loss_;
  t->args_.train_outputs = t->buffers_->train_outputs_for_call();
  // Dropout masks are a function of (rng_seed, step, op): the run's seed.
  t->args_.rng_seed = seed;
  return t;
}

void Trainer::StartCall() {
  args_.step = steps_done_;
  // A step that forgets to write the loss must not pass as finite.
  loss_ = std::numeric_limits<float>::quiet_NaN();
}

void Trainer::BindBatch(HostBatch &batch, bool with_outputs) {
  for (auto [input, data] : batch.Inputs(binding_))
    input_ptrs_[input] = data; // the step reads its inputs only
  args_.outputs = with_outputs ? buffers_->outputs_for_call() : nullptr;
  StartCall();
}

void Trainer::BindInputSet(int set, bool with_outputs) {
  for (size_t i = 0; i < input_ptrs_.size(); ++i)
    input_ptrs_[i] = buffers_->device_input(set, static_cast<int32_t>(i));
  args_.outputs = with_outputs ? buffers_->outputs_for_call() : nullptr;
  StartCall();
}

absl::Status Trainer::CallError(absl::string_view what, int32_t status) const {
  std::string message =
      absl::StrFormat("step '%s': %s failed: returned %d (%s)",
                      descriptor_.model_name, what, status, StatusName(status));
  if (device_)
    message = WithDeviceError(*device_, message);
  if (std::string collective = LastCollectiveError(); !collective.empty())
    message += "; the collective: " + collective;
  return absl::InternalError(message);
}

absl::Status Trainer::CheckEvalLoss(float loss, int64_t index) const {
  if (std::isfinite(loss))
    return absl::OkStatus();
  return absl::InternalError(
      absl::StrFormat("step '%s': non-finite loss %g at eval batch %d",
                      descriptor_.model_name, loss, index));
}

absl::Status Trainer::SetProfiling(bool on) {
  if (!device_) // trun refuses --profile for such steps before this
    return absl::FailedPreconditionError("profiling needs a cuda step");
  return DeviceCallStatus(*device_, device_->set_profiling(on ? 1 : 0),
                          absl::StrCat("step '", descriptor_.model_name,
                                       "': turning profiling ",
                                       on ? "on" : "off"));
}

absl::Status Trainer::ReleaseGraphs() {
  if (!device_ || !tcc_device_api_has_release_graphs(device_))
    return absl::OkStatus();
  return DeviceCallStatus(*device_, device_->release_graphs(),
                          absl::StrCat("step '", descriptor_.model_name,
                                       "': releasing its CUDA graphs"));
}

absl::StatusOr<std::vector<tcc_launch_time>> Trainer::ReadProfile() const {
  if (!device_)
    return std::vector<tcc_launch_time>();
  int32_t n = device_->profile_read(nullptr, 0);
  std::vector<tcc_launch_time> launches(n > 0 ? n : 0);
  if (n > 0)
    n = device_->profile_read(launches.data(), n);
  if (n < 0)
    return absl::InternalError(WithDeviceError(
        *device_, absl::StrCat("step '", descriptor_.model_name,
                               "': reading the profile failed")));
  launches.resize(std::min<size_t>(launches.size(), n));
  return launches;
}

GemmChoices Trainer::ReadGemmChoices(const std::vector<tcc_launch_time> &launches) const {
  GemmChoices choices;
  if (!device_ || !tcc_device_api_has_gemm_choice(device_))
    return choices;
  for (const tcc_launch_time &l : launches) {
    tcc_gemm_choice c{};
    if (l.entry != 0 || device_->gemm_choice(0, l.launch, &c) != 1)
      continue;
    auto text = [](const char *s) { return std::string(s ? s : ""); };
    choices[l.launch] = GemmChoiceInfo{text(c.descriptor), text(c.algorithm), text(c.source),
                                       c.best_ms, c.heuristic_ms};
  }
  return choices;
}

std::optional<GpuMemory> Trainer::gpu_memory() const {
  if (!device_)
    return std::nullopt;
  return GpuMemory{device_->allocated_bytes(), device_->peak_allocated_bytes()};
}

absl::StatusOr<TrainSummary> Trainer::Train(BatchLoader &loader,
                                            const TrainConfig &config) {
  if (!buffers_->sync_error().ok())
    return buffers_->sync_error();
  TrainSummary summary;
  Clock::time_point loop_start = Clock::now();
  absl::Status status = TrainLoop(loader, config, summary);
  if (device_) {
    // Queued sources are loader slots: done before the loader may go.
    absl::Status waited = buffers_->WaitUploads();
    if (status.ok())
      status = waited;
    next_set_ = -1; // a peeked batch stays in the loader, not taken
  }
  if (!status.ok())
    return status;
  summary.seconds = SecondsSince(loop_start);
  return summary;
}

absl::Status Trainer::TrainLoop(BatchLoader &loader, const TrainConfig &config,
                                TrainSummary &summary) {
  double epoch_loss = 0;
  int64_t epoch_steps = 0, consecutive_skips = 0;
  Clock::time_point epoch_start = Clock::now();
  while (steps_done_ < config.steps) {
    if (config.stop_requested && config.stop_requested->load()) {
      summary.interrupted = true;
      break;
    }
    HostBatch *batch = nullptr;
    int set = 0; // GPU steps: the input set this step reads
    if (device_ && next_set_ != -1) {
      // This batch was peeked, and its upload queued, during the previous
      // step. Taking it hands the previous batch's slot back to the
      // loader, which may refill it at once: its upload must be done.
      if (absl::Status s = buffers_->WaitUploads(); !s.ok())
        return s;
      batch = loader.Take(); // ready: it was peeked
      set = next_set_;
    } else {
      batch = loader.Take();
      if (device_ && batch)
        if (absl::Status s = buffers_->QueueUpload(*batch, binding_, set);
            !s.ok())
          return s;
    }
    if (!batch && !loader.error().ok())
      return loader.error();
    if (!batch)
      return loader.slots_allocated()
                 ? absl::InternalError("training data ran out")
                 : absl::ResourceExhaustedError(
                       "cannot allocate the batch loader's buffers");
    if (device_) {
      // Batch k+1 goes up on the copy stream while step k computes.
      next_set_ = -1;
      if (steps_done_ + 1 < config.steps)
        if (HostBatch *next = loader.Peek()) {
          if (absl::Status s = buffers_->QueueUpload(*next, binding_, 1 - set);
              !s.ok())
            return s;
          next_set_ = 1 - set;
        }
    }
    double wait = loader.ConsumeWaitSeconds();
    summary.data_wait_seconds += wait;
    if (config.on_nan == OnNan::kSkip)
      if (absl::Status s = buffers_->Snapshot(); !s.ok())
        return s;
    if (device_)
      BindInputSet(set, /*with_outputs=*/false);
    else
      BindBatch(*batch, /*with_outputs=*/false);
    // The schedule continues from steps_done_, also across runs (resume).
    args_.learning_rate = static_cast<float>(LearningRateAt(
        descriptor_.lr_schedule, config.learning_rate, steps_done_));
    if (absl::Status s = buffers_->SyncToDevice(); !s.ok())
      return s;
    Clock::time_point step_start = Clock::now();
    // An encode cache (EncodeCache.h) trains through @train_cached instead.
    int32_t status = train_hook_ ? train_hook_(*batch, args_) : descriptor_.train(&args_);
    double step_seconds = SecondsSince(step_start);
    buffers_->DeviceWritten();
    if (status != TCC_STATUS_OK)
      return CallError(absl::StrCat("train step ", steps_done_ + 1), status);
    if (device_ && !note_printed_) {
      ++device_train_calls_;
      // How the first call chose its cuBLASLt algorithms (searched, cached).
      const char *gemm = device_train_calls_ == 1 && tcc_device_api_has_gemm_choice(device_)
                             ? device_->gemm_note()
                             : "";
      if (gemm && *gemm && config.progress)
        config.progress->Message(absl::StrCat("gpu: ", gemm));
      // The step runs its first call kernel by kernel (making those plans)
      // and captures its CUDA graph at the second: that call's note says
      // how the rest run (the first's, when the run has one step).
      if (device_train_calls_ >= 2 || steps_done_ + 1 >= config.steps) {
        note_printed_ = true;
        const char *note = device_->execution_note();
        if (note && *note && config.progress)
          config.progress->Message(absl::StrCat("gpu: ", note));
      }
    }
    ++summary.steps;
    StepRecord record;
    record.step = steps_done_ + 1;
    record.loss = loss_;
    record.learning_rate = args_.learning_rate;
    if (grad_norm_output_ != -1)
      record.grad_norm = *static_cast<const float *>(
          buffers_->train_output(grad_norm_output_));
    record.step_seconds = step_seconds;
    record.data_wait_seconds = wait;
    record.items = config.items_per_step;
    ReadLossScaling(record, summary);
    if (fp8_state_ != -1 && config.read_fp8_scaling && config.progress &&
        config.progress->ShowsLineAt(record.step)) {
      absl::StatusOr<Fp8ScalingSummary> fp8 = ReadFp8Scaling();
      if (!fp8.ok())
        return fp8.status();
      record.fp8 = *fp8;
    }
    // Loss scaling: an overflowing step's gradients (and so its grad norm)
    // are not finite, and the step already kept the old weights.
    bool finite = std::isfinite(loss_) &&
                  (!record.grad_norm || std::isfinite(*record.grad_norm) ||
                   record.overflow);
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
      if (absl::Status s = buffers_->RestoreSnapshot(); !s.ok())
        return s;
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
    // A checkpoint in after_step reads the weights through the accessors.
    if (!buffers_->sync_error().ok())
      return buffers_->sync_error();
  }
  return absl::OkStatus();
}

void Trainer::ReadLossScaling(StepRecord &record, TrainSummary &summary) const {
  auto value = [&](int32_t output) {
    return *static_cast<const float *>(buffers_->train_output(output));
  };
  if (loss_scale_output_ != -1) {
    record.loss_scale = value(loss_scale_output_);
    summary.last_loss_scale = record.loss_scale;
  }
  if (skipped_output_ != -1 && value(skipped_output_) != 0) {
    record.overflow = true;
    ++summary.overflow_skipped;
  }
  if (skipped_steps_output_ != -1) {
    record.skipped_steps = static_cast<int64_t>(value(skipped_steps_output_));
    summary.run_skipped_steps = record.skipped_steps;
  }
}

absl::StatusOr<Fp8ScalingSummary> Trainer::ReadFp8Scaling() {
  const tcc_tensor_desc &t = descriptor_.optimizer_state[fp8_state_];
  fp8_records_.resize(static_cast<size_t>(t.num_elements));
  if (absl::Status s = buffers_->ReadOptimizerState(fp8_state_, fp8_records_.data());
      !s.ok())
    return s;
  return SummarizeFp8Scaling(fp8_records_.data(), t.shape[0]);
}

absl::Status Trainer::EvalBatch(HostBatch &batch, absl::string_view what) {
  if (!device_) {
    BindBatch(batch, /*with_outputs=*/true);
    int32_t status = descriptor_.eval(&args_);
    return status == TCC_STATUS_OK ? absl::OkStatus() : CallError(what, status);
  }
  if (absl::Status s = buffers_->SyncToDevice(); !s.ok())
    return s;
  // Synchronous copies into the set no queued upload (a batch peeked by
  // Train, during validation) is writing.
  int set = next_set_ == 0 ? 1 : 0;
  if (absl::Status s = buffers_->UploadBatch(batch, binding_, set, what);
      !s.ok())
    return s;
  if (absl::Status s = buffers_->EnsureDeviceOutputs(); !s.ok())
    return s;
  BindInputSet(set, /*with_outputs=*/true);
  int32_t status = descriptor_.eval(&args_);
  return status == TCC_STATUS_OK ? absl::OkStatus() : CallError(what, status);
}

absl::Status Trainer::ReadOutput(int32_t output, int64_t offset, int64_t bytes,
                                 void *dst) const {
  const tcc_step_descriptor &d = descriptor_;
  if (output < 0 || output >= d.num_outputs || offset < 0 || bytes < 0 ||
      offset > d.outputs[output].size_bytes - bytes)
    return absl::InvalidArgumentError(
        absl::StrCat("step '", d.model_name, "': no bytes [", offset, ", ",
                     offset + bytes, ") in eval output #", output));
  return buffers_->CopyOutput(output, offset, bytes, dst);
}

absl::StatusOr<EvalResult> Trainer::Evaluate(BatchSource &source) {
  if (!buffers_->sync_error().ok())
    return buffers_->sync_error();
  HostBatch batch(binding_);
  EvalResult result;
  result.has_accuracy = binding_.logits_output != -1;
  // (B, classes): downloaded from a GPU step, else read in place.
  std::vector<float> downloaded;
  double weighted_loss = 0;
  for (int64_t index = 0; source.Next(batch); ++index) {
    if (absl::Status s = EvalBatch(batch, absl::StrCat("eval batch ", index));
        !s.ok())
      return s;
    if (absl::Status s = CheckEvalLoss(loss_, index); !s.ok())
      return s;
    // The step's loss is a mean over all B rows, padding included: weight it
    // by the real rows so a padded batch counts as much as its real data.
    weighted_loss += static_cast<double>(loss_) * batch.real_rows;
    result.samples += batch.real_rows;
    if (!result.has_accuracy)
      continue;
    const float *logits = nullptr; // (B, classes)
    if (device_) {
      downloaded.resize(binding_.batch_size * binding_.num_classes);
      if (absl::Status s = ReadOutput(
              binding_.logits_output, 0,
              static_cast<int64_t>(downloaded.size() * sizeof(float)),
              downloaded.data());
          !s.ok())
        return s;
      logits = downloaded.data();
    } else {
      logits = static_cast<const float *>(
          buffers_->host_output(binding_.logits_output));
    }
    const int32_t *labels = batch.targets.as<int32_t>(); // (B)
    // Named arrays: i32 or i64 labels in their input's buffer.
    const int32_t label_dtype =
        binding_.is_named_arrays()
            ? descriptor_.inputs[binding_.target_input].dtype
            : TCC_DTYPE_I32;
    for (int64_t row = 0; row < batch.real_rows; ++row)
      if (ArgMax(logits + row * binding_.num_classes, binding_.num_classes) ==
          (binding_.is_named_arrays()
               ? batch.ArrayLabel(binding_, label_dtype, row)
               : labels[row]))
        ++result.correct;
  }
  if (absl::Status s = source.error(); !s.ok())
    return s;
  result.mean_loss = result.samples ? weighted_loss / result.samples : 0.0;
  return result;
}

} // namespace tcc::trun
