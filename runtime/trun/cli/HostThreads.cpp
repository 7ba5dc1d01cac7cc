#include "runtime/trun/cli/HostThreads.h"

#include "support/AffinityCpus.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

namespace tcc::trun {
namespace {

std::optional<std::string> ReadSmallFile(const std::string &path) {
  std::ifstream in(path);
  if (!in)
    return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The cgroup path of this process for `controller` ("" for v2's unified
// line "0::/path"), from /proc/self/cgroup.
std::optional<std::string> CgroupPath(absl::string_view controller) {
  std::optional<std::string> text = ReadSmallFile("/proc/self/cgroup");
  if (!text)
    return std::nullopt;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    std::vector<absl::string_view> parts = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (parts.size() != 3)
      continue;
    // v1 lists its controllers comma-separated ("cpu,cpuacct"); "cpuset" is
    // another controller, not a match for "cpu".
    bool match = controller.empty() ? parts[0] == "0" && parts[1].empty() : false;
    for (absl::string_view c : absl::StrSplit(parts[1], ','))
      match |= !controller.empty() && c == controller;
    if (match)
      return std::string(parts[2]);
  }
  return std::nullopt;
}

} // namespace

std::optional<double> ParseCpuQuota(absl::string_view quota, absl::string_view period) {
  quota = absl::StripAsciiWhitespace(quota);
  period = absl::StripAsciiWhitespace(period);
  if (quota == "max")
    return std::nullopt;
  double q = 0, p = 0;
  if (!absl::SimpleAtod(quota, &q) || !absl::SimpleAtod(period, &p) || q <= 0 || p <= 0)
    return std::nullopt; // v1's -1: no limit
  return q / p;
}

std::optional<double> ParseCpuMax(absl::string_view cpu_max) {
  std::vector<absl::string_view> fields =
      absl::StrSplit(absl::StripAsciiWhitespace(cpu_max), ' ', absl::SkipEmpty());
  if (fields.size() != 2)
    return std::nullopt;
  return ParseCpuQuota(fields[0], fields[1]);
}

int ThreadsForCpus(int affinity_cpus, std::optional<double> quota_cpus) {
  int threads = affinity_cpus > 0 ? affinity_cpus : 1;
  if (quota_cpus) {
    double allowed = std::ceil(*quota_cpus - 1e-9);
    if (allowed >= 1 && allowed < threads)
      threads = static_cast<int>(allowed);
  }
  return threads;
}

std::optional<double> CgroupCpuLimit() {
  if (std::optional<std::string> path = CgroupPath(""))
    if (std::optional<std::string> text = ReadSmallFile("/sys/fs/cgroup" + *path + "/cpu.max"))
      return ParseCpuMax(*text);
  if (std::optional<std::string> path = CgroupPath("cpu")) {
    for (const std::string &root : {std::string("/sys/fs/cgroup/cpu,cpuacct"),
                                    std::string("/sys/fs/cgroup/cpu")}) {
      std::optional<std::string> quota = ReadSmallFile(root + *path + "/cpu.cfs_quota_us");
      std::optional<std::string> period = ReadSmallFile(root + *path + "/cpu.cfs_period_us");
      if (quota && period)
        return ParseCpuQuota(*quota, *period);
    }
  }
  return std::nullopt;
}

std::string ConfigureHostThreads(std::optional<int> flag_threads) {
  std::string threads_part;
  if (flag_threads) {
    ::setenv("OMP_NUM_THREADS", std::to_string(*flag_threads).c_str(), 1);
    threads_part = absl::StrCat(*flag_threads, " (--threads)");
  } else if (const char *env = std::getenv("OMP_NUM_THREADS"); env && *env) {
    threads_part = absl::StrCat(env, " (OMP_NUM_THREADS)");
  } else {
    int affinity = tcc::AffinityCpus();
    std::optional<double> quota = CgroupCpuLimit();
    int threads = ThreadsForCpus(affinity, quota);
    ::setenv("OMP_NUM_THREADS", std::to_string(threads).c_str(), 1);
    threads_part = threads < affinity
                       ? absl::StrCat(threads, " (the cgroup's CPU quota of ", *quota,
                                      " on ", affinity, " CPUs)")
                       : absl::StrCat(threads, " (the CPUs this process may use)");
  }
  std::string wait_part;
  const char *policy = std::getenv("OMP_WAIT_POLICY");
  const char *spin = std::getenv("GOMP_SPINCOUNT");
  if ((policy && *policy) || (spin && *spin)) {
    wait_part = policy && *policy ? absl::StrCat("OMP_WAIT_POLICY=", policy)
                                  : absl::StrCat("GOMP_SPINCOUNT=", spin);
  } else {
    ::setenv("OMP_WAIT_POLICY", "passive", 1);
    wait_part = "idle threads sleep (OMP_WAIT_POLICY=passive)";
  }
  return absl::StrCat("threads: ", threads_part, ", ", wait_part);
}

} // namespace tcc::trun
