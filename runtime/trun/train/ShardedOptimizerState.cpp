#include "runtime/trun/train/ShardedOptimizerState.h"

#include "runtime/trun/dist/RankGroup.h"
#include "runtime/trun/step/StepDescriptor.h"

#include "absl/strings/str_cat.h"

#include <cstring>
#include <string>

namespace tcc::trun {

std::unique_ptr<ShardedOptimizerState> ShardedOptimizerState::ForStep(const tcc_step_descriptor &d) {
  if (ShardOptimizerRanks(d) == 0)
    return nullptr;
  return std::unique_ptr<ShardedOptimizerState>(new ShardedOptimizerState(d));
}

ShardedOptimizerState::ShardedOptimizerState(const tcc_step_descriptor &d) : step_(d), whole_(d) {
  for (int32_t i = 0; i < d.num_optimizer_state; ++i) {
    bool shard = false;
    whole_tensors_.push_back(WholeOptimizerState(d, i, &shard));
    sharded_.push_back(shard);
  }
  whole_.optimizer_state = whole_tensors_.data();
  // What a step without sharding would say.
  whole_.shard_optimizer_ranks = 0;
  whole_.optimizer_state_shard_of = nullptr;
}

void ShardedOptimizerState::AllocateWhole() {
  if (!whole_buffers_.empty())
    return;
  for (const tcc_tensor_desc &t : whole_tensors_)
    whole_buffers_.emplace_back(static_cast<size_t>(t.size_bytes));
}

std::vector<const void *> ShardedOptimizerState::whole() const {
  std::vector<const void *> out;
  for (const AlignedBuffer &b : whole_buffers_)
    out.push_back(b.data());
  return out;
}

std::vector<void *> ShardedOptimizerState::mutable_whole() {
  AllocateWhole();
  std::vector<void *> out;
  for (AlignedBuffer &b : whole_buffers_)
    out.push_back(b.data());
  return out;
}

absl::Status ShardedOptimizerState::Gather(RankGroup *ranks, const std::vector<const void *> &state) {
  const int32_t n = ShardOptimizerRanks(step_);
  const int world = ranks ? ranks->world_size() : 1;
  if (world != n || state.size() != whole_tensors_.size())
    return absl::InternalError(absl::StrCat(
        "gathering the optimizer state: ", state.size(), " buffers over ", world,
        " ranks for a step sharded over ", n, " with ", whole_tensors_.size(), " tensors"));
  const bool lead = !ranks || ranks->is_lead();
  if (lead)
    AllocateWhole();
  for (size_t i = 0; i < state.size(); ++i) {
    const size_t bytes = static_cast<size_t>(step_.optimizer_state[i].size_bytes);
    char *whole = lead ? static_cast<char *>(whole_buffers_[i].data()) : nullptr;
    if (!sharded_[i] || !ranks) { // whole already (or one rank)
      if (lead)
        std::memcpy(whole, state[i], bytes);
      continue;
    }
    absl::StatusOr<std::vector<std::string>> pieces =
        ranks->AllGather(std::string(static_cast<const char *>(state[i]), bytes));
    if (!pieces.ok())
      return absl::Status(pieces.status().code(),
                          absl::StrCat("gathering the optimizer state's shards of '",
                                       step_.optimizer_state[i].name,
                                       "': ", pieces.status().message()));
    if (!lead)
      continue;
    for (int r = 0; r < world; ++r)
      std::memcpy(whole + static_cast<size_t>(r) * bytes, (*pieces)[r].data(), bytes);
  }
  return absl::OkStatus();
}

void ShardedOptimizerState::Scatter(int rank, const std::vector<void *> &state) const {
  for (size_t i = 0; i < state.size() && i < whole_buffers_.size(); ++i) {
    const size_t bytes = static_cast<size_t>(step_.optimizer_state[i].size_bytes);
    const char *whole = static_cast<const char *>(whole_buffers_[i].data());
    size_t offset = sharded_[i] ? static_cast<size_t>(rank) * bytes : 0;
    std::memcpy(state[i], whole + offset, bytes);
  }
}

} // namespace tcc::trun
