// The training loop and the evaluation pass over a loaded step.
#ifndef TCC_RUNTIME_TRUN_TRAINER_H
#define TCC_RUNTIME_TRUN_TRAINER_H

#include "runtime/trun/AlignedBuffer.h"
#include "runtime/trun/BatchLoader.h"
#include "runtime/trun/BatchSource.h"
#include "runtime/trun/Metrics.h"
#include "runtime/trun/Options.h"
#include "runtime/trun/StepBinding.h"
#include "tcc/step_abi.h"

#include "absl/status/statusor.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
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
  // Called after each step with steps_done() (periodic validation,
  // checkpoints); an error stops training.
  std::function<absl::Status(int64_t)> after_step;
};

// Consecutive skipped steps after which --on-nan skip gives up.
inline constexpr int64_t kMaxConsecutiveSkips = 10;

struct TrainSummary {
  int64_t steps = 0;         // train calls made by this Train call
  int64_t skipped = 0;       // of those, rolled back (--on-nan skip)
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

class Trainer {
public:
  // Allocates 64-byte aligned params, optimizer state, workspace and eval
  // outputs, and initializes params and optimizer state from their specs
  // with `seed`. `descriptor` must have passed ValidateDescriptor.
  static absl::StatusOr<std::unique_ptr<Trainer>>
  Create(const tcc_step_descriptor &descriptor, const StepBinding &binding,
         uint64_t seed);

  // Runs train steps on batches from `loader` until config.steps are done
  // or a stop is requested. Fails on a non-zero step status, and on a
  // non-finite loss or grad norm with OnNan::kStop (the message names the
  // step); OnNan::kSkip restores the weights and optimizer state from
  // before the step and goes on. After a failure the weights may hold the
  // failed step's update: do not checkpoint them.
  absl::StatusOr<TrainSummary> Train(BatchLoader &loader,
                                     const TrainConfig &config);

  // Runs eval on every batch of `source`; accuracy counts real rows only.
  absl::StatusOr<EvalResult> Evaluate(BatchSource &source);

  int64_t steps_done() const { return steps_done_; }
  // A resumed run continues the step count (schedule, dropout, AdamW bias
  // correction all depend on it).
  void set_steps_done(int64_t steps) { steps_done_ = steps; }
  // The seed dropout masks are keyed by (a resumed run keeps its own).
  void set_rng_seed(uint64_t seed) { args_.rng_seed = seed; }
  const StepBinding &binding() const { return binding_; }
  std::vector<const void *> params() const;
  std::vector<void *> mutable_params();
  std::vector<const void *> optimizer_state() const;
  std::vector<void *> mutable_optimizer_state();
  const void *param(int32_t index) const { return params_[index].data(); }
  void *mutable_param(int32_t index) { return params_[index].data(); }
  // Values the last train call reported (descriptor.train_outputs order).
  const void *train_output(int32_t index) const {
    return train_outputs_[index].data();
  }
  // The loss of the last train or eval call.
  float last_loss() const { return loss_; }
  // The learning rate of the last train call.
  float last_learning_rate() const { return args_.learning_rate; }

private:
  Trainer(const tcc_step_descriptor &descriptor, const StepBinding &binding)
      : descriptor_(descriptor), binding_(binding) {}

  // Fills args_ for one call on `batch`.
  void BindBatch(HostBatch &batch, bool with_outputs);
  absl::Status CheckCall(const char *entry, int32_t status, float loss,
                         int64_t index) const;
  // --on-nan skip: copies of params and optimizer state before a step.
  absl::Status Snapshot();
  void RestoreSnapshot();

  const tcc_step_descriptor &descriptor_;
  StepBinding binding_;
  std::vector<AlignedBuffer> params_, optimizer_state_, outputs_,
      train_outputs_;
  AlignedBuffer workspace_;
  std::vector<AlignedBuffer> snapshot_; // params then optimizer state
  std::vector<void *> param_ptrs_, state_ptrs_, output_ptrs_,
      train_output_ptrs_;
  int32_t grad_norm_output_ = -1; // index of train output "grad_norm"
  std::vector<const void *> input_ptrs_;
  float loss_ = 0;
  tcc_step_args args_{};
  int64_t steps_done_ = 0;
};

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_TRAINER_H
