// trun's command line.
#ifndef TCC_RUNTIME_TRUN_CLI_OPTIONS_H
#define TCC_RUNTIME_TRUN_CLI_OPTIONS_H

#include "runtime/trun/train/OnNan.h"

#include "absl/status/statusor.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tcc::trun {

enum class DataOrder { kRandom, kSequential };

struct Options {
  std::string step_path;
  std::string data;                    // --data: DIR, IMAGES,LABELS or SHARDS
  std::optional<std::string> test;     // --test IMAGES,LABELS
  std::optional<std::string> val;      // --val SHARDS
  std::optional<DataOrder> data_order; // --data-order (default random)
  int64_t eval_every = 0;              // --eval-every (0: only at the end)
  int64_t eval_batches = 20;           // --eval-batches
  int64_t test_batches = 0;            // --test-batches (0: the whole test split)
  std::optional<int64_t> steps;        // --steps
  std::optional<int64_t> epochs;       // --epochs (default 1)
  std::optional<double> learning_rate; // --lr (default: the step's)
  uint64_t seed = 0;                   // --seed
  bool seed_given = false;             // --seed was on the command line
  int64_t log_every = 100;             // --log-every
  std::optional<std::string> init_from;    // --init-from W.safetensors
  bool init_from_ignore_extra = false;     // --init-from-ignore-extra
  std::optional<std::string> save_weights; // --save-weights W.safetensors
  std::optional<std::string> save_train_outputs; // --save-train-outputs F
  int64_t sample = 0;                      // --sample N (0: no sampling)
  std::vector<std::string> prompts;        // --prompt TEXT (repeatable)
  std::optional<std::string> vocab;        // --vocab VOCAB.json
  double temperature = 1.0;                // --temperature
  int64_t num_samples = 1;                 // --num-samples K (per prompt)
  int64_t top_k = 0;                       // --top-k K (0: off)
  double top_p = 1.0;                      // --top-p P (1: off)
  bool eval_sampler = false;               // --sampler eval (default: cache)
  int64_t context_keep = 0; // --context-keep K (0: re-prefill per token past T)
  std::optional<std::string> ckpt_dir;     // --ckpt-dir D
  int64_t ckpt_every = 0;                  // --ckpt-every N (0: final only)
  int64_t keep = 0;                        // --keep K (0: keep all)
  bool resume = false;                     // --resume
  std::optional<std::string> metrics;      // --metrics FILE.jsonl
  OnNan on_nan = OnNan::kStop;             // --on-nan stop|skip
  int64_t loader_depth = 4; // --loader-depth N: batches prepared ahead
  std::optional<int32_t> gpu;  // --gpu N: the GPU of a cuda step (default 0)
  bool profile = false;        // --profile: per-kernel times (cuda steps)
  std::optional<int32_t> threads; // --threads N: a cpu step's OpenMP threads
  // Not a flag: main() sets it to the threads line a cpu step's run prints
  // (HostThreads.h).
  std::string threads_line;
  // Not a flag: main() sets it when stdout is a terminal (live progress bar
  // instead of plain lines).
  bool live_progress = false;
  bool info = false;                       // --info
  bool diagnose = false;                   // --diagnose (STEP.so optional)
  bool help = false;                       // --help
  // --nproc N: start N ranks of this command on this machine
  // (dist/LocalLaunch.h) instead of training in this process.
  int32_t nproc = 0;
  // --global-batch G: the global batch the run must have (ranks x the
  // step's batch), checked at start so a script that changes the number
  // of ranks cannot silently change the optimization.
  std::optional<int64_t> global_batch;
  // The encode cache of a step compiled with tcc compile --cache-frozen
  // (EncodeCache.h): --encode-cache DIR (a file there; default: memory),
  // --encode-cache-limit BYTES, --no-encode-cache (train through @train_step).
  std::optional<std::string> encode_cache_dir;
  int64_t encode_cache_limit = int64_t{4} << 30;
  bool no_encode_cache = false;
};

// The text of `trun --help` (docs/runtime.md quotes it verbatim).
extern const char kUsage[];

// Parses the arguments after argv[0]. Every error is a usage error: one line,
// without the "trun: error: " prefix.
absl::StatusOr<Options> ParseOptions(const std::vector<std::string> &args);

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_CLI_OPTIONS_H
