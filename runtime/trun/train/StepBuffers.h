// Every buffer a step call reads or writes, and the copies between host and
// device: the Trainer's memory, apart from its loop.
//
// CPU steps: 64-byte aligned host buffers for parameters, optimizer state,
// workspace, eval outputs and train outputs; the step reads and writes them.
//
// GPU steps (descriptor.device set; target "cuda"):
//  - Memory: one device allocation (DeviceArena) per category: parameters,
//    optimizer state, workspace (the memory plan keeps gradients and
//    activations there), inputs (two sets, double-buffered) and eval
//    outputs. Parameters and optimizer state also have host mirrors (the
//    buffers params() returns); loss and train outputs are host memory, as
//    the ABI says.
//  - Coherence: after a train call (DeviceWritten) the device copy of the
//    parameters and optimizer state is newer. params(), param() and
//    optimizer_state() download them first in that case; mutable_params(),
//    mutable_param() and mutable_optimizer_state() download if needed and
//    then mark the host copy newer, and SyncToDevice() (before the next call)
//    uploads it. A failed download is kept and returned by SyncToHost(),
//    SyncToDevice() and sync_error().
//  - Batches: QueueUpload() queues a batch into an input set on the copy
//    stream (upload_async); WaitUploads() waits for what was queued.
//    UploadBatch() copies synchronously (eval).
//
// Model buffers (batch norm's running statistics; the descriptor's buffers)
// live and move with the parameters: host buffers (mirrors on a GPU), one
// device arena, the same coherence, in the --on-nan snapshot.
//
// --on-nan skip: Snapshot() copies the parameters and optimizer state before
// a step, RestoreSnapshot() puts them back (on the GPU for GPU steps, so
// nothing crosses the bus).
#ifndef TCC_RUNTIME_TRUN_TRAIN_STEPBUFFERS_H
#define TCC_RUNTIME_TRUN_TRAIN_STEPBUFFERS_H

#include "runtime/trun/base/AlignedBuffer.h"
#include "runtime/trun/data/BatchSource.h"
#include "runtime/trun/data/StepBinding.h"
#include "runtime/trun/step/DeviceMemory.h"
#include "tcc/step_abi.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

namespace tcc::trun {

class StepBuffers {
public:
  // Allocates the host buffers, initializes parameters and optimizer state
  // from their specs with `seed` (Initializers.h) and, for a GPU step,
  // selects GPU `gpu` (device->init) and allocates the device arenas.
  // `descriptor` must have passed ValidateDescriptor and must outlive this.
  static absl::StatusOr<std::unique_ptr<StepBuffers>>
  Create(const tcc_step_descriptor &descriptor, uint64_t seed, int32_t gpu,
         int32_t shard_rank = 0);
  ~StepBuffers(); // waits for queued uploads (their sources may go next)
  StepBuffers(const StepBuffers &) = delete;
  StepBuffers &operator=(const StepBuffers &) = delete;

  // Where a call's tcc_step_args point: the device arenas of a GPU step,
  // else the host buffers. outputs() is null for a GPU step without eval
  // outputs; train_outputs() is null without train outputs.
  void **params_for_call();
  void **optimizer_state_for_call();
  void **buffers_for_call(); // null without buffers
  void *workspace_for_call();
  // On a GPU the eval outputs are allocated by the first eval that reads
  // them (a training run that never does never holds them: GPT-2's logits
  // are 3 GiB); outputs_for_call is null until then.
  absl::Status EnsureDeviceOutputs();
  void **outputs_for_call();
  void **train_outputs_for_call();
  // GPU steps: input `input` of input set `set` (0 or 1) on the device.
  void *device_input(int set, int32_t input) const {
    return device_inputs_[set][input];
  }

  // Host buffers (see "Coherence" above for GPU steps).
  std::vector<const void *> params() const;
  std::vector<void *> mutable_params();
  std::vector<const void *> optimizer_state() const;
  std::vector<void *> mutable_optimizer_state();
  std::vector<const void *> buffers() const;
  std::vector<void *> mutable_buffers();
  int32_t num_buffers() const { return num_buffers_; }
  const void *param(int32_t index) const;
  void *mutable_param(int32_t index);
  const void *train_output(int32_t index) const {
    return train_outputs_[index].data();
  }

  // GPU steps: downloads the parameters and optimizer state if the device
  // copy is newer; returns the first failed download, if any. OK on CPU.
  absl::Status SyncToHost() const;
  // GPU steps: uploads the host mirrors if they are newer (or returns the
  // kept download failure). OK on CPU.
  absl::Status SyncToDevice();
  // GPU steps: a train call wrote the device copies.
  void DeviceWritten();
  // Copies optimizer state tensor `index` (all its size_bytes) to `dst`
  // without syncing the rest: from the device when its copy is newer (one
  // to_host of that tensor alone), else from the host buffer.
  absl::Status ReadOptimizerState(int32_t index, void *dst) const;
  // The kept failure of a download (OK if none).
  const absl::Status &sync_error() const { return sync_error_; }

  // GPU steps: queues the upload of `batch`'s bound inputs into input
  // set `set`; WaitUploads() waits for everything queued (OK if nothing).
  absl::Status QueueUpload(const HostBatch &batch, const StepBinding &binding,
                           int set);
  absl::Status WaitUploads();
  // GPU steps: uploads `batch` into input set `set` now; `what` names the
  // call in errors.
  absl::Status UploadBatch(const HostBatch &batch, const StepBinding &binding,
                           int set, absl::string_view what);
  // Copies `bytes` bytes at byte `offset` of eval output `output` to `dst`
  // (a download for GPU steps); the range must have been checked.
  absl::Status CopyOutput(int32_t output, int64_t offset, int64_t bytes,
                          void *dst) const;
  // CPU steps: eval output `output` in place.
  const void *host_output(int32_t output) const {
    return outputs_[output].data();
  }

  // --on-nan skip.
  absl::Status Snapshot();
  absl::Status RestoreSnapshot();

private:
  // Which copy of the parameters and optimizer state is current.
  enum class Newer { kNeither, kHost, kDevice };

  explicit StepBuffers(const tcc_step_descriptor &descriptor)
      : descriptor_(descriptor), device_(descriptor.device) {}

  absl::Status AllocateDevice(int32_t gpu);
  // GPU steps: one arena, its errors prefixed with the step's name.
  absl::Status CreateArena(absl::string_view category,
                           const std::vector<int64_t> &sizes,
                           std::unique_ptr<DeviceArena> &into);
  static void AppendSizes(int32_t count, const tcc_tensor_desc *tensors,
                          std::vector<int64_t> &sizes);
  // GPU steps: the accessors' download (keeps a failure for later); for
  // the mutable ones the host copy is then the newer.
  void SyncForAccess() const;
  void SyncForWrite();
  absl::Status CopyParamsAndState(bool to_device) const;
  absl::Status SnapshotOnDevice();
  absl::Status CopySnapshot(bool restore); // GPU: live <-> copy

  const tcc_step_descriptor &descriptor_;
  const tcc_device_api *device_; // GPU steps only
  std::vector<AlignedBuffer> params_, optimizer_state_, outputs_,
      train_outputs_, buffers_;
  int32_t num_buffers_ = 0; // 0 for steps built before the ABI had them
  std::vector<void *> buffer_ptrs_, device_buffers_;
  std::unique_ptr<DeviceArena> device_buffers_arena_;
  AlignedBuffer workspace_;
  std::vector<AlignedBuffer> snapshot_; // params then optimizer state
  std::vector<void *> param_ptrs_, state_ptrs_, output_ptrs_,
      train_output_ptrs_;

  // GPU steps. Pointers into the arenas, descriptor order; input set s
  // holds input i at device_inputs_[s][i].
  std::unique_ptr<DeviceArena> device_params_arena_, device_state_arena_,
      device_workspace_arena_, device_inputs_arena_, device_outputs_arena_,
      device_snapshot_arena_; // --on-nan skip: params, then optimizer state
  std::vector<void *> device_params_, device_state_, device_outputs_;
  std::array<std::vector<void *>, 2> device_inputs_;
  // The host mirrors are caches the const accessors may refresh.
  mutable Newer newer_ = Newer::kNeither;
  mutable absl::Status sync_error_;
  bool uploads_queued_ = false; // since the last wait_uploads
};

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_TRAIN_STEPBUFFERS_H
