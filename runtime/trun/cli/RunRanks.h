// The parts of a trun run that concern its ranks (docs/distributed.md):
// whether a step may train across them, which back end joins them, the
// checks every rank makes at start, and trun --nproc's launch.
#ifndef TCC_RUNTIME_TRUN_CLI_RUNRANKS_H
#define TCC_RUNTIME_TRUN_CLI_RUNRANKS_H

#include "runtime/trun/cli/Options.h"
#include "runtime/trun/data/BatchSource.h"
#include "runtime/trun/data/StepBinding.h"
#include "runtime/trun/dist/LaunchEnvironment.h"
#include "runtime/trun/dist/RankGroup.h"
#include "tcc/step_abi.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tcc::trun {

// trun --nproc N: starts N ranks of the command line `args` (trun's
// arguments) on this machine, after checking that the step can train
// across ranks; returns this process's exit status (dist/LocalLaunch.h).
absl::StatusOr<int> LaunchRanks(const Options &options, const std::vector<std::string> &args);

// --global-batch: ranks x the step's batch B must be what the user meant.
absl::Status CheckGlobalBatch(const Options &options, int64_t world, int64_t B);

// Whether step `d` may train as one of `world_size` ranks: compiled with
// --data-parallel (and, if sharded, for that many ranks). `who`: "started
// as rank 1 of 2 (...)" or "--nproc 2", for the message.
absl::Status CheckRanksCanTrain(const std::string &who, const tcc_step_descriptor &d,
                                int world_size);
// A step compiled with --shard-optimizer N runs on exactly N ranks: an error
// naming `who` ("--nproc 4", "started as ...", "one process") otherwise.
absl::Status CheckShardRanks(const std::string &who, const tcc_step_descriptor &d,
                             int world_size);

// The back end of the step's target: MPI for cpu steps, NCCL for cuda (on
// GPU `gpu`).
absl::StatusOr<std::unique_ptr<RankGroup>> JoinRanks(const RankInfo &rank,
                                                     const tcc_step_descriptor &d, int32_t gpu);

// Every rank was given the flags that decide what it computes (data,
// steps, seed, lr, order, evaluation, checkpoints and resume, --on-nan,
// --init-from, --global-batch, --profile): ranks that differ would diverge
// or wait for each other forever. Paths only rank 0 writes (--metrics,
// --save-weights, ...) and display flags may differ. The error names the
// first differing flag of each rank that differs from rank 0.
absl::Status CheckSameFlags(RankGroup &ranks, const Options &options);

// A rank's share of the data: the global batch is every rank's B rows, and
// this rank reads `slice` of each global batch (RowsOfRank), so that N
// ranks see the batches one process of N x B rows would. One rank (ranks
// null): the whole batch.
struct RankRows {
  int64_t world = 1;
  int64_t global = 0; // N x B
  RowSlice slice;
};
absl::StatusOr<RankRows> RankRowsOf(const RankGroup *ranks, int64_t B);

// "rank 1 of 2: <error>": which rank failed, when several print.
absl::Status WithRank(const RankInfo &rank, const absl::Status &status);

// Every rank starts from step `step` (the same checkpoint), else an error
// naming the ranks that differ.
absl::Status CheckSameStart(RankGroup &ranks, int64_t step);

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_CLI_RUNRANKS_H
