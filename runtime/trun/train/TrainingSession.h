// Everything around the train steps of one trun invocation: the checkpoint
// directory and resume, the metrics file, the progress display, periodic
// evaluation and checkpoints, and stopping cleanly on SIGINT / SIGTERM.
// Run.cpp builds the data for the step's kind and hands it over here.
#ifndef TCC_RUNTIME_TRUN_TRAIN_TRAININGSESSION_H
#define TCC_RUNTIME_TRUN_TRAIN_TRAININGSESSION_H

#include "runtime/trun/checkpoint/Checkpoint.h"
#include "runtime/trun/cli/Options.h"
#include "runtime/trun/data/BatchSource.h"
#include "runtime/trun/dist/RankGroup.h"
#include "runtime/trun/train/Metrics.h"
#include "runtime/trun/train/ShardedTrainingState.h"
#include "runtime/trun/train/Trainer.h"
#include "tcc/step_abi.h"

#include "absl/status/statusor.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>

namespace tcc::trun {

// What Run.cpp prepared for training.
struct TrainingPlan {
  BatchSource *source = nullptr; // positioned by the session on resume
  std::string data_order;        // "random", "sequential", "shuffled"
  std::string data;              // --data, for the checkpoint's record
  int64_t steps = 0;             // total steps of the run
  int64_t steps_per_epoch = 0;
  float learning_rate = 0;       // the schedule's base lr
  const char *unit = "samples";  // "tokens" for token models
  int64_t items_per_step = 0;
  // Validation every options.eval_every steps (token models); empty: none.
  std::function<absl::StatusOr<EvalRecord>()> validate;
};

class TrainingSession {
public:
  // Opens --ckpt-dir (locked for the run) and, with --resume, loads the
  // newest usable checkpoint into `trainer`: its weights, optimizer state
  // and step; the seed, base lr and data order of the run come from it
  // unless given (a different --seed or --data-order is refused, since the
  // run could not continue exactly). Opens --metrics. Reports to `out`.
  //
  // `ranks` (a data-parallel run; nullptr: one rank): every rank resumes
  // from the same checkpoint, only the lead rank (0) locks the directory
  // and writes checkpoints and metrics, and the ranks stop together (a
  // signal any of them got ends the step all of them are at).
  static absl::StatusOr<std::unique_ptr<TrainingSession>>
  Open(const Options &options, const tcc_step_descriptor &descriptor,
       Trainer &trainer, std::ostream &out, RankGroup *ranks = nullptr);

  // The options with what a resumed checkpoint fixed (seed, lr, order).
  const Options &options() const { return options_; }
  bool resumed() const { return resumed_.has_value(); }

  // Trains per `plan` until plan.steps are done. Writes checkpoints every
  // --ckpt-every steps and a final one; when a stop signal arrives, writes
  // the final checkpoint and returns Cancelled (RunTrun's caller exits
  // 128 + signal). A failed step (non-finite loss with --on-nan stop)
  // returns its error with the last good checkpoint named, and writes none.
  absl::Status Train(TrainingPlan &plan);

  // Steps trained by Train in this process.
  int64_t steps_trained() const { return steps_trained_; }
  // The loss of the last train step (evaluations overwrite the trainer's).
  float last_train_loss() const { return last_train_loss_; }
  // The step of the last ReportEval; -1: none.
  int64_t last_validated_step() const { return last_validated_step_; }

  // An evaluation result: recorded in the metrics file; validation results
  // are also printed ("val loss: L (step N)").
  absl::Status ReportEval(const EvalRecord &record);

  // Writes the run-end metrics record.
  absl::Status Finish();

private:
  TrainingSession(Options options, const tcc_step_descriptor &descriptor,
                  Trainer &trainer, std::ostream &out)
      : options_(std::move(options)), descriptor_(descriptor),
        trainer_(trainer), out_(out) {}

  absl::Status WriteCheckpoint(const TrainingPlan &plan, int64_t cursor);
  // " (last good checkpoint: D/step_N)" or " (no checkpoint written)".
  std::string LastCheckpointNote() const;
  void Say(const std::string &line);

  Options options_;
  const tcc_step_descriptor &descriptor_;
  Trainer &trainer_;
  std::ostream &out_;
  std::unique_ptr<CheckpointDir> checkpoints_;
  std::optional<LoadedCheckpoint> resumed_;
  std::string last_checkpoint_; // newest complete one (written or loaded)
  int64_t last_checkpoint_step_ = -1;
  std::unique_ptr<MetricsLog> metrics_;
  RankGroup *ranks_ = nullptr;
  std::unique_ptr<ShardedTrainingState> sharded_; // ZeRO-1 and ZeRO-3 steps only
  bool writes_ = true; // checkpoints (the lead rank, or the only one)
  std::atomic<bool> stop_agreed_{false};
  ProgressReporter *progress_ = nullptr; // while Train runs
  int64_t steps_trained_ = 0;
  float last_train_loss_ = 0;
  int64_t last_validated_step_ = -1;
};

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_TRAIN_TRAININGSESSION_H
