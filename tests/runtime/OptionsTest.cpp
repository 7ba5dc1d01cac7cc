// trun's command line as tables: arguments -> the fields they set, and
// arguments -> the one-line usage error. Each TEST keeps its name and runs its
// table row by row (the row's arguments are traced on failure).
#include "runtime/trun/cli/Options.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

namespace tcc::trun {
namespace {

using Args = std::vector<std::string>;

std::string Joined(const Args &args) {
  std::string text = "args:";
  for (const std::string &arg : args)
    text += " '" + arg + "'";
  return text;
}

// Option fields as text, so one table row can name any of them. Unset
// optionals read "unset"; doubles are printed to round-trip exactly.
std::string Text(const std::string &s) { return s; }
std::string Text(bool b) { return b ? "true" : "false"; }
std::string Text(int64_t i) { return std::to_string(i); }
std::string Text(int32_t i) { return std::to_string(i); }
std::string Text(uint64_t u) { return std::to_string(u); }
std::string Text(double d) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.17g", d);
  return buffer;
}
std::string Text(DataOrder o) {
  return o == DataOrder::kRandom ? "random" : "sequential";
}
std::string Text(OnNan o) { return o == OnNan::kStop ? "stop" : "skip"; }
template <typename T> std::string Text(const std::optional<T> &value) {
  return value ? Text(*value) : "unset";
}
// Repeatable flags: the values joined by '|'; none: "unset".
std::string Text(const std::vector<std::string> &values) {
  std::string all;
  for (const std::string &v : values)
    all += (all.empty() ? "" : "|") + v;
  return values.empty() ? "unset" : all;
}

std::map<std::string, std::string> Fields(const Options &o) {
  return {{"step_path", Text(o.step_path)},
          {"data", Text(o.data)},
          {"test", Text(o.test)},
          {"val", Text(o.val)},
          {"data_order", Text(o.data_order)},
          {"eval_every", Text(o.eval_every)},
          {"eval_batches", Text(o.eval_batches)},
          {"steps", Text(o.steps)},
          {"epochs", Text(o.epochs)},
          {"learning_rate", Text(o.learning_rate)},
          {"seed", Text(o.seed)},
          {"seed_given", Text(o.seed_given)},
          {"log_every", Text(o.log_every)},
          {"init_from", Text(o.init_from)},
          {"init_from_ignore_extra", Text(o.init_from_ignore_extra)},
          {"save_weights", Text(o.save_weights)},
          {"save_train_outputs", Text(o.save_train_outputs)},
          {"sample", Text(o.sample)},
          {"prompts", Text(o.prompts)},
          {"num_samples", Text(o.num_samples)},
          {"top_k", Text(o.top_k)},
          {"top_p", Text(o.top_p)},
          {"eval_sampler", Text(o.eval_sampler)},
          {"vocab", Text(o.vocab)},
          {"temperature", Text(o.temperature)},
          {"ckpt_dir", Text(o.ckpt_dir)},
          {"ckpt_every", Text(o.ckpt_every)},
          {"keep", Text(o.keep)},
          {"resume", Text(o.resume)},
          {"metrics", Text(o.metrics)},
          {"on_nan", Text(o.on_nan)},
          {"loader_depth", Text(o.loader_depth)},
          {"gpu", Text(o.gpu)},
          {"profile", Text(o.profile)},
          {"info", Text(o.info)},
          {"diagnose", Text(o.diagnose)},
          {"help", Text(o.help)}};
}

// Arguments that parse, and the fields (by name) they must set; fields not
// named are not checked. A row with no fields only has to parse.
struct Accepted {
  Args args;
  std::map<std::string, std::string> fields;
};

void ExpectAccepted(const std::vector<Accepted> &table) {
  for (const Accepted &row : table) {
    SCOPED_TRACE(Joined(row.args));
    absl::StatusOr<Options> options = ParseOptions(row.args);
    if (!options.ok()) {
      ADD_FAILURE() << options.status();
      continue;
    }
    std::map<std::string, std::string> actual = Fields(*options);
    for (const auto &[field, expected] : row.fields) {
      auto it = actual.find(field);
      if (it == actual.end())
        ADD_FAILURE() << "the table names no Options field '" << field << "'";
      else
        EXPECT_EQ(it->second, expected) << "field " << field;
    }
  }
}

// Arguments that do not parse, and the whole usage error they give.
struct Rejected {
  Args args;
  std::string error;
};

void ExpectRejected(const std::vector<Rejected> &table) {
  for (const Rejected &row : table) {
    SCOPED_TRACE(Joined(row.args));
    absl::StatusOr<Options> options = ParseOptions(row.args);
    if (options.ok()) {
      ADD_FAILURE() << "parsed, expected the error: " << row.error;
      continue;
    }
    EXPECT_EQ(std::string(options.status().message()), row.error);
  }
}

TEST(OptionsTest, ParsesEveryFlag) {
  ExpectAccepted({{{"step.so", "--data", "dir", "--test=i,l", "--steps", "12",
                    "--lr", "0.25", "--seed=18446744073709551615",
                    "--log-every", "0"},
                   {{"step_path", "step.so"},
                    {"data", "dir"},
                    {"test", "i,l"},
                    {"steps", "12"},
                    {"epochs", "unset"},
                    {"learning_rate", "0.25"},
                    {"seed", "18446744073709551615"},
                    {"log_every", "0"},
                    {"info", "false"}}}});
}

TEST(OptionsTest, Defaults) {
  ExpectAccepted({{{"--data", "d", "s.so"},
                   {{"seed", "0"},
                    {"log_every", "100"},
                    {"steps", "unset"},
                    {"epochs", "unset"},
                    {"learning_rate", "unset"},
                    {"test", "unset"}}}});
}

TEST(OptionsTest, InfoNeedsNoData) {
  ExpectAccepted({{{"s.so", "--info"}, {{"info", "true"}}}});
}

TEST(OptionsTest, HelpWinsOverEverythingElse) {
  // An error before --help is still an error.
  EXPECT_FALSE(ParseOptions({"--bogus", "--help"}).ok());
  ExpectAccepted({{{"--help", "--bogus"}, {{"help", "true"}}}});
}

TEST(OptionsTest, RejectsBadUsage) {
  ExpectRejected({
      {{}, "missing STEP.so (see trun --help)"},
      {{"s.so"}, "missing --data (see trun --help)"},
      {{"s.so", "--data", "d", "--frobnicate"}, "unknown flag '--frobnicate'"},
      {{"s.so", "--data", "d", "--stepz", "3"}, "unknown flag '--stepz' (did you mean --steps?)"},
      {{"s.so", "--data", "d", "--chkpt-dir", "c"},
       "unknown flag '--chkpt-dir' (did you mean --ckpt-dir?)"},
      {{"s.so", "--data"}, "--data needs a value"},
      {{"s.so", "--data", "--steps", "3"}, "--data needs a value"},
      {{"s.so", "--data="}, "--data needs a value"},
      {{"s.so", "--data", "d", "--steps", "ten"},
       "--steps expects a non-negative integer, got 'ten'"},
      {{"s.so", "--data", "d", "--steps", "-1"},
       "--steps expects a non-negative integer, got '-1'"},
      {{"s.so", "--data", "d", "--epochs", "1.5"},
       "--epochs expects a non-negative integer, got '1.5'"},
      {{"s.so", "--data", "d", "--lr", "0"},
       "--lr expects a positive number (float32 range), got '0'"},
      {{"s.so", "--data", "d", "--lr", "nan"},
       "--lr expects a positive number (float32 range), got 'nan'"},
      {{"s.so", "--data", "d", "--lr", "1e39"},
       "--lr expects a positive number (float32 range), got '1e39'"},
      {{"s.so", "--data", "d", "--seed", "-3"},
       "--seed expects an unsigned 64-bit integer, got '-3'"},
      {{"s.so", "--data", "d", "--steps", "1", "--epochs", "1"},
       "give --steps or --epochs, not both"},
      {{"s.so", "--data", "d", "--seed", "1", "--seed=2"},
       "--seed given twice"},
      {{"s.so", "other.so", "--data", "d"},
       "unexpected argument 'other.so' (one STEP.so only)"},
      {{"s.so", "--info=yes"}, "unknown flag '--info=yes'"},
  });
}

TEST(OptionsTest, ParsesCheckpointMetricsAndNanFlags) {
  ExpectAccepted({
      {{"s.so", "--data", "d", "--ckpt-dir", "ck", "--ckpt-every", "50",
        "--keep", "3", "--resume", "--metrics", "m.jsonl", "--on-nan", "skip",
        "--loader-depth", "8"},
       {{"ckpt_dir", "ck"},
        {"ckpt_every", "50"},
        {"keep", "3"},
        {"resume", "true"},
        {"metrics", "m.jsonl"},
        {"on_nan", "skip"},
        {"loader_depth", "8"},
        {"seed_given", "false"}}},
      {{"s.so", "--data", "d", "--seed", "3"},
       {{"seed_given", "true"}, {"on_nan", "stop"}, {"resume", "false"}}},
  });
}

TEST(OptionsTest, DiagnoseNeedsNoStepOrData) {
  ExpectAccepted({
      {{"--diagnose"}, {{"diagnose", "true"}, {"step_path", ""}}},
      {{"s.so", "--diagnose"}, {{"step_path", "s.so"}}},
  });
  ExpectRejected({{{"--diagnose", "--diagnose"}, "--diagnose given twice"}});
}

TEST(OptionsTest, RejectsBadCheckpointFlags) {
  ExpectRejected({
      {{"s.so", "--data", "d", "--resume"}, "--resume needs --ckpt-dir"},
      {{"s.so", "--data", "d", "--ckpt-every", "5"},
       "--ckpt-every needs --ckpt-dir"},
      {{"s.so", "--data", "d", "--keep", "2"}, "--keep needs --ckpt-dir"},
      {{"s.so", "--data", "d", "--ckpt-dir", "c", "--ckpt-every", "0"},
       "--ckpt-every expects a positive integer, got '0'"},
      {{"s.so", "--data", "d", "--ckpt-dir", "c", "--keep", "-1"},
       "--keep expects a positive integer, got '-1'"},
      {{"s.so", "--data", "d", "--on-nan", "ignore"},
       "--on-nan expects stop or skip, got 'ignore'"},
      {{"s.so", "--data", "d", "--loader-depth", "0"},
       "--loader-depth expects a positive integer, got '0'"},
      {{"s.so", "--data", "d", "--ckpt-dir", "c", "--resume", "--resume"},
       "--resume given twice"},
      {{"s.so", "--data", "d", "--ckpt-dir", "c", "--resume=yes"},
       "unknown flag '--resume=yes'"},
  });
}

TEST(OptionsTest, ParsesTheGpuFlag) {
  ExpectAccepted({
      {{"s.so", "--data", "d", "--gpu", "3"}, {{"gpu", "3"}}},
      // GPU 0, and fine for a cpu step.
      {{"s.so", "--data", "d"}, {{"gpu", "unset"}}},
      {{"s.so", "--data", "d", "--profile"}, {{"profile", "true"}}},
      // --diagnose checks the GPU --gpu names.
      {{"s.so", "--diagnose", "--gpu=1"}, {{"gpu", "1"}}},
  });
  std::vector<Rejected> rejected;
  for (const char *bad : {"-1", "x", "1.5", "4294967296"})
    rejected.push_back(
        {{"s.so", "--data", "d", "--gpu", bad},
         std::string("--gpu expects a GPU number (0, 1, ...), got '") + bad +
             "'"});
  rejected.insert(
      rejected.end(),
      {{{"s.so", "--info", "--gpu", "1"}, "--gpu does not apply to --info"},
       {{"s.so", "--data", "d", "--nproc", "0"},
        "--nproc expects a number of ranks from 1 to 1024, got '0'"},
       {{"s.so", "--data", "d", "--nproc", "two"},
        "--nproc expects a number of ranks from 1 to 1024, got 'two'"},
       {{"s.so", "--data", "d", "--threads", "0"},
        "--threads expects a number of threads from 1 to 4096, got '0'"},
       {{"s.so", "--data", "d", "--threads", "-2"},
        "--threads expects a number of threads from 1 to 4096, got '-2'"},
       {{"s.so", "--data", "d", "--nproc", "2", "--gpu", "1"},
        "--gpu does not apply with --nproc (rank r drives GPU r)"},
       {{"s.so", "--info", "--nproc", "2"}, "--nproc does not apply to --info"},
       {{"s.so", "--data", "d", "--global-batch", "0"},
        "--global-batch expects a positive integer, got '0'"},
       {{"s.so", "--info", "--profile"}, "--profile does not apply to --info"},
       {{"s.so", "--diagnose", "--profile"},
        "--profile does not apply to --diagnose"},
       {{"s.so", "--profile", "--profile"}, "--profile given twice"}});
  ExpectRejected(rejected);
}

// docs/runtime.md must quote `trun --help` verbatim.
TEST(OptionsTest, DocsQuoteTheHelpText) {
  std::ifstream docs(TRUN_TEST_DOCS);
  ASSERT_TRUE(docs.good()) << "cannot read " << TRUN_TEST_DOCS;
  std::stringstream text;
  text << docs.rdbuf();
  EXPECT_NE(text.str().find(std::string("```\n") + kUsage + "```\n"),
            std::string::npos)
      << TRUN_TEST_DOCS << " does not contain the current --help text";
}

TEST(OptionsTest, ParsesTokenWeightAndSamplingFlags) {
  ExpectAccepted({
      {{"s.so", "--data", "d/train_*.bin", "--val=v.bin", "--data-order",
        "sequential", "--eval-every", "50", "--eval-batches", "4",
        "--init-from", "a.safetensors", "--save-weights", "b.safetensors",
        "--sample", "30", "--prompt", "Once upon", "--vocab", "v.json",
        "--temperature", "0"},
       {{"data", "d/train_*.bin"},
        {"val", "v.bin"},
        {"data_order", "sequential"},
        {"eval_every", "50"},
        {"eval_batches", "4"},
        {"init_from", "a.safetensors"},
        {"save_weights", "b.safetensors"},
        {"sample", "30"},
        {"prompts", "Once upon"},
        {"vocab", "v.json"},
        {"temperature", "0"}}},
      // Defaults: random order (unset), 20 eval batches, temperature 1.
      {{"s.so", "--data", "t.bin"},
       {{"data_order", "unset"}, {"eval_batches", "20"}, {"temperature", "1"}}},
      // Evaluating or sampling alone needs no training data.
      {{"s.so", "--val", "v.bin"}, {}},
      {{"s.so", "--sample", "5"}, {}},
      // Generation: several prompts, samples per prompt, top-k / top-p, the
      // sampler; defaults 1 sample, no filtering, the cache path.
      {{"s.so", "--sample", "5", "--prompt", "a", "--prompt=b c", "--num-samples", "3",
        "--top-k", "40", "--top-p", "0.9", "--sampler", "eval"},
       {{"prompts", "a|b c"},
        {"num_samples", "3"},
        {"top_k", "40"},
        {"top_p", "0.90000000000000002"},
        {"eval_sampler", "true"}}},
      {{"s.so", "--sample", "5", "--top-p", "1"},
       {{"prompts", "unset"}, {"num_samples", "1"}, {"top_k", "0"}, {"top_p", "1"},
        {"eval_sampler", "false"}}},
  });
}

TEST(OptionsTest, RejectsBadTokenAndSamplingUsage) {
  ExpectRejected({
      {{"s.so", "--data", "d", "--data-order", "shuffle"},
       "--data-order expects random or sequential, got 'shuffle'"},
      {{"s.so", "--data", "d", "--eval-batches", "0"},
       "--eval-batches expects a positive integer, got '0'"},
      {{"s.so", "--sample", "0"},
       "--sample expects a positive integer, got '0'"},
      {{"s.so", "--sample", "3", "--temperature", "nan"},
       "--temperature expects a non-negative number, got 'nan'"},
      {{"s.so", "--data", "d", "--prompt", "x"}, "--prompt needs --sample"},
      {{"s.so", "--sample", "3", "--top-p", "0"},
       "--top-p expects a number in (0, 1], got '0'"},
      {{"s.so", "--sample", "3", "--top-p", "1.5"},
       "--top-p expects a number in (0, 1], got '1.5'"},
      {{"s.so", "--sample", "3", "--top-k", "0"},
       "--top-k expects a positive integer, got '0'"},
      {{"s.so", "--sample", "3", "--num-samples", "-1"},
       "--num-samples expects a positive integer, got '-1'"},
      {{"s.so", "--sample", "3", "--sampler", "fast"},
       "--sampler expects cache or eval, got 'fast'"},
      {{"s.so", "--data", "d", "--top-k", "5"}, "--top-k needs --sample"},
      {{"s.so", "--sample", "3", "--top-k", "2", "--top-k", "3"}, "--top-k given twice"},
      {{"s.so", "--data", "d", "--eval-every", "5"},
       "--eval-every needs --val"},
      {{"s.so", "--val", "v", "--data-order", "random"},
       "--data-order needs --data"},
      {{"s.so", "--sample", "3", "--epochs", "2"},
       "--epochs needs --data (training data)"},
      {{"s.so", "--val", "v", "--steps", "1"},
       "--steps needs --data (training data)"},
  });
  ExpectAccepted({{{"s.so", "--val", "v", "--steps", "0"}, {}}});
}

TEST(OptionsTest, InitFromIgnoreExtraGoesWithInitFrom) {
  ExpectAccepted({{{"s.so", "--data", "d", "--init-from", "w.safetensors",
                    "--init-from-ignore-extra"},
                   {{"init_from", "w.safetensors"}, {"init_from_ignore_extra", "true"}}},
                  {{"s.so", "--data", "d"}, {{"init_from_ignore_extra", "false"}}}});
  ExpectRejected({
      {{"s.so", "--data", "d", "--init-from-ignore-extra"},
       "--init-from-ignore-extra needs --init-from"},
      {{"s.so", "--init-from", "w", "--init-from-ignore-extra", "--init-from-ignore-extra"},
       "--init-from-ignore-extra given twice"},
  });
}

} // namespace
} // namespace tcc::trun
