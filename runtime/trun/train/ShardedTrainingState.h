// Sharded parameters (ZeRO-3, tcc compile --shard-parameters N) and
// optimizer state (ZeRO-1, --shard-optimizer N) in checkpoints and weight
// files.
//
// Each rank of a sharded step holds, for every sharded tensor of n
// elements, elements [rank * n / N, (rank + 1) * n / N) of it, 1-D; the
// descriptor says which (optimizer_state_shard_of, whole_params).
// Checkpoints, --init-from and --save-weights keep the whole tensors
// instead, exactly as a step without sharding has them, so a run resumes at
// any world size, with or without sharding: the shards are gathered before
// a checkpoint or weights file is written (rank 0 writes) and cut out of
// the whole tensors after one is loaded.
#ifndef TCC_RUNTIME_TRUN_TRAIN_SHARDEDTRAININGSTATE_H
#define TCC_RUNTIME_TRUN_TRAIN_SHARDEDTRAININGSTATE_H

#include "runtime/trun/base/AlignedBuffer.h"
#include "runtime/trun/step/StepDescriptor.h"
#include "tcc/step_abi.h"

#include "absl/status/status.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace tcc::trun {

class RankGroup;

class ShardedTrainingState {
public:
  // For a sharded step (ShardRanks(d) > 0); nullptr otherwise.
  static std::unique_ptr<ShardedTrainingState> ForStep(const tcc_step_descriptor &d);

  // `d` with whole parameters and optimizer state: what checkpoints and
  // weight files hold and check.
  const tcc_step_descriptor &whole_descriptor() const { return whole_; }
  // Whether this rank holds shards of parameters (ZeRO-3); else the
  // trainer's parameters are the whole ones.
  bool shards_parameters() const { return ShardParameterRanks(step_) > 0; }

  // Fills the whole tensors from every rank's `params` (ignored unless
  // shards_parameters()) and `state` (this rank's buffers, in descriptor
  // order): every rank calls it (one host exchange per sharded tensor); the
  // lead rank (or the only one, `ranks` null) keeps the result, the others
  // only send.
  absl::Status Gather(RankGroup *ranks, const std::vector<const void *> &params,
                      const std::vector<const void *> &state);
  // After Gather on the lead rank, or to receive a checkpoint or weights:
  // the whole tensors in descriptor order.
  std::vector<const void *> whole_params() const;
  std::vector<void *> mutable_whole_params();
  std::vector<const void *> whole_state() const;
  std::vector<void *> mutable_whole_state();
  // This rank's `params` (when shards_parameters()) and `state` (if not
  // empty) from the whole tensors.
  void Scatter(int rank, const std::vector<void *> &params,
               const std::vector<void *> &state) const;

private:
  // One kind of tensor (parameters or optimizer state): this rank's
  // descriptors, the whole ones, which are sharded, and the whole buffers.
  struct Tensors {
    const tcc_tensor_desc *shards = nullptr;
    std::vector<tcc_tensor_desc> whole;
    std::vector<bool> sharded;
    std::vector<AlignedBuffer> buffers;
    void Allocate();
    std::vector<const void *> data() const;
    std::vector<void *> mutable_data();
    absl::Status Gather(RankGroup *ranks, const std::vector<const void *> &mine,
                        bool lead, const char *what);
    void Scatter(int rank, const std::vector<void *> &mine) const;
  };

  explicit ShardedTrainingState(const tcc_step_descriptor &d);

  const tcc_step_descriptor &step_;
  tcc_step_descriptor whole_;
  Tensors params_, state_;
};

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_TRAIN_SHARDEDTRAININGSTATE_H
