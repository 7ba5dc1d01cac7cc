// Checks and formatting for the tcc_step_descriptor a step.so hands to trun.
#ifndef TCC_RUNTIME_TRUN_STEP_STEPDESCRIPTOR_H
#define TCC_RUNTIME_TRUN_STEP_STEPDESCRIPTOR_H

// DtypeSize, DtypeName, ... (shared with the initializers library).
#include "runtime/initializers/Dtypes.h"
#include "runtime/trun/step/ShapeString.h"
#include "tcc/step_abi.h"

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace tcc::trun {

// Checks everything trun relies on before it touches a buffer: ABI version and
// struct size, the target ("cpu" without a device API; "cuda" with a
// tcc_device_api of at least this trun's size and every function set),
// non-null entry points and lists, unique non-empty names, known dtypes,
// shapes consistent with num_elements and size_bytes, valid init specs.
// `origin` names the library in error messages.
absl::Status ValidateDescriptor(const tcc_step_descriptor &descriptor,
                                absl::string_view origin);

// The learning rate at 0-based optimizer step `step` under `schedule` (the
// formula in step_abi.h), with `base_lr` in place of schedule.base_lr (trun
// --lr replaces the base; warmup, decay and min_lr stay).
double LearningRateAt(const tcc_lr_schedule &schedule, double base_lr,
                      int64_t step);

// "constant" or "warmup_cosine (warmup 100 steps, cosine to 0.0001 at step
// 1000)", for --info and the run header.
std::string ScheduleString(const tcc_lr_schedule &schedule);

// Index of the train output called `name`, or -1.
int32_t FindTrainOutput(const tcc_step_descriptor &descriptor,
                        absl::string_view name);

// Index of FP8 delayed scaling's state (TCC_FP8_SCALING_STATE, step_abi.h)
// among the optimizer state: a whole-step tensor (not a ZeRO-1 shard) of
// f32 [sites, TCC_FP8_SCALING_RECORD_FLOATS]; -1 when there is none, or
// when the tensor of that name has another dtype or shape (trun then shows
// nothing of it).
int32_t FindFp8ScalingState(const tcc_step_descriptor &descriptor);

// The `trun --info` report.
// Whether the step averages its gradients over ranks (tcc compile
// --data-parallel); false for steps built before the field existed.
inline bool IsDataParallel(const tcc_step_descriptor &d) {
  return tcc_step_descriptor_has_data_parallel(&d) && d.data_parallel == 1;
}

// N of a step compiled with tcc compile --shard-optimizer N (ZeRO-1: it
// runs on exactly N ranks); 0 for other steps and steps built before the
// field.
inline int32_t ShardOptimizerRanks(const tcc_step_descriptor &d) {
  if (!tcc_step_descriptor_has_shard_optimizer(&d) || d.shard_optimizer_ranks < 1 ||
      !d.optimizer_state_shard_of)
    return 0;
  return d.shard_optimizer_ranks;
}

// N of a step compiled with tcc compile --shard-parameters N (ZeRO-3: each
// rank holds 1/N of the parameters N divides; it also shards its optimizer
// state over N); 0 for other steps and steps built before the field.
inline int32_t ShardParameterRanks(const tcc_step_descriptor &d) {
  if (!tcc_step_descriptor_has_shard_parameters(&d) || d.shard_parameter_ranks < 1 ||
      !d.whole_params)
    return 0;
  return d.shard_parameter_ranks;
}

// The number of ranks a sharded step runs at (ZeRO-1 or ZeRO-3); 0: any.
inline int32_t ShardRanks(const tcc_step_descriptor &d) {
  return ShardParameterRanks(d) ? ShardParameterRanks(d) : ShardOptimizerRanks(d);
}

// Parameter `i` of `d` as a whole (ZeRO-3: whole_params[i]); `sharded` (if
// given) says whether d.params[i] is this rank's 1-D shard of it.
tcc_tensor_desc WholeParam(const tcc_step_descriptor &d, int32_t i, bool *sharded = nullptr);

// `d` as the same step without parameter sharding describes it: params
// are the whole tensors (what checkpoints, --init-from, --save-weights and
// the PyTorch table refer to). For other steps, `d` itself.
class WholeParameters {
public:
  explicit WholeParameters(const tcc_step_descriptor &d);
  WholeParameters(const WholeParameters &) = delete;
  WholeParameters &operator=(const WholeParameters &) = delete;
  const tcc_step_descriptor &descriptor() const { return whole_; }

private:
  tcc_step_descriptor whole_;
  std::vector<tcc_tensor_desc> params_;
};

// Optimizer state tensor `i` of `d` as a whole: for a ZeRO-1 shard
// (optimizer_state_shard_of[i] names a parameter), the parameter-shaped
// tensor the ranks' shards make together; else the tensor itself.
// Checkpoints hold these; `sharded` (if given) says which case it was.
tcc_tensor_desc WholeOptimizerState(const tcc_step_descriptor &d, int32_t i,
                                    bool *sharded = nullptr);

// How PyTorch holds parameter `i` (the descriptor's param_torch): its
// state_dict key, the permutation with torch.shape[k] = shape[perm[k]]
// (empty: the same layout) and further keys of the same tensor. A step
// without param_torch (built before it, or a model without any): the
// parameter's name and layout, no aliases.
struct TorchTensor {
  std::string name;
  std::vector<int32_t> perm;
  std::vector<std::string> aliases;
};
TorchTensor TorchTensorOf(const tcc_step_descriptor &d, int32_t i);

// The PyTorch shape of parameter `i`: its shape permuted by TorchTensorOf's
// perm.
std::vector<int64_t> TorchShapeOf(const tcc_step_descriptor &d, int32_t i);

void PrintDescriptorInfo(const tcc_step_descriptor &descriptor,
                         std::ostream &out);

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_STEP_STEPDESCRIPTOR_H
