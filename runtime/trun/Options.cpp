#include "runtime/trun/Options.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

#include <cmath>
#include <set>

namespace tcc::trun {

const char kUsage[] =
    R"(usage: trun STEP.so --data DIR|IMAGES,LABELS [options]
       trun STEP.so --info

Trains a step library compiled by tcc on IDX image data (e.g. Fashion-MNIST)
with the step's optimizer, then reports accuracy and loss on the test split.

options:
  --data DIR            train on DIR/train-images-idx3-ubyte[.gz] and
                        DIR/train-labels-idx1-ubyte[.gz], test on
                        DIR/t10k-images-idx3-ubyte[.gz] and
                        DIR/t10k-labels-idx1-ubyte[.gz]
  --data IMAGES,LABELS  train on these two IDX files (gzipped or not)
  --test IMAGES,LABELS  test on these two IDX files (with --data IMAGES,LABELS
                        and no --test, evaluation is skipped)
  --steps N             train N steps (batches); 0: evaluate only
  --epochs E            train E epochs (default 1); not with --steps
  --lr X                learning rate (default: the step's default)
  --seed S              seed of parameter init and shuffling (default 0)
  --log-every N         print mean loss and samples/s every N steps
                        (default 100; 0: only per-epoch lines)
  --info                print the step descriptor and exit
  --help                print this help and exit

Exit status: 0 on success, 1 on a runtime error, 2 on a usage error.
)";

namespace {

absl::Status UsageError(absl::string_view message) {
  return absl::InvalidArgumentError(message);
}

absl::Status BadNumber(absl::string_view flag, absl::string_view value,
                       absl::string_view expected) {
  return UsageError(
      absl::StrCat(flag, " expects ", expected, ", got '", value, "'"));
}

absl::StatusOr<int64_t> ParseCount(absl::string_view flag,
                                   absl::string_view value) {
  int64_t n = 0;
  if (!absl::SimpleAtoi(value, &n) || n < 0)
    return BadNumber(flag, value, "a non-negative integer");
  return n;
}

// Applies one `--flag value` pair to `options`.
absl::Status ApplyValue(const std::string &flag, const std::string &value,
                        Options &options) {
  if (flag == "--data") {
    options.data = value;
  } else if (flag == "--test") {
    options.test = value;
  } else if (flag == "--steps" || flag == "--epochs" || flag == "--log-every") {
    absl::StatusOr<int64_t> n = ParseCount(flag, value);
    if (!n.ok())
      return n.status();
    if (flag == "--steps")
      options.steps = *n;
    else if (flag == "--epochs")
      options.epochs = *n;
    else
      options.log_every = *n;
  } else if (flag == "--lr") {
    double lr = 0;
    if (!absl::SimpleAtod(value, &lr) || !std::isfinite(lr) || lr <= 0)
      return BadNumber(flag, value, "a positive number");
    options.learning_rate = lr;
  } else if (flag == "--seed") {
    uint64_t seed = 0;
    if (!absl::SimpleAtoi(value, &seed))
      return BadNumber(flag, value, "an unsigned 64-bit integer");
    options.seed = seed;
  }
  return absl::OkStatus();
}

} // namespace

absl::StatusOr<Options> ParseOptions(const std::vector<std::string> &args) {
  static const std::set<std::string> kValueFlags = {
      "--data", "--test", "--steps",    "--epochs",
      "--lr",   "--seed", "--log-every"};
  Options options;
  std::set<std::string> seen;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &arg = args[i];
    if (arg == "--help" || arg == "-h") {
      options.help = true;
      return options;
    }
    if (arg.rfind("-", 0) != 0 || arg == "-") {
      if (!options.step_path.empty())
        return UsageError(
            absl::StrCat("unexpected argument '", arg, "' (one STEP.so only)"));
      options.step_path = arg;
      continue;
    }
    size_t equals = arg.find('=');
    std::string flag = arg.substr(0, equals);
    if (flag == "--info" && equals == std::string::npos) {
      options.info = true;
      continue;
    }
    if (!kValueFlags.count(flag))
      return UsageError(absl::StrCat("unknown flag '", arg, "'"));
    if (!seen.insert(flag).second)
      return UsageError(absl::StrCat(flag, " given twice"));
    std::string value;
    if (equals != std::string::npos) {
      value = arg.substr(equals + 1);
    } else {
      // "--data --steps 5" is a forgotten value, not a file named --steps.
      if (i + 1 >= args.size() || args[i + 1].rfind("--", 0) == 0)
        return UsageError(absl::StrCat(flag, " needs a value"));
      value = args[++i];
    }
    if (value.empty())
      return UsageError(absl::StrCat(flag, " needs a value"));
    if (absl::Status s = ApplyValue(flag, value, options); !s.ok())
      return s;
  }
  if (options.step_path.empty())
    return UsageError("missing STEP.so (see trun --help)");
  if (!options.info && options.data.empty())
    return UsageError("missing --data (see trun --help)");
  if (options.steps && options.epochs)
    return UsageError("give --steps or --epochs, not both");
  return options;
}

} // namespace tcc::trun
