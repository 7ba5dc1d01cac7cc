// The run of a step bound as named arrays (StepBinding kNamedArrays), and
// what it shares with Run.cpp's runs of the other kinds (defined there).
#ifndef TCC_RUNTIME_TRUN_CLI_RUNARRAYS_H
#define TCC_RUNTIME_TRUN_CLI_RUNARRAYS_H

#include "runtime/trun/cli/Options.h"
#include "runtime/trun/data/BatchSource.h"
#include "runtime/trun/data/StepBinding.h"
#include "runtime/trun/dist/RankGroup.h"
#include "runtime/trun/train/Trainer.h"
#include "runtime/trun/train/TrainingSession.h"
#include "tcc/step_abi.h"

#include "absl/status/statusor.h"

#include <cstdint>
#include <ostream>
#include <string>

namespace tcc::trun {

// Reads --data (and --test) as named arrays, trains on shuffled batches of
// them, then reports the mean test loss (and accuracy when the binding has
// labels and logits). The caller writes --save-weights afterwards.
absl::Status RunNamedArrays(const Options &options,
                            const tcc_step_descriptor &d,
                            const StepBinding &binding, Trainer &trainer,
                            TrainingSession &session, RankGroup *ranks,
                            std::ostream &out);

// Defined in Run.cpp. What every kind's plan shares: the source, the base
// lr and the step count (--steps, else --epochs (default 1) of
// steps_per_epoch).
absl::StatusOr<TrainingPlan> BasePlan(const Options &options,
                                      const tcc_step_descriptor &d,
                                      BatchSource *source,
                                      int64_t steps_per_epoch);
// Trains per `plan`, then writes --save-train-outputs.
absl::Status TrainAndSaveOutputs(const Options &options,
                                 const tcc_step_descriptor &d,
                                 const Trainer &trainer,
                                 TrainingSession &session, TrainingPlan &plan,
                                 std::ostream &out);
// "target: cpu (x86_64)\n" or "target: cuda (sm_90), GPU 0\n".
std::string TargetLine(const tcc_step_descriptor &d, const Options &options);

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_CLI_RUNARRAYS_H
