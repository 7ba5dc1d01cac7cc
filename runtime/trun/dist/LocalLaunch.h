// trun --nproc N: N ranks of the same command on this machine.
//
//   cuda steps: N child processes, rank r on GPU r, with torchrun's
//               variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR
//               127.0.0.1, a free MASTER_PORT); this process waits for
//               them, passes SIGINT / SIGTERM on, and when one fails ends
//               the others and says which rank failed and how.
//   cpu steps:  mpirun -np N (Open MPI: MPI is the cpu back end), which
//               does the same for its ranks; this process becomes mpirun.
#ifndef TCC_RUNTIME_TRUN_DIST_LOCALLAUNCH_H
#define TCC_RUNTIME_TRUN_DIST_LOCALLAUNCH_H

#include "absl/status/statusor.h"

#include <string>
#include <vector>

namespace tcc::trun {

// `rank_args`: the command line each rank runs (trun's arguments without
// --nproc). Returns the exit status for this process (the first failed
// rank's, else 0), or an error before any rank started.
absl::StatusOr<int> LaunchLocalRanks(const std::vector<std::string> &rank_args, int nproc,
                                     bool cuda_step);

// The cuda launch: `nproc` children running `executable` with `rank_args`
// and torchrun's variables, watched as described above (LaunchLocalRanks
// passes this trun; tests pass a shell).
absl::StatusOr<int> SpawnLocalRanks(const std::string &executable,
                                    const std::vector<std::string> &rank_args, int nproc);

// `args` without "--nproc N" / "--nproc=N".
std::vector<std::string> WithoutNproc(const std::vector<std::string> &args);

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_DIST_LOCALLAUNCH_H
