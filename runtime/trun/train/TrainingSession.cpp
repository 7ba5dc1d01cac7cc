#include "runtime/trun/train/TrainingSession.h"

#include <cmath>

#include "runtime/trun/base/Stopwatch.h"
#include "runtime/trun/checkpoint/CheckpointCompatibility.h"
#include "runtime/trun/data/BatchLoader.h"
#include "runtime/trun/step/Profile.h"
#include "runtime/trun/step/WithBuffers.h"
#include "runtime/trun/train/StopSignals.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tcc::trun {
namespace {

// Prefixes a status message, keeping its code.
absl::Status WithContext(const absl::Status &status, absl::string_view before,
                         absl::string_view after = "") {
  return absl::Status(status.code(),
                      absl::StrCat(before, status.message(), after));
}

} // namespace

absl::StatusOr<std::unique_ptr<TrainingSession>>
TrainingSession::Open(const Options &options,
                      const tcc_step_descriptor &descriptor, Trainer &trainer,
                      std::ostream &out, RankGroup *ranks) {
  std::unique_ptr<TrainingSession> session(
      new TrainingSession(options, descriptor, trainer, out));
  Options &effective = session->options_;
  session->ranks_ = ranks;
  session->writes_ = !ranks || ranks->is_lead();
  if (options.ckpt_dir && !session->writes_) {
    session->checkpoints_ = CheckpointDir::OpenForReading(*options.ckpt_dir);
  } else if (options.ckpt_dir) {
    absl::StatusOr<std::unique_ptr<CheckpointDir>> dir =
        CheckpointDir::Open(*options.ckpt_dir);
    if (!dir.ok())
      return dir.status();
    session->checkpoints_ = std::move(*dir);
  }
  if (session->checkpoints_ && ranks)
    session->checkpoints_->set_world_size(ranks->world_size());
  // ZeRO-1 / ZeRO-3: checkpoints hold the whole optimizer state and
  // parameters (ShardedTrainingState.h).
  session->sharded_ = ShardedTrainingState::ForStep(descriptor);
  if (options.resume) {
    CheckpointDir &dir = *session->checkpoints_;
    std::vector<std::string> warnings;
    ShardedTrainingState *sharded = session->sharded_.get();
    // Model buffers are restored with the parameters (WithBuffers.h).
    WithBuffers view(sharded ? sharded->whole_descriptor() : descriptor);
    std::vector<void *> params = WithBuffers::Join(
        sharded && sharded->shards_parameters() ? sharded->mutable_whole_params()
                                                : trainer.mutable_params(),
        trainer.mutable_model_buffers());
    absl::StatusOr<LoadedCheckpoint> loaded =
        sharded ? dir.LoadNewest(view.descriptor(), params, sharded->mutable_whole_state(),
                                 warnings)
                : dir.LoadNewest(view.descriptor(), params,
                                 trainer.mutable_optimizer_state(), warnings);
    if (loaded.ok() && sharded) // this rank's shards of the whole tensors
      sharded->Scatter(ranks ? ranks->rank() : 0, trainer.mutable_params(),
                       trainer.mutable_optimizer_state());
    for (const std::string &warning : warnings)
      out << "warning: " << warning << "\n";
    if (absl::IsNotFound(loaded.status())) {
      out << "resume: no checkpoint in " << dir.dir()
          << " yet; starting at step 0\n";
    } else if (!loaded.ok()) {
      return WithContext(loaded.status(), "--resume: ");
    } else {
      const TrainState &state = loaded->state;
      // Values no flag would allow (an edited or corrupt state.json): a
      // learning rate the command line refuses, a data cursor past the
      // batches `step` steps can have read.
      if (!(std::isfinite(state.base_learning_rate) && state.base_learning_rate > 0))
        return absl::DataLossError(absl::StrFormat(
            "--resume: %s: state.json base_learning_rate %g is not > 0 (edited or "
            "corrupt)",
            loaded->path, state.base_learning_rate));
      const int64_t readable =
          state.step * std::max<int64_t>(1, descriptor.micro_batches);
      if (state.data_cursor > readable)
        return absl::DataLossError(absl::StrFormat(
            "--resume: %s: state.json data_cursor %d is past the %d batches %d steps "
            "read (edited or corrupt)",
            loaded->path, state.data_cursor, readable, state.step));
      if (options.seed_given)
        if (absl::Status s = CheckResumeSeed(*loaded, options.seed); !s.ok())
          return s;
      effective.seed = state.seed;
      trainer.set_rng_seed(state.seed);
      if (options.learning_rate && *options.learning_rate !=
                                       state.base_learning_rate)
        out << absl::StrFormat(
            "note: --lr %g differs from the checkpoint's base lr %g; the "
            "resumed run will not repeat the interrupted one exactly\n",
            *options.learning_rate, state.base_learning_rate);
      else
        effective.learning_rate = state.base_learning_rate;
      if (!options.data_order) {
        if (state.data_order == "sequential")
          effective.data_order = DataOrder::kSequential;
        else if (state.data_order == "random")
          effective.data_order = DataOrder::kRandom;
      }
      trainer.set_steps_done(state.step);
      session->last_checkpoint_ = loaded->path;
      session->last_checkpoint_step_ = state.step;
      out << absl::StrFormat("resumed from %s: step %d of %d, seed %u, data "
                             "cursor %d batches\n",
                             loaded->path, state.step, state.total_steps,
                             state.seed, state.data_cursor);
      // --keep's retention, which a run killed after writing its last
      // checkpoint and before deleting the old ones did not finish.
      if (session->writes_)
        if (const int64_t removed = dir.PruneOlder(state.step, options.keep))
          out << absl::StrFormat("resume: removed %d older checkpoint%s beyond --keep %d "
                                 "(an interrupted run's)\n",
                                 removed, removed == 1 ? "" : "s", options.keep);
      if (options.init_from)
        out << "note: --init-from is ignored: the weights come from the "
               "checkpoint\n";
      session->resumed_ = std::move(*loaded);
    }
  }
  if (!options.resume && !options.init_from && session->writes_) {
    // A frozen parameter with a random initializer is never trained: its
    // stand-in values would stay (an imported module's frozen rotary table).
    std::vector<std::string> stand_ins;
    for (int32_t i = 0; i < descriptor.num_params; ++i) {
      const tcc_tensor_desc &p = descriptor.params[i];
      if (!p.trainable && (p.init_kind == TCC_INIT_NORMAL || p.init_kind == TCC_INIT_UNIFORM))
        stand_ins.push_back(p.name);
    }
    if (!stand_ins.empty())
      out << absl::StrFormat(
          "note: frozen parameter%s %s%s start%s from a random initializer and %s never "
          "trained: load %s values with --init-from (for a model from tcc.from_torch, the "
          "file tcc.export_torch_weights writes)\n",
          stand_ins.size() > 1 ? "s" : "", stand_ins.front(),
          stand_ins.size() > 1 ? absl::StrFormat(" (and %d more)", stand_ins.size() - 1) : "",
          stand_ins.size() > 1 ? "" : "s", stand_ins.size() > 1 ? "are" : "is",
          stand_ins.size() > 1 ? "their" : "its");
  }
  if (options.metrics && session->writes_) {
    // A resumed run continues the same file; tcc-plot keeps the last record
    // of each step, so steps redone after a kill replace the lost ones.
    absl::StatusOr<std::unique_ptr<MetricsLog>> metrics =
        MetricsLog::Open(*options.metrics, /*append=*/options.resume);
    if (!metrics.ok())
      return metrics.status();
    session->metrics_ = std::move(*metrics);
    if (absl::Status s = session->metrics_->WriteRunEvent(
            session->resumed() ? "resume" : "start", trainer.steps_done(),
            {{"model", descriptor.model_name},
             {"step_library", options.step_path},
             {"seed", std::to_string(effective.seed)}});
        !s.ok())
      return s;
  }
  return session;
}

void TrainingSession::Say(const std::string &line) {
  if (progress_)
    progress_->Message(line);
  else
    out_ << line << "\n" << std::flush;
}

std::string TrainingSession::LastCheckpointNote() const {
  if (!checkpoints_)
    return " (no --ckpt-dir: nothing was checkpointed)";
  if (last_checkpoint_.empty())
    return absl::StrCat(" (no checkpoint in ", checkpoints_->dir(),
                        " yet)");
  return absl::StrCat(" (last good checkpoint: ", last_checkpoint_, ")");
}

absl::Status TrainingSession::WriteCheckpoint(const TrainingPlan &plan,
                                              int64_t cursor) {
  if (sharded_) {
    // ZeRO-1 / ZeRO-3: every rank sends its shards of the optimizer state
    // (and parameters); the lead rank writes them as whole tensors.
    if (absl::Status s = trainer_.SyncToHost(); !s.ok())
      return WithContext(s, "checkpoint failed: ");
    if (absl::Status s = sharded_->Gather(ranks_, trainer_.params(), trainer_.optimizer_state());
        !s.ok())
      return WithContext(s, "checkpoint failed: ");
  }
  if (!writes_) { // the lead rank writes the (replicated) state
    // Every rank counts the checkpoint, so that all of them agree whether
    // the end needs one more (a sharded step's ranks exchange shards for
    // it: one rank alone would wait for the others forever).
    last_checkpoint_step_ = trainer_.steps_done();
    return absl::OkStatus();
  }
  TrainState state;
  state.step = trainer_.steps_done();
  state.data_cursor = cursor;
  state.seed = options_.seed;
  state.data_order = plan.data_order;
  state.base_learning_rate = plan.learning_rate;
  state.total_steps = plan.steps;
  state.data = plan.data;
  Clock::time_point start = Clock::now();
  // GPU steps: the weights come from the device; a failed copy must not
  // leave a checkpoint of stale host weights.
  if (absl::Status s = trainer_.SyncToHost(); !s.ok())
    return WithContext(s, "checkpoint failed: ");
  WithBuffers view(sharded_ ? sharded_->whole_descriptor() : descriptor_);
  std::vector<const void *> params = WithBuffers::Join(
      sharded_ && sharded_->shards_parameters() ? sharded_->whole_params() : trainer_.params(),
      trainer_.model_buffers());
  absl::StatusOr<std::string> path =
      sharded_ ? checkpoints_->Write(view.descriptor(), state, params, sharded_->whole_state(),
                                     options_.keep)
               : checkpoints_->Write(view.descriptor(), state, params,
                                     trainer_.optimizer_state(), options_.keep);
  if (!path.ok()) // the caller names the last good checkpoint
    return WithContext(path.status(), "checkpoint failed: ");
  last_checkpoint_ = *path;
  last_checkpoint_step_ = state.step;
  Say(absl::StrFormat("checkpoint: %s (step %d, %.2f s)", *path, state.step,
                      SecondsSince(start)));
  if (metrics_)
    return metrics_->WriteRunEvent("checkpoint", state.step,
                                   {{"path", *path}});
  return absl::OkStatus();
}

absl::Status TrainingSession::ReportEval(const EvalRecord &record) {
  if (record.split == "val")
    Say(absl::StrFormat("val loss: %.6f (step %d)", record.loss, record.step));
  last_validated_step_ = record.step;
  if (metrics_)
    return metrics_->WriteEval(record);
  return absl::OkStatus();
}

absl::Status TrainingSession::Train(TrainingPlan &plan) {
  if (resumed_) {
    if (absl::Status s = CheckResumeDataOrder(*resumed_, plan.data_order);
        !s.ok())
      return s;
    plan.source->SeekTo(resumed_->state.data_cursor);
  }
  const int64_t first_cursor = plan.source->position();
  if (trainer_.steps_done() >= plan.steps) {
    out_ << absl::StrFormat("nothing to train: %d of %d steps already done\n",
                            trainer_.steps_done(), plan.steps);
    last_train_loss_ = trainer_.last_loss();
    return absl::OkStatus();
  }

  StopSignals signals;
  ProgressReporter progress(out_, options_.live_progress, plan.steps,
                            trainer_.steps_done(), options_.log_every,
                            plan.unit);
  progress_ = &progress;
  // GPU steps: the loader fills pinned staging buffers (async uploads).
  BatchLoader loader(*plan.source, trainer_.binding(),
                     static_cast<int>(options_.loader_depth) + 1,
                     trainer_.pinned_memory());

  // --profile: the first step builds cuBLASLt plans and warms caches, so it
  // is left out when more steps follow.
  const int64_t first_step = trainer_.steps_done();
  const int64_t profile_warmup =
      options_.profile && plan.steps - first_step > 1 ? 1 : 0;
  // Across ranks (NCCL) --profile also times the collectives (CommProfile.h),
  // per step after the warm-up.
  const bool comm_profile = options_.profile && ranks_ && ranks_->TimesCollectives();
  CommProfile comm;
  Clock::time_point comm_last = Clock::now();
  auto start_profiling = [&]() -> absl::Status {
    if (absl::Status s = trainer_.SetProfiling(true); !s.ok()) // clears
      return s;
    comm = CommProfile{};
    comm_last = Clock::now();
    return comm_profile ? ranks_->SetCommProfiling(true) : absl::OkStatus();
  };
  if (options_.profile)
    if (absl::Status s = start_profiling(); !s.ok())
      return s;

  TrainConfig config;
  config.steps = plan.steps;
  config.learning_rate = plan.learning_rate;
  config.steps_per_epoch = plan.steps_per_epoch;
  config.on_nan = options_.on_nan;
  config.progress = &progress;
  config.metrics = metrics_.get();
  config.unit = plan.unit;
  config.items_per_step = plan.items_per_step;
  config.stop_requested = &StopSignals::requested();
  // FP8 scaling records are whole-step state, alike on every rank: rank 0's.
  config.read_fp8_scaling = !ranks_ || ranks_->is_lead();
  if (ranks_) {
    // A rank that stopped alone would leave the others waiting in the next
    // step's all-reduce: after each step the ranks agree, and all stop if
    // any was asked to.
    stop_agreed_ = false;
    config.stop_requested = &stop_agreed_;
  }
  config.after_step = [&](int64_t done) -> absl::Status {
    if (ranks_) {
      std::vector<double> stop = {StopSignals::requested().load() ? 1.0 : 0.0};
      if (absl::Status s = ranks_->SumOnHost(stop); !s.ok())
        return s;
      stop_agreed_ = stop[0] > 0;
    }
    last_train_loss_ = trainer_.last_loss(); // before an eval overwrites it
    if (comm_profile) {
      if (absl::Status s = ranks_->AddCommTimes(comm); !s.ok())
        return s;
      comm.steps += 1;
      comm.step_ms += 1e3 * SecondsSince(comm_last);
    }
    if (profile_warmup && done == first_step + profile_warmup)
      if (absl::Status s = start_profiling(); !s.ok())
        return s;
    if (plan.validate && options_.eval_every > 0 &&
        done % options_.eval_every == 0) {
      absl::StatusOr<EvalRecord> result = plan.validate();
      if (!result.ok())
        return result.status();
      if (absl::Status s = ReportEval(*result); !s.ok())
        return s;
    }
    if (checkpoints_ && options_.ckpt_every > 0 &&
        done % options_.ckpt_every == 0)
      if (absl::Status s = WriteCheckpoint(plan, first_cursor + loader.taken()); !s.ok())
        return s;
    // The next step's time starts here, after this step's evaluation and
    // checkpoint: --profile's step time is the step's alone.
    if (comm_profile)
      comm_last = Clock::now();
    return absl::OkStatus();
  };
  absl::StatusOr<TrainSummary> summary = trainer_.Train(loader, config);
  progress.Finish();
  if (!summary.ok()) {
    progress_ = nullptr;
    return WithContext(summary.status(), "", LastCheckpointNote());
  }
  steps_trained_ = summary->steps;
  if (options_.profile) {
    absl::StatusOr<std::vector<tcc_launch_time>> launches = trainer_.ReadProfile();
    if (!launches.ok())
      return launches.status();
    PrintProfile(*launches, profile_warmup, out_, /*top=*/15,
                 trainer_.ReadGemmChoices(*launches));
    if (metrics_)
      if (absl::Status s = metrics_->WriteProfile(trainer_.steps_done(), *launches);
          !s.ok())
        return s;
    if (absl::Status s = trainer_.SetProfiling(false); !s.ok())
      return s;
    if (comm_profile) {
      if (absl::Status s = ranks_->SetCommProfiling(false); !s.ok())
        return s;
      absl::StatusOr<std::vector<std::string>> all = ranks_->AllGather(comm.Serialize());
      if (!all.ok())
        return all.status();
      std::vector<CommProfile> rows;
      for (const std::string &bytes : *all)
        rows.push_back(CommProfile::Deserialize(bytes));
      if (ranks_->is_lead())
        PrintCommProfile(rows, ranks_->Describe(), out_);
    }
  }
  double rate = summary->seconds > 0
                    ? summary->steps * plan.items_per_step / summary->seconds
                    : 0.0;
  Say(absl::StrFormat(
      "trained %d steps in %.2f s (%.0f %s/s, data wait %.1f%%)%s",
      summary->steps, summary->seconds, rate, plan.unit,
      summary->seconds > 0
          ? 100.0 * summary->data_wait_seconds / summary->seconds
          : 0.0,
      summary->skipped
          ? absl::StrFormat("; %d skipped (non-finite)", summary->skipped)
          : ""));
  if (summary->last_loss_scale)
    Say(absl::StrFormat(
        "loss scaling: %d of %d steps skipped their update (inf/NaN "
        "gradients)%s; the last step used loss scale %g",
        summary->overflow_skipped, summary->steps,
        summary->run_skipped_steps &&
                *summary->run_skipped_steps != summary->overflow_skipped
            ? absl::StrFormat(", %d in the whole run", *summary->run_skipped_steps)
            : "",
        *summary->last_loss_scale));
  absl::Status final_checkpoint = absl::OkStatus();
  if (checkpoints_ && last_checkpoint_step_ != trainer_.steps_done())
    final_checkpoint = WriteCheckpoint(plan, first_cursor + loader.taken());
  progress_ = nullptr;
  if (!final_checkpoint.ok())
    return WithContext(final_checkpoint, "", LastCheckpointNote());
  if (summary->interrupted) {
    int signal_number = StopSignals::signal_number();
    if (metrics_)
      if (absl::Status s = metrics_->WriteRunEvent(
              "interrupted", trainer_.steps_done(),
              {{"signal", SignalName(signal_number)}});
          !s.ok())
        return s;
    return absl::CancelledError(absl::StrCat(
        "interrupted by ", SignalName(signal_number), " after step ",
        trainer_.steps_done(), " of ", plan.steps, "; ",
        checkpoints_ ? absl::StrCat("continue with --resume from ",
                                    last_checkpoint_)
                     : "no --ckpt-dir, so the run cannot be resumed"));
  }
  return absl::OkStatus();
}

absl::Status TrainingSession::Finish() {
  if (!metrics_)
    return absl::OkStatus();
  std::map<std::string, std::string> extra;
  if (std::optional<GpuMemory> gpu = trainer_.gpu_memory()) {
    extra["gpu_allocated_bytes"] = std::to_string(gpu->allocated_bytes);
    extra["gpu_peak_bytes"] = std::to_string(gpu->peak_allocated_bytes);
  }
  return metrics_->WriteRunEvent("end", trainer_.steps_done(), extra);
}

} // namespace tcc::trun
