#include "runtime/trun/dist/LaunchEnvironment.h"

#include "absl/status/status.h"

#include <cerrno>
#include <cstdlib>
#include <limits.h>
#include <limits>
#include <unistd.h>

namespace tcc::trun {
namespace {


// `name`'s value as a number in [lo, hi]; nullopt when unset; an error
// naming the variable when set to anything else.
absl::StatusOr<std::optional<int64_t>> ReadInt(const EnvLookup &env, const std::string &name,
                                               int64_t lo, int64_t hi) {
  std::optional<std::string> text = env(name);
  if (!text)
    return std::optional<int64_t>();
  errno = 0;
  char *end = nullptr;
  long long v = std::strtoll(text->c_str(), &end, 10);
  if (text->empty() || *end != '\0' || errno != 0 || v < lo || v > hi)
    return absl::InvalidArgumentError(name + "='" + *text + "' is not a number from " +
                                      std::to_string(lo) + " to " + std::to_string(hi));
  return std::optional<int64_t>(v);
}

struct Variables {
  Launcher launcher;
  const char *rank, *size, *local; // the launcher's variable names
};

// Rank, size and local rank of one launcher, all three or none (a partial
// set is an error: another launcher's leftovers or a broken job script).
absl::StatusOr<bool> ReadRanks(const EnvLookup &env, const Variables &v, RankInfo &info) {
  constexpr int64_t kMaxRanks = 1 << 20;
  auto rank = ReadInt(env, v.rank, 0, kMaxRanks - 1);
  auto size = ReadInt(env, v.size, 1, kMaxRanks);
  auto local = ReadInt(env, v.local, 0, kMaxRanks - 1);
  for (const auto *s : {&rank, &size, &local})
    if (!s->ok())
      return s->status();
  const std::optional<int64_t> &r = *rank, &n = *size, &l = *local;
  if (!r && !n)
    return false; // not this launcher (a lone local rank names no job)
  if (!r || !n)
    return absl::InvalidArgumentError(
        std::string(LauncherName(v.launcher)) + " environment incomplete: " +
        (r ? std::string(v.size) : std::string(v.rank)) + " is unset while " +
        (r ? std::string(v.rank) : std::string(v.size)) + " is set");
  if (*r >= *n)
    return absl::InvalidArgumentError(std::string(v.rank) + "=" + std::to_string(*r) +
                                      " is not below " + v.size + "=" + std::to_string(*n));
  info.launcher = v.launcher;
  info.rank = static_cast<int>(*r);
  info.world_size = static_cast<int>(*n);
  info.local_rank = l ? static_cast<int>(*l) : 0;
  if (l && info.local_rank >= info.world_size)
    return absl::InvalidArgumentError(std::string(v.local) + "=" +
                                      std::to_string(info.local_rank) + " is not below " +
                                      v.size + "=" + std::to_string(info.world_size));
  return true;
}

absl::Status ReadMaster(const EnvLookup &env, RankInfo &info, const std::string &addr) {
  info.master_addr = addr;
  auto port = ReadInt(env, "MASTER_PORT", 1, 65535);
  if (!port.ok())
    return port.status();
  info.master_port = *port ? static_cast<int>(**port) : kDefaultMasterPort;
  return absl::OkStatus();
}

// One item of a node list without top-level commas: each [...] group
// multiplies the names (ranges keep the zero padding of their start).
absl::Status ExpandItem(const std::string &item, std::vector<std::string> &out) {
  size_t open = item.find('[');
  if (open == std::string::npos) {
    if (item.find(']') != std::string::npos)
      return absl::InvalidArgumentError("unbalanced ']' in '" + item + "'");
    out.push_back(item);
    return absl::OkStatus();
  }
  size_t close = item.find(']', open);
  if (close == std::string::npos)
    return absl::InvalidArgumentError("unbalanced '[' in '" + item + "'");
  std::string prefix = item.substr(0, open), body = item.substr(open + 1, close - open - 1);
  std::string rest = item.substr(close + 1);
  if (body.empty())
    return absl::InvalidArgumentError("empty [] in '" + item + "'");
  std::vector<std::string> tails;
  if (absl::Status s = ExpandItem(rest, tails); !s.ok())
    return s;
  size_t start = 0;
  while (start <= body.size()) {
    size_t comma = body.find(',', start);
    std::string range = body.substr(start, comma == std::string::npos ? std::string::npos
                                                                     : comma - start);
    size_t dash = range.find('-');
    std::string lo = range.substr(0, dash), hi = dash == std::string::npos ? lo : range.substr(dash + 1);
    auto digits = [](const std::string &s) {
      return !s.empty() && s.size() <= 9 && s.find_first_not_of("0123456789") == std::string::npos;
    };
    if (!digits(lo) || !digits(hi) || std::stol(hi) < std::stol(lo))
      return absl::InvalidArgumentError("bad range '" + range + "' in '" + item + "'");
    for (long n = std::stol(lo); n <= std::stol(hi); ++n) {
      std::string number = std::to_string(n);
      if (number.size() < lo.size())
        number.insert(0, lo.size() - number.size(), '0');
      for (const std::string &tail : tails)
        out.push_back(prefix + number + tail);
    }
    if (comma == std::string::npos)
      break;
    start = comma + 1;
  }
  return absl::OkStatus();
}

} // namespace

const char *LauncherName(Launcher launcher) {
  switch (launcher) {
  case Launcher::kNone:
    return "none";
  case Launcher::kTorchrun:
    return "torchrun";
  case Launcher::kSlurm:
    return "slurm";
  case Launcher::kOpenMpi:
    return "mpirun (Open MPI)";
  case Launcher::kMpich:
    return "mpirun (MPICH)";
  }
  return "?";
}

std::string RankInfo::Describe() const {
  std::string s = "rank " + std::to_string(rank) + " of " + std::to_string(world_size) +
                  " (local " + std::to_string(local_rank) + ", " + LauncherName(launcher);
  if (!master_addr.empty())
    s += ", master " + master_addr + ":" + std::to_string(master_port);
  return s + ")";
}

std::string ThisExecutable() {
  char exe[PATH_MAX] = {0};
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  return n > 0 ? std::string(exe, n) : std::string();
}

EnvLookup ProcessEnvironment() {
  return [](const std::string &name) -> std::optional<std::string> {
    const char *v = std::getenv(name.c_str());
    return v ? std::optional<std::string>(v) : std::nullopt;
  };
}

absl::StatusOr<std::vector<std::string>> ExpandSlurmNodeList(const std::string &list) {
  std::vector<std::string> hosts;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= list.size(); ++i) {
    char c = i < list.size() ? list[i] : ',';
    depth += c == '[' ? 1 : c == ']' ? -1 : 0;
    if (depth < 0 || depth > 1)
      return absl::InvalidArgumentError("Slurm node list '" + list + "': bad brackets");
    if (c != ',' || depth != 0)
      continue;
    std::string item = list.substr(start, i - start);
    start = i + 1;
    if (item.empty())
      return absl::InvalidArgumentError("Slurm node list '" + list + "': an empty name");
    if (absl::Status s = ExpandItem(item, hosts); !s.ok())
      return absl::InvalidArgumentError("Slurm node list '" + list +
                                        "': " + std::string(s.message()));
  }
  if (depth != 0)
    return absl::InvalidArgumentError("Slurm node list '" + list + "': bad brackets");
  return hosts;
}

absl::StatusOr<RankInfo> ReadLaunchEnvironment(const EnvLookup &env) {
  RankInfo info;
  // torchrun
  absl::StatusOr<bool> found =
      ReadRanks(env, {Launcher::kTorchrun, "RANK", "WORLD_SIZE", "LOCAL_RANK"}, info);
  if (!found.ok())
    return found.status();
  if (*found) {
    std::optional<std::string> addr = env("MASTER_ADDR");
    if (info.distributed() && (!addr || addr->empty()))
      return absl::InvalidArgumentError(
          "torchrun environment incomplete: MASTER_ADDR is unset (rank 0's host, where the "
          "others connect)");
    if (absl::Status s = ReadMaster(env, info, addr.value_or("")); !s.ok())
      return s;
    return info;
  }
  // Slurm
  found = ReadRanks(env, {Launcher::kSlurm, "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
                    info);
  if (!found.ok())
    return found.status();
  if (*found) {
    std::optional<std::string> addr = env("MASTER_ADDR");
    if (!addr || addr->empty()) {
      std::optional<std::string> nodes = env("SLURM_JOB_NODELIST");
      if (!nodes)
        nodes = env("SLURM_NODELIST");
      if (!nodes || nodes->empty()) {
        if (info.distributed())
          return absl::InvalidArgumentError(
              "slurm environment incomplete: neither MASTER_ADDR nor SLURM_JOB_NODELIST is set");
        addr = "";
      } else {
        absl::StatusOr<std::vector<std::string>> hosts = ExpandSlurmNodeList(*nodes);
        if (!hosts.ok())
          return hosts.status();
        addr = hosts->front();
      }
    }
    if (absl::Status s = ReadMaster(env, info, *addr); !s.ok())
      return s;
    return info;
  }
  // MPI launchers: MPI connects the ranks itself.
  found = ReadRanks(env,
                    {Launcher::kOpenMpi, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                     "OMPI_COMM_WORLD_LOCAL_RANK"},
                    info);
  if (!found.ok() || *found)
    return found.ok() ? absl::StatusOr<RankInfo>(info) : found.status();
  found = ReadRanks(env, {Launcher::kMpich, "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"}, info);
  if (!found.ok())
    return found.status();
  return info; // one rank when nothing was found
}

} // namespace tcc::trun
