#include "runtime/trun/train/StopSignals.h"

#include <csignal>
#include <cstring>

namespace tcc::trun {
namespace {

std::atomic<bool> stop_requested{false};
std::atomic<int> stop_signal{0};
struct sigaction previous_int, previous_term;

static_assert(std::atomic<bool>::is_always_lock_free,
              "the signal handler needs a lock-free flag");

void OnStopSignal(int signal_number) {
  stop_signal.store(signal_number);
  stop_requested.store(true);
}

} // namespace

StopSignals::StopSignals() {
  stop_requested.store(false);
  stop_signal.store(0);
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_handler = OnStopSignal;
  sigemptyset(&action.sa_mask);
  // One-shot: the second Ctrl-C gets the default action (terminate).
  action.sa_flags = SA_RESETHAND | SA_RESTART;
  sigaction(SIGINT, &action, &previous_int);
  sigaction(SIGTERM, &action, &previous_term);
}

StopSignals::~StopSignals() {
  sigaction(SIGINT, &previous_int, nullptr);
  sigaction(SIGTERM, &previous_term, nullptr);
}

const std::atomic<bool> &StopSignals::requested() { return stop_requested; }

int StopSignals::signal_number() { return stop_signal.load(); }

const char *SignalName(int signal_number) {
  switch (signal_number) {
  case SIGINT:
    return "SIGINT";
  case SIGTERM:
    return "SIGTERM";
  default:
    return "a signal";
  }
}

} // namespace tcc::trun
