#include "runtime/trun/train/Trainer.h"

#include "runtime/initializers/Initializers.h"
#include "runtime/trun/base/Stopwatch.h"
#include "runtime/trun/step/StepDescriptor.h"
#include "runtime/trun/train/Sampler.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include <algorithm>

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

} // namespace

absl::StatusOr<std::unique_ptr<Trainer>>
Trainer::Create(const tcc_step_descriptor &descriptor,
                const StepBinding &binding, uint64_t seed, int32_t gpu) {
  std::unique_ptr<Trainer> t(new Trainer(descriptor, binding));
  const tcc_step_descriptor &d = descriptor;
  // On a GPU these are the host mirrors of the device arenas.
  if (absl::Status s =
          AllocateTensors(d.num_params, d.params, t->params_, t->param_ptrs_);
      !s.ok())
    return s;
  if (absl::Status s = AllocateTensors(d.num_optimizer_state, d.optimizer_state,
                                       t->optimizer_state_, t->state_ptrs_);
      !s.ok())
    return s;
  if (!t->device_) {
    if (absl::Status s = AllocateTensors(d.num_outputs, d.outputs, t->outputs_,
                                         t->output_ptrs_);
        !s.ok())
      return s;
    t->workspace_ = AlignedBuffer(static_cast<size_t>(d.workspace_bytes));
    if (!t->workspace_.ok())
      return absl::ResourceExhaustedError(absl::StrCat(
          "cannot allocate ", d.workspace_bytes, " bytes of workspace"));
  }
  if (absl::Status s =
          AllocateTensors(d.num_train_outputs, d.train_outputs,
                          t->train_outputs_, t->train_output_ptrs_);
      !s.ok())
    return s;
  t->grad_norm_output_ = FindTrainOutput(d, "grad_norm");
  if (absl::Status s =
          InitializeTensors(d.num_params, d.params, t->params_, seed);
      !s.ok())
    return s;
  if (absl::Status s = InitializeTensors(
          d.num_optimizer_state, d.optimizer_state, t->optimizer_state_, seed);
      !s.ok())
    return s;
  t->input_ptrs_.assign(d.num_inputs, nullptr);
  if (t->device_) {
    if (absl::Status s = t->AllocateDevice(gpu); !s.ok())
      return s;
    t->args_.params = t->device_params_.data();
    t->args_.optimizer_state = t->device_state_.data();
    t->args_.workspace = t->device_workspace_arena_->tensor(0);
    t->newer_ = Newer::kHost; // initialized here: uploaded by the first call
  } else {
    t->args_.params = t->param_ptrs_.data();
    t->args_.optimizer_state = t->state_ptrs_.data();
    t->args_.workspace = t->workspace_.data();
  }
  t->args_.inputs = t->input_ptrs_.data();
  t->args_.loss = &t->loss_;
  t->args_.train_outputs =
      t->train_output_ptrs_.empty() ? nullptr : t->train_output_ptrs_.data();
  // Dropout masks are a function of (rng_seed, step, op): the run's seed.
  t->args_.rng_seed = seed;
  return t;
}

Trainer::~Trainer() {
  // Train() waits for its uploads; this only guards a source still queued.
  if (device_ && uploads_queued_)
    device_->wait_uploads();
}

void Trainer::AppendSizes(int32_t count, const tcc_tensor_desc *tensors,
                          std::vector<int64_t> &sizes) {
  for (int32_t i = 0; i < count; ++i)
    sizes.push_back(tensors[i].size_bytes);
}

absl::Status Trainer::CreateArena(absl::string_view category,
                                  const std::vector<int64_t> &sizes,
                                  std::unique_ptr<DeviceArena> &into) {
  absl::StatusOr<std::unique_ptr<DeviceArena>> created =
      DeviceArena::Create(*device_, category, sizes);
  if (!created.ok())
    return absl::Status(created.status().code(),
                        absl::StrCat("step '", descriptor_.model_name, "': ",
                                     created.status().message()));
  into = std::move(*created);
  return absl::OkStatus();
}

absl::Status Trainer::AllocateDevice(int32_t gpu) {
  const tcc_device_api &device = *device_;
  const tcc_step_descriptor &d = descriptor_;
  if (absl::Status s = DeviceCallStatus(
          device, device.init(gpu),
          absl::StrCat("step '", d.model_name, "': selecting GPU ", gpu));
      !s.ok())
    return absl::FailedPreconditionError(s.message());
  auto sizes = [](int32_t count, const tcc_tensor_desc *tensors, int copies) {
    std::vector<int64_t> out;
    for (int c = 0; c < copies; ++c)
      AppendSizes(count, tensors, out);
    return out;
  };
  // Categories without tensors get no allocation; the workspace always
  // does, so the step gets a non-null pointer.
  if (d.num_params > 0) {
    if (absl::Status s = CreateArena("parameters", sizes(d.num_params, d.params, 1),
                                     device_params_arena_);
        !s.ok())
      return s;
    device_params_ = device_params_arena_->tensors();
  }
  if (d.num_optimizer_state > 0) {
    if (absl::Status s = CreateArena("optimizer state",
                                     sizes(d.num_optimizer_state, d.optimizer_state, 1),
                                     device_state_arena_);
        !s.ok())
      return s;
    device_state_ = device_state_arena_->tensors();
  }
  if (absl::Status s =
          CreateArena("workspace", {d.workspace_bytes}, device_workspace_arena_);
      !s.ok())
    return s;
  // Two input sets: batch k+1 is uploaded into one while step k reads the
  // other.
  if (absl::Status s = CreateArena("inputs", sizes(d.num_inputs, d.inputs, 2),
                                   device_inputs_arena_);
      !s.ok())
    return s;
  for (int set = 0; set < 2; ++set)
    for (int32_t i = 0; i < d.num_inputs; ++i)
      device_inputs_[set].push_back(
          device_inputs_arena_->tensor(set * d.num_inputs + i));
  if (d.num_outputs > 0) {
    if (absl::Status s = CreateArena("eval outputs", sizes(d.num_outputs, d.outputs, 1),
                                     device_outputs_arena_);
        !s.ok())
      return s;
    device_outputs_ = device_outputs_arena_->tensors();
  }
  return absl::OkStatus();
}

void Trainer::StartCall() {
  args_.step = steps_done_;
  // A step that forgets to write the loss must not pass as finite.
  loss_ = std::numeric_limits<float>::quiet_NaN();
}

void Trainer::BindBatch(HostBatch &batch, bool with_outputs) {
  input_ptrs_[binding_.data_input] = batch.data.data();
  input_ptrs_[binding_.target_input] = batch.targets.data();
  args_.outputs = with_outputs ? output_ptrs_.data() : nullptr;
  StartCall();
}

void Trainer::BindInputSet(int set, bool with_outputs) {
  for (size_t i = 0; i < input_ptrs_.size(); ++i)
    input_ptrs_[i] = device_inputs_[set][i];
  args_.outputs = with_outputs && !device_outputs_.empty()
                      ? device_outputs_.data()
                      : nullptr;
  StartCall();
}

absl::Status Trainer::CallError(absl::string_view what, int32_t status) const {
  std::string message =
      absl::StrFormat("step '%s': %s failed: returned %d (%s)",
                      descriptor_.model_name, what, status, StatusName(status));
  if (device_)
    message = WithDeviceError(*device_, message);
  return absl::InternalError(message);
}

absl::Status Trainer::CheckEvalLoss(float loss, int64_t index) const {
  if (std::isfinite(loss))
    return absl::OkStatus();
  return absl::InternalError(
      absl::StrFormat("step '%s': non-finite loss %g at eval batch %d",
                      descriptor_.model_name, loss, index));
}

// Every parameter and optimizer state tensor, host to device or back.
absl::Status Trainer::CopyParamsAndState(bool to_device) const {
  auto copy = [&](int32_t count, const tcc_tensor_desc *tensors,
                  const std::vector<void *> &host,
                  const std::vector<void *> &on_device) -> absl::Status {
    for (int32_t i = 0; i < count; ++i) {
      uint64_t bytes = static_cast<uint64_t>(tensors[i].size_bytes);
      int32_t status = to_device ? device_->to_device(on_device[i], host[i], bytes)
                                 : device_->to_host(host[i], on_device[i], bytes);
      if (absl::Status s = DeviceCallStatus(
              *device_, status,
              absl::StrCat("step '", descriptor_.model_name, "': ",
                           to_device ? "uploading '" : "downloading '", tensors[i].name,
                           to_device ? "' to the GPU" : "' from the GPU"));
          !s.ok())
        return s;
    }
    return absl::OkStatus();
  };
  const tcc_step_descriptor &d = descriptor_;
  if (absl::Status s = copy(d.num_params, d.params, param_ptrs_, device_params_); !s.ok())
    return s;
  return copy(d.num_optimizer_state, d.optimizer_state, state_ptrs_, device_state_);
}

absl::Status Trainer::SyncToHost() const {
  if (!device_ || newer_ != Newer::kDevice || !sync_error_.ok())
    return sync_error_;
  sync_error_ = CopyParamsAndState(/*to_device=*/false);
  if (sync_error_.ok())
    newer_ = Newer::kNeither;
  return sync_error_;
}

void Trainer::SyncForAccess() const {
  // A failure stays in sync_error_: the accessors cannot return it, the
  // next SyncToHost(), Train() or Evaluate() does.
  SyncToHost().IgnoreError();
}

void Trainer::SyncForWrite() {
  SyncForAccess();
  if (device_ && sync_error_.ok())
    newer_ = Newer::kHost; // the caller writes the host copy
}

absl::Status Trainer::SyncToDevice() {
  if (!sync_error_.ok())
    return sync_error_;
  if (!device_ || newer_ != Newer::kHost)
    return absl::OkStatus();
  if (absl::Status s = CopyParamsAndState(/*to_device=*/true); !s.ok())
    return s;
  newer_ = Newer::kNeither;
  return absl::OkStatus();
}

std::vector<const void *> Trainer::params() const {
  SyncForAccess();
  return std::vector<const void *>(param_ptrs_.begin(), param_ptrs_.end());
}
std::vector<void *> Trainer::mutable_params() {
  SyncForWrite();
  return param_ptrs_;
}
std::vector<const void *> Trainer::optimizer_state() const {
  SyncForAccess();
  return std::vector<const void *>(state_ptrs_.begin(), state_ptrs_.end());
}
std::vector<void *> Trainer::mutable_optimizer_state() {
  SyncForWrite();
  return state_ptrs_;
}
const void *Trainer::param(int32_t index) const {
  SyncForAccess();
  return params_[index].data();
}
void *Trainer::mutable_param(int32_t index) {
  SyncForWrite();
  return params_[index].data();
}

absl::Status Trainer::SetProfiling(bool on) {
  if (!device_) // trun refuses --profile for such steps before this
    return absl::FailedPreconditionError("profiling needs a cuda step");
  return DeviceCallStatus(*device_, device_->set_profiling(on ? 1 : 0),
                          absl::StrCat("step '", descriptor_.model_name,
                                       "': turning profiling ",
                                       on ? "on" : "off"));
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

std::optional<GpuMemory> Trainer::gpu_memory() const {
  if (!device_)
    return std::nullopt;
  return GpuMemory{device_->allocated_bytes(), device_->peak_allocated_bytes()};
}

absl::Status Trainer::QueueUpload(HostBatch &batch, int set) {
  const tcc_step_descriptor &d = descriptor_;
  void *dst[2] = {device_inputs_[set][binding_.data_input],
                  device_inputs_[set][binding_.target_input]};
  const void *src[2] = {batch.data.data(), batch.targets.data()};
  uint64_t bytes[2] = {
      static_cast<uint64_t>(d.inputs[binding_.data_input].size_bytes),
      static_cast<uint64_t>(d.inputs[binding_.target_input].size_bytes)};
  if (absl::Status s =
          DeviceCallStatus(*device_, device_->upload_async(2, dst, src, bytes),
                           absl::StrCat("step '", d.model_name,
                                        "': queueing the upload of a batch"));
      !s.ok())
    return s;
  uploads_queued_ = true;
  return absl::OkStatus();
}

absl::Status Trainer::WaitUploads() {
  if (!uploads_queued_)
    return absl::OkStatus();
  uploads_queued_ = false;
  return DeviceCallStatus(*device_, device_->wait_uploads(),
                          absl::StrCat("step '", descriptor_.model_name,
                                       "': waiting for batch uploads"));
}

absl::Status Trainer::Snapshot() {
  if (device_)
    return SnapshotOnDevice();
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

// GPU steps: the copy lives on the GPU, one device-to-device copy per
// tensor queued on the step stream before the step (nothing waits for it,
// nothing crosses the bus), and the restore is the same the other way.
absl::Status Trainer::SnapshotOnDevice() {
  // The device copies must be current before they are copied.
  if (absl::Status s = SyncToDevice(); !s.ok())
    return s;
  const tcc_step_descriptor &d = descriptor_;
  if (!device_snapshot_arena_) {
    std::vector<int64_t> sizes;
    AppendSizes(d.num_params, d.params, sizes);
    AppendSizes(d.num_optimizer_state, d.optimizer_state, sizes);
    if (absl::Status s = CreateArena(
            "the --on-nan skip copy of the weights and optimizer state", sizes,
            device_snapshot_arena_);
        !s.ok())
      return s;
  }
  return CopySnapshot(/*restore=*/false);
}

absl::Status Trainer::CopySnapshot(bool restore) {
  const tcc_step_descriptor &d = descriptor_;
  size_t k = 0;
  auto copy = [&](const tcc_tensor_desc &t, void *live) -> absl::Status {
    void *saved = device_snapshot_arena_->tensor(k++);
    return DeviceCallStatus(
        *device_,
        device_->copy_on_device(restore ? live : saved, restore ? saved : live,
                                static_cast<uint64_t>(t.size_bytes)),
        absl::StrCat("step '", d.model_name, "': --on-nan skip: ",
                     restore ? "restoring '" : "copying '", t.name,
                     "' on the GPU"));
  };
  for (int32_t i = 0; i < d.num_params; ++i)
    if (absl::Status s = copy(d.params[i], device_params_[i]); !s.ok())
      return s;
  for (int32_t i = 0; i < d.num_optimizer_state; ++i)
    if (absl::Status s = copy(d.optimizer_state[i], device_state_[i]); !s.ok())
      return s;
  return absl::OkStatus();
}

absl::Status Trainer::RestoreSnapshot() {
  if (device_) {
    // The GPU holds the restored weights; the host mirrors are stale.
    newer_ = Newer::kDevice;
    return CopySnapshot(/*restore=*/true);
  }
  size_t i = 0;
  for (AlignedBuffer &b : params_)
    std::memcpy(b.data(), snapshot_[i++].data(), b.size());
  for (AlignedBuffer &b : optimizer_state_)
    std::memcpy(b.data(), snapshot_[i++].data(), b.size());
  return absl::OkStatus();
}

absl::StatusOr<TrainSummary> Trainer::Train(BatchLoader &loader,
                                            const TrainConfig &config) {
  if (!sync_error_.ok())
    return sync_error_;
  TrainSummary summary;
  Clock::time_point loop_start = Clock::now();
  absl::Status status = TrainLoop(loader, config, summary);
  if (device_) {
    // Queued sources are loader slots: done before the loader may go.
    absl::Status waited = WaitUploads();
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
      if (absl::Status s = WaitUploads(); !s.ok())
        return s;
      batch = loader.Take(); // ready: it was peeked
      set = next_set_;
    } else {
      batch = loader.Take();
      if (device_ && batch)
        if (absl::Status s = QueueUpload(*batch, set); !s.ok())
          return s;
    }
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
          if (absl::Status s = QueueUpload(*next, 1 - set); !s.ok())
            return s;
          next_set_ = 1 - set;
        }
    }
    double wait = loader.ConsumeWaitSeconds();
    summary.data_wait_seconds += wait;
    if (config.on_nan == OnNan::kSkip)
      if (absl::Status s = Snapshot(); !s.ok())
        return s;
    if (device_)
      BindInputSet(set, /*with_outputs=*/false);
    else
      BindBatch(*batch, /*with_outputs=*/false);
    // The schedule continues from steps_done_, also across runs (resume).
    args_.learning_rate = static_cast<float>(LearningRateAt(
        descriptor_.lr_schedule, config.learning_rate, steps_done_));
    if (absl::Status s = SyncToDevice(); !s.ok())
      return s;
    Clock::time_point step_start = Clock::now();
    int32_t status = descriptor_.train(&args_);
    double step_seconds = SecondsSince(step_start);
    if (device_)
      newer_ = Newer::kDevice;
    if (status != TCC_STATUS_OK)
      return CallError(absl::StrCat("train step ", steps_done_ + 1), status);
    if (device_ && !note_printed_) {
      note_printed_ = true;
      const char *note = device_->execution_note();
      if (note && *note && config.progress)
        config.progress->Message(absl::StrCat("gpu: ", note));
    }
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
      if (absl::Status s = RestoreSnapshot(); !s.ok())
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
    if (!sync_error_.ok())
      return sync_error_;
  }
  return absl::OkStatus();
}

absl::Status Trainer::EvalBatch(HostBatch &batch, absl::string_view what) {
  if (!device_) {
    BindBatch(batch, /*with_outputs=*/true);
    int32_t status = descriptor_.eval(&args_);
    return status == TCC_STATUS_OK ? absl::OkStatus() : CallError(what, status);
  }
  if (absl::Status s = SyncToDevice(); !s.ok())
    return s;
  // Synchronous copies into the set no queued upload (a batch peeked by
  // Train, during validation) is writing.
  int set = next_set_ == 0 ? 1 : 0;
  const tcc_step_descriptor &d = descriptor_;
  for (auto [input, source] :
       {std::make_pair(binding_.data_input, batch.data.data()),
        std::make_pair(binding_.target_input,
                       static_cast<void *>(batch.targets.data()))})
    if (absl::Status s = DeviceCallStatus(
            *device_,
            device_->to_device(
                device_inputs_[set][input], source,
                static_cast<uint64_t>(d.inputs[input].size_bytes)),
            absl::StrCat("step '", d.model_name, "': uploading input '",
                         d.inputs[input].name, "' for ", what));
        !s.ok())
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
  if (!device_) {
    std::memcpy(dst, outputs_[output].as<char>() + offset,
                static_cast<size_t>(bytes));
    return absl::OkStatus();
  }
  return DeviceCallStatus(
      *device_,
      device_->to_host(dst,
                       static_cast<char *>(device_outputs_[output]) + offset,
                       static_cast<uint64_t>(bytes)),
      absl::StrCat("step '", d.model_name, "': downloading eval output '",
                   d.outputs[output].name, "'"));
}

absl::StatusOr<EvalResult> Trainer::Evaluate(BatchSource &source) {
  if (!sync_error_.ok())
    return sync_error_;
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
      logits = outputs_[binding_.logits_output].as<float>();
    }
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
