// Who this trun process is among the ranks of a data-parallel job, read
// from the environment of the launcher that started it.
//
// trun runs under the launchers people already use, and reads each one's
// variables (first match wins, in this order):
//
//   torchrun / torch.distributed.run:  RANK, WORLD_SIZE, LOCAL_RANK,
//                                      MASTER_ADDR, MASTER_PORT
//   Slurm (srun):                      SLURM_PROCID, SLURM_NTASKS,
//                                      SLURM_LOCALID; the master is the
//                                      first host of SLURM_JOB_NODELIST
//                                      (or SLURM_NODELIST), its port
//                                      MASTER_PORT or 29500
//   Open MPI (mpirun):                 OMPI_COMM_WORLD_RANK,
//                                      OMPI_COMM_WORLD_SIZE,
//                                      OMPI_COMM_WORLD_LOCAL_RANK
//   MPICH / Hydra (PMI):               PMI_RANK, PMI_SIZE, MPI_LOCALRANKID
//
// None of them: one rank (rank 0 of 1), the single-process run. A launcher
// whose variables are there but inconsistent (a rank outside [0, world),
// a world size below 1, a partial set, text where a number belongs) is an
// error naming the variable, never a guess: a rank that guessed would hang
// the others at the first collective.
#ifndef TCC_RUNTIME_TRUN_DIST_LAUNCHENVIRONMENT_H
#define TCC_RUNTIME_TRUN_DIST_LAUNCHENVIRONMENT_H

#include "absl/status/statusor.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace tcc::trun {

// MASTER_PORT when unset (torchrun's default).
inline constexpr int kDefaultMasterPort = 29500;

enum class Launcher { kNone, kTorchrun, kSlurm, kOpenMpi, kMpich };

// "torchrun", "slurm", ...: for messages.
const char *LauncherName(Launcher launcher);

struct RankInfo {
  Launcher launcher = Launcher::kNone;
  int rank = 0;        // in [0, world_size)
  int world_size = 1;
  int local_rank = 0;  // the GPU this rank drives on its machine
  // Where rank 0 listens for the others (NCCL's bootstrap): empty for the
  // MPI launchers (MPI itself connects the ranks) and for one rank.
  std::string master_addr;
  int master_port = 0;

  bool distributed() const { return world_size > 1; }
  // "rank 3 of 8 (local 1, slurm)".
  std::string Describe() const;
};

// The variable `name`, or nullopt when it is unset.
using EnvLookup = std::function<std::optional<std::string>(const std::string &name)>;

// The process's environment (getenv).
EnvLookup ProcessEnvironment();

// The path of this process's executable (/proc/self/exe); "" when it
// cannot be read. trun --nproc starts it again; the MPI plugin lies next
// to it.
std::string ThisExecutable();

// This process's place in the job, from `env`.
absl::StatusOr<RankInfo> ReadLaunchEnvironment(const EnvLookup &env);

// The hosts of a Slurm node list, in order: "gpu[01-03,07],login1" ->
// gpu01, gpu02, gpu03, gpu07, login1 (zero padding kept; nested brackets
// and ranges are as `scontrol show hostnames` expands them).
absl::StatusOr<std::vector<std::string>> ExpandSlurmNodeList(const std::string &list);

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_DIST_LAUNCHENVIRONMENT_H
