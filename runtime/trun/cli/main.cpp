// trun: trains a tcc-compiled step.so on IDX data. See docs/runtime.md.
#include "runtime/trun/cli/HostThreads.h"
#include "runtime/trun/cli/Options.h"
#include "runtime/trun/cli/Run.h"
#include "runtime/trun/cli/RunRanks.h"
#include "runtime/trun/dist/RankGroup.h"
#include "runtime/trun/train/StopSignals.h"

#include "absl/strings/str_replace.h"

#include <cstdio>
#include <iostream>
#include <string>
#include <unistd.h>
#include <vector>
#include <csignal>

namespace {

// Every failure is exactly one line on stderr.
int Fail(const std::string &message, int exit_code) {
  std::string line = absl::StrReplaceAll(message, {{"\n", " "}});
  std::cout.flush();
  std::fprintf(stderr, "trun: error: %s\n", line.c_str());
  return exit_code;
}

} // namespace

int main(int argc, char **argv) {
  // Past a file-size limit (ulimit -f) a write fails with EFBIG, which the
  // writers report naming the file (and remove their temporaries), instead
  // of SIGXFSZ ending the process mid-write.
  std::signal(SIGXFSZ, SIG_IGN);
  std::vector<std::string> args(argv + 1, argv + argc);
  absl::StatusOr<tcc::trun::Options> options = tcc::trun::ParseOptions(args);
  if (!options.ok())
    return Fail(std::string(options.status().message()), 2);
  if (options->help) {
    std::fputs(tcc::trun::kUsage, stdout);
    return 0;
  }
  if (options->nproc > 0) {
    absl::StatusOr<int> code = tcc::trun::LaunchRanks(*options, args);
    if (!code.ok())
      return Fail(std::string(code.status().message()), 1);
    return *code;
  }
  // Before the step library (and with it libgomp) loads.
  options->threads_line = tcc::trun::ConfigureHostThreads(options->threads);
  // A live progress line on a terminal; plain lines in a log.
  options->live_progress = isatty(STDOUT_FILENO) == 1;
  absl::Status status = tcc::trun::RunTrun(*options, std::cout);
  if (absl::IsCancelled(status)) {
    // Stopped by SIGINT / SIGTERM after the final checkpoint: not an error,
    // but the exit status says how it ended, as the shell's would.
    std::cout.flush();
    std::fprintf(stderr, "trun: %s\n", std::string(status.message()).c_str());
    return 128 + tcc::trun::StopSignals::signal_number();
  }
  if (!status.ok()) {
    int code = Fail(std::string(status.message()), 1);
    // One of several ranks failed alone: end the others now rather than
    // leave them waiting for it in a collective.
    if (tcc::trun::RankGroup *ranks = tcc::trun::ActiveRankGroup())
      ranks->AbortAll(code);
    return code;
  }
  return 0;
}
