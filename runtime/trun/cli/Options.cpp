#include "runtime/trun/cli/Options.h"

#include "support/NearestName.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

#include <cmath>
#include <limits>
#include <set>

namespace tcc::trun {

const char kUsage[] =
    R"(usage: trun STEP.so --data DIR|IMAGES,LABELS [options]    (image classifier)
       trun STEP.so --data SHARDS [--val SHARDS] [options]   (token model)
       trun STEP.so --data NAME=FILE,... [--test ...] [options] (named arrays)
       trun STEP.so --init-from W.safetensors --sample N [--prompt TEXT]
       trun STEP.so --info
       trun [STEP.so] --diagnose

Trains a step library compiled by tcc with the step's optimizer. A step with
inputs 'tokens' and 'targets' (i32 [B, T]) is a token model and trains on
token shards; a step whose inputs are f32 images [B, ...] and i32 labels [B]
is an image classifier and trains on image data (IDX files such as
Fashion-MNIST, or .npy arrays), then reports accuracy and loss on the test
split. Any other step, and any step given named arrays, is fed named arrays:
each input from the array of its name.

image data:
  --data DIR            train on DIR/train-images-idx3-ubyte[.gz] and
                        DIR/train-labels-idx1-ubyte[.gz], test on
                        DIR/t10k-images-idx3-ubyte[.gz] and
                        DIR/t10k-labels-idx1-ubyte[.gz]
  --data IMAGES,LABELS  train on these two files, each IDX (gzipped or not)
                        or, when named *.npy, a numpy array: images uint8
                        (normalized like IDX) or float32 (fed as stored)
                        [N, ...], labels any integer dtype [N]
  --test IMAGES,LABELS  test on these two files (same formats; with --data
                        IMAGES,LABELS and no --test, evaluation is skipped)
  --test-batches N      test on the first N batches of the test split only
                        (images or named arrays; default: all of it, which
                        for Fashion-MNIST's 10,000 images can take longer
                        than a short run's training)
token data (shards from tcc-data tokenize, nanoGPT or llm.c):
  --data SHARDS         train on a token shard file or a quoted glob of them
                        ('data/train_*.bin')
  --val SHARDS          report the validation loss on these shards at the end
  --data-order ORDER    random: windows at seeded random offsets (default);
                        sequential: consecutive non-overlapping windows
  --eval-every N        also report the validation loss every N steps
  --eval-batches M      validation batches per report (default 20)
named arrays (any step; an array per input, (samples, ...) per sample as the
input [B, ...]; batches of shuffled rows, the same rows from every array):
  --data NAME=FILE.npy,...
                        input NAME from FILE.npy; NAME=FILE.safetensors[:T]
                        from tensor T (default NAME) of a safetensors file;
                        FILE.npy alone feeds the input named like the file
  --data FILE.safetensors
                        every tensor feeds the input of its name
  --data DIR            every DIR/NAME.npy feeds input NAME
  --test ...            test arrays in the same forms: mean test loss (and
                        accuracy with an output 'logits' [B, C] and one
                        integer input [B] of labels)
                        dtypes convert when exact (float64 rounds to f32,
                        integers in range, whole floats to integer inputs);
                        otherwise, and for any mismatch, a one-line error
training:
  --steps N             train N steps (batches); 0: evaluate only
  --epochs E            train E epochs (default 1); not with --steps
  --lr X                learning rate (default: the step's default)
  --seed S              seed of parameter init, shuffling, random windows and
                        sampling (default 0)
  --on-nan stop|skip    a non-finite loss or gradient norm: stop (default,
                        naming the step and the last good checkpoint) or
                        undo that step's update and go on (keeps a copy of
                        the weights and optimizer state every step; stops
                        after 10 skipped steps in a row). A step compiled
                        with --loss-scale dynamic that skipped its own
                        update on inf/NaN gradients is no such event
  --gpu N               the GPU a cuda step runs on (default 0, or the
                        local rank across ranks; an error for a cpu step)
  --threads N           a cpu step's threads (default: OMP_NUM_THREADS, else
                        the CPUs this process may use, capped by its
                        cgroup's CPU quota). Idle threads sleep
                        (OMP_WAIT_POLICY=passive) unless OMP_WAIT_POLICY or
                        GOMP_SPINCOUNT is set: spinning costs a loaded
                        machine far more than waking costs an idle one
ranks (a step compiled with tcc compile --data-parallel; token models):
  --nproc N             train on N ranks of this machine: a cuda step on
                        GPUs 0..N-1 (NCCL), a cpu step as N processes
                        under mpirun (Open MPI). The global batch is N x
                        the step's batch, each rank reading its rows of it,
                        so N ranks compute the steps one process of N x B
                        rows would. Rank 0 alone prints and writes metrics
                        and checkpoints; a rank that fails ends the others.
                        trun also runs under torchrun, srun and mpirun,
                        reading their environment (docs/distributed.md);
                        TCC_DIST_TIMEOUT (seconds, default 300) bounds
                        every wait for the other ranks: at start, and
                        between steps (a rank that hangs ends the job)
  --global-batch G      stop at start unless ranks x the step's batch is G
                        (compile the step at batch G / ranks)
progress and metrics:
  --log-every N         without a terminal: a progress line every N steps
                        (default 100; 0: none); on a terminal a live line
                        is redrawn instead. Both show loss, lr, grad norm,
                        tokens/s or samples/s, ms/step, data wait, ETA
  --encode-cache DIR    a step compiled with tcc compile --cache-frozen: keep
                        each sample's encoder values in a file under DIR
                        (keyed by the data files, the frozen weights and the
                        step; default: in memory for this run only)
  --encode-cache-limit BYTES
                        at most BYTES of cached values (default 4 GiB); the
                        samples beyond are encoded every time
  --no-encode-cache     train through the whole train step (no cache)
  --metrics FILE        append one JSON record per step, evaluation and
                        checkpoint to FILE (JSON lines; plot it with
                        tcc-plot FILE -o loss.png)
  --loader-depth N      batches the background loader prepares ahead
                        (default 4)
  --profile             cuda steps: time every kernel of the train steps
                        after the first (launched one by one with an event
                        after each, no CUDA graph: the steps run slower)
                        and print where the time goes at the end: by kind
                        of kernel and the slowest launches, with their
                        model node, GB/s and TFLOP/s
checkpoints (D/step_NNNNNNNNN/: model.safetensors, optimizer.safetensors,
state.json; each written completely before it replaces anything):
  --ckpt-dir D          write a checkpoint to D at the end of training and
                        when interrupted (SIGINT, SIGTERM)
  --ckpt-every N        also every N steps
  --keep K              keep only the newest K checkpoints (default: all)
  --resume              continue from the newest usable checkpoint in
                        --ckpt-dir (an unreadable one is skipped, with a
                        warning); exactly the run that was interrupted:
                        same batches, schedule and losses. Starts at step 0
                        when D has no checkpoint yet
weights (safetensors, PyTorch's state_dict names and layouts; docs/cli.md):
  --init-from FILE      start from these weights instead of the step's init
                        (a PyTorch state_dict saved with safetensors, a
                        --save-weights file, a checkpoint's model.safetensors)
  --init-from-ignore-extra
                        skip tensors of the --init-from file that are no
                        parameter (e.g. buffers) instead of refusing them
  --save-weights FILE   write the weights at the end (load_state_dict
                        accepts them)
  --save-train-outputs FILE
                        write the loss and the train outputs of the last
                        train step (e.g. the gradients of a step compiled
                        with tcc compile --emit-gradients)
sampling (token models with a 'logits' output; after training, if any):
  --sample N            generate N tokens and print the text
  --prompt TEXT         the text to continue (default: a newline); repeat
                        it for several prompts, generated together
  --num-samples K       samples per prompt (default 1), rows of one batch
  --vocab FILE          the _vocab.json from tcc-data to encode and decode
                        text (default: PREFIX_vocab.json beside the --data /
                        --val shards, else the --ckpt-dir's vocab.json, else
                        W.vocab.json beside --init-from W.safetensors; none:
                        bytes, for a step with 256 logits only). Training
                        keeps a copy in --ckpt-dir and beside --save-weights
  --temperature T       softmax temperature; 0: always the likeliest token
                        (default 1)
  --top-k K             draw only among the K likeliest tokens
  --top-p P             draw only among the fewest likeliest tokens whose
                        probabilities add up to P, in (0, 1] (default 1)
  --sampler cache|eval  cache (default): the step's prefill / decode entries
                        (a KV cache) when it has them; eval: the eval entry
                        point per token (the reference). Past the context
                        both run a whole prefill / eval per new token (each
                        row's last context tokens: exact, but as slow as
                        the eval path)
  --context-keep K      cache: past the context, restart the cache from each
                        row's last K tokens (1 <= K < context) with one
                        prefill and decode on: one prefill per context - K
                        tokens; the tokens then differ from the eval path's
other:
  --info                print the step descriptor (parameters, inputs,
                        precision, workspace, FLOPs per step) and its memory
                        by category and precision, and exit
  --diagnose            print host memory, the NVIDIA driver and GPUs, and
                        whether STEP.so runs where its target runs (a cuda
                        step: its architecture and buffers on the GPU of
                        --gpu, default 0), and exit (1 if it does not)
  --help                print this help and exit

Exit status: 0 on success, 1 on a runtime error, 2 on a usage error,
130 / 143 when stopped by SIGINT / SIGTERM (after the final checkpoint).
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
                                   absl::string_view value, int64_t minimum) {
  int64_t n = 0;
  if (!absl::SimpleAtoi(value, &n) || n < minimum)
    return BadNumber(flag, value,
                     minimum == 0 ? "a non-negative integer"
                                  : "a positive integer");
  return n;
}

// Applies one `--flag value` pair to `options`.
absl::Status ApplyValue(const std::string &flag, const std::string &value,
                        Options &options) {
  if (flag == "--data") {
    options.data = value;
  } else if (flag == "--test") {
    options.test = value;
  } else if (flag == "--val") {
    options.val = value;
  } else if (flag == "--init-from") {
    options.init_from = value;
  } else if (flag == "--save-weights") {
    options.save_weights = value;
  } else if (flag == "--save-train-outputs") {
    options.save_train_outputs = value;
  } else if (flag == "--prompt") {
    options.prompts.push_back(value);
  } else if (flag == "--sampler") {
    if (value == "cache" || value == "eval")
      options.eval_sampler = value == "eval";
    else
      return BadNumber(flag, value, "cache or eval");
  } else if (flag == "--num-samples" || flag == "--top-k" || flag == "--context-keep") {
    absl::StatusOr<int64_t> n = ParseCount(flag, value, 1);
    if (!n.ok())
      return n.status();
    (flag == "--top-k"          ? options.top_k
     : flag == "--context-keep" ? options.context_keep
                                : options.num_samples) = *n;
  } else if (flag == "--top-p") {
    double p = 0;
    if (!absl::SimpleAtod(value, &p) || !(p > 0 && p <= 1))
      return BadNumber(flag, value, "a number in (0, 1]");
    options.top_p = p;
  } else if (flag == "--vocab") {
    options.vocab = value;
  } else if (flag == "--data-order") {
    if (value == "random")
      options.data_order = DataOrder::kRandom;
    else if (value == "sequential")
      options.data_order = DataOrder::kSequential;
    else
      return BadNumber(flag, value, "random or sequential");
  } else if (flag == "--encode-cache") {
    options.encode_cache_dir = value;
  } else if (flag == "--encode-cache-limit") {
    absl::StatusOr<int64_t> n = ParseCount(flag, value, 0);
    if (!n.ok())
      return n.status();
    options.encode_cache_limit = *n;
  } else if (flag == "--ckpt-dir") {
    options.ckpt_dir = value;
  } else if (flag == "--metrics") {
    options.metrics = value;
  } else if (flag == "--on-nan") {
    if (value == "stop")
      options.on_nan = OnNan::kStop;
    else if (value == "skip")
      options.on_nan = OnNan::kSkip;
    else
      return BadNumber(flag, value, "stop or skip");
  } else if (flag == "--ckpt-every" || flag == "--keep" ||
             flag == "--loader-depth") {
    absl::StatusOr<int64_t> n = ParseCount(flag, value, 1);
    if (!n.ok())
      return n.status();
    (flag == "--ckpt-every" ? options.ckpt_every
     : flag == "--keep"     ? options.keep
                            : options.loader_depth) = *n;
  } else if (flag == "--steps" || flag == "--epochs" ||
             flag == "--log-every" || flag == "--eval-every") {
    absl::StatusOr<int64_t> n = ParseCount(flag, value, 0);
    if (!n.ok())
      return n.status();
    if (flag == "--steps")
      options.steps = *n;
    else if (flag == "--epochs")
      options.epochs = *n;
    else if (flag == "--log-every")
      options.log_every = *n;
    else
      options.eval_every = *n;
  } else if (flag == "--eval-batches" || flag == "--sample" || flag == "--test-batches") {
    absl::StatusOr<int64_t> n = ParseCount(flag, value, 1);
    if (!n.ok())
      return n.status();
    (flag == "--sample"         ? options.sample
     : flag == "--test-batches" ? options.test_batches
                                : options.eval_batches) = *n;
  } else if (flag == "--global-batch") {
    absl::StatusOr<int64_t> n = ParseCount(flag, value, 1);
    if (!n.ok())
      return n.status();
    options.global_batch = *n;
  } else if (flag == "--nproc") {
    int32_t n = 0;
    if (!absl::SimpleAtoi(value, &n) || n < 1 || n > 1024)
      return BadNumber(flag, value, "a number of ranks from 1 to 1024");
    options.nproc = n;
  } else if (flag == "--threads") {
    int32_t n = 0;
    if (!absl::SimpleAtoi(value, &n) || n < 1 || n > 4096)
      return BadNumber(flag, value, "a number of threads from 1 to 4096");
    options.threads = n;
  } else if (flag == "--gpu") {
    int32_t gpu = 0;
    if (!absl::SimpleAtoi(value, &gpu) || gpu < 0)
      return BadNumber(flag, value, "a GPU number (0, 1, ...)");
    options.gpu = gpu;
  } else if (flag == "--lr") {
    double lr = 0;
    // The step takes a float: 1e39 would silently become infinity.
    if (!absl::SimpleAtod(value, &lr) || !std::isfinite(lr) || lr <= 0 ||
        lr > std::numeric_limits<float>::max())
      return BadNumber(flag, value, "a positive number (float32 range)");
    options.learning_rate = lr;
  } else if (flag == "--temperature") {
    double t = 0;
    if (!absl::SimpleAtod(value, &t) || !std::isfinite(t) || t < 0)
      return BadNumber(flag, value, "a non-negative number");
    options.temperature = t;
  } else if (flag == "--seed") {
    uint64_t seed = 0;
    if (!absl::SimpleAtoi(value, &seed))
      return BadNumber(flag, value, "an unsigned 64-bit integer");
    options.seed = seed;
    options.seed_given = true;
  }
  return absl::OkStatus();
}

// Flags that only make sense with another one.
absl::Status CheckFlagPairs(const std::set<std::string> &seen) {
  static const std::pair<const char *, const char *> kNeeds[] = {
      {"--prompt", "--sample"},
      {"--temperature", "--sample"},  {"--num-samples", "--sample"},
      {"--top-k", "--sample"},        {"--top-p", "--sample"},
      {"--sampler", "--sample"},      {"--context-keep", "--sample"},
      {"--eval-every", "--val"},
      {"--eval-batches", "--val"},    {"--data-order", "--data"},
      {"--test", "--data"},           {"--test-batches", "--data"},
      {"--ckpt-every", "--ckpt-dir"},
      {"--keep", "--ckpt-dir"},       {"--resume", "--ckpt-dir"},
      {"--init-from-ignore-extra", "--init-from"}};
  for (const auto &[flag, needed] : kNeeds)
    if (seen.count(flag) && !seen.count(needed))
      return UsageError(absl::StrCat(flag, " needs ", needed));
  return absl::OkStatus();
}

} // namespace

absl::StatusOr<Options> ParseOptions(const std::vector<std::string> &args) {
  static const std::set<std::string> kValueFlags = {
      "--data",         "--test",      "--val",          "--data-order",
      "--eval-every",   "--eval-batches", "--test-batches", "--steps", "--epochs",
      "--lr",           "--seed",      "--log-every",    "--init-from",
      "--save-weights", "--sample",    "--prompt",       "--vocab",
      "--temperature",  "--save-train-outputs", "--ckpt-dir", "--ckpt-every",
      "--keep",         "--metrics",   "--on-nan",       "--loader-depth",
      "--gpu",          "--nproc",     "--global-batch", "--num-samples",
      "--top-k",        "--top-p",     "--sampler",      "--context-keep",
      "--encode-cache",
      "--encode-cache-limit", "--threads"};
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
    if ((flag == "--info" || flag == "--resume" || flag == "--diagnose" ||
         flag == "--profile" || flag == "--init-from-ignore-extra" ||
         flag == "--no-encode-cache") &&
        equals == std::string::npos) {
      if (!seen.insert(flag).second)
        return UsageError(absl::StrCat(flag, " given twice"));
      (flag == "--info"       ? options.info
       : flag == "--resume"   ? options.resume
       : flag == "--profile"  ? options.profile
       : flag == "--init-from-ignore-extra" ? options.init_from_ignore_extra
       : flag == "--no-encode-cache" ? options.no_encode_cache
                              : options.diagnose) = true;
      continue;
    }
    if (!kValueFlags.count(flag))
      return UsageError(absl::StrCat("unknown flag '", arg, "'", DidYouMean(flag, kUsage)));
    if (!seen.insert(flag).second && flag != "--prompt")
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
  // --info runs nothing; --diagnose --gpu N checks that GPU.
  if (options.gpu && options.info)
    return UsageError("--gpu does not apply to --info");
  if (options.nproc && (options.info || options.diagnose))
    return UsageError(absl::StrCat("--nproc does not apply to ",
                                   options.info ? "--info" : "--diagnose"));
  if (options.profile && (options.info || options.diagnose))
    return UsageError(absl::StrCat("--profile does not apply to ",
                                   options.info ? "--info" : "--diagnose"));
  if (options.diagnose)
    return options; // a machine report, with or without a step
  if (options.step_path.empty())
    return UsageError("missing STEP.so (see trun --help)");
  if (options.info)
    return options;
  if (options.nproc && options.gpu)
    return UsageError("--gpu does not apply with --nproc (rank r drives GPU r)");
  // A token model may only evaluate (--val) or only sample (--sample).
  if (options.data.empty() && !options.val && options.sample == 0)
    return UsageError("missing --data (see trun --help)");
  if (options.steps && options.epochs)
    return UsageError("give --steps or --epochs, not both");
  if (options.data.empty() && (options.epochs || options.steps.value_or(0)))
    return UsageError(absl::StrCat(options.epochs ? "--epochs" : "--steps",
                                   " needs --data (training data)"));
  if (absl::Status s = CheckFlagPairs(seen); !s.ok())
    return s;
  return options;
}

} // namespace tcc::trun
