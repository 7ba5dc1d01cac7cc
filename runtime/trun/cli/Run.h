// One trun invocation: load, bind, read data, train, evaluate.
#ifndef TCC_RUNTIME_TRUN_CLI_RUN_H
#define TCC_RUNTIME_TRUN_CLI_RUN_H

#include "runtime/trun/cli/Options.h"

#include "absl/status/status.h"

#include <ostream>

namespace tcc::trun {

// Does what `options` asks (--help is the caller's); reports go to `out`.
// Any failure is returned as one status, to be printed as one line.
absl::Status RunTrun(const Options &options, std::ostream &out);

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_CLI_RUN_H
