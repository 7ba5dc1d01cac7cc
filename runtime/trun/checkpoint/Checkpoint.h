// Checkpoints that never lose a run: a directory of complete checkpoints,
// each written atomically, the newest valid one found on resume.
//
//   D/.lock                          flock'ed by the trun using D
//   D/step_000000100/model.safetensors      parameters, names = parameter
//                                           names (descriptor order)
//   D/step_000000100/optimizer.safetensors  optimizer state, names = the
//                                           descriptor's state names
//   D/step_000000100/state.json             TrainState, the descriptor
//                                           fingerprint and tensor specs, and
//                                           size + CRC32 of both files
//
// Writing step N: everything goes to D/.tmp-step_000000N-<pid>/, each file
// is fsync'ed, the directory is renamed to D/step_000000N and D is fsync'ed.
// A crash at any point leaves either no step_N or a complete one; older
// checkpoints are only deleted (--keep) after the new one is complete.
// Temporary directories of dead writers are removed when D is opened.
#ifndef TCC_RUNTIME_TRUN_CHECKPOINT_CHECKPOINT_H
#define TCC_RUNTIME_TRUN_CHECKPOINT_CHECKPOINT_H

#include "runtime/trun/checkpoint/TrainState.h"
#include "tcc/step_abi.h"

#include "absl/status/statusor.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tcc::trun {

// A hex string that changes whenever the step's interface does: ABI
// version, model name, optimizer, schedule, micro-batches, and name, dtype,
// shape and init of every param, optimizer state, input, output and train
// output. Equal fingerprints mean a checkpoint's tensors fit the step.
// `world_size`: InterfaceLines'.
std::string DescriptorFingerprint(const tcc_step_descriptor &descriptor, int world_size = 1);

class CheckpointDir {
public:
  // Creates `dir` (and missing parents) if needed, takes an exclusive
  // flock on dir/.lock (error naming the holder's pid if another process
  // has it) and removes temporary directories left by dead writers.
  // Errors name the directory and the cause (not a directory, not
  // writable, ...).
  static absl::StatusOr<std::unique_ptr<CheckpointDir>>
  Open(const std::string &dir);
  // The directory of a run another process writes (the other ranks of a
  // data-parallel run, which only resume from it): no lock, nothing
  // created or removed; Write must not be called.
  static std::unique_ptr<CheckpointDir> OpenForReading(const std::string &dir);
  ~CheckpointDir(); // releases the lock

  const std::string &dir() const { return dir_; }

  // The data-parallel ranks of the run (default 1): checkpoints record and
  // match the global step (InterfaceLines), so a run may resume at another
  // number of ranks with the same global batch.
  void set_world_size(int world_size) { world_size_ = world_size; }

  // Writes the checkpoint for state.step (params[i] / optimizer_state[i]
  // hold the descriptor's size_bytes), then, if keep > 0, deletes older
  // complete checkpoints beyond the newest `keep` (counting this one;
  // checkpoints of later steps are left alone). An existing checkpoint of
  // the same step is replaced atomically. Returns its path. On failure (disk
  // full, I/O error) nothing older is touched and the temporary directory
  // is removed; the error names the file and the cause.
  absl::StatusOr<std::string>
  Write(const tcc_step_descriptor &descriptor, const TrainState &state,
        const std::vector<const void *> &params,
        const std::vector<const void *> &optimizer_state, int64_t keep);

  // Write's retention alone: deletes the checkpoints of steps before `step`
  // beyond the newest `keep` counting step's own (keep <= 0: none), and
  // returns how many it deleted. A resumed run calls it for the checkpoint
  // it resumed from: a run killed between writing a checkpoint and
  // deleting the old ones leaves one too many.
  int64_t PruneOlder(int64_t step, int64_t keep);

  // Loads the newest usable checkpoint into params / optimizer_state.
  // A checkpoint that cannot be read (truncated or corrupt file, bad JSON,
  // CRC mismatch) is skipped with a line in `warnings` ("D/step_N is
  // unusable: <why>; trying the previous one"). Returns:
  //   NotFound            no checkpoint in the directory at all
  //   FailedPrecondition  the newest readable checkpoint was written for a
  //                       different step (fingerprint mismatch); the message
  //                       names the first differing tensor or field and
  //                       nothing is loaded
  //   DataLoss            checkpoints exist but none is usable (each reason
  //                       is in `warnings`)
  // Nothing is written to the buffers unless a checkpoint fully validated.
  absl::StatusOr<LoadedCheckpoint>
  LoadNewest(const tcc_step_descriptor &descriptor,
             const std::vector<void *> &params,
             const std::vector<void *> &optimizer_state,
             std::vector<std::string> &warnings);

  // Paths of complete checkpoints (step_* directories), oldest first.
  std::vector<std::string> List() const;

private:
  CheckpointDir(std::string dir, int lock_fd)
      : dir_(std::move(dir)), lock_fd_(lock_fd) {}
  std::string dir_;
  int lock_fd_ = -1;
  int world_size_ = 1;
};

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_CHECKPOINT_CHECKPOINT_H
