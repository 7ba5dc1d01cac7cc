#include "runtime/trun/train/Metrics.h"

#include "tests/runtime/TestData.h"

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <vector>

namespace tcc::trun {
namespace {

using testing::TempDir;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr const char *kClear = "\r\x1b[K";

// A reporter on a clock the test moves by hand.
class ScriptedReporter : public ProgressReporter {
public:
  ScriptedReporter(std::ostream &out, bool live, int64_t total_steps,
                   int64_t first_step, int64_t log_every, std::string unit,
                   const double *clock)
      : ProgressReporter(out, live, total_steps, first_step, log_every,
                         std::move(unit), [clock] { return *clock; }) {}
};

std::vector<std::string> Lines(const std::string &text) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  if (!lines.empty() && lines.back().empty())
    lines.pop_back();
  return lines;
}

std::vector<std::string> FileLines(const std::string &path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return Lines(text.str());
}

size_t Count(const std::string &text, const std::string &piece) {
  size_t count = 0;
  for (size_t at = text.find(piece); at != std::string::npos;
       at = text.find(piece, at + piece.size()))
    ++count;
  return count;
}

StepRecord Step(int64_t step, double loss, double lr,
                std::optional<double> grad_norm, double step_seconds,
                double wait_seconds, int64_t items) {
  StepRecord record;
  record.step = step;
  record.loss = loss;
  record.learning_rate = lr;
  record.grad_norm = grad_norm;
  record.step_seconds = step_seconds;
  record.data_wait_seconds = wait_seconds;
  record.items = items;
  return record;
}

// --- plain mode --------------------------------------------------------------

TEST(ProgressReporterTest, PlainLinesEveryLogEverySteps) {
  // 100 steps of 1.5 s wall each: 1.2 s in the train call, 0.03 s waiting,
  // 20480 tokens; loss and grad norm change every step, lr decays.
  const int64_t total = 100, every = 50, tokens = 20480;
  const double wall = 1.5, train = 1.2, wait = 0.03;
  auto loss = [](int64_t s) { return 3.0 - 0.01 * s; };
  auto norm = [](int64_t s) { return 0.5 + 0.002 * s; };
  auto lr = [](int64_t s) { return 3e-4 * (1.0 - s / 200.0); };
  std::ostringstream out;
  double clock = 1000;
  ScriptedReporter reporter(out, /*live=*/false, total, /*first_step=*/0, every,
                            "tokens", &clock);
  for (int64_t s = 1; s <= total; ++s) {
    clock += wall;
    reporter.OnStep(Step(s, loss(s), lr(s), norm(s), train, wait, tokens));
  }
  reporter.Finish();

  // Per window of 50 steps: 50 * 20480 tokens / 75 s = 13653.3 -> "13.7K";
  // wait 50 * 0.03 / 75 = 2%; ETA at step 50: 1.5 s * 50 left = 1m15s.
  const char *eta[] = {"1m15s", "0s"};
  std::vector<std::string> expected;
  for (int64_t end = every; end <= total; end += every) {
    double loss_sum = 0, norm_sum = 0;
    for (int64_t s = end - every + 1; s <= end; ++s) {
      loss_sum += loss(s);
      norm_sum += norm(s);
    }
    expected.push_back(absl::StrFormat(
        "step %d/%d  loss %.4f  lr %.2e  grad norm %.3g  13.7K tokens/s  "
        "%.1f ms/step  data wait %.1f%%  ETA %s",
        end, total, loss_sum / every, lr(end), norm_sum / every, train * 1e3,
        100 * wait / wall, eta[end / every - 1]));
  }
  EXPECT_EQ(Lines(out.str()), expected);
  // The computed pieces, spelled out once for a reader.
  EXPECT_NE(expected[0].find("loss 2.7450  lr 2.25e-04  grad norm 0.551"),
            std::string::npos)
      << expected[0];
  EXPECT_NE(expected[0].find("1200.0 ms/step  data wait 2.0%"),
            std::string::npos);
  EXPECT_EQ(out.str().find('\r'), std::string::npos);
}

TEST(ProgressReporterTest, PlainLineWithoutGradNormAndWithSamples) {
  // 4 steps of 0.5 s with 256 samples: 512 samples/s, under 1000 -> "512".
  std::ostringstream out;
  double clock = 0;
  ScriptedReporter reporter(out, false, 8, 0, 4, "samples", &clock);
  const double losses[] = {0.9, 0.7, 0.6, 0.4};
  for (int64_t s = 1; s <= 4; ++s) {
    clock += 0.5;
    reporter.OnStep(Step(s, losses[s - 1], 0.05, std::nullopt, 0.25, 0, 256));
  }
  double mean = (0.9 + 0.7 + 0.6 + 0.4) / 4;
  // ETA: 2 s / 4 steps * 4 left = 2 s.
  EXPECT_EQ(out.str(),
            absl::StrFormat("step 4/8  loss %.4f  lr 5.00e-02  512 samples/s  "
                            "250.0 ms/step  data wait 0.0%%  ETA 2s\n",
                            mean));
}

TEST(ProgressReporterTest, ResumedRunCountsStepsAndEtaFromThisProcess) {
  // Resumed after 40 of 100 steps; log every 25: the first line is at step
  // 50 and covers 10 steps; the ETA uses this process's 10 steps (2 s each).
  std::ostringstream out;
  double clock = 0;
  ScriptedReporter reporter(out, false, 100, 40, 25, "tokens", &clock);
  for (int64_t s = 41; s <= 50; ++s) {
    clock += 2;
    reporter.OnStep(Step(s, 1.0, 1e-3, 1.0, 1.0, 0.5, 1000));
  }
  // 10000 tokens / 20 s = 500; wait 5 s / 20 s = 25%; ETA 2 s * 50 = 1m40s.
  EXPECT_EQ(out.str(), "step 50/100  loss 1.0000  lr 1.00e-03  grad norm 1  "
                       "500 tokens/s  1000.0 ms/step  data wait 25.0%  "
                       "ETA 1m40s\n");
}

TEST(ProgressReporterTest, LargeRatesAndLongEtas) {
  std::ostringstream out;
  double clock = 0;
  ScriptedReporter reporter(out, false, 10000, 0, 1, "tokens", &clock);
  clock += 0.5;
  reporter.OnStep(Step(1, 2.0, 1e-4, std::nullopt, 0.5, 0, 2000000));
  // 2e6 / 0.5 s = 4.0M tokens/s; ETA 0.5 s * 9999 = 4999.5 s -> 1h23m20s.
  EXPECT_EQ(out.str(), "step 1/10000  loss 2.0000  lr 1.00e-04  4.0M tokens/s  "
                       "500.0 ms/step  data wait 0.0%  ETA 1h23m20s\n");
}

TEST(ProgressReporterTest, SkippedStepsAreCountedNotAveraged) {
  std::ostringstream out;
  double clock = 0;
  ScriptedReporter reporter(out, false, 3, 0, 3, "tokens", &clock);
  StepRecord skipped = Step(2, kNaN, 1e-3, kNaN, 1, 0, 100);
  skipped.skipped = true;
  for (StepRecord record : {Step(1, 2.0, 1e-3, 1.0, 1, 0, 100), skipped,
                            Step(3, 3.0, 1e-3, 3.0, 1, 0, 100)}) {
    clock += 1;
    reporter.OnStep(record);
  }
  // loss (2 + 3) / 2, grad norm (1 + 3) / 2: the NaNs are left out.
  EXPECT_EQ(out.str(), "step 3/3  loss 2.5000  skipped 1  lr 1.00e-03  "
                       "grad norm 2  100 tokens/s  1000.0 ms/step  "
                       "data wait 0.0%  ETA 0s\n");
}

TEST(ProgressReporterTest, PlainLogEveryZeroPrintsOnlyMessages) {
  std::ostringstream out;
  double clock = 0;
  ScriptedReporter reporter(out, false, 10, 0, 0, "tokens", &clock);
  for (int64_t s = 1; s <= 10; ++s) {
    clock += 1;
    reporter.OnStep(Step(s, 1, 1, 1, 1, 0, 1));
  }
  EXPECT_EQ(out.str(), "");
  reporter.Message("val loss 1.2345");
  reporter.Finish();
  EXPECT_EQ(out.str(), "val loss 1.2345\n");
}

// --- live mode ---------------------------------------------------------------

TEST(ProgressReporterTest, LiveRedrawsOneLineAtMostEvery100ms) {
  // Steps 1/32 s apart: drawn at step 1 (the first), then when 0.1 s have
  // passed since the last draw (step 5 at 5/32, step 9 at 9/32), and at the
  // last step 10.
  std::ostringstream out;
  double clock = 0;
  ScriptedReporter reporter(out, /*live=*/true, 10, 0, 100, "tokens", &clock);
  for (int64_t s = 1; s <= 10; ++s) {
    clock += 1.0 / 32;
    reporter.OnStep(Step(s, /*loss=*/s, 1e-3, std::nullopt, 0.03125, 0, 32));
  }
  std::string text = out.str();
  EXPECT_EQ(text.find('\n'), std::string::npos);
  std::vector<std::string> draws = absl::StrSplit(text, kClear);
  ASSERT_EQ(draws.size(), 5u) << text; // "" before the first \r
  EXPECT_EQ(draws[0], "");
  // Each draw: the bar (20 wide, step/10 full) and the window's mean loss.
  struct Draw {
    int64_t step;
    double mean_loss;
  } want[] = {
      {1, 1}, {5, (2 + 3 + 4 + 5) / 4.0}, {9, (6 + 7 + 8 + 9) / 4.0}, {10, 10}};
  for (int i = 0; i < 4; ++i) {
    int64_t filled = want[i].step * 20 / 10;
    std::string bar =
        "[" + std::string(filled, '#') + std::string(20 - filled, '.') + "] ";
    std::string head = absl::StrFormat("%sstep %d/10  loss %.4f  ", bar,
                                       want[i].step, want[i].mean_loss);
    EXPECT_EQ(draws[i + 1].substr(0, head.size()), head) << draws[i + 1];
  }
  // 32 tokens per 1/32 s = 1024 tokens/s on every draw.
  EXPECT_EQ(Count(text, "1.0K tokens/s"), 4u);
  EXPECT_NE(draws[4].find("ETA 0s"), std::string::npos);
  reporter.Finish();
  EXPECT_EQ(out.str(), text + "\n");
}

TEST(ProgressReporterTest, LiveMessageClearsTheBarAndRedrawsIt) {
  std::ostringstream out;
  double clock = 0;
  ScriptedReporter reporter(out, true, 100, 0, 100, "samples", &clock);
  clock = 1;
  reporter.OnStep(Step(1, 0.5, 0.1, std::nullopt, 0.5, 0, 10));
  std::string bar = out.str();
  ASSERT_EQ(bar.substr(0, std::strlen(kClear)), kClear);
  bar = bar.substr(std::strlen(kClear));
  reporter.Message("eval step 1: val loss 0.4321");
  EXPECT_EQ(out.str(), std::string(kClear) + bar + kClear +
                           "eval step 1: val loss 0.4321\n" + bar);
  reporter.Finish();
  EXPECT_EQ(out.str().back(), '\n');
  // After Finish there is no bar to clear: a plain line.
  size_t before = out.str().size();
  reporter.Message("done");
  EXPECT_EQ(out.str().substr(before), "done\n");
}

TEST(ProgressReporterTest, LiveMessageBeforeAnyStepIsAPlainLine) {
  std::ostringstream out;
  double clock = 0;
  ScriptedReporter reporter(out, true, 100, 0, 100, "tokens", &clock);
  reporter.Message("resumed from step 0");
  reporter.Finish();
  EXPECT_EQ(out.str(), "resumed from step 0\n");
}

TEST(ProgressReporterTest, LiveFinishDrawsStepsHeldBackByTheRateLimit) {
  // Stopped early (e.g. interrupted) at step 3 of 100, steps 10 ms apart:
  // only step 1 was drawn; Finish shows step 3 before the newline.
  std::ostringstream out;
  double clock = 0;
  ScriptedReporter reporter(out, true, 100, 0, 100, "tokens", &clock);
  for (int64_t s = 1; s <= 3; ++s) {
    clock += 0.01;
    reporter.OnStep(Step(s, 1, 1, std::nullopt, 0.01, 0, 1));
  }
  EXPECT_EQ(Count(out.str(), kClear), 1u);
  EXPECT_NE(out.str().find("step 1/100"), std::string::npos);
  reporter.Finish();
  std::string text = out.str();
  EXPECT_EQ(Count(text, kClear), 2u);
  EXPECT_NE(text.find("step 3/100"), std::string::npos);
  EXPECT_EQ(text.find('\n'), text.size() - 1);
  reporter.Finish(); // a second Finish adds nothing
  EXPECT_EQ(out.str(), text);
}

// --- MetricsLog --------------------------------------------------------------

using Json = nlohmann::json;

Json Parse(const std::string &line) {
  Json json = Json::parse(line, nullptr, /*allow_exceptions=*/false);
  EXPECT_TRUE(json.is_object()) << line;
  return json;
}

// Issue 36: two runs given one --metrics file interleaved their records.
// The second one to open it is refused (flock), and the first one's file
// is not truncated by the attempt.
TEST(MetricsLogTest, OneWriterPerFile) {
  TempDir dir;
  std::string path = dir.File("m.jsonl");
  absl::StatusOr<std::unique_ptr<MetricsLog>> first = MetricsLog::Open(path, false);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE((*first)->WriteRunEvent("start", 0, {}).ok());
  for (bool append : {false, true}) {
    absl::StatusOr<std::unique_ptr<MetricsLog>> second = MetricsLog::Open(path, append);
    ASSERT_FALSE(second.ok());
    EXPECT_EQ(second.status().message(),
              "metrics file " + path + " is being written by another process (another "
              "trun?): give each run its own --metrics file");
  }
  first->reset();
  EXPECT_EQ(FileLines(path).size(), 1u);
  EXPECT_TRUE(MetricsLog::Open(path, true).ok()); // free again once closed
}

TEST(MetricsLogTest, RecordsRoundTripThroughJson) {
  TempDir dir;
  std::string path = dir.File("m.jsonl");
  absl::StatusOr<std::unique_ptr<MetricsLog>> log =
      MetricsLog::Open(path, false);
  ASSERT_TRUE(log.ok()) << log.status();
  StepRecord step = Step(17, 2.31, 3e-4, 1.25, 0.15, 0.00001, 2048);
  ASSERT_TRUE((*log)->WriteStep(step, "tokens").ok());
  EvalRecord val{100, "val", 1.93, std::nullopt, 20};
  ASSERT_TRUE((*log)->WriteEval(val).ok());
  EvalRecord test{938, "test", 0.41, 0.85, 79};
  ASSERT_TRUE((*log)->WriteEval(test).ok());
  ASSERT_TRUE((*log)
                  ->WriteRunEvent("checkpoint", 100,
                                  {{"path", "ckpt/step-100"}, {"why", "every"}})
                  .ok());
  log->reset(); // closes the file

  std::vector<std::string> lines = FileLines(path);
  ASSERT_EQ(lines.size(), 4u);
  Json s = Parse(lines[0]);
  EXPECT_EQ(s["kind"], "step");
  EXPECT_EQ(s["step"], 17);
  EXPECT_DOUBLE_EQ(s["loss"].get<double>(), step.loss);
  EXPECT_DOUBLE_EQ(s["lr"].get<double>(), step.learning_rate);
  EXPECT_DOUBLE_EQ(s["grad_norm"].get<double>(), 1.25);
  EXPECT_DOUBLE_EQ(s["step_ms"].get<double>(), step.step_seconds * 1e3);
  EXPECT_DOUBLE_EQ(s["data_wait_ms"].get<double>(),
                   step.data_wait_seconds * 1e3);
  EXPECT_DOUBLE_EQ(s["items_per_s"].get<double>(),
                   2048 / (step.step_seconds + step.data_wait_seconds));
  EXPECT_EQ(s["unit"], "tokens");
  // Keys in the documented order.
  EXPECT_EQ(lines[0].rfind(R"({"kind":"step","step":17,"loss":)", 0), 0u)
      << lines[0];

  Json v = Parse(lines[1]);
  EXPECT_EQ(v["kind"], "eval");
  EXPECT_EQ(v["step"], 100);
  EXPECT_DOUBLE_EQ(v["val_loss"].get<double>(), 1.93);
  EXPECT_EQ(v["batches"], 20);
  EXPECT_FALSE(v.contains("accuracy"));
  Json t = Parse(lines[2]);
  EXPECT_EQ(t["step"], 938);
  EXPECT_DOUBLE_EQ(t["test_loss"].get<double>(), 0.41);
  EXPECT_DOUBLE_EQ(t["accuracy"].get<double>(), 0.85);
  EXPECT_EQ(t["batches"], 79);
  Json r = Parse(lines[3]);
  EXPECT_EQ(r["kind"], "run");
  EXPECT_EQ(r["event"], "checkpoint");
  EXPECT_EQ(r["step"], 100);
  EXPECT_EQ(r["path"], "ckpt/step-100");
  EXPECT_EQ(r["why"], "every");

  // Every record has time_s: seconds since Open, never decreasing.
  double previous = 0;
  for (const std::string &line : lines) {
    Json json = Parse(line);
    ASSERT_TRUE(json["time_s"].is_number()) << line;
    EXPECT_GE(json["time_s"].get<double>(), previous);
    previous = json["time_s"].get<double>();
  }
}

TEST(MetricsLogTest, LossScalingFieldsFollowTheGradNorm) {
  TempDir dir;
  std::string path = dir.File("m.jsonl");
  absl::StatusOr<std::unique_ptr<MetricsLog>> log =
      MetricsLog::Open(path, false);
  ASSERT_TRUE(log.ok()) << log.status();
  StepRecord overflow = Step(3, 2.5, 0.1, std::nullopt, 0.1, 0, 64);
  overflow.grad_norm = std::numeric_limits<double>::infinity();
  overflow.loss_scale = 65536;
  overflow.overflow = true;
  overflow.skipped_steps = 2;
  ASSERT_TRUE((*log)->WriteStep(overflow, "samples").ok());
  ASSERT_TRUE((*log)->WriteStep(Step(4, 2.4, 0.1, 1.0, 0.1, 0, 64), "samples").ok());
  log->reset();
  std::vector<std::string> lines = FileLines(path);
  ASSERT_EQ(lines.size(), 2u);
  // An overflow is a step (its loss counts), not an --on-nan "skip".
  EXPECT_NE(lines[0].find(R"("kind":"step","step":3,"loss":2.5,"lr":0.1,)"
                          R"("grad_norm":null,"loss_scale":65536.0,)"
                          R"("overflow":true,"skipped_steps":2,"step_ms")"),
            std::string::npos)
      << lines[0];
  // A step without loss scaling has none of these fields.
  EXPECT_EQ(lines[1].find("loss_scale"), std::string::npos) << lines[1];
  EXPECT_EQ(lines[1].find("overflow"), std::string::npos) << lines[1];
}

TEST(ProgressReporterTest, ShowsTheLatestLossScaleAndCountsOverflows) {
  std::ostringstream out;
  double now = 0;
  ScriptedReporter progress(out, /*live=*/false, 4, /*first_step=*/0, 2,
                            "samples", &now);
  for (int64_t s = 1; s <= 4; ++s) {
    StepRecord r = Step(s, 1.0, 0.1, 1.0, 0.1, 0, 10);
    r.loss_scale = s < 3 ? 65536 : 32768;
    r.overflow = s == 2;
    if (r.overflow)
      r.grad_norm = std::numeric_limits<double>::quiet_NaN();
    now += 0.1;
    progress.OnStep(r);
  }
  EXPECT_NE(out.str().find("step 2/4  loss 1.0000  lr 1.00e-01  grad norm 1  "
                           "loss scale 65536  overflow 1  "),
            std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("step 4/4  loss 1.0000  lr 1.00e-01  grad norm 1  "
                           "loss scale 32768  100 samples/s"),
            std::string::npos)
      << out.str();
}

// --- FP8 delayed scaling ------------------------------------------------------

// One tcc_fp8_scaling_record, written through the struct's own fields.
struct Fp8Site {
  float scale = 0, elements = 0, saturated = 0, flushed = 0, casts = 0;
};

std::vector<float> Fp8Records(const std::vector<Fp8Site> &sites) {
  std::vector<float> data(sites.size() * TCC_FP8_SCALING_RECORD_FLOATS, 0.0f);
  for (size_t i = 0; i < sites.size(); ++i) {
    tcc_fp8_scaling_record r{};
    r.scale = sites[i].scale;
    r.elements = sites[i].elements;
    r.saturated = sites[i].saturated;
    r.flushed = sites[i].flushed;
    r.casts = sites[i].casts;
    r.next = 3;   // fields the summary does not read
    r.amax = 7.5f;
    r.amax_history[0] = 7.5f;
    std::memcpy(&data[i * TCC_FP8_SCALING_RECORD_FLOATS], &r, sizeof r);
  }
  return data;
}

TEST(Fp8ScalingSummaryTest, NoSiteCastYet) {
  std::vector<float> zeros(3 * TCC_FP8_SCALING_RECORD_FLOATS, 0.0f);
  Fp8ScalingSummary s = SummarizeFp8Scaling(zeros.data(), 3);
  EXPECT_EQ(s.sites, 0);
  EXPECT_EQ(s.elements, 0);
  EXPECT_EQ(s.saturated, 0);
  EXPECT_EQ(s.flushed, 0);
  EXPECT_FALSE(s.scale_min);
  EXPECT_FALSE(s.scale_max);
  // No records at all.
  EXPECT_EQ(SummarizeFp8Scaling(nullptr, 0).sites, 0);
  EXPECT_EQ(SummarizeFp8Scaling(zeros.data(), 0).sites, 0);
}

TEST(Fp8ScalingSummaryTest, SumsTheSitesCastAndLeavesTheOthersOut) {
  std::vector<Fp8Site> sites = {
      {2.5f, 1000, 3, 7, 5},
      {},                        // never cast
      {0.0f, 24, 0, 1, 1},       // cast, no scale yet: no scale counted
      {0.125f, 4096, 0, 100, 2},
      {1000.0f, 50, 9, 9, 0},    // casts 0: left out whatever it holds
      {64.0f, 8, 1, 0, 3},
  };
  std::vector<float> data = Fp8Records(sites);
  Fp8ScalingSummary s = SummarizeFp8Scaling(data.data(), 6);
  double elements = 0, saturated = 0, flushed = 0;
  int64_t cast = 0;
  for (const Fp8Site &site : sites)
    if (site.casts > 0) {
      ++cast;
      elements += site.elements;
      saturated += site.saturated;
      flushed += site.flushed;
    }
  EXPECT_EQ(s.sites, cast);
  EXPECT_EQ(s.sites, 4);
  EXPECT_EQ(s.elements, elements);
  EXPECT_EQ(s.elements, 1000 + 24 + 4096 + 8);
  EXPECT_EQ(s.saturated, saturated);
  EXPECT_EQ(s.saturated, 3 + 1);
  EXPECT_EQ(s.flushed, flushed);
  EXPECT_EQ(s.flushed, 7 + 1 + 100);
  ASSERT_TRUE(s.scale_min && s.scale_max);
  EXPECT_EQ(*s.scale_min, 0.125);
  EXPECT_EQ(*s.scale_max, 64.0);
  // Only the first `sites` records are read.
  Fp8ScalingSummary first = SummarizeFp8Scaling(data.data(), 1);
  EXPECT_EQ(first.sites, 1);
  EXPECT_EQ(first.elements, 1000);
  EXPECT_EQ(*first.scale_min, 2.5);
  EXPECT_EQ(*first.scale_max, 2.5);
}

TEST(ProgressReporterTest, ShowsTheLatestFp8Summary) {
  std::ostringstream out;
  double now = 0;
  ScriptedReporter progress(out, /*live=*/false, 6, /*first_step=*/0, 2,
                            "samples", &now);
  for (int64_t s = 1; s <= 6; ++s) {
    StepRecord r = Step(s, 1.0, 0.1, 1.0, 0.1, 0, 10);
    EXPECT_EQ(progress.ShowsLineAt(s), s % 2 == 0);
    Fp8ScalingSummary fp8;
    fp8.sites = 2;
    fp8.elements = 100000;
    if (s == 2)
      fp8.flushed = 12; // 0.012%
    if (s == 4) {
      fp8.saturated = 5; // 0.005%
      fp8.flushed = 2500; // 2.5%
    }
    if (s % 2 == 0 && s != 6) // step 6: the latest summary (step 4's) stays
      r.fp8 = fp8;
    now += 0.1;
    progress.OnStep(r);
  }
  std::vector<std::string> lines = Lines(out.str());
  ASSERT_EQ(lines.size(), 3u) << out.str();
  EXPECT_NE(lines[0].find("grad norm 1  fp8 sat 0 flush 0.012%  100 samples/s"),
            std::string::npos)
      << lines[0];
  EXPECT_NE(lines[1].find("grad norm 1  fp8 sat 5 (0.005%) flush 2.5%  100 samples/s"),
            std::string::npos)
      << lines[1];
  EXPECT_NE(lines[2].find("fp8 sat 5 (0.005%) flush 2.5%"), std::string::npos)
      << lines[2];
}

TEST(ProgressReporterTest, WithoutFp8TheLineHasNoFp8) {
  std::ostringstream out;
  double now = 0;
  ScriptedReporter progress(out, false, 2, 0, 1, "samples", &now);
  now += 0.1;
  progress.OnStep(Step(1, 1.0, 0.1, 1.0, 0.1, 0, 10));
  // A summary with no site cast yet shows zeros.
  StepRecord r = Step(2, 1.0, 0.1, 1.0, 0.1, 0, 10);
  r.fp8 = Fp8ScalingSummary();
  now += 0.1;
  progress.OnStep(r);
  std::vector<std::string> lines = Lines(out.str());
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].find("fp8"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("  fp8 sat 0 flush 0%  "), std::string::npos) << lines[1];
}

TEST(ProgressReporterTest, LiveShowsALineWhenItWouldRedraw) {
  std::ostringstream out;
  double now = 0;
  ScriptedReporter progress(out, /*live=*/true, 10, 0, 100, "tokens", &now);
  EXPECT_TRUE(progress.ShowsLineAt(1)) << "the first step is drawn";
  progress.OnStep(Step(1, 1.0, 0.1, 1.0, 0.01, 0, 10));
  now += 0.05;
  EXPECT_FALSE(progress.ShowsLineAt(2)) << "within 100 ms of the last redraw";
  EXPECT_TRUE(progress.ShowsLineAt(10)) << "the last step is always drawn";
  now += 0.06;
  EXPECT_TRUE(progress.ShowsLineAt(2));
}

TEST(MetricsLogTest, Fp8FieldsFollowTheLossScaling) {
  TempDir dir;
  std::string path = dir.File("m.jsonl");
  absl::StatusOr<std::unique_ptr<MetricsLog>> log = MetricsLog::Open(path, false);
  ASSERT_TRUE(log.ok()) << log.status();
  std::vector<float> data =
      Fp8Records({{0.5f, 3000, 2, 40, 4}, {}, {448.0f, 1000, 0, 1, 4}});
  StepRecord with = Step(4, 2.5, 0.1, 1.0, 0.1, 0, 64);
  with.fp8 = SummarizeFp8Scaling(data.data(), 3);
  ASSERT_TRUE((*log)->WriteStep(with, "tokens").ok());
  StepRecord none_cast = Step(5, 2.5, 0.1, 1.0, 0.1, 0, 64);
  none_cast.fp8 = Fp8ScalingSummary();
  ASSERT_TRUE((*log)->WriteStep(none_cast, "tokens").ok());
  ASSERT_TRUE((*log)->WriteStep(Step(6, 2.5, 0.1, 1.0, 0.1, 0, 64), "tokens").ok());
  log->reset();
  std::vector<std::string> lines = FileLines(path);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_NE(lines[0].find(R"("grad_norm":1.0,"fp8_sites":2,"fp8_elements":4000,)"
                          R"("fp8_saturated":2,"fp8_flushed":41,"fp8_scale_min":0.5,)"
                          R"("fp8_scale_max":448.0,"step_ms")"),
            std::string::npos)
      << lines[0];
  nlohmann::json second = nlohmann::json::parse(lines[1]);
  EXPECT_EQ(second["fp8_sites"], 0);
  EXPECT_EQ(second["fp8_elements"], 0);
  EXPECT_TRUE(second["fp8_scale_min"].is_null());
  EXPECT_TRUE(second["fp8_scale_max"].is_null());
  EXPECT_EQ(lines[2].find("fp8"), std::string::npos) << lines[2];
}

TEST(MetricsLogTest, NonFiniteNumbersAreNull) {
  TempDir dir;
  std::string path = dir.File("m.jsonl");
  auto log = MetricsLog::Open(path, false);
  ASSERT_TRUE(log.ok()) << log.status();
  StepRecord skipped = Step(18, kNaN, kInf, -kInf, 0, 0, 64);
  skipped.skipped = true;
  ASSERT_TRUE((*log)->WriteStep(skipped, "samples").ok());
  ASSERT_TRUE(
      (*log)
          ->WriteStep(Step(19, 1, 1, std::nullopt, 0.5, 0, 64), "samples")
          .ok());
  ASSERT_TRUE((*log)->WriteEval({19, "val", kNaN, kNaN, 1}).ok());
  std::vector<std::string> lines = FileLines(path);
  ASSERT_EQ(lines.size(), 3u);
  Json s = Parse(lines[0]);
  EXPECT_EQ(s["kind"], "skip");
  EXPECT_TRUE(s["loss"].is_null());
  EXPECT_TRUE(s["lr"].is_null());
  EXPECT_TRUE(s["grad_norm"].is_null());
  EXPECT_TRUE(s["items_per_s"].is_null()); // 64 items in 0 s
  Json n = Parse(lines[1]);
  EXPECT_FALSE(n.contains("grad_norm"));
  EXPECT_DOUBLE_EQ(n["items_per_s"].get<double>(), 128);
  Json e = Parse(lines[2]);
  EXPECT_TRUE(e["val_loss"].is_null());
  EXPECT_TRUE(e["accuracy"].is_null());
}

TEST(MetricsLogTest, AppendKeepsEarlierLinesAndWriteTruncates) {
  TempDir dir;
  std::string path = dir.File("m.jsonl");
  {
    auto log = MetricsLog::Open(path, false);
    ASSERT_TRUE(log.ok());
    ASSERT_TRUE((*log)->WriteRunEvent("start", 0, {}).ok());
    ASSERT_TRUE((*log)->WriteRunEvent("end", 5, {}).ok());
  }
  {
    auto log = MetricsLog::Open(path, true);
    ASSERT_TRUE(log.ok());
    ASSERT_TRUE((*log)->WriteRunEvent("resume", 5, {{"from", "ckpt"}}).ok());
  }
  std::vector<std::string> lines = FileLines(path);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(Parse(lines[0])["event"], "start");
  EXPECT_EQ(Parse(lines[1])["event"], "end");
  EXPECT_EQ(Parse(lines[2])["event"], "resume");
  {
    auto log = MetricsLog::Open(path, false);
    ASSERT_TRUE(log.ok());
    ASSERT_TRUE((*log)->WriteRunEvent("start", 0, {}).ok());
  }
  lines = FileLines(path);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(Parse(lines[0])["event"], "start");
}

TEST(MetricsLogTest, AppendAfterACutOffLineStartsANewLine) {
  TempDir dir;
  std::string path = dir.File("m.jsonl");
  std::string partial = R"({"kind":"step","step":3,"lo)";
  {
    std::ofstream out(path);
    out << R"({"kind":"run","event":"start","step":0})"
        << "\n"
        << partial;
  }
  auto log = MetricsLog::Open(path, true);
  ASSERT_TRUE(log.ok()) << log.status();
  ASSERT_TRUE((*log)->WriteRunEvent("resume", 2, {}).ok());
  std::vector<std::string> lines = FileLines(path);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1], partial);
  EXPECT_EQ(Parse(lines[2])["event"], "resume");
}

TEST(MetricsLogTest, OpenErrorNamesThePath) {
  TempDir dir;
  std::string path = dir.File("no/such/dir/m.jsonl");
  auto log = MetricsLog::Open(path, true);
  ASSERT_FALSE(log.ok());
  EXPECT_EQ(log.status().message(),
            "cannot open metrics file " + path + ": " + std::strerror(ENOENT));
}

TEST(MetricsLogTest, FullDiskIsReportedAndStaysReported) {
  // /dev/full accepts the open and fails every write with ENOSPC.
  for (bool append : {false, true}) {
    auto log = MetricsLog::Open("/dev/full", append);
    ASSERT_TRUE(log.ok()) << log.status();
    absl::Status first = (*log)->WriteStep(Step(1, 1, 1, 1, 1, 0, 1), "tokens");
    ASSERT_FALSE(first.ok());
    EXPECT_EQ(first.message(), std::string("cannot write metrics file "
                                           "/dev/full: ") +
                                   std::strerror(ENOSPC));
    // Later writes return the same error (and do not crash).
    EXPECT_EQ((*log)->WriteEval({1, "val", 1, std::nullopt, 1}), first);
    EXPECT_EQ((*log)->WriteRunEvent("end", 1, {}), first);
  }
}

TEST(MetricsLogTest, BadRecordsAreRejectedWithoutBreakingTheLog) {
  TempDir dir;
  std::string path = dir.File("m.jsonl");
  auto log = MetricsLog::Open(path, false);
  ASSERT_TRUE(log.ok());
  absl::Status reserved = (*log)->WriteRunEvent("end", 3, {{"step", "4"}});
  EXPECT_EQ(reserved.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(reserved.message().find("'step'"), std::string::npos) << reserved;
  EXPECT_NE(reserved.message().find(path), std::string::npos) << reserved;
  absl::Status no_split = (*log)->WriteEval({3, "", 1, std::nullopt, 1});
  EXPECT_EQ(no_split.code(), absl::StatusCode::kInvalidArgument);
  // Not UTF-8: written as U+FFFD, the line still parses.
  ASSERT_TRUE(
      (*log)->WriteRunEvent("end", 3, {{"note", "bad \xff byte"}}).ok());
  std::vector<std::string> lines = FileLines(path);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(Parse(lines[0])["note"], "bad \xef\xbf\xbd byte");
}

} // namespace
} // namespace tcc::trun
