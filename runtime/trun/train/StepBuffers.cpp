#include "runtime/trun/train/StepBuffers.h"

#include "runtime/trun/step/StepDescriptor.h"

#include "runtime/initializers/Initializers.h"

#include "absl/strings/str_cat.h"

#include <cstring>

namespace tcc::trun {
namespace {

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

absl::StatusOr<std::unique_ptr<StepBuffers>>
StepBuffers::Create(const tcc_step_descriptor &descriptor, uint64_t seed,
                    int32_t gpu, int32_t shard_rank) {
  std::unique_ptr<StepBuffers> t(new StepBuffers(descriptor));
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
  t->num_buffers_ = tcc_step_descriptor_has_buffers(&d) ? d.num_buffers : 0;
  if (absl::Status s = AllocateTensors(t->num_buffers_, d.buffers, t->buffers_,
                                       t->buffer_ptrs_);
      !s.ok())
    return s;
  if (absl::Status s = InitializeTensors(t->num_buffers_, d.buffers, t->buffers_, seed);
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
  if (absl::Status s =
          InitializeTensors(d.num_params, d.params, t->params_, seed);
      !s.ok())
    return s;
  // ZeRO-3: a rank's shard holds the values the whole parameter has at its
  // elements, so every world size starts from the same weights.
  for (int32_t i = 0; i < d.num_params && shard_rank > 0; ++i) {
    bool sharded = false;
    WholeParam(d, i, &sharded);
    if (sharded)
      if (absl::Status s = InitializeTensor(d.params[i], seed, t->params_[i].data(),
                                            shard_rank * d.params[i].num_elements);
          !s.ok())
        return s;
  }
  if (absl::Status s = InitializeTensors(
          d.num_optimizer_state, d.optimizer_state, t->optimizer_state_, seed);
      !s.ok())
    return s;
  if (t->device_) {
    if (absl::Status s = t->AllocateDevice(gpu); !s.ok())
      return s;
    t->newer_ = Newer::kHost; // initialized here: uploaded by the first call
  }
  return t;
}

StepBuffers::~StepBuffers() {
  // Train() waits for its uploads; this only guards a source still queued.
  if (device_ && uploads_queued_)
    device_->wait_uploads();
}

void **StepBuffers::params_for_call() {
  return device_ ? device_params_.data() : param_ptrs_.data();
}

void **StepBuffers::optimizer_state_for_call() {
  return device_ ? device_state_.data() : state_ptrs_.data();
}

void **StepBuffers::buffers_for_call() {
  if (num_buffers_ == 0)
    return nullptr;
  return device_ ? device_buffers_.data() : buffer_ptrs_.data();
}

void *StepBuffers::workspace_for_call() {
  return device_ ? device_workspace_arena_->tensor(0) : workspace_.data();
}

void **StepBuffers::outputs_for_call() {
  if (!device_)
    return output_ptrs_.data();
  return device_outputs_.empty() ? nullptr : device_outputs_.data();
}

void **StepBuffers::train_outputs_for_call() {
  return train_output_ptrs_.empty() ? nullptr : train_output_ptrs_.data();
}

void StepBuffers::AppendSizes(int32_t count, const tcc_tensor_desc *tensors,
                          std::vector<int64_t> &sizes) {
  for (int32_t i = 0; i < count; ++i)
    sizes.push_back(tensors[i].size_bytes);
}

absl::Status StepBuffers::CreateArena(absl::string_view category,
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

absl::Status StepBuffers::AllocateDevice(int32_t gpu) {
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
  if (num_buffers_ > 0) {
    if (absl::Status s = CreateArena("buffers", sizes(num_buffers_, d.buffers, 1),
                                     device_buffers_arena_);
        !s.ok())
      return s;
    device_buffers_ = device_buffers_arena_->tensors();
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
  // Eval outputs: EnsureDeviceOutputs, on the first eval that reads them.
  return absl::OkStatus();
}

// Every parameter and optimizer state tensor, host to device or back.
absl::Status StepBuffers::CopyParamsAndState(bool to_device) const {
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
  if (absl::Status s = copy(num_buffers_, d.buffers, buffer_ptrs_, device_buffers_); !s.ok())
    return s;
  return copy(d.num_optimizer_state, d.optimizer_state, state_ptrs_, device_state_);
}

absl::Status StepBuffers::SyncToHost() const {
  if (!device_ || newer_ != Newer::kDevice || !sync_error_.ok())
    return sync_error_;
  sync_error_ = CopyParamsAndState(/*to_device=*/false);
  if (sync_error_.ok())
    newer_ = Newer::kNeither;
  return sync_error_;
}

void StepBuffers::SyncForAccess() const {
  // A failure stays in sync_error_: the accessors cannot return it, the
  // next SyncToHost(), Train() or Evaluate() does.
  SyncToHost().IgnoreError();
}

void StepBuffers::SyncForWrite() {
  SyncForAccess();
  if (device_ && sync_error_.ok())
    newer_ = Newer::kHost; // the caller writes the host copy
}

absl::Status StepBuffers::SyncToDevice() {
  if (!sync_error_.ok())
    return sync_error_;
  if (!device_ || newer_ != Newer::kHost)
    return absl::OkStatus();
  if (absl::Status s = CopyParamsAndState(/*to_device=*/true); !s.ok())
    return s;
  newer_ = Newer::kNeither;
  return absl::OkStatus();
}

std::vector<const void *> StepBuffers::params() const {
  SyncForAccess();
  return std::vector<const void *>(param_ptrs_.begin(), param_ptrs_.end());
}
std::vector<void *> StepBuffers::mutable_params() {
  SyncForWrite();
  return param_ptrs_;
}
std::vector<const void *> StepBuffers::optimizer_state() const {
  SyncForAccess();
  return std::vector<const void *>(state_ptrs_.begin(), state_ptrs_.end());
}
std::vector<void *> StepBuffers::mutable_optimizer_state() {
  SyncForWrite();
  return state_ptrs_;
}
std::vector<const void *> StepBuffers::buffers() const {
  SyncForAccess();
  return std::vector<const void *>(buffer_ptrs_.begin(), buffer_ptrs_.end());
}
std::vector<void *> StepBuffers::mutable_buffers() {
  SyncForWrite();
  return buffer_ptrs_;
}
const void *StepBuffers::param(int32_t index) const {
  SyncForAccess();
  return params_[index].data();
}
void *StepBuffers::mutable_param(int32_t index) {
  SyncForWrite();
  return params_[index].data();
}

void StepBuffers::DeviceWritten() {
  if (device_)
    newer_ = Newer::kDevice;
}

absl::Status StepBuffers::QueueUpload(const HostBatch &batch,
                                      const StepBinding &binding, int set) {
  const tcc_step_descriptor &d = descriptor_;
  std::vector<void *> dst;
  std::vector<const void *> src;
  std::vector<uint64_t> bytes;
  for (auto [input, source] : batch.Inputs(binding)) {
    dst.push_back(device_inputs_[set][input]);
    src.push_back(source);
    bytes.push_back(static_cast<uint64_t>(d.inputs[input].size_bytes));
  }
  if (absl::Status s = DeviceCallStatus(
          *device_,
          device_->upload_async(static_cast<int32_t>(dst.size()), dst.data(),
                                src.data(), bytes.data()),
          absl::StrCat("step '", d.model_name,
                       "': queueing the upload of a batch"));
      !s.ok())
    return s;
  uploads_queued_ = true;
  return absl::OkStatus();
}

absl::Status StepBuffers::WaitUploads() {
  if (!uploads_queued_)
    return absl::OkStatus();
  uploads_queued_ = false;
  return DeviceCallStatus(*device_, device_->wait_uploads(),
                          absl::StrCat("step '", descriptor_.model_name,
                                       "': waiting for batch uploads"));
}

absl::Status StepBuffers::UploadBatch(const HostBatch &batch,
                                      const StepBinding &binding, int set,
                                      absl::string_view what) {
  const tcc_step_descriptor &d = descriptor_;
  for (auto [input, source] : batch.Inputs(binding))
    if (absl::Status s = DeviceCallStatus(
            *device_,
            device_->to_device(
                device_inputs_[set][input], source,
                static_cast<uint64_t>(d.inputs[input].size_bytes)),
            absl::StrCat("step '", d.model_name, "': uploading input '",
                         d.inputs[input].name, "' for ", what));
        !s.ok())
      return s;
  return absl::OkStatus();
}

absl::Status StepBuffers::EnsureDeviceOutputs() {
  const tcc_step_descriptor &d = descriptor_;
  if (!device_ || d.num_outputs == 0 || device_outputs_arena_)
    return absl::OkStatus();
  std::vector<int64_t> sizes;
  AppendSizes(d.num_outputs, d.outputs, sizes);
  if (absl::Status s = CreateArena("eval outputs", sizes, device_outputs_arena_);
      !s.ok())
    return s;
  device_outputs_ = device_outputs_arena_->tensors();
  return absl::OkStatus();
}

absl::Status StepBuffers::ReadOptimizerState(int32_t index, void *dst) const {
  const tcc_tensor_desc &t = descriptor_.optimizer_state[index];
  const uint64_t bytes = static_cast<uint64_t>(t.size_bytes);
  if (!device_ || newer_ != Newer::kDevice) {
    std::memcpy(dst, state_ptrs_[index], bytes);
    return absl::OkStatus();
  }
  return DeviceCallStatus(*device_, device_->to_host(dst, device_state_[index], bytes),
                          absl::StrCat("step '", descriptor_.model_name,
                                       "': downloading '", t.name, "' from the GPU"));
}

absl::Status StepBuffers::CopyOutput(int32_t output, int64_t offset,
                                     int64_t bytes, void *dst) const {
  if (!device_) {
    std::memcpy(dst, outputs_[output].as<char>() + offset,
                static_cast<size_t>(bytes));
    return absl::OkStatus();
  }
  const tcc_step_descriptor &d = descriptor_;
  if (device_outputs_.empty())
    return absl::FailedPreconditionError(
        absl::StrCat("step '", d.model_name, "': eval output '", d.outputs[output].name,
                     "' read before any eval call wrote it"));
  return DeviceCallStatus(
      *device_,
      device_->to_host(dst,
                       static_cast<char *>(device_outputs_[output]) + offset,
                       static_cast<uint64_t>(bytes)),
      absl::StrCat("step '", d.model_name, "': downloading eval output '",
                   d.outputs[output].name, "'"));
}

absl::Status StepBuffers::Snapshot() {
  if (device_)
    return SnapshotOnDevice();
  std::vector<AlignedBuffer *> sources;
  for (AlignedBuffer &b : params_)
    sources.push_back(&b);
  for (AlignedBuffer &b : optimizer_state_)
    sources.push_back(&b);
  for (AlignedBuffer &b : buffers_)
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
absl::Status StepBuffers::SnapshotOnDevice() {
  // The device copies must be current before they are copied.
  if (absl::Status s = SyncToDevice(); !s.ok())
    return s;
  const tcc_step_descriptor &d = descriptor_;
  if (!device_snapshot_arena_) {
    std::vector<int64_t> sizes;
    AppendSizes(d.num_params, d.params, sizes);
    AppendSizes(d.num_optimizer_state, d.optimizer_state, sizes);
    AppendSizes(num_buffers_, d.buffers, sizes);
    if (absl::Status s = CreateArena(
            "the --on-nan skip copy of the weights and optimizer state", sizes,
            device_snapshot_arena_);
        !s.ok())
      return s;
  }
  return CopySnapshot(/*restore=*/false);
}

absl::Status StepBuffers::CopySnapshot(bool restore) {
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
  for (int32_t i = 0; i < num_buffers_; ++i)
    if (absl::Status s = copy(d.buffers[i], device_buffers_[i]); !s.ok())
      return s;
  return absl::OkStatus();
}

absl::Status StepBuffers::RestoreSnapshot() {
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
  for (AlignedBuffer &b : buffers_)
    std::memcpy(b.data(), snapshot_[i++].data(), b.size());
  return absl::OkStatus();
}

} // namespace tcc::trun
