// state.json of a checkpoint (Checkpoint.h shows the directory): what it
// records and its encoding and decoding. It holds the TrainState, the step's
// interface lines and their fingerprint, the tensor specs of both
// safetensors files and their size and CRC32. Internal to checkpoint/.
#ifndef TCC_RUNTIME_TRUN_CHECKPOINT_CHECKPOINTSTATE_H
#define TCC_RUNTIME_TRUN_CHECKPOINT_CHECKPOINTSTATE_H

#include "runtime/trun/checkpoint/TrainState.h"
#include "runtime/trun/io/FileChecksum.h"
#include "tcc/step_abi.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tcc::trun::checkpoint {

inline constexpr char kModelFile[] = "model.safetensors";
inline constexpr char kOptimizerFile[] = "optimizer.safetensors";
inline constexpr char kStateFile[] = "state.json";

// A descriptor's C string, "" for null.
inline const char *OrEmpty(const char *s) { return s ? s : ""; }

// A tensor spec as state.json records it.
struct TensorSpec {
  std::string name;
  std::string dtype; // tcc name, "f32"
  std::vector<int64_t> shape;
};

// Everything state.json of one checkpoint says.
struct RecordedState {
  TrainState state;
  std::string model, optimizer, fingerprint;
  std::vector<std::string> interface;
  std::vector<TensorSpec> params, optimizer_state;
  std::map<std::string, FileChecksum> files; // kModelFile, kOptimizerFile
};

// The canonical text the fingerprint hashes, one line per field or tensor
// (descriptor order). state.json records it, so a mismatch can be named.
// Across `world_size` data-parallel ranks the lines describe the global
// step: the batch (first) dimension of inputs and outputs is the ranks'
// together, so 2 ranks of batch 4 and 1 rank of batch 8 resume each
// other's checkpoints.
std::vector<std::string> InterfaceLines(const tcc_step_descriptor &d, int world_size = 1);
// 64-bit FNV-1a (tcc_fnv1a64) of the lines, each ended by "\n", as 16 hex
// digits.
std::string Fingerprint(const std::vector<std::string> &lines);

// "f32[64,784]"
std::string SpecText(const std::string &dtype,
                     const std::vector<int64_t> &shape);
std::string SpecText(const tcc_tensor_desc &t);
std::vector<int64_t> ShapeOf(const tcc_tensor_desc &t);

// The text of state.json for `state` of step `d`, whose two safetensors
// files are checksummed by `model` and `optimizer`.
std::string EncodeState(const tcc_step_descriptor &d, int world_size, const TrainState &state,
                        const FileChecksum &model,
                        const FileChecksum &optimizer);

// Reads and checks state.json of the checkpoint directory `path` of step
// `step`: format, version, every field's type, the seed, the step and the
// fingerprint of its own interface lines. Errors are DataLoss naming the
// field.
absl::Status ReadState(const std::string &path, int64_t step,
                       RecordedState &recorded);

} // namespace tcc::trun::checkpoint

#endif // TCC_RUNTIME_TRUN_CHECKPOINT_CHECKPOINTSTATE_H
