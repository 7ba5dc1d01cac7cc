// What a checkpoint records about a run besides its tensors, and what
// loading one returns. Its own header so that the checkpoint pieces
// (CheckpointState, CheckpointCompatibility, Checkpoint) share it without
// including each other in a circle.
#ifndef TCC_RUNTIME_TRUN_CHECKPOINT_TRAINSTATE_H
#define TCC_RUNTIME_TRUN_CHECKPOINT_TRAINSTATE_H

#include <cstdint>
#include <string>

namespace tcc::trun {

// Where a run is, besides its tensors: enough to continue it exactly.
struct TrainState {
  int64_t step = 0;        // optimizer steps done (the next step's index)
  int64_t data_cursor = 0; // training batches consumed from the data order
  uint64_t seed = 0;       // --seed of the run (init, data order, dropout)
  std::string data_order;  // "random", "sequential" (tokens), "shuffled"
                           // (images); resume refuses a different one
  double base_learning_rate = 0; // the schedule's base lr (--lr or default)
  int64_t total_steps = 0;       // steps the run was asked for
  std::string data;              // --data as given (reported, not checked)
};

struct LoadedCheckpoint {
  std::string path; // D/step_...
  TrainState state;
};

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_CHECKPOINT_TRAINSTATE_H
