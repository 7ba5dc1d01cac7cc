// What a run reports while it trains: a progress display for people and a
// JSON-lines metrics file for plots and tools.
//
// --metrics FILE writes one JSON object per line, flushed as written:
//   {"kind":"step","step":17,"loss":2.31,"lr":0.0003,"grad_norm":1.2,
//    "step_ms":151.2,"data_wait_ms":0.01,"items_per_s":13540.1,
//    "unit":"tokens","time_s":2.75}                  (grad_norm if the step
//                                                     reports one)
//   with dynamic loss scaling also, after grad_norm:
//    "loss_scale":65536,"overflow":false,"skipped_steps":0
//   (the scale the step used; overflow: the step skipped its own update on
//   an inf/NaN gradient; skipped_steps: such steps so far in the run)
//   with FP8 delayed scaling (the "fp8_scaling" state), on the steps with a
//   progress line, after those:
//    "fp8_sites":12,"fp8_elements":3145728,"fp8_saturated":0,
//    "fp8_flushed":377,"fp8_scale_min":0.52,"fp8_scale_max":448.0
//   (Fp8ScalingSummary: each site's last cast, i.e. this step's)
//   {"kind":"skip","step":18,"loss":NaN-as-null,...}   (--on-nan skip)
//   {"kind":"eval","step":100,"val_loss":1.93,"batches":20,"time_s":...}
//   {"kind":"eval","step":938,"test_loss":0.41,"accuracy":0.85,...}
//   {"kind":"run","event":"start"|"resume"|"checkpoint"|"end"|
//    "interrupted", "step":...,  ...extra string fields}
// "step" is the 1-based count of optimizer steps done after that step
// (the loss of "step":1 is the loss of the first train call). Non-finite
// numbers are written as null. time_s is seconds since the log was opened
// (every record has it). items_per_s = items / (step_ms + data_wait_ms) of
// that one step. A run event's extra fields may not reuse the names kind,
// event, step or time_s.
#ifndef TCC_RUNTIME_TRUN_TRAIN_METRICS_H
#define TCC_RUNTIME_TRUN_TRAIN_METRICS_H

#include "absl/status/statusor.h"
#include "tcc/step_abi.h"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace tcc::trun {

// FP8 delayed scaling's health (tcc compile --precision fp8): the
// TCC_FP8_SCALING_STATE records (tcc_fp8_scaling_record, step_abi.h) summed
// over the sites cast so far (casts > 0). Each record counts its site's
// last cast, so after a train call these are that step's casts.
struct Fp8ScalingSummary {
  int64_t sites = 0;     // records with casts > 0
  double elements = 0;   // their elements
  double saturated = 0;  // ... past the format's largest finite value
  double flushed = 0;    // ... non-zero ones that became zero
  // Over the records with scale > 0 (a cast site has one); none: nullopt.
  std::optional<double> scale_min, scale_max;
};

// Sums `sites` records of TCC_FP8_SCALING_RECORD_FLOATS floats at `data`
// (the state's f32 [sites, 32]). Records never cast (casts <= 0) are left
// out, even of the scales.
Fp8ScalingSummary SummarizeFp8Scaling(const float *data, int64_t sites);

struct StepRecord {
  int64_t step = 0;  // steps done after this one (1-based)
  double loss = 0;
  double learning_rate = 0;
  std::optional<double> grad_norm;
  double step_seconds = 0;      // the train call
  double data_wait_seconds = 0; // blocked on the loader before it
  int64_t items = 0;            // tokens (token models) or samples
  bool skipped = false;         // --on-nan skip rolled this step back
  // Steps with dynamic loss scaling: the scale the step used, whether it
  // skipped its own update (an inf/NaN gradient), and the updates skipped
  // so far in the run (this one included).
  std::optional<double> loss_scale;
  bool overflow = false;
  std::optional<int64_t> skipped_steps;
  // FP8 delayed scaling: read after the steps that print a progress line
  // (ProgressReporter::ShowsLineAt), else nullopt.
  std::optional<Fp8ScalingSummary> fp8;
};

struct EvalRecord {
  int64_t step = 0;
  std::string split; // "val" or "test"
  double loss = 0;
  std::optional<double> accuracy;
  int64_t batches = 0;
};

// The JSON-lines file. Every Write* flushes; the first failure is returned
// (and later calls return it again) so a full disk is reported, not hidden.
// Appending to a file whose last line was cut off (a crash mid-write) first
// ends that line, so the new records stay on lines of their own.
class MetricsLog {
public:
  // append: keep existing lines (a resumed run continues the same file).
  static absl::StatusOr<std::unique_ptr<MetricsLog>>
  Open(const std::string &path, bool append);
  ~MetricsLog();

  absl::Status WriteStep(const StepRecord &record, const char *unit);
  absl::Status WriteEval(const EvalRecord &record);
  absl::Status WriteRunEvent(const std::string &event, int64_t step,
                             const std::map<std::string, std::string> &extra);
  // trun --profile: one "profile" record per timed launch (after `step`
  // train steps), times per call.
  absl::Status WriteProfile(int64_t step, const std::vector<tcc_launch_time> &launches);

private:
  MetricsLog(std::string path, std::FILE *file);
  MetricsLog(const MetricsLog &) = delete;
  MetricsLog &operator=(const MetricsLog &) = delete;
  // Writes `line` and a newline and flushes; remembers the first failure.
  absl::Status WriteLine(const std::string &line);
  double SecondsSinceOpen() const;

  std::string path_;
  std::FILE *file_;
  std::chrono::steady_clock::time_point opened_;
  absl::Status error_; // the first write failure, returned from then on
};

// The progress display. live (stdout is a TTY): one line redrawn in place
// (\r, at most ~10 times a second) with a bar; otherwise a plain line every
// `log_every` steps (0: none). Both show: step/total, loss (mean since the
// last line), lr, grad norm (if any), tokens/s or samples/s, step time in
// ms, the share of time waiting for data, and the ETA:
//   step 200/1000  loss 2.1345  lr 3.00e-04  grad norm 0.812  13.5K tokens/s
//   151.2 ms/step  data wait 0.1%  ETA 2m01s                   (one line)
// With dynamic loss scaling, after the grad norm: "loss scale 65536" (the
// latest step's) and "overflow N" (steps since the last line that skipped
// their update on an inf/NaN gradient; their loss counts, their grad norm
// does not).
// With FP8 delayed scaling, after those: "fp8 sat 0 flush 0.012%" (the
// latest summary read: saturated elements, with their share when not 0,
// and the share of elements flushed to zero, over every site's last cast).
// "Since the last line" (live: since the last redraw): loss and grad norm
// are means over those steps (skipped steps add "skipped N" and no loss);
// tokens/s and data wait are over the wall time since then; ms/step is the
// mean train call. lr is the latest step's. ETA = the mean wall time per
// step so far in this process times the steps left. Plain lines come when
// the step count is a multiple of log_every (counted from 0, also after a
// resume). The live bar ("[#####...............] step ...") is drawn on the
// first step, then at most every 100 ms, and always on the last step.
class ProgressReporter {
public:
  // unit: "tokens" or "samples"; first_step: steps already done (resume).
  ProgressReporter(std::ostream &out, bool live, int64_t total_steps,
                   int64_t first_step, int64_t log_every, std::string unit);
  void OnStep(const StepRecord &record);
  // Whether OnStep(record of `step`), called next, prints a line (plain
  // mode) or redraws the bar (live: as of now; a redraw it then makes as
  // time passed shows the latest fp8 summary given before).
  bool ShowsLineAt(int64_t step) const;
  // A whole line (eval result, checkpoint written, warning) printed above
  // the live bar, which is redrawn after it.
  void Message(const std::string &line);
  // Ends the live line (newline) so later output starts on a fresh line.
  void Finish();

protected:
  // For tests: `now` returns seconds on any monotonic scale.
  ProgressReporter(std::ostream &out, bool live, int64_t total_steps,
                   int64_t first_step, int64_t log_every, std::string unit,
                   std::function<double()> now);

private:
  // Sums over the steps since the last printed line (or redraw).
  struct Window {
    int64_t steps = 0, losses = 0, grad_norms = 0, skipped = 0, items = 0,
            overflows = 0;
    double loss_sum = 0, grad_norm_sum = 0, step_seconds = 0, wait_seconds = 0;
  };
  // The fields after the bar: "step 200/1000  loss 2.1345  ...  ETA 2m01s".
  std::string StatusText(double now);
  void DrawBar(double now);

  std::ostream &out_;
  bool live_;
  int64_t total_steps_, first_step_, log_every_;
  std::string unit_;
  std::function<double()> now_;
  double start_;         // construction time
  double window_start_;  // time of the last line (or construction)
  double last_draw_ = 0; // live: time of the last redraw
  Window window_;
  int64_t last_step_; // the step of the latest record
  double last_lr_ = 0;
  std::optional<double> last_loss_scale_; // loss scaling: the latest step's
  std::optional<Fp8ScalingSummary> last_fp8_; // FP8: the latest read
  bool pending_ = false;   // live: steps not drawn yet
  bool bar_shown_ = false; // live: the bar is on screen, no newline after it
  std::string bar_;        // live: the last bar text drawn
};

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_TRAIN_METRICS_H
