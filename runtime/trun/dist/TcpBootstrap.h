// How the ranks of a cuda step find each other before NCCL exists: rank 0
// listens at MASTER_ADDR:MASTER_PORT and hands every other rank a few bytes
// (NCCL's unique id), as torchrun's store does. Every wait has a deadline,
// so an unreachable master or a rank that never starts is an error naming
// the address or the missing ranks, not a hang.
#ifndef TCC_RUNTIME_TRUN_DIST_TCPBOOTSTRAP_H
#define TCC_RUNTIME_TRUN_DIST_TCPBOOTSTRAP_H

#include "runtime/trun/dist/LaunchEnvironment.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include <cstddef>
#include <string>

namespace tcc::trun {

struct BootstrapOptions {
  std::string master_addr;
  int master_port = 0;
  // Where master_port came from, for errors.
  std::string port_source = "MASTER_PORT";
  double timeout_seconds = 300;
};

// The master from the launcher (RankInfo), else from MASTER_ADDR /
// MASTER_PORT (mpirun -x ...); under torchrun (TORCHELASTIC_USE_AGENT_STORE
// set: its own store listens at MASTER_PORT) the port above it;
// TCC_BOOTSTRAP_PORT overrides the port. The deadline from
// TCC_DIST_TIMEOUT (seconds, default 300). Errors name what is missing.
absl::StatusOr<BootstrapOptions> BootstrapFromEnvironment(const RankInfo &info);

// Rank 0 sends its `size` bytes at `bytes` to every other rank, which
// receive them into `bytes`. Each rank also checks that all agree on the
// world size.
absl::Status ShareBootstrapBytes(const RankInfo &info, const BootstrapOptions &options,
                                 char *bytes, size_t size);

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_DIST_TCPBOOTSTRAP_H
