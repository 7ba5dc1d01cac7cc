// Whether a checkpoint may be loaded into this step and continued by this
// run: its files are what state.json recorded (size, CRC32, tensor specs),
// it was written for the same step interface (else the first difference is
// named), its tensors fill the step's buffers exactly, and on --resume the
// run's --seed and data order are the checkpoint's.
#ifndef TCC_RUNTIME_TRUN_CHECKPOINT_CHECKPOINTCOMPATIBILITY_H
#define TCC_RUNTIME_TRUN_CHECKPOINT_CHECKPOINTCOMPATIBILITY_H

#include "runtime/trun/checkpoint/CheckpointState.h"
#include "runtime/trun/checkpoint/TrainState.h"
#include "runtime/trun/io/Safetensors.h"
#include "tcc/step_abi.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tcc::trun {

// --resume with --seed: refused (FailedPrecondition) unless it is the seed
// the checkpoint was written with; the data order and dropout would not
// continue otherwise.
absl::Status CheckResumeSeed(const LoadedCheckpoint &loaded, uint64_t seed);

// --resume: refused (FailedPrecondition) if this run's data order
// ("random", "sequential", "shuffled") is not the checkpoint's.
absl::Status CheckResumeDataOrder(const LoadedCheckpoint &loaded,
                                  const std::string &data_order);

} // namespace tcc::trun

namespace tcc::trun::checkpoint {

// Checks data file `name` of checkpoint directory `path` against state.json
// (size and CRC32 in `recorded`), then opens it as safetensors holding
// exactly `specs`. Errors are DataLoss naming the file.
absl::StatusOr<SafetensorsFile>
ReadRecordedTensors(const std::string &path, const char *name,
                    const FileChecksum &recorded,
                    const std::vector<TensorSpec> &specs);

// Names the first difference between the step a checkpoint was written for
// (`recorded`) and `d`, for a fingerprint mismatch.
std::string StepDifference(const RecordedState &recorded,
                           const tcc_step_descriptor &d, int world_size = 1);

// The file tensors for `n` descriptor tensors, checked to fill exactly
// size_bytes each (the fingerprint matched, so a failure means corruption).
absl::Status MatchBuffers(const SafetensorsFile &file, const char *name,
                          int32_t n, const tcc_tensor_desc *list,
                          std::vector<const SafetensorsFile::Tensor *> &out);

// InvalidArgument (prefixed with `what`) unless the caller passed one buffer
// per parameter and per optimizer state tensor of `d`.
absl::Status CheckBufferCounts(const tcc_step_descriptor &d, size_t params,
                               size_t optimizer_state, absl::string_view what);

} // namespace tcc::trun::checkpoint

#endif // TCC_RUNTIME_TRUN_CHECKPOINT_CHECKPOINTCOMPATIBILITY_H
