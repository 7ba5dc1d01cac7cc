// Which step inputs trun feeds, with what data, and where the logits come out.
//
// Two kinds of steps:
//   image classifiers: one floating input (images [B, ...]) and one integer
//     input (labels [B]); optional output "logits" [B, C].
//   token models: inputs named "tokens" and "targets", both i32 [B, T]
//     (targets = tokens shifted by one); optional output "logits" [B, T, V].
// B is the step's whole batch (micro-batches included).
#ifndef TCC_RUNTIME_TRUN_DATA_STEPBINDING_H
#define TCC_RUNTIME_TRUN_DATA_STEPBINDING_H

#include "runtime/trun/data/IdxDataset.h"
#include "tcc/step_abi.h"

#include "absl/status/statusor.h"

#include <cstdint>

namespace tcc::trun {

enum class StepKind { kImageClassifier, kTokenModel };

struct StepBinding {
  StepKind kind = StepKind::kImageClassifier;
  // Indices into descriptor.inputs of the two fed inputs:
  int32_t data_input = -1;   // images f32 [B, ...]  | tokens i32 [B, T]
  int32_t target_input = -1; // labels i32 [B]       | targets i32 [B, T]
  int64_t batch_size = 0;    // B, fixed by the step
  int64_t values_per_sample = 0;  // image values H*W  | T
  int64_t targets_per_sample = 0; // 1                 | T
  // Image classifiers: the "logits" [B, C] output, used for accuracy.
  int32_t logits_output = -1; // index into descriptor.outputs; -1: none
  int64_t num_classes = 0;    // C, when there are logits
  // Token models: the "logits" [B, T, V] output (sampling, token id checks).
  int32_t token_logits_output = -1; // -1: none
  int64_t vocab_size = 0;           // V, when there are logits; 0: unknown

  bool is_token_model() const { return kind == StepKind::kTokenModel; }
  int64_t context_length() const { return values_per_sample; } // T
};

// Binds a token model when the step has inputs "tokens" and "targets",
// otherwise an image classifier. Errors say what trun expected.
absl::StatusOr<StepBinding> BindStep(const tcc_step_descriptor &descriptor);

// Image classifiers: checks that the data fits the bound step: values per
// sample and label range (when there are logits).
absl::Status CheckDataFits(const StepBinding &binding,
                           const tcc_step_descriptor &descriptor,
                           const LabeledImages &data);

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_DATA_STEPBINDING_H
