#include "runtime/trun/cli/RunRanks.h"

#include "runtime/trun/dist/LocalLaunch.h"
#include "runtime/trun/io/FileChecksum.h"
#include "runtime/trun/step/Diagnose.h"
#include "runtime/trun/step/StepDescriptor.h"
#include "runtime/trun/step/StepLibrary.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace tcc::trun {

// --global-batch: ranks x the step's batch must be what the user meant.
absl::Status CheckGlobalBatch(const Options &options, int64_t world, int64_t B) {
  if (!options.global_batch || *options.global_batch == world * B)
    return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "--global-batch ", *options.global_batch, ": ", world, world == 1 ? " rank" : " ranks",
      " x the step's batch ", B, " is ", world * B,
      *options.global_batch % world == 0
          ? absl::StrCat("; compile the step at batch ", *options.global_batch / world,
                         " (tcc compile --batch)")
          : absl::StrCat("; ", world, " ranks do not divide a global batch of ",
                         *options.global_batch)));
}

// `who`: "started as rank 1 of 2 (...)" or "--nproc 2".
absl::Status CheckRanksCanTrain(const std::string &who, const tcc_step_descriptor &d,
                                int world_size) {
  if (!IsDataParallel(d))
    return absl::FailedPreconditionError(absl::StrCat(
        who, ", but step '", d.model_name,
        "' was compiled for one rank: its ranks would each train their own copy. Compile it "
        "with tcc compile --data-parallel to train across ranks"));
  return CheckShardRanks(who, d, world_size);
}

absl::Status CheckShardRanks(const std::string &who, const tcc_step_descriptor &d,
                             int world_size) {
  const int32_t shards = ShardRanks(d);
  if (shards == 0 || shards == world_size)
    return absl::OkStatus();
  const bool params = ShardParameterRanks(d) > 0;
  const char *flag = params ? "--shard-parameters" : "--shard-optimizer";
  return absl::FailedPreconditionError(absl::StrCat(
      who, ", but step '", d.model_name, "' shards its ",
      params ? "parameters and optimizer state" : "optimizer state", " over exactly ", shards,
      shards == 1 ? " rank" : " ranks", " (tcc compile ", flag, " ", shards, "): run it on ",
      shards, shards == 1 ? " rank" : " ranks", " (trun --nproc ", shards,
      "), or compile it with ", flag, " ", world_size,
      " (its checkpoints resume at any world size)"));
}

// The back end of the step's target: MPI for cpu steps, NCCL for cuda.
absl::StatusOr<std::unique_ptr<RankGroup>> JoinRanks(const RankInfo &rank,
                                                     const tcc_step_descriptor &d, int32_t gpu) {
  if (d.device)
    return JoinNcclRanks(rank, gpu);
  if (rank.launcher == Launcher::kTorchrun)
    return absl::FailedPreconditionError(absl::StrCat(
        "started by torchrun as ", rank.Describe(), ": a cpu step trains across ranks with "
        "MPI; start it with trun --nproc N or mpirun"));
  return JoinMpiRanks(rank);
}

absl::Status CheckSameFlags(RankGroup &ranks, const Options &options) {
  auto text = [](const auto &v) -> std::string {
    if (!v)
      return "(none)";
    return absl::StrCat(*v);
  };
  const std::vector<std::pair<const char *, std::string>> flags = {
      {"--data", options.data},
      {"--test", text(options.test)},
      {"--val", text(options.val)},
      {"--data-order", options.data_order ? std::to_string(static_cast<int>(*options.data_order))
                                          : "(default)"},
      {"--eval-every", absl::StrCat(options.eval_every)},
      {"--eval-batches", absl::StrCat(options.eval_batches)},
      {"--test-batches", absl::StrCat(options.test_batches)},
      {"--steps", text(options.steps)},
      {"--epochs", text(options.epochs)},
      {"--lr", options.learning_rate ? absl::StrFormat("%.17g", *options.learning_rate)
                                     : "(default)"},
      {"--seed", absl::StrCat(options.seed)},
      {"--init-from", text(options.init_from)},
      {"--init-from-ignore-extra", options.init_from_ignore_extra ? "yes" : "no"},
      {"--ckpt-dir", text(options.ckpt_dir)},
      {"--ckpt-every", absl::StrCat(options.ckpt_every)},
      {"--resume", options.resume ? "yes" : "no"},
      {"--on-nan", std::to_string(static_cast<int>(options.on_nan))},
      {"--global-batch", text(options.global_batch)},
      {"--profile", options.profile ? "yes" : "no"},
  };
  // One CRC32 per flag, gathered: fixed-size records.
  std::string mine;
  for (const auto &[flag, value] : flags) {
    uint32_t crc = Crc32(value);
    mine.append(reinterpret_cast<const char *>(&crc), sizeof crc);
  }
  absl::StatusOr<std::vector<std::string>> all = ranks.AllGather(mine);
  if (!all.ok())
    return all.status();
  // Each differing rank's first differing flag; the earliest of them is
  // the one this rank's value is shown for.
  std::vector<std::string> differ;
  size_t first = flags.size();
  for (int r = 1; r < ranks.world_size(); ++r)
    for (size_t i = 0; i < flags.size(); ++i)
      if ((*all)[r].compare(i * 4, 4, (*all)[0], i * 4, 4) != 0) {
        differ.push_back(absl::StrCat("rank ", r, " has another ", flags[i].first));
        first = std::min(first, i);
        break;
      }
  if (differ.empty())
    return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "the ranks were given different flags (", absl::StrJoin(differ, ", "),
      " than rank 0; this rank's is ", flags[first].first, " ", flags[first].second,
      "): start every rank with the same command line"));
}

absl::StatusOr<RankRows> RankRowsOf(const RankGroup *ranks, int64_t B) {
  RankRows r;
  r.world = ranks ? ranks->world_size() : 1;
  r.global = r.world * B;
  if (ranks) {
    absl::StatusOr<RowSlice> rows = RowsOfRank(r.global, ranks->rank(), r.world);
    if (!rows.ok())
      return rows.status();
    r.slice = *rows;
  }
  return r;
}

// "rank 1 of 2: <error>": which rank failed, when several print.
absl::Status WithRank(const RankInfo &rank, const absl::Status &status) {
  return absl::Status(status.code(), absl::StrCat("rank ", rank.rank, " of ", rank.world_size,
                                                  ": ", status.message()));
}

// A rank that cannot see --ckpt-dir (a machine without the shared file
// system) would start at step 0 and train other weights in silence.
absl::Status CheckSameStart(RankGroup &ranks, int64_t step) {
  absl::StatusOr<std::vector<std::string>> all =
      ranks.AllGather(std::string(reinterpret_cast<const char *>(&step), sizeof step));
  if (!all.ok())
    return all.status();
  std::vector<int64_t> steps;
  for (const std::string &bytes : *all) {
    int64_t s = 0;
    std::memcpy(&s, bytes.data(), sizeof s);
    steps.push_back(s);
  }
  std::vector<std::string> differ;
  for (int r = 0; r < ranks.world_size(); ++r)
    if (steps[r] != steps[0])
      differ.push_back(absl::StrCat("rank ", r, " at step ", steps[r]));
  if (differ.empty())
    return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "the ranks start from different steps (rank 0 at step ", steps[0],
      ", ", absl::StrJoin(differ, ", "),
      "): every rank must see the same --ckpt-dir (a shared file system) to resume"));
}

absl::StatusOr<int> LaunchRanks(const Options &options, const std::vector<std::string> &args) {
  absl::StatusOr<RankInfo> rank = ReadLaunchEnvironment(ProcessEnvironment());
  if (!rank.ok())
    return absl::InvalidArgumentError(absl::StrCat("launch environment: ", rank.status().message()));
  if (rank->distributed())
    return absl::InvalidArgumentError(absl::StrCat(
        "--nproc: this trun was itself started as ", rank->Describe(),
        "; use --nproc or a launcher, not both"));
  // What the ranks would refuse, refused once here, before any starts.
  absl::StatusOr<std::unique_ptr<StepLibrary>> library = StepLibrary::Open(options.step_path);
  if (!library.ok())
    return library.status();
  const tcc_step_descriptor &d = (*library)->descriptor();
  absl::StatusOr<StepBinding> binding = BindStep(d);
  if (!binding.ok())
    return binding.status();
  if (absl::Status s =
          CheckRanksCanTrain(absl::StrCat("--nproc ", options.nproc), d, options.nproc);
      !s.ok())
    return s;
  if (absl::Status s = CheckGlobalBatch(options, options.nproc, binding->batch_size); !s.ok())
    return s;
  if (d.device) { // rank r drives GPU r: there must be N of them
    MachineInfo machine = ProbeMachine();
    if (!machine.has_driver)
      return absl::FailedPreconditionError(absl::StrCat(
          "--nproc ", options.nproc, ": a cuda step needs the NVIDIA driver: ",
          machine.driver_error));
    if (static_cast<int>(machine.gpus.size()) < options.nproc)
      return absl::FailedPreconditionError(absl::StrCat(
          "--nproc ", options.nproc, ": this machine has ", machine.gpus.size(),
          machine.gpus.size() == 1 ? " GPU" : " GPUs",
          " (rank r drives GPU r; CUDA_VISIBLE_DEVICES counts)"));
  }
  return LaunchLocalRanks(WithoutNproc(args), options.nproc, d.device != nullptr);
}

} // namespace tcc::trun
