// trun's command line.
#ifndef TCC_RUNTIME_TRUN_OPTIONS_H
#define TCC_RUNTIME_TRUN_OPTIONS_H

#include "absl/status/statusor.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tcc::trun {

struct Options {
  std::string step_path;
  std::string data;                    // --data: DIR or IMAGES,LABELS
  std::optional<std::string> test;     // --test IMAGES,LABELS
  std::optional<int64_t> steps;        // --steps
  std::optional<int64_t> epochs;       // --epochs (default 1)
  std::optional<double> learning_rate; // --lr (default: the step's)
  uint64_t seed = 0;                   // --seed
  int64_t log_every = 100;             // --log-every
  bool info = false;                   // --info
  bool help = false;                   // --help
};

// The text of `trun --help` (docs/runtime.md quotes it verbatim).
extern const char kUsage[];

// Parses the arguments after argv[0]. Every error is a usage error: one line,
// without the "trun: error: " prefix.
absl::StatusOr<Options> ParseOptions(const std::vector<std::string> &args);

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_OPTIONS_H
