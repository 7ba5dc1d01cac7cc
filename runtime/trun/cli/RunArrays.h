// The run of a step bound as named arrays (StepBinding kNamedArrays).
#ifndef TCC_RUNTIME_TRUN_CLI_RUNARRAYS_H
#define TCC_RUNTIME_TRUN_CLI_RUNARRAYS_H

#include "runtime/trun/cli/Options.h"
#include "runtime/trun/cli/RunCommon.h"
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

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_CLI_RUNARRAYS_H
