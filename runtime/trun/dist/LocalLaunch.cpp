#include "runtime/trun/dist/LocalLaunch.h"
#include "runtime/trun/dist/LaunchEnvironment.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

#include <arpa/inet.h>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace tcc::trun {
namespace {

std::string TrunExecutable() {
  std::string exe = ThisExecutable();
  return exe.empty() ? "trun" : exe;
}

// A port on 127.0.0.1 that was free a moment ago, for rank 0 to listen on.
absl::StatusOr<int> FreeLocalPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return absl::ErrnoToStatus(errno, "socket");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (::bind(fd, reinterpret_cast<sockaddr *>(&address), sizeof address) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr *>(&address), &length) != 0) {
    int error = errno;
    ::close(fd);
    return absl::ErrnoToStatus(error, "cannot find a free port on 127.0.0.1");
  }
  ::close(fd);
  return ntohs(address.sin_port);
}

// The executable `name` on PATH (or `name` itself when it has a '/').
std::string FindOnPath(const std::string &name) {
  if (name.find('/') != std::string::npos)
    return ::access(name.c_str(), X_OK) == 0 ? name : "";
  const char *path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path ? path : "/usr/bin:/bin", ':')) {
    std::string candidate = absl::StrCat(dir.empty() ? "." : dir, "/", name);
    struct stat st;
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0)
      return candidate;
  }
  return "";
}

std::vector<char *> Argv(std::vector<std::string> &args) {
  std::vector<char *> argv;
  for (std::string &a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  return argv;
}

// cpu steps: this process becomes mpirun, which starts the ranks.
absl::StatusOr<int> ExecMpirun(const std::vector<std::string> &rank_args, int nproc) {
  const char *override_path = std::getenv("TCC_MPIRUN");
  std::string mpirun = FindOnPath(override_path && *override_path ? override_path : "mpirun");
  if (mpirun.empty())
    return absl::FailedPreconditionError(
        "--nproc: a cpu step trains its ranks as MPI processes, and mpirun was not found on "
        "PATH (apt-get install openmpi-bin, or set TCC_MPIRUN)");
  std::vector<std::string> args = {mpirun, "-np", std::to_string(nproc),
                                   // ranks may outnumber cores (a laptop, CI), and
                                   // each rank's BLAS threads may use any core
                                   "--oversubscribe", "--bind-to", "none"};
  if (::geteuid() == 0) // Open MPI refuses root unless asked
    args.push_back("--allow-run-as-root");
  // The ranks share the cores: each rank's BLAS gets its share of them
  // unless the user chose (N ranks of all-core BLAS thrash).
  if (!std::getenv("OPENBLAS_NUM_THREADS") && !std::getenv("OMP_NUM_THREADS")) {
    long cores = std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN));
    std::string share = std::to_string(std::max(1L, cores / nproc));
    for (const char *name : {"OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"})
      for (std::string a : {std::string("-x"), std::string(name) + "=" + share})
        args.push_back(a);
  }
  args.push_back(TrunExecutable());
  args.insert(args.end(), rank_args.begin(), rank_args.end());
  std::fflush(stdout);
  std::vector<char *> argv = Argv(args);
  ::execv(mpirun.c_str(), argv.data());
  return absl::ErrnoToStatus(errno, absl::StrCat("--nproc: cannot run ", mpirun));
}

std::atomic<int> g_forward_signal{0};
void RememberSignal(int signal_number) { g_forward_signal = signal_number; }

std::string HowItEnded(int status) {
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return absl::StrCat("was killed by signal ", sig, " (", strsignal(sig), ")");
  }
  return absl::StrCat("failed with exit status ", WEXITSTATUS(status));
}

} // namespace

// cuda steps: N children with torchrun's variables, watched until all end.
absl::StatusOr<int> SpawnLocalRanks(const std::string &exe,
                                    const std::vector<std::string> &rank_args, int nproc) {
  absl::StatusOr<int> port = FreeLocalPort();
  if (!port.ok())
    return port.status();
  std::vector<pid_t> pids(nproc, -1);
  std::fflush(stdout);
  std::fflush(stderr);
  for (int r = 0; r < nproc; ++r) {
    pid_t pid = ::fork();
    if (pid < 0)
      return absl::ErrnoToStatus(errno, "--nproc: fork");
    if (pid == 0) {
      // Terminal signals reach the launcher alone, which passes them on
      // once; a launcher that dies takes its ranks with it.
      ::setpgid(0, 0);
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      ::setenv("RANK", std::to_string(r).c_str(), 1);
      ::setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(nproc).c_str(), 1);
      ::setenv("LOCAL_WORLD_SIZE", std::to_string(nproc).c_str(), 1);
      ::setenv("MASTER_ADDR", "127.0.0.1", 1);
      ::setenv("MASTER_PORT", std::to_string(*port).c_str(), 1);
      std::vector<std::string> args = {exe};
      args.insert(args.end(), rank_args.begin(), rank_args.end());
      std::vector<char *> argv = Argv(args);
      ::execv(exe.c_str(), argv.data());
      std::fprintf(stderr, "trun --nproc: cannot run %s: %s\n", exe.c_str(), std::strerror(errno));
      std::_Exit(127);
    }
    pids[r] = pid;
  }
  struct sigaction forward{}, old_int{}, old_term{};
  forward.sa_handler = RememberSignal;
  sigemptyset(&forward.sa_mask);
  ::sigaction(SIGINT, &forward, &old_int);
  ::sigaction(SIGTERM, &forward, &old_term);

  using Clock = std::chrono::steady_clock;
  constexpr auto kGrace = std::chrono::seconds(10); // to stop, before SIGKILL
  int alive = nproc, forwarded = 0;
  int exit_code = 0; // the first failed rank's; 0 while none failed
  Clock::time_point kill_at = Clock::time_point::max();
  while (alive > 0) {
    if (int sig = g_forward_signal.exchange(0)) {
      forwarded = sig;
      for (pid_t pid : pids)
        if (pid > 0)
          ::kill(pid, sig);
    }
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      int r = 0;
      while (r < nproc && pids[r] != pid)
        ++r;
      if (r == nproc)
        continue;
      pids[r] = -1;
      --alive;
      bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      bool stopped = forwarded && WIFEXITED(status) && WEXITSTATUS(status) == 128 + forwarded;
      if (!ok && exit_code == 0) {
        exit_code = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
        if (!stopped) {
          std::fprintf(stderr, "trun --nproc: rank %d (pid %d) %s%s\n", r, pid,
                       HowItEnded(status).c_str(),
                       alive ? "; ending the other ranks" : "");
          for (pid_t other : pids)
            if (other > 0)
              ::kill(other, SIGTERM);
          kill_at = Clock::now() + kGrace;
        }
      }
      continue;
    }
    if (pid < 0 && errno != EINTR)
      break;
    if (Clock::now() >= kill_at) {
      for (int r = 0; r < nproc; ++r)
        if (pids[r] > 0) {
          std::fprintf(stderr, "trun --nproc: rank %d (pid %d) did not stop; killing it\n", r,
                       pids[r]);
          ::kill(pids[r], SIGKILL);
        }
      kill_at = Clock::time_point::max();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGTERM, &old_term, nullptr);
  return exit_code;
}

std::vector<std::string> WithoutNproc(const std::vector<std::string> &args) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--nproc") {
      ++i;
      continue;
    }
    if (args[i].rfind("--nproc=", 0) == 0)
      continue;
    out.push_back(args[i]);
  }
  return out;
}

absl::StatusOr<int> LaunchLocalRanks(const std::vector<std::string> &rank_args, int nproc,
                                     bool cuda_step) {
  return cuda_step ? SpawnLocalRanks(TrunExecutable(), rank_args, nproc)
                   : ExecMpirun(rank_args, nproc);
}

} // namespace tcc::trun
