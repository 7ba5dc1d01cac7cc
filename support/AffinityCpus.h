// The CPUs this process may run on: its affinity mask's count (taskset,
// cpusets), else the online CPUs, at least 1. Header-only, in support/
// (below the compiler and the runtime), so that trun's --threads default
// (runtime/trun/cli/HostThreads.cpp) and the parameter fill's thread count
// (runtime/initializers) count them the same way without linking each other.
#ifndef TCC_SUPPORT_AFFINITYCPUS_H
#define TCC_SUPPORT_AFFINITYCPUS_H

#include <sched.h>
#include <unistd.h>

namespace tcc {

inline int AffinityCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
    return CPU_COUNT(&set);
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  return online > 0 ? static_cast<int>(online) : 1;
}

} // namespace tcc

#endif // TCC_SUPPORT_AFFINITYCPUS_H
