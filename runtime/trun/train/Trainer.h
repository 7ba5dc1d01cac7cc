// The training loop and the evaluation pass over a loaded step, on the CPU
// or, for a step with target "cuda", on the GPU through the step's
// tcc_device_api (see "GPU steps" below).
#ifndef TCC_RUNTIME_TRUN_TRAIN_TRAINER_H
#define TCC_RUNTIME_TRUN_TRAIN_TRAINER_H

#include "runtime/trun/data/BatchLoader.h"
#include "runtime/trun/data/BatchSource.h"
#include "runtime/trun/data/StepBinding.h"
#include "runtime/trun/step/Profile.h"
#include "runtime/trun/train/EntryBuffers.h"
#include "runtime/trun/train/Metrics.h"
#include "runtime/trun/train/OnNan.h"
#include "runtime/trun/train/StepBuffers.h"
#include "tcc/step_abi.h"

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace tcc::trun {

struct TrainConfig {
  // Train until steps_done() == steps (a resumed trainer starts past 0).
  int64_t steps = 0;
  // The schedule's base learning rate (--lr, else the step's default): step
  // s trains with LearningRateAt(descriptor.lr_schedule, learning_rate, s).
  float learning_rate = 0;
  int64_t steps_per_epoch = 0; // a line per finished epoch; 0: none
  OnNan on_nan = OnNan::kStop;
  // Where each step is reported; `metrics` may be null.
  ProgressReporter *progress = nullptr;
  MetricsLog *metrics = nullptr;
  const char *unit = "samples"; // "tokens" for token models
  int64_t items_per_step = 0;   // tokens or samples per step
  // Set (by a signal handler) to stop after the current step.
  const std::atomic<bool> *stop_requested = nullptr;
  // FP8 delayed scaling (the step's "fp8_scaling" state): read it after
  // the steps `progress` prints a line for, into StepRecord::fp8. false on
  // ranks other than 0: the state is whole-step, the same on every rank.
  bool read_fp8_scaling = true;
  // Called after each step with steps_done() (periodic validation,
  // checkpoints); an error stops training.
  std::function<absl::Status(int64_t)> after_step;
};

// Consecutive skipped steps after which --on-nan skip gives up.
inline constexpr int64_t kMaxConsecutiveSkips = 10;

struct TrainSummary {
  int64_t steps = 0;         // train calls made by this Train call
  int64_t skipped = 0;       // of those, rolled back (--on-nan skip)
  // Steps with loss scaling (train outputs "loss_scale", "skipped",
  // "skipped_steps"): of the steps made, those whose update the step itself
  // skipped on an inf/NaN gradient, the scale after the last one, and the
  // updates skipped in the whole run (a resumed run's included).
  int64_t overflow_skipped = 0;
  std::optional<double> last_loss_scale;
  std::optional<int64_t> run_skipped_steps;
  bool interrupted = false;  // stop_requested ended it early
  double seconds = 0;        // wall time of the loop
  double data_wait_seconds = 0;
};

struct EvalResult {
  int64_t samples = 0;
  double mean_loss = 0;      // per-batch losses weighted by real rows
  bool has_accuracy = false; // false: the step has no "logits" output
  int64_t correct = 0;
  double accuracy() const {
    return samples ? static_cast<double>(correct) / samples : 0.0;
  }
};

// GPU memory allocated through the step's device API, now and at the peak.
struct GpuMemory {
  uint64_t allocated_bytes = 0;
  uint64_t peak_allocated_bytes = 0;
};

// GPU steps (descriptor.device set; target "cuda"):
//  - Memory and coherence: StepBuffers.h (device arenas, host mirrors of
//    the parameters and optimizer state, which copy is newer). params(),
//    mutable_params() and the other accessors are StepBuffers'; so
//    checkpoints, --init-from, resume and --on-nan skip work on the host
//    buffers unchanged. A failed download is kept and returned by
//    SyncToHost() and the next Train() or Evaluate(); callers that can
//    report it call SyncToHost() before reading.
//  - Batches: Train() takes batch k from the loader (pinned slots when the
//    loader was made with pinned_memory()), and before step k runs, peeks
//    batch k+1 and queues its upload (upload_async) into the other input
//    set, so that copy runs on the copy stream while step k computes. The
//    slot of batch k goes back to the loader at the Take() of batch k+1,
//    after wait_uploads; Train() also waits for queued uploads before it
//    returns. Evaluate() uploads each batch synchronously (to_device) into
//    the input set no queued upload targets, and downloads the logits only
//    for accuracy.
//  - Errors of the device API carry its last_error(); the first train call
//    is followed by the device's gemm_note() and the second (or the only)
//    by its execution_note() ("gpu: ...") through the progress reporter.
class Trainer {
public:
  // Allocates params, optimizer state, workspace and eval outputs (64-byte
  // aligned on the host; device arenas for a GPU step, after
  // device->init(gpu)), and initializes params and optimizer state from
  // their specs with `seed`. `descriptor` must have passed
  // ValidateDescriptor and must outlive the trainer; `gpu` is ignored for a
  // CPU step. `rank`: this process's rank, whose shards a ZeRO-3 step's
  // parameters start as.
  static absl::StatusOr<std::unique_ptr<Trainer>>
  Create(const tcc_step_descriptor &descriptor, const StepBinding &binding,
         uint64_t seed, int32_t gpu = 0, int32_t rank = 0);
  Trainer(const Trainer &) = delete;
  Trainer &operator=(const Trainer &) = delete;

  // Runs train steps on batches from `loader` until config.steps are done
  // or a stop is requested. Fails on a non-zero step status, and on a
  // non-finite loss or grad norm with OnNan::kStop (the message names the
  // step; a non-finite grad norm of a step that skipped its own update
  // under loss scaling is expected, not a failure); OnNan::kSkip restores the weights and optimizer state from
  // before the step and goes on. After a failure the weights may hold the
  // failed step's update: do not checkpoint them. loader.taken() counts
  // exactly the batches of the steps run (a GPU step's peeked batch is not
  // taken), so it stays the data cursor of a checkpoint.
  absl::StatusOr<TrainSummary> Train(BatchLoader &loader,
                                     const TrainConfig &config);

  // Runs eval on every batch of `source`; accuracy counts real rows only.
  absl::StatusOr<EvalResult> Evaluate(BatchSource &source);

  // One eval call on `batch` (GPU steps: uploaded first), e.g. for
  // sampling; the loss is last_loss() and is not checked. `what` names the
  // call in errors ("step 'x': <what> failed: returned 1 (...)").
  absl::Status EvalBatch(HostBatch &batch, absl::string_view what);
  // Further entry points (descriptor.entries; StepEntries.h), in
  // TrainerEntries.cpp. Calls entries[entry] on host `inputs` (its input order,
  // each its size_bytes) and copies its outputs to host `outputs` (its
  // output order; null or a null pointer: not read). Its state tensors
  // start at zeros and stay with the trainer between calls
  // (ResetEntryState zeroes them). An entry that trains (EntryTrains)
  // trains step steps_done() at the schedule's rate for base `base_lr`,
  // counts that step and leaves its loss in last_loss() and its train
  // outputs in train_output(); the others leave the weights alone (their
  // loss, when they write one, is last_loss() too). GPU steps: the inputs
  // are uploaded into, the outputs downloaded from device buffers of the
  // entry's own. `what` names the call in errors.
  absl::Status CallEntry(int32_t entry, const std::vector<const void *> &inputs,
                         const std::vector<void *> &outputs, float base_lr,
                         absl::string_view what);
  absl::Status ResetEntryState(int32_t entry);
  // Replaces the train call of Train()'s loop: `hook` gets the batch and
  // the args the train call would get (parameters, optimizer state,
  // workspace, learning rate, step, loss bound) and returns a tcc_status
  // (trun's encode cache, EncodeCache.h, calls encode / train_cached).
  using TrainHook = std::function<int32_t(HostBatch &, const tcc_step_args &)>;
  void set_train_hook(TrainHook hook) { train_hook_ = std::move(hook); }
  // Where a call's buffers are (device arenas on a GPU step).
  StepBuffers &buffers() { return *buffers_; }

  // Copies `bytes` bytes at byte `offset` of eval output `output` (of the
  // last eval call) to `dst`: a download for GPU steps.
  absl::Status ReadOutput(int32_t output, int64_t offset, int64_t bytes,
                          void *dst) const;

  int64_t steps_done() const { return steps_done_; }
  // A resumed run continues the step count (schedule, dropout, AdamW bias
  // correction all depend on it).
  void set_steps_done(int64_t steps) { steps_done_ = steps; }
  // The seed dropout masks are keyed by (a resumed run keeps its own).
  void set_rng_seed(uint64_t seed) { args_.rng_seed = seed; }
  // The collectives a data-parallel step (tcc compile --data-parallel)
  // averages its gradients and loss through; null (the default): one rank.
  // `collectives` must outlive the trainer's calls.
  void set_collectives(const tcc_collectives *collectives) { args_.collectives = collectives; }
  const StepBinding &binding() const { return binding_; }
  // Host buffers of the parameters and optimizer state (GPU steps: current
  // after a download when the device copy was newer; the mutable ones mark
  // the host copy newer).
  std::vector<const void *> params() const { return buffers_->params(); }
  std::vector<void *> mutable_params() { return buffers_->mutable_params(); }
  std::vector<const void *> optimizer_state() const {
    return buffers_->optimizer_state();
  }
  std::vector<void *> mutable_optimizer_state() {
    return buffers_->mutable_optimizer_state();
  }
  const void *param(int32_t index) const { return buffers_->param(index); }
  void *mutable_param(int32_t index) { return buffers_->mutable_param(index); }
  // Model buffers (batch norm's running statistics), descriptor order.
  std::vector<const void *> model_buffers() const { return buffers_->buffers(); }
  std::vector<void *> mutable_model_buffers() { return buffers_->mutable_buffers(); }
  // GPU steps: downloads the parameters and optimizer state if the device
  // copy is newer; returns the first failed download, if any. OK on CPU.
  absl::Status SyncToHost() const { return buffers_->SyncToHost(); }
  // Values the last train call reported (descriptor.train_outputs order).
  const void *train_output(int32_t index) const {
    return buffers_->train_output(index);
  }
  // The loss of the last train or eval call.
  float last_loss() const { return loss_; }
  // The learning rate of the last train call.
  float last_learning_rate() const { return args_.learning_rate; }

  // The step's device API (GPU steps) to allocate the loader's slots in
  // pinned memory; null for a CPU step.
  const tcc_device_api *pinned_memory() const { return device_; }
  // GPU steps: device memory allocated through the step's API; nullopt on
  // CPU.
  std::optional<GpuMemory> gpu_memory() const;
  // GPU steps: per-kernel timing through the device API (--profile).
  // SetProfiling(true) also clears what was timed so far.
  absl::Status SetProfiling(bool on);
  // Destroys the cuda step's captured CUDA graphs (nothing for cpu steps
  // and steps built before the device API had release_graphs): before an
  // NCCL communicator their collectives used is destroyed.
  absl::Status ReleaseGraphs();
  absl::StatusOr<std::vector<tcc_launch_time>> ReadProfile() const;
  // GPU steps: the algorithm of each cuBLASLt product among the train
  // `launches` (empty when the step's device API predates gemm_choice).
  GemmChoices ReadGemmChoices(const std::vector<tcc_launch_time> &launches) const;

private:
  Trainer(const tcc_step_descriptor &descriptor, const StepBinding &binding)
      : descriptor_(descriptor), binding_(binding), device_(descriptor.device) {
  }

  // Fills args_ for one call on `batch` (CPU) or input set `set` (GPU).
  void BindBatch(HostBatch &batch, bool with_outputs);
  void BindInputSet(int set, bool with_outputs);
  void StartCall();
  // "step 'x': <what> failed: returned N (NAME)[: <device last_error>]"
  absl::Status CallError(absl::string_view what, int32_t status) const;
  absl::Status CheckEvalLoss(float loss, int64_t index) const;
  // Fills `record`'s loss-scaling fields from the last train call's
  // outputs and counts its overflow in `summary`.
  void ReadLossScaling(StepRecord &record, TrainSummary &summary) const;
  // FP8 delayed scaling: the summary of the "fp8_scaling" state now (a
  // download of that tensor alone on a GPU).
  absl::StatusOr<Fp8ScalingSummary> ReadFp8Scaling();
  // The loop of Train(); Train() waits for queued uploads around it.
  absl::Status TrainLoop(BatchLoader &loader, const TrainConfig &config,
                         TrainSummary &summary);

  // CallEntry's buffers, per entry (created at its first call).
  absl::StatusOr<EntryBuffers *> BuffersOfEntry(int32_t entry);

  const tcc_step_descriptor &descriptor_;
  StepBinding binding_;
  std::vector<std::unique_ptr<EntryBuffers>> entry_buffers_;
  TrainHook train_hook_;
  const tcc_device_api *device_; // GPU steps only
  std::unique_ptr<StepBuffers> buffers_;
  int32_t grad_norm_output_ = -1; // index of train output "grad_norm"
  // Loss scaling's train outputs ("loss_scale", "skipped",
  // "skipped_steps"); -1 for a step without loss scaling.
  int32_t loss_scale_output_ = -1, skipped_output_ = -1,
          skipped_steps_output_ = -1;
  // FP8 delayed scaling's state (FindFp8ScalingState; -1: none), and
  // where it is read to.
  int32_t fp8_state_ = -1;
  std::vector<float> fp8_records_;
  std::vector<const void *> input_ptrs_;
  float loss_ = 0;
  tcc_step_args args_{};
  int64_t steps_done_ = 0;
  int next_set_ = -1;         // GPU: input set of a queued, untrained batch
  bool note_printed_ = false; // GPU: execution_note() shown
  int64_t device_train_calls_ = 0; // GPU: train calls until then
};

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_TRAIN_TRAINER_H
