// One NCCL rank on the fakes beside this file (fake_nccl.c, fake_cuda.c):
// `abort` runs AbortAll(3), main()'s error path; `watchdog` starts the
// watchdog with a 1 s timeout and never exchanges, so it fires. Either must
// end the process (exit 3, exit 1) even when ncclCommAbort never returns
// (FAKE_NCCL_GRAPHS_HELD): nccl_abort_check.sh times it.
#include "runtime/trun/dist/RankGroup.h"

#include <cstdio>
#include <cstring>
#include <string>
#include <unistd.h>

int main(int argc, char **argv) {
  using namespace tcc::trun;
  if (argc != 3 || (std::strcmp(argv[1], "abort") && std::strcmp(argv[1], "watchdog"))) {
    std::fprintf(stderr, "usage: nccl_abort_check abort|watchdog PORT\n");
    return 2;
  }
  RankInfo info;
  info.launcher = Launcher::kTorchrun;
  info.master_addr = "127.0.0.1";
  info.master_port = std::stoi(argv[2]);
  auto group = JoinNcclRanks(info, 0);
  if (!group.ok()) {
    std::fprintf(stderr, "nccl_abort_check: %s\n", std::string(group.status().message()).c_str());
    return 9;
  }
  if (!std::strcmp(argv[1], "abort"))
    (*group)->AbortAll(3);
  (*group)->StartWatchdog(1.0);
  for (;;)
    pause();
}
