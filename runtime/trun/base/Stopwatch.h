// Wall-clock intervals for trun's reports (step time, data wait, checkpoint
// time): a monotonic clock, so a clock adjustment never makes them negative.
#ifndef TCC_RUNTIME_TRUN_BASE_STOPWATCH_H
#define TCC_RUNTIME_TRUN_BASE_STOPWATCH_H

#include <chrono>

namespace tcc::trun {

using Clock = std::chrono::steady_clock;

inline double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_BASE_STOPWATCH_H
