// The OpenMP threads of a cpu step: how many, and how idle ones wait.
//
// A cpu step's loops and gemm splits run on libgomp's threads, which read
// OMP_NUM_THREADS and OMP_WAIT_POLICY once, when the step library (and so
// libgomp) is loaded. trun sets them before that, unless the user did:
//
// - threads: --threads N, else OMP_NUM_THREADS, else the CPUs this process
//   may run on (its affinity mask), capped by its cgroup's CPU quota (a
//   container limited to 2 CPUs on a 64-core host gets 2 threads, not 64);
// - waiting: OMP_WAIT_POLICY=passive unless OMP_WAIT_POLICY or
//   GOMP_SPINCOUNT is set. libgomp's default spins up to ~300k iterations
//   at every barrier; on a machine another process keeps busy the spinning
//   thread takes the core from the one with work (GPT-2's CPU config, 2
//   threads beside one busy process: 3.9-4.8 s for 30 steps spinning,
//   2.4-2.6 s passive; docs/performance.md).
#ifndef TCC_RUNTIME_TRUN_CLI_HOSTTHREADS_H
#define TCC_RUNTIME_TRUN_CLI_HOSTTHREADS_H

#include <optional>
#include <string>
#include "absl/strings/string_view.h"

namespace tcc::trun {

// The CPUs a cgroup's quota allows: "200000 100000" (cgroup v2 cpu.max:
// quota, period) is 2.0; "max 100000" is no limit (nullopt). v1's two files
// read the same way with quota -1 for no limit. nullopt for text it cannot
// read.
std::optional<double> ParseCpuQuota(absl::string_view quota, absl::string_view period);
std::optional<double> ParseCpuMax(absl::string_view cpu_max);

// Threads for `affinity_cpus` usable CPUs under a quota of `quota_cpus`
// (rounded up: 1.5 CPUs is 2 threads), at least 1.
int ThreadsForCpus(int affinity_cpus, std::optional<double> quota_cpus);

// This process's cgroup CPU limit (v2, else v1), nullopt when there is none
// or it cannot be read.
std::optional<double> CgroupCpuLimit();

// Sets OMP_NUM_THREADS and OMP_WAIT_POLICY for the step as described
// above (`flag_threads` is --threads) and returns the line trun prints for
// a cpu step, e.g. "threads: 2 (the CPUs this process may use), idle
// threads sleep (OMP_WAIT_POLICY=passive)". Call before the step loads.
std::string ConfigureHostThreads(std::optional<int> flag_threads);

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_CLI_HOSTTHREADS_H
