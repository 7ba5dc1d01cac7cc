// ZeRO-1 optimizer state (tcc compile --shard-optimizer N) in checkpoints.
//
// Each rank of a sharded step holds, for every sharded parameter of n
// elements, elements [rank * n / N, (rank + 1) * n / N) of its AdamW (or
// momentum) state; the descriptor says which (optimizer_state_shard_of).
// Checkpoints keep the whole, parameter-shaped tensors instead, exactly as a
// step without sharding writes them, so a run resumes at any world size,
// with or without sharding: the shards are gathered before a checkpoint is
// written (rank 0 writes, as for replicated state) and cut out of the whole
// tensors after one is loaded.
#ifndef TCC_RUNTIME_TRUN_TRAIN_SHARDEDOPTIMIZERSTATE_H
#define TCC_RUNTIME_TRUN_TRAIN_SHARDEDOPTIMIZERSTATE_H

#include "runtime/trun/base/AlignedBuffer.h"
#include "tcc/step_abi.h"

#include "absl/status/status.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace tcc::trun {

class RankGroup;

class ShardedOptimizerState {
public:
  // For a sharded step (ShardOptimizerRanks(d) > 0); nullptr otherwise.
  static std::unique_ptr<ShardedOptimizerState> ForStep(const tcc_step_descriptor &d);

  // `d` with whole optimizer state tensors: what checkpoints hold and check.
  const tcc_step_descriptor &whole_descriptor() const { return whole_; }

  // Fills the whole tensors from every rank's `state` (this rank's buffers,
  // in descriptor order): every rank calls it (one host exchange per
  // sharded tensor); the lead rank (or the only one, `ranks` null) keeps
  // the result, the others only send.
  absl::Status Gather(RankGroup *ranks, const std::vector<const void *> &state);
  // After Gather on the lead rank, or to receive a checkpoint: the whole
  // tensors in descriptor order.
  std::vector<const void *> whole() const;
  std::vector<void *> mutable_whole();
  // This rank's `state` from the whole tensors.
  void Scatter(int rank, const std::vector<void *> &state) const;

private:
  explicit ShardedOptimizerState(const tcc_step_descriptor &d);
  void AllocateWhole();

  const tcc_step_descriptor &step_;
  tcc_step_descriptor whole_;
  std::vector<tcc_tensor_desc> whole_tensors_;
  std::vector<bool> sharded_; // per state tensor: this rank holds a shard
  std::vector<AlignedBuffer> whole_buffers_;
};

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_TRAIN_SHARDEDOPTIMIZERSTATE_H
