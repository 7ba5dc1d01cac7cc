// What the runs of every kind of step share (defined in Run.cpp): the plan,
// training with --save-train-outputs, --save-weights at the end, and the
// lines of the run's header.
#ifndef TCC_RUNTIME_TRUN_CLI_RUNCOMMON_H
#define TCC_RUNTIME_TRUN_CLI_RUNCOMMON_H

#include "runtime/trun/cli/Options.h"
#include "runtime/trun/data/BatchSource.h"
#include "runtime/trun/data/StepBinding.h"
#include "runtime/trun/dist/RankGroup.h"
#include "runtime/trun/train/Trainer.h"
#include "runtime/trun/train/TrainingSession.h"
#include "tcc/step_abi.h"

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include <cstdint>
#include <ostream>
#include <string>

namespace tcc::trun {

class RankGroup;

// The source, the base lr and the step count (--steps, else --epochs
// (default 1) of steps_per_epoch).
absl::StatusOr<TrainingPlan> BasePlan(const Options &options,
                                      const tcc_step_descriptor &d,
                                      BatchSource *source,
                                      int64_t steps_per_epoch);
// Trains per `plan`, then writes --save-train-outputs (before any final
// evaluation overwrites the step's loss).
absl::Status TrainAndSaveOutputs(const Options &options,
                                 const tcc_step_descriptor &d,
                                 const Trainer &trainer,
                                 TrainingSession &session, TrainingPlan &plan,
                                 std::ostream &out);
// --save-weights FILE, when given: the weights from the device if need be.
// A ZeRO-3 step's ranks all call it (each sends its shards; rank 0 writes);
// `ranks` is null for one process.
absl::Status SaveAtEnd(const Options &options, const tcc_step_descriptor &d,
                       const Trainer &trainer, RankGroup *ranks, std::ostream &out);
// The schedule's base learning rate: --lr, else the step's default.
float BaseLearningRate(const Options &options, const tcc_step_descriptor &d);
// "target: cpu (x86_64)\n" or "target: cuda (sm_90), GPU 0\n".
std::string TargetLine(const tcc_step_descriptor &d, const Options &options);
// "2 ranks x " before the per-rank batch in the run's header; "" for one
// process.
std::string RanksTimes(const RankGroup *ranks);
// One line saying which file feeds which of the binding's two inputs, e.g.
//   inputs: 'image' f32 [64, 784] <- x.gz (normalized), 'label' i32 [64] <- y.gz
std::string BindingLine(const tcc_step_descriptor &d, const StepBinding &b,
                        absl::string_view data_from,
                        absl::string_view targets_from);

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_CLI_RUNCOMMON_H
