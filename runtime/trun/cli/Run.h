// One trun invocation: load, bind, read data, train, evaluate.
#ifndef TCC_RUNTIME_TRUN_CLI_RUN_H
#define TCC_RUNTIME_TRUN_CLI_RUN_H

#include "runtime/trun/cli/Options.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include <ostream>
#include <string>
#include <vector>

namespace tcc::trun {

// Does what `options` asks (--help is the caller's); reports go to `out`.
// Any failure is returned as one status, to be printed as one line.
absl::Status RunTrun(const Options &options, std::ostream &out);

// trun --nproc N: starts N ranks of the command line `args` (trun's
// arguments) on this machine, after checking that the step can train
// across ranks; returns this process's exit status (dist/LocalLaunch.h).
absl::StatusOr<int> LaunchRanks(const Options &options, const std::vector<std::string> &args);

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_CLI_RUN_H
