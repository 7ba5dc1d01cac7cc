// The run of a token model (StepBinding kTokenModel): token shards, windows,
// validation, the run's vocabulary, and --sample.
#ifndef TCC_RUNTIME_TRUN_CLI_RUNTOKENS_H
#define TCC_RUNTIME_TRUN_CLI_RUNTOKENS_H

#include "runtime/trun/cli/Options.h"
#include "runtime/trun/data/StepBinding.h"
#include "runtime/trun/dist/RankGroup.h"
#include "runtime/trun/train/Trainer.h"
#include "runtime/trun/train/TrainingSession.h"
#include "tcc/step_abi.h"

#include "absl/status/status.h"

#include <ostream>

namespace tcc::trun {

// Reads and checks --data / --val shards, finds and keeps the vocabulary
// (data/VocabLookup.h), trains on windows, validates, writes --save-weights
// and samples (--sample).
absl::Status RunTokenModel(const Options &options,
                           const tcc_step_descriptor &d,
                           const StepBinding &binding, Trainer &trainer,
                           TrainingSession &session, RankGroup *ranks,
                           std::ostream &out);

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_CLI_RUNTOKENS_H
