#include "runtime/trun/train/ShardedTrainingState.h"

#include "runtime/trun/dist/RankGroup.h"

#include "absl/strings/str_cat.h"

#include <cstring>
#include <string>

namespace tcc::trun {

std::unique_ptr<ShardedTrainingState> ShardedTrainingState::ForStep(const tcc_step_descriptor &d) {
  if (ShardRanks(d) == 0)
    return nullptr;
  return std::unique_ptr<ShardedTrainingState>(new ShardedTrainingState(d));
}

ShardedTrainingState::ShardedTrainingState(const tcc_step_descriptor &d) : step_(d), whole_(d) {
  params_.shards = d.params;
  for (int32_t i = 0; i < d.num_params; ++i) {
    bool shard = false;
    params_.whole.push_back(WholeParam(d, i, &shard));
    params_.sharded.push_back(shard);
  }
  state_.shards = d.optimizer_state;
  for (int32_t i = 0; i < d.num_optimizer_state; ++i) {
    bool shard = false;
    state_.whole.push_back(WholeOptimizerState(d, i, &shard));
    state_.sharded.push_back(shard);
  }
  whole_.params = params_.whole.data();
  whole_.optimizer_state = state_.whole.data();
  // What a step without sharding would say.
  whole_.shard_optimizer_ranks = 0;
  whole_.optimizer_state_shard_of = nullptr;
  if (tcc_step_descriptor_has_shard_parameters(&whole_)) {
    whole_.shard_parameter_ranks = 0;
    whole_.whole_params = nullptr;
  }
}

void ShardedTrainingState::Tensors::Allocate() {
  if (!buffers.empty())
    return;
  for (const tcc_tensor_desc &t : whole)
    buffers.emplace_back(static_cast<size_t>(t.size_bytes));
}

std::vector<const void *> ShardedTrainingState::Tensors::data() const {
  std::vector<const void *> out;
  for (const AlignedBuffer &b : buffers)
    out.push_back(b.data());
  return out;
}

std::vector<void *> ShardedTrainingState::Tensors::mutable_data() {
  Allocate();
  std::vector<void *> out;
  for (AlignedBuffer &b : buffers)
    out.push_back(b.data());
  return out;
}

absl::Status ShardedTrainingState::Tensors::Gather(RankGroup *ranks,
                                                   const std::vector<const void *> &mine,
                                                   bool lead, const char *what) {
  if (lead)
    Allocate();
  const int world = ranks ? ranks->world_size() : 1;
  for (size_t i = 0; i < mine.size(); ++i) {
    const size_t bytes = static_cast<size_t>(shards[i].size_bytes);
    char *out = lead ? static_cast<char *>(buffers[i].data()) : nullptr;
    if (!sharded[i] || !ranks) { // whole already (or one rank)
      if (lead)
        std::memcpy(out, mine[i], bytes);
      continue;
    }
    absl::StatusOr<std::vector<std::string>> pieces =
        ranks->AllGather(std::string(static_cast<const char *>(mine[i]), bytes));
    if (!pieces.ok())
      return absl::Status(pieces.status().code(),
                          absl::StrCat("gathering the shards of ", what, " '", shards[i].name,
                                       "': ", pieces.status().message()));
    if (!lead)
      continue;
    for (int r = 0; r < world; ++r)
      std::memcpy(out + static_cast<size_t>(r) * bytes, (*pieces)[r].data(), bytes);
  }
  return absl::OkStatus();
}

void ShardedTrainingState::Tensors::Scatter(int rank, const std::vector<void *> &mine) const {
  for (size_t i = 0; i < mine.size() && i < buffers.size(); ++i) {
    const size_t bytes = static_cast<size_t>(shards[i].size_bytes);
    const char *whole = static_cast<const char *>(buffers[i].data());
    size_t offset = sharded[i] ? static_cast<size_t>(rank) * bytes : 0;
    std::memcpy(mine[i], whole + offset, bytes);
  }
}

absl::Status ShardedTrainingState::Gather(RankGroup *ranks,
                                          const std::vector<const void *> &params,
                                          const std::vector<const void *> &state) {
  const int32_t n = ShardRanks(step_);
  const int world = ranks ? ranks->world_size() : 1;
  if (world != n || (!state.empty() && state.size() != state_.whole.size()) ||
      (shards_parameters() && params.size() != params_.whole.size()))
    return absl::InternalError(absl::StrCat(
        "gathering the sharded tensors: ", params.size(), " parameters and ", state.size(),
        " state buffers over ", world, " ranks for a step sharded over ", n, " with ",
        params_.whole.size(), " and ", state_.whole.size()));
  const bool lead = !ranks || ranks->is_lead();
  if (shards_parameters())
    if (absl::Status s = params_.Gather(ranks, params, lead, "parameter"); !s.ok())
      return s;
  return state_.Gather(ranks, state, lead, "the optimizer state");
}

std::vector<const void *> ShardedTrainingState::whole_params() const { return params_.data(); }
std::vector<void *> ShardedTrainingState::mutable_whole_params() { return params_.mutable_data(); }
std::vector<const void *> ShardedTrainingState::whole_state() const { return state_.data(); }
std::vector<void *> ShardedTrainingState::mutable_whole_state() { return state_.mutable_data(); }

void ShardedTrainingState::Scatter(int rank, const std::vector<void *> &params,
                                   const std::vector<void *> &state) const {
  if (shards_parameters())
    params_.Scatter(rank, params);
  state_.Scatter(rank, state);
}

} // namespace tcc::trun
