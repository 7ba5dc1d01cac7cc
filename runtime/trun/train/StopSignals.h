// SIGINT / SIGTERM during training: finish the current step, write the
// final checkpoint, exit 128 + signal. A second signal ends the process at
// once (the handler is one-shot), so a hung run can still be stopped.
#ifndef TCC_RUNTIME_TRUN_TRAIN_STOPSIGNALS_H
#define TCC_RUNTIME_TRUN_TRAIN_STOPSIGNALS_H

#include <atomic>

namespace tcc::trun {

// Installs the handlers on construction, restores the previous ones on
// destruction. One instance at a time.
class StopSignals {
public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals &) = delete;
  StopSignals &operator=(const StopSignals &) = delete;

  // Set by the handler; the training loop polls it between steps.
  static const std::atomic<bool> &requested();
  // The signal that set it (SIGINT or SIGTERM); 0 if none.
  static int signal_number();
};

// "SIGINT", "SIGTERM", ...
const char *SignalName(int signal_number);

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_TRAIN_STOPSIGNALS_H
