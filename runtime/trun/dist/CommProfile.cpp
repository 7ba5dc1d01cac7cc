#include "runtime/trun/dist/CommProfile.h"

#include "absl/strings/str_format.h"

#include <algorithm>
#include <cstring>

namespace tcc::trun {
namespace {
constexpr int kFields = 6;
} // namespace

std::string CommProfile::Serialize() const {
  const double fields[kFields] = {steps, step_ms, collectives, bytes, comm_ms, exposed_ms};
  return std::string(reinterpret_cast<const char *>(fields), sizeof fields);
}

CommProfile CommProfile::Deserialize(const std::string &bytes) {
  double fields[kFields] = {};
  std::memcpy(fields, bytes.data(), std::min(bytes.size(), sizeof fields));
  return CommProfile{fields[0], fields[1], fields[2], fields[3], fields[4], fields[5]};
}

void PrintCommProfile(const std::vector<CommProfile> &ranks, const std::string &backend,
                      std::ostream &out) {
  if (ranks.empty())
    return;
  out << absl::StrFormat(
      "communication per step (%s, %d ranks; means over each rank's %.0f profiled steps; no CUDA "
      "graph while profiling):\n",
      backend, ranks.size(), ranks[0].steps);
  out << absl::StrFormat("  %4s %8s %10s %10s %10s %10s %10s %10s\n", "rank", "calls", "MB",
                         "step ms", "compute", "comm ms", "exposed", "overlapped");
  for (size_t r = 0; r < ranks.size(); ++r) {
    const CommProfile &p = ranks[r];
    if (p.steps <= 0) {
      out << absl::StrFormat("  %4d  no profiled step\n", r);
      continue;
    }
    const double n = p.steps;
    const double step = p.step_ms / n, comm = p.comm_ms / n, exposed = p.exposed_ms / n;
    out << absl::StrFormat("  %4d %8.0f %10.1f %10.2f %10.2f %10.2f %10.2f %10.2f\n", r,
                           p.collectives / n, p.bytes / n / 1e6, step, step - exposed, comm,
                           exposed, std::max(0.0, comm - exposed));
  }
  out << "  (comm: the communication stream busy with the step's collectives; exposed: the step\n"
         "  stream waiting for them; overlapped = comm - exposed; compute = step - exposed)\n";
}

} // namespace tcc::trun
