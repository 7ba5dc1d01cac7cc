#include "runtime/trun/train/Metrics.h"

#include "runtime/trun/base/Stopwatch.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include <nlohmann/json.hpp>

#include <sys/stat.h>
#include <sys/file.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstddef>
#include <limits>
#include <utility>

namespace tcc::trun {
namespace {

// Keys in insertion order, so lines read like the header's examples.
using Json = nlohmann::ordered_json;

Json Number(double value) {
  if (!std::isfinite(value))
    return Json(nullptr);
  return Json(value);
}

// Invalid UTF-8 in a string field becomes U+FFFD instead of an exception.
std::string Dump(const Json &object) {
  return object.dump(-1, ' ', false, Json::error_handler_t::replace);
}

double SteadySeconds() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// 13540.1 -> "13.5K"; below 1000 a whole number.
std::string HumanCount(double value) {
  if (value < 999.5)
    return absl::StrFormat("%.0f", value);
  if (value < 999.95e3)
    return absl::StrFormat("%.1fK", value / 1e3);
  if (value < 999.95e6)
    return absl::StrFormat("%.1fM", value / 1e6);
  return absl::StrFormat("%.1fG", value / 1e9);
}

// 121.2 -> "2m01s", 3725 -> "1h02m05s", 9 -> "9s".
std::string Duration(double seconds) {
  int64_t s = static_cast<int64_t>(std::llround(std::max(seconds, 0.0)));
  if (s < 60)
    return absl::StrFormat("%ds", s);
  if (s < 3600)
    return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  return absl::StrFormat("%dh%02dm%02ds", s / 3600, s / 60 % 60, s % 60);
}

// A share in percent, short: "0%", "0.012%", "3.5e-05%", "12.5%".
std::string Percent(double part, double whole) {
  double p = whole > 0 ? 100 * part / whole : 0;
  if (p == 0)
    return "0%";
  if (p >= 1)
    return absl::StrFormat("%.1f%%", p);
  return absl::StrFormat("%.2g%%", p);
}

// A float count of a record as an integer for the metrics file.
Json Count(double value) {
  if (!std::isfinite(value))
    return Json(nullptr);
  return Json(static_cast<int64_t>(std::llround(value)));
}

constexpr int kBarWidth = 20;
constexpr double kRedrawSeconds = 0.1;
constexpr const char *kClearLine = "\r\x1b[K";

} // namespace

Fp8ScalingSummary SummarizeFp8Scaling(const float *data, int64_t sites) {
  static_assert(sizeof(tcc_fp8_scaling_record) ==
                TCC_FP8_SCALING_RECORD_FLOATS * sizeof(float));
  constexpr size_t kScale = offsetof(tcc_fp8_scaling_record, scale) / sizeof(float),
                   kElements = offsetof(tcc_fp8_scaling_record, elements) / sizeof(float),
                   kSaturated = offsetof(tcc_fp8_scaling_record, saturated) / sizeof(float),
                   kFlushed = offsetof(tcc_fp8_scaling_record, flushed) / sizeof(float),
                   kCasts = offsetof(tcc_fp8_scaling_record, casts) / sizeof(float);
  Fp8ScalingSummary summary;
  for (int64_t site = 0; data != nullptr && site < sites; ++site) {
    const float *record = data + site * TCC_FP8_SCALING_RECORD_FLOATS;
    if (!(record[kCasts] > 0)) // never cast (NaN too)
      continue;
    ++summary.sites;
    summary.elements += record[kElements];
    summary.saturated += record[kSaturated];
    summary.flushed += record[kFlushed];
    const double scale = record[kScale];
    if (scale > 0) {
      summary.scale_min = std::min(summary.scale_min.value_or(scale), scale);
      summary.scale_max = std::max(summary.scale_max.value_or(scale), scale);
    }
  }
  return summary;
}

// --- MetricsLog -------------------------------------------------------------

MetricsLog::MetricsLog(std::string path, std::FILE *file)
    : path_(std::move(path)), file_(file),
      opened_(std::chrono::steady_clock::now()) {}

MetricsLog::~MetricsLog() { std::fclose(file_); }

absl::StatusOr<std::unique_ptr<MetricsLog>>
MetricsLog::Open(const std::string &path, bool append) {
  // Read access for the pread below; appends still go to the end. A
  // write-only file is still appended to, without the check. Not truncated
  // before the lock is held: another run's file stays whole.
  const int mode = O_CREAT | O_CLOEXEC | (append ? O_APPEND : 0);
  int fd = ::open(path.c_str(), O_RDWR | mode, 0644);
  const bool readable = fd >= 0;
  if (fd < 0 && append && errno == EACCES)
    fd = ::open(path.c_str(), O_WRONLY | mode, 0644);
  if (fd < 0)
    return absl::ErrnoToStatus(errno,
                               absl::StrCat("cannot open metrics file ", path));
  // One writer per file: two runs' records would interleave (and tcc-plot
  // then fail). A file system without locks (flock's other errors) goes on.
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
    ::close(fd);
    return absl::FailedPreconditionError(absl::StrCat(
        "metrics file ", path, " is being written by another process (another trun?): "
        "give each run its own --metrics file"));
  }
  struct stat opened;
  if (!append && ::fstat(fd, &opened) == 0 && S_ISREG(opened.st_mode))
    (void)::ftruncate(fd, 0);
  std::FILE *file = ::fdopen(fd, append ? (readable ? "a+" : "a") : "w");
  if (file == nullptr) {
    int error = errno;
    ::close(fd);
    return absl::ErrnoToStatus(error, absl::StrCat("cannot open metrics file ", path));
  }
  auto log = std::unique_ptr<MetricsLog>(new MetricsLog(path, file));
  // Only a regular file has a last byte to look at (not a pipe or a tty).
  struct stat info;
  char last = '\n';
  if (append && ::fstat(::fileno(file), &info) == 0 && S_ISREG(info.st_mode) &&
      info.st_size > 0 &&
      ::pread(::fileno(file), &last, 1, info.st_size - 1) == 1 &&
      last != '\n') {
    // A line cut off by a crash: end it (it stays malformed on its own).
    if (absl::Status status = log->WriteLine(""); !status.ok())
      return status;
  }
  return log;
}

absl::Status MetricsLog::WriteLine(const std::string &line) {
  if (!error_.ok())
    return error_;
  errno = 0;
  bool ok = std::fwrite(line.data(), 1, line.size(), file_) == line.size() &&
            std::fputc('\n', file_) != EOF;
  // Buffered writes fail only here (e.g. ENOSPC), so the flush is checked.
  ok = std::fflush(file_) == 0 && ok;
  if (!ok) {
    error_ =
        absl::ErrnoToStatus(errno != 0 ? errno : EIO,
                            absl::StrCat("cannot write metrics file ", path_));
  }
  return error_;
}

double MetricsLog::SecondsSinceOpen() const {
  return SecondsSince(opened_);
}

absl::Status MetricsLog::WriteStep(const StepRecord &record, const char *unit) {
  Json line;
  line["kind"] = record.skipped ? "skip" : "step";
  line["step"] = record.step;
  line["loss"] = Number(record.loss);
  line["lr"] = Number(record.learning_rate);
  if (record.grad_norm)
    line["grad_norm"] = Number(*record.grad_norm);
  if (record.loss_scale) {
    line["loss_scale"] = Number(*record.loss_scale);
    line["overflow"] = record.overflow;
  }
  if (record.skipped_steps)
    line["skipped_steps"] = *record.skipped_steps;
  if (record.fp8) {
    const Fp8ScalingSummary &fp8 = *record.fp8;
    line["fp8_sites"] = fp8.sites;
    line["fp8_elements"] = Count(fp8.elements);
    line["fp8_saturated"] = Count(fp8.saturated);
    line["fp8_flushed"] = Count(fp8.flushed);
    line["fp8_scale_min"] = fp8.scale_min ? Number(*fp8.scale_min) : Json(nullptr);
    line["fp8_scale_max"] = fp8.scale_max ? Number(*fp8.scale_max) : Json(nullptr);
  }
  line["step_ms"] = Number(record.step_seconds * 1e3);
  line["data_wait_ms"] = Number(record.data_wait_seconds * 1e3);
  line["items_per_s"] =
      Number(static_cast<double>(record.items) /
             (record.step_seconds + record.data_wait_seconds));
  if (unit != nullptr)
    line["unit"] = unit;
  line["time_s"] = SecondsSinceOpen();
  return WriteLine(Dump(line));
}

absl::Status MetricsLog::WriteEval(const EvalRecord &record) {
  if (record.split.empty())
    return absl::InvalidArgumentError(absl::StrCat(
        "metrics file ", path_, ": eval record without a split name"));
  Json line;
  line["kind"] = "eval";
  line["step"] = record.step;
  line[record.split + "_loss"] = Number(record.loss);
  if (record.accuracy)
    line["accuracy"] = Number(*record.accuracy);
  line["batches"] = record.batches;
  line["time_s"] = SecondsSinceOpen();
  return WriteLine(Dump(line));
}

absl::Status
MetricsLog::WriteRunEvent(const std::string &event, int64_t step,
                          const std::map<std::string, std::string> &extra) {
  Json line;
  line["kind"] = "run";
  line["event"] = event;
  line["step"] = step;
  for (const auto &[key, value] : extra) {
    if (key == "kind" || key == "event" || key == "step" || key == "time_s")
      return absl::InvalidArgumentError(
          absl::StrCat("metrics file ", path_, ": run event '", event,
                       "' has a field named '", key, "', which is reserved"));
    line[key] = value;
  }
  line["time_s"] = SecondsSinceOpen();
  return WriteLine(Dump(line));
}

absl::Status MetricsLog::WriteProfile(int64_t step,
                                      const std::vector<tcc_launch_time> &launches) {
  for (const tcc_launch_time &l : launches) {
    Json line;
    line["kind"] = "profile";
    line["step"] = step;
    line["entry"] = l.entry == 0 ? "train" : "eval";
    line["launch"] = l.launch;
    line["kernel"] = l.kernel ? l.kernel : "";
    line["label"] = l.label ? l.label : "";
    line["ms_per_call"] = Number(l.calls ? l.milliseconds / l.calls : 0.0);
    line["calls"] = l.calls;
    line["flops"] = Number(l.flops);
    line["bytes"] = Number(l.bytes);
    line["time_s"] = SecondsSinceOpen();
    if (absl::Status s = WriteLine(Dump(line)); !s.ok())
      return s;
  }
  return absl::OkStatus();
}

// --- ProgressReporter -------------------------------------------------------

ProgressReporter::ProgressReporter(std::ostream &out, bool live,
                                   int64_t total_steps, int64_t first_step,
                                   int64_t log_every, std::string unit)
    : ProgressReporter(out, live, total_steps, first_step, log_every,
                       std::move(unit), SteadySeconds) {}

ProgressReporter::ProgressReporter(std::ostream &out, bool live,
                                   int64_t total_steps, int64_t first_step,
                                   int64_t log_every, std::string unit,
                                   std::function<double()> now)
    : out_(out), live_(live), total_steps_(total_steps),
      first_step_(first_step), log_every_(log_every), unit_(std::move(unit)),
      now_(std::move(now)), start_(now_()), window_start_(start_),
      last_draw_(-std::numeric_limits<double>::infinity()),
      last_step_(first_step) {}

void ProgressReporter::OnStep(const StepRecord &record) {
  double now = now_();
  ++window_.steps;
  if (record.skipped) {
    ++window_.skipped;
  } else if (std::isfinite(record.loss)) {
    ++window_.losses;
    window_.loss_sum += record.loss;
  }
  if (record.grad_norm && std::isfinite(*record.grad_norm)) {
    ++window_.grad_norms;
    window_.grad_norm_sum += *record.grad_norm;
  }
  if (record.overflow)
    ++window_.overflows;
  if (record.loss_scale)
    last_loss_scale_ = record.loss_scale;
  if (record.fp8)
    last_fp8_ = record.fp8;
  window_.items += record.items;
  window_.step_seconds += record.step_seconds;
  window_.wait_seconds += record.data_wait_seconds;
  last_step_ = record.step;
  last_lr_ = record.learning_rate;

  if (live_) {
    pending_ = true;
    if (now - last_draw_ >= kRedrawSeconds || record.step >= total_steps_)
      DrawBar(now);
    return;
  }
  if (log_every_ > 0 && record.step % log_every_ == 0) {
    out_ << StatusText(now) << '\n' << std::flush;
    window_ = Window();
    window_start_ = now;
  }
}

bool ProgressReporter::ShowsLineAt(int64_t step) const {
  if (live_)
    return now_() - last_draw_ >= kRedrawSeconds || step >= total_steps_;
  return log_every_ > 0 && step % log_every_ == 0;
}

std::string ProgressReporter::StatusText(double now) {
  std::string text =
      absl::StrFormat("step %d/%d  loss ", last_step_, total_steps_);
  if (window_.losses > 0)
    absl::StrAppendFormat(&text, "%.4f", window_.loss_sum / window_.losses);
  else
    text += "-";
  if (window_.skipped > 0)
    absl::StrAppendFormat(&text, "  skipped %d", window_.skipped);
  absl::StrAppendFormat(&text, "  lr %.2e", last_lr_);
  if (window_.grad_norms > 0)
    absl::StrAppendFormat(&text, "  grad norm %.3g",
                          window_.grad_norm_sum / window_.grad_norms);
  if (last_loss_scale_)
    absl::StrAppendFormat(&text, "  loss scale %g", *last_loss_scale_);
  if (window_.overflows > 0)
    absl::StrAppendFormat(&text, "  overflow %d", window_.overflows);
  if (last_fp8_) {
    const Fp8ScalingSummary &fp8 = *last_fp8_;
    absl::StrAppendFormat(&text, "  fp8 sat %.0f", fp8.saturated);
    if (fp8.saturated != 0)
      absl::StrAppend(&text, " (", Percent(fp8.saturated, fp8.elements), ")");
    absl::StrAppend(&text, " flush ", Percent(fp8.flushed, fp8.elements));
  }
  double wall = now - window_start_;
  if (wall > 0)
    absl::StrAppendFormat(&text, "  %s %s/s  ",
                          HumanCount(window_.items / wall), unit_);
  else
    absl::StrAppendFormat(&text, "  - %s/s  ", unit_);
  if (window_.steps > 0)
    absl::StrAppendFormat(&text, "%.1f ms/step",
                          window_.step_seconds / window_.steps * 1e3);
  else
    text += "- ms/step";
  if (wall > 0)
    absl::StrAppendFormat(&text, "  data wait %.1f%%",
                          100 * window_.wait_seconds / wall);
  int64_t done_here = last_step_ - first_step_;
  int64_t left = std::max<int64_t>(total_steps_ - last_step_, 0);
  if (left == 0)
    text += "  ETA 0s";
  else if (done_here > 0)
    absl::StrAppendFormat(&text, "  ETA %s",
                          Duration((now - start_) / done_here * left));
  return text;
}

void ProgressReporter::DrawBar(double now) {
  int64_t filled = 0;
  if (total_steps_ > 0)
    filled = std::clamp<int64_t>(last_step_ * kBarWidth / total_steps_, 0,
                                 kBarWidth);
  bar_ =
      absl::StrCat("[", std::string(filled, '#'),
                   std::string(kBarWidth - filled, '.'), "] ", StatusText(now));
  out_ << kClearLine << bar_ << std::flush;
  window_ = Window();
  window_start_ = now;
  last_draw_ = now;
  pending_ = false;
  bar_shown_ = true;
}

void ProgressReporter::Message(const std::string &line) {
  if (live_ && bar_shown_) {
    out_ << kClearLine << line << '\n' << bar_ << std::flush;
    return;
  }
  out_ << line << '\n' << std::flush;
}

void ProgressReporter::Finish() {
  if (!live_)
    return;
  // Steps held back by the rate limit still get shown.
  if (pending_)
    DrawBar(now_());
  if (bar_shown_)
    out_ << '\n' << std::flush;
  bar_shown_ = false;
}

} // namespace tcc::trun
