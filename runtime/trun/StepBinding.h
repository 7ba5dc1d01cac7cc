// Which step inputs receive images and labels, and where the logits come out.
#ifndef TCC_RUNTIME_TRUN_STEPBINDING_H
#define TCC_RUNTIME_TRUN_STEPBINDING_H

#include "runtime/trun/IdxDataset.h"
#include "tcc/step_abi.h"

#include "absl/status/statusor.h"

#include <cstdint>

namespace tcc::trun {

struct StepBinding {
  int32_t image_input = -1;      // index into descriptor.inputs, f32
  int32_t label_input = -1;      // index into descriptor.inputs, i32 [B]
  int64_t batch_size = 0;        // B, fixed by the step
  int64_t values_per_sample = 0; // image values per sample: H*W
  int32_t logits_output = -1;    // index into descriptor.outputs; -1: none
  int64_t num_classes = 0;       // logits width, when there are logits
};

// The step must have exactly one floating input (images [B, H*W] or any shape
// [B, ...]) and one integer input (labels [B]). An output named "logits", if
// present, must be f32 [B, C].
absl::StatusOr<StepBinding> BindStep(const tcc_step_descriptor &descriptor);

// Checks that the data fits the bound step: values per sample and label
// range (when there are logits).
absl::Status CheckDataFits(const StepBinding &binding,
                           const tcc_step_descriptor &descriptor,
                           const LabeledImages &data);

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_STEPBINDING_H
