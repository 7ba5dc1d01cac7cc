// trun --save-weights and --init-from: a step's parameters as a safetensors
// file (Safetensors.h) that PyTorch's load_state_dict accepts, and back.
//
// Layouts. Each parameter has a PyTorch state_dict key, a layout and aliases
// (the descriptor's param_torch; StepDescriptor.h TorchTensorOf): the model
// says them, else they are the parameter's name and tcc's layout.
//   torch  every parameter under its key, permuted into PyTorch's layout
//          (nn.Linear's weight (out, in) of tcc's (in, out)), and again
//          under each alias; metadata "layout": "torch". SaveWeights writes
//          this; LoadWeights reads it, and any file without trun's metadata
//          (a PyTorch state_dict saved with safetensors).
//   tcc    tcc's parameter names and layouts, no aliases: what checkpoints
//          hold and what trun wrote before PyTorch layouts (metadata
//          "producer": "trun" without "layout"). Read only.
#ifndef TCC_RUNTIME_TRUN_IO_WEIGHTS_H
#define TCC_RUNTIME_TRUN_IO_WEIGHTS_H

#include "tcc/step_abi.h"

#include "absl/status/status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tcc::trun {

// Writes every parameter in the torch layout (descriptor order, each alias
// right after its key), with metadata {"format": "pt", "layout": "torch",
// "model": model_name, "producer": "trun"}. params[i] holds the parameter's
// size_bytes in tcc's layout.
absl::Status SaveWeights(const std::string &path,
                         const tcc_step_descriptor &descriptor,
                         const std::vector<const void *> &params);

struct LoadWeightsOptions {
  // Skip tensors that are no parameter's key or alias (a state_dict's
  // buffers, e.g. BatchNorm running statistics) instead of refusing them.
  bool ignore_extra = false;
};

// What LoadWeights did, for trun's "init:" line.
struct LoadedWeights {
  bool torch_layout = false;
  int32_t permuted = 0;   // parameters whose PyTorch layout is not tcc's
  int32_t from_alias = 0; // parameters found under an alias only
  int32_t converted = 0;  // parameters converted from another float dtype
  std::vector<std::string> ignored; // extra tensors skipped (ignore_extra)
  bool checksummed = false; // the data matched trun's tcc_data_crc32
};

// Fills every parameter from the file (either layout, as its metadata
// says). Each parameter must be present, under its key or, when the key is
// absent, an alias (a key and its aliases present together must be equal),
// with the layout's shape and a float dtype (F32, F64, F16 or BF16,
// converted to the parameter's f32 or f64; other parameter dtypes must
// match exactly); every tensor of the file must be one of those unless
// options.ignore_extra. Errors are one line naming the file and the tensor.
// Nothing is written to `params` unless the whole file matches.
absl::Status LoadWeights(const std::string &path,
                         const tcc_step_descriptor &descriptor,
                         const std::vector<void *> &params,
                         const LoadWeightsOptions &options = {},
                         LoadedWeights *loaded = nullptr);

// Copies `src` (row-major `shape`, `element_bytes` per element) to `dst`
// permuted: dst's dimension k is src's dimension perm[k] (torch.permute).
// An empty perm copies as is.
void PermuteCopy(const void *src, const std::vector<int64_t> &shape,
                 const std::vector<int32_t> &perm, int64_t element_bytes,
                 void *dst);

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_IO_WEIGHTS_H
