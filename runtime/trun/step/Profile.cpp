#include "runtime/trun/step/Profile.h"

#include "absl/strings/str_format.h"

#include <algorithm>
#include <map>
#include <regex>

namespace tcc::trun {

std::string KernelKind(const std::string &kernel) {
  if (kernel == "cublasLtMatmul")
    return "matmul (cuBLASLt)";
  // kern.gemm_epilogue: "cublasLtMatmul+bias+gelu_aux" and the like.
  if (kernel.rfind("cublasLtMatmul+", 0) == 0)
    return "matmul+epilogue (cuBLASLt)";
  // Attention calls cuDNN ran (the step's prepare renamed them).
  if (kernel == "cudnn_sdpa_forward")
    return "attention (cuDNN)";
  if (kernel == "cudnn_sdpa_backward")
    return "attention_grad (cuDNN)";
  static const std::regex generated("tcc_k[0-9]+_(.+)");
  std::smatch m;
  if (!std::regex_match(kernel, m, generated))
    return kernel;
  std::string family = m[1];
  if (family == "ew" || family == "ew4")
    return "elementwise";
  if (family == "reduce")
    return "reduction";
  return family;
}

namespace {

// A launch's kind, from its kernel name and, for a product, the algorithm
// that ran it: an epilogue product the step timed faster on CUTLASS than on
// cuBLASLt (host_support/gemm_cutlass.h) keeps its cuBLASLt kernel name.
std::string LaunchKind(const tcc_launch_time &l, const GemmChoices &gemm) {
  auto it = gemm.find(l.launch);
  if (it != gemm.end() && it->second.algorithm.rfind("CUTLASS", 0) == 0)
    return "matmul+epilogue (CUTLASS)";
  return KernelKind(l.kernel);
}

// GB/s and TFLOP/s of `bytes` and `flops` in `ms` ("-" when nothing moves).
std::string Rates(double bytes, double flops, double ms) {
  if (ms <= 0)
    return absl::StrFormat("%8s %8s", "-", "-");
  double seconds = ms / 1e3;
  return absl::StrFormat("%8s %8s",
                         bytes > 0 ? absl::StrFormat("%.0f", bytes / seconds / 1e9) : "-",
                         flops > 0 ? absl::StrFormat("%.1f", flops / seconds / 1e12) : "-");
}

struct Totals {
  int64_t launches = 0;
  double ms = 0, bytes = 0, flops = 0; // per call
};

// Train products summed by descriptor (one row per distinct product),
// slowest first, with the algorithm each ran.
void PrintGemmShapes(const std::vector<const tcc_launch_time *> &train,
                     const GemmChoices &gemm, double step_ms, std::ostream &out) {
  struct Shape {
    Totals totals;
    const GemmChoiceInfo *choice = nullptr;
  };
  std::map<std::string, Shape> shapes;
  for (const tcc_launch_time *l : train) {
    auto it = gemm.find(l->launch);
    if (it == gemm.end())
      continue;
    Shape &shape = shapes[it->second.descriptor];
    shape.choice = &it->second;
    ++shape.totals.launches;
    shape.totals.ms += l->calls ? l->milliseconds / l->calls : 0;
    shape.totals.bytes += l->bytes;
    shape.totals.flops += l->flops;
  }
  if (shapes.empty())
    return;
  std::vector<const std::pair<const std::string, Shape> *> sorted;
  for (const auto &entry : shapes)
    sorted.push_back(&entry);
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto *a, const auto *b) {
    return a->second.totals.ms > b->second.totals.ms;
  });
  out << absl::StrFormat("  %-22s %8s %10s %6s %8s %8s  %s\n", "cuBLASLt products", "launches",
                         "ms/step", "%", "GB/s", "TFLOP/s", "descriptor: algorithm (source)");
  for (const auto *entry : sorted) {
    const Totals &t = entry->second.totals;
    out << absl::StrFormat("  %-22s %8d %10.2f %5.1f%% %s  %s: %s\n", "", t.launches, t.ms,
                           step_ms > 0 ? 100 * t.ms / step_ms : 0.0,
                           Rates(t.bytes, t.flops, t.ms), entry->first,
                           DescribeGemmChoice(*entry->second.choice));
  }
}

} // namespace

std::string DescribeGemmChoice(const GemmChoiceInfo &choice) {
  std::string timing;
  // A CUTLASS choice's second time is cuBLASLt's chosen algorithm's.
  bool cutlass = choice.algorithm.rfind("CUTLASS", 0) == 0;
  if (choice.best_ms > 0 && choice.heuristic_ms > 0)
    timing = absl::StrFormat(cutlass ? ": %.3f ms, cuBLASLt's %.3f ms"
                                     : ": %.3f ms, cuBLASLt's first answer %.3f ms",
                             choice.best_ms, choice.heuristic_ms);
  return absl::StrFormat("%s (%s%s)", choice.algorithm, choice.source, timing);
}

void PrintProfile(const std::vector<tcc_launch_time> &launches,
                  int64_t steps_left_out, std::ostream &out, int top,
                  const GemmChoices &gemm) {
  std::vector<const tcc_launch_time *> train;
  Totals eval;
  int64_t steps = 0, eval_calls = 0;
  for (const tcc_launch_time &l : launches) {
    if (l.entry == 0) {
      train.push_back(&l);
      steps = std::max(steps, l.calls);
    } else {
      ++eval.launches;
      eval.ms += l.calls ? l.milliseconds / l.calls : 0;
      eval_calls = std::max(eval_calls, l.calls);
    }
  }
  if (train.empty()) {
    out << "profile: no train step was timed\n";
    return;
  }
  out << absl::StrFormat(
      "profile: %d train step%s timed kernel by kernel (no CUDA graph while "
      "profiling)%s\n",
      steps, steps == 1 ? "" : "s",
      steps_left_out > 0
          ? absl::StrFormat("; the first %d left out (warm-up)", steps_left_out)
          : "");
  // Per step: each launch's time averaged over the steps that ran it.
  Totals step;
  std::map<std::string, Totals> kinds;
  for (const tcc_launch_time *l : train) {
    double ms = l->calls ? l->milliseconds / l->calls : 0;
    for (Totals *t : {&step, &kinds[LaunchKind(*l, gemm)]}) {
      ++t->launches;
      t->ms += ms;
      t->bytes += l->bytes;
      t->flops += l->flops;
    }
  }
  out << absl::StrFormat("  train step: %.2f ms in %d launches (kernel time, "
                         "launch gaps included)\n",
                         step.ms, step.launches);
  out << absl::StrFormat("  %-22s %8s %10s %6s %8s %8s\n", "by kind", "launches",
                         "ms/step", "%", "GB/s", "TFLOP/s");
  std::vector<std::pair<std::string, Totals>> sorted(kinds.begin(), kinds.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto &a, const auto &b) { return a.second.ms > b.second.ms; });
  for (const auto &[kind, t] : sorted)
    out << absl::StrFormat("  %-22s %8d %10.2f %5.1f%% %s\n", kind, t.launches, t.ms,
                           step.ms > 0 ? 100 * t.ms / step.ms : 0.0,
                           Rates(t.bytes, t.flops, t.ms));
  PrintGemmShapes(train, gemm, step.ms, out);
  std::vector<const tcc_launch_time *> slowest = train;
  std::stable_sort(slowest.begin(), slowest.end(), [](const auto *a, const auto *b) {
    return a->milliseconds / std::max<int64_t>(a->calls, 1) >
           b->milliseconds / std::max<int64_t>(b->calls, 1);
  });
  if (static_cast<int>(slowest.size()) > top)
    slowest.resize(top);
  out << absl::StrFormat("  %-22s %8s %10s %6s %8s %8s  %s\n", "slowest launches", "#",
                         "ms/step", "%", "GB/s", "TFLOP/s", "model node: op (kernel)");
  for (const tcc_launch_time *l : slowest) {
    double ms = l->calls ? l->milliseconds / l->calls : 0;
    auto choice = gemm.find(l->launch);
    out << absl::StrFormat("  %-22s %8d %10.3f %5.1f%% %s  %s%s\n", LaunchKind(*l, gemm),
                           l->launch, ms, step.ms > 0 ? 100 * ms / step.ms : 0.0,
                           Rates(l->bytes, l->flops, ms), l->label,
                           choice == gemm.end()
                               ? std::string()
                               : " [" + DescribeGemmChoice(choice->second) + "]");
  }
  if (eval.launches > 0)
    out << absl::StrFormat("  eval: %d call%s, %.2f ms per call in %d launches\n",
                           eval_calls, eval_calls == 1 ? "" : "s", eval.ms, eval.launches);
}

} // namespace tcc::trun
