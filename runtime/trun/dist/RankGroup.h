// The ranks of a data-parallel run, joined: the collectives a step compiled
// with tcc compile --data-parallel calls (tcc_collectives), and the few
// host-side exchanges trun itself needs around the step — the step-library
// check at start, evaluation sums, agreeing to stop.
//
// Back ends (docs/distributed.md):
//   MPI   cpu steps, under mpirun / srun / trun --nproc: the plugin
//         libtcc_mpi.so (mpi/MpiPlugin.h), dlopened only here, so trun
//         starts on machines without MPI.
//   NCCL  cuda steps (NcclRankGroup.cpp).
#ifndef TCC_RUNTIME_TRUN_DIST_RANKGROUP_H
#define TCC_RUNTIME_TRUN_DIST_RANKGROUP_H

#include "runtime/trun/dist/CommProfile.h"
#include "runtime/trun/dist/LaunchEnvironment.h"
#include "tcc/step_abi.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tcc::trun {

class RankGroup {
public:
  virtual ~RankGroup();

  const RankInfo &info() const { return info_; }
  int rank() const { return info_.rank; }
  int world_size() const { return info_.world_size; }
  // Rank 0 prints progress and writes metrics, checkpoints and exports.
  bool is_lead() const { return info_.rank == 0; }

  // The table the step calls (Trainer::set_collectives); lives as long as
  // the group.
  const tcc_collectives *step_collectives() const { return &collectives_; }

  // "MPI (Open MPI v4.1.4)", for the run's header.
  virtual std::string Describe() const = 0;

  // The host exchanges (each one a heartbeat for the watchdog):
  // every rank's `mine` (the same size on every rank), in rank order;
  absl::StatusOr<std::vector<std::string>> AllGather(const std::string &mine);
  // `values` becomes, on every rank, its sum over the ranks.
  absl::Status SumOnHost(std::vector<double> &values);

  // trun --profile: while on, the back end times the step's collectives
  // (CommProfile.h); on again clears. False: this back end cannot (MPI).
  virtual bool TimesCollectives() const { return false; }
  virtual absl::Status SetCommProfiling(bool on) { return absl::OkStatus(); }
  // After a step (its stream synchronized): adds the times of the
  // collectives and waits since the last call to `sums` (collectives,
  // bytes, comm_ms, exposed_ms).
  virtual absl::Status AddCommTimes(CommProfile &sums) { return absl::OkStatus(); }

  // Ends the group after a successful run (every rank calls it).
  virtual absl::Status Finish() = 0;

  // This rank failed alone (its error already printed): ends every rank
  // now, so that none waits forever in a collective. Does not return.
  [[noreturn]] virtual void AbortAll(int exit_code) = 0;

  // The watchdog: a thread that ends this process (exit 1, after a line on
  // stderr) when no host exchange (SumOnHost, AllGather: after every train
  // step and evaluation) has finished for `timeout_seconds`. A rank that
  // died, hung or was stopped leaves the others blocked in a step's
  // collective; the launcher then sees this rank exit and ends the job.
  void StartWatchdog(double timeout_seconds);
  void StopWatchdog();

protected:
  explicit RankGroup(RankInfo info);
  // The back end's exchanges: `bytes` bytes of every rank's `mine` into
  // `all` (rank order); `count` doubles summed in place.
  virtual absl::Status GatherBytes(const char *mine, size_t bytes, char *all) = 0;
  virtual absl::Status SumDoubles(double *values, size_t count) = 0;
  // The most bytes one GatherBytes may exchange in all (every rank's part):
  // AllGather splits larger exchanges.
  virtual size_t MaxExchangeBytes() const { return static_cast<size_t>(1) << 30; }
  // Called by the watchdog before the process ends (NCCL: abort the
  // communicator so that its kernels stop); must be safe from its thread.
  virtual void AbortFromWatchdog() {}

  RankInfo info_;
  tcc_collectives collectives_{};

private:
  struct Watchdog;
  std::unique_ptr<Watchdog> watchdog_;
};

// TCC_DIST_TIMEOUT (seconds, default 300): how long a rank waits for the
// others, at start (the NCCL bootstrap) and between steps (the watchdog).
absl::StatusOr<double> DistTimeoutSeconds();

// Joins the other ranks of a cpu step through MPI. Errors say what is
// missing (the plugin, libmpi) and how to get it.
absl::StatusOr<std::unique_ptr<RankGroup>> JoinMpiRanks(const RankInfo &info);

// Joins the other ranks of a cuda step through NCCL on GPU `gpu`, after
// TcpBootstrap.h's exchange of NCCL's id. Errors: NCCL or the driver
// missing, an unreachable master, ranks that never came.
absl::StatusOr<std::unique_ptr<RankGroup>> JoinNcclRanks(const RankInfo &info, int gpu);

// Checks that every rank loaded the same step library (size and CRC32 of
// `step_path`): ranks running different steps would exchange buffers of
// different gradients, or hang. The error names the ranks that differ.
absl::Status CheckSameStepLibrary(RankGroup &group, const std::string &step_path);

// The back end's text for the last collective of a step that failed
// ("" if none): the step itself only returns a code, so trun's message for
// a failed train call adds this (Trainer::CallError).
std::string LastCollectiveError();
void RecordCollectiveError(std::string error);

// The group of this process, once joined (nullptr before and for one
// rank): main() calls AbortAll on it after printing a rank's error.
RankGroup *ActiveRankGroup();
void SetActiveRankGroup(RankGroup *group);

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_DIST_RANKGROUP_H
