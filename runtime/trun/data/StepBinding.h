// Which step inputs trun feeds, with what data, and where the logits come out.
//
// Three kinds of steps:
//   image classifiers: exactly two inputs, f32 images [B, ...] and i32
//     labels [B]; optional output "logits" [B, C].
//   token models: inputs named "tokens" and "targets", both i32 [B, T]
//     (targets = tokens shifted by one); optional output "logits" [B, T, V].
//   named arrays: any inputs [B, ...] of any dtype, each fed from the array
//     of its name (NamedArrays.h); chosen when the user gives named arrays,
//     or for a step that is neither of the above. Accuracy when there is an
//     output "logits" f32 [B, C] and an integer input [B] that the loss
//     reads as class labels (the descriptor's label_input; a step built
//     before it: the only integer input [B]); loss only otherwise.
// B is the step's whole batch (micro-batches included).
#ifndef TCC_RUNTIME_TRUN_DATA_STEPBINDING_H
#define TCC_RUNTIME_TRUN_DATA_STEPBINDING_H

#include "runtime/trun/data/IdxDataset.h"
#include "tcc/step_abi.h"

#include "absl/status/statusor.h"

#include <cstdint>
#include <vector>

namespace tcc::trun {

enum class StepKind { kImageClassifier, kTokenModel, kNamedArrays };

struct StepBinding {
  StepKind kind = StepKind::kImageClassifier;
  // Indices into descriptor.inputs of the two fed inputs:
  int32_t data_input = -1;   // images f32 [B, ...]  | tokens i32 [B, T]
  int32_t target_input = -1; // labels i32 [B]       | targets i32 [B, T]
                             // named arrays: the labels input (i32 or i64
                             // [B]) when there is accuracy, else -1
  int64_t batch_size = 0;    // B, fixed by the step
  int64_t values_per_sample = 0;  // image values H*W  | T
  int64_t targets_per_sample = 0; // 1                 | T
  // Image classifiers: the "logits" [B, C] output, used for accuracy.
  int32_t logits_output = -1; // index into descriptor.outputs; -1: none
  int64_t num_classes = 0;    // C, when there are logits
  // Token models: the "logits" [B, T, V] output (sampling, token id checks).
  int32_t token_logits_output = -1; // -1: none
  int64_t vocab_size = 0;           // V, when there are logits; 0: unknown
  // Named arrays: every step input is fed (descriptor order); the bytes of
  // each input's whole batch (its size_bytes). data_input is -1 and
  // values_per_sample / targets_per_sample 0.
  std::vector<int64_t> array_batch_bytes;

  bool is_token_model() const { return kind == StepKind::kTokenModel; }
  bool is_named_arrays() const { return kind == StepKind::kNamedArrays; }
  int64_t context_length() const { return values_per_sample; } // T
};

// Binds named arrays when `named_arrays` (the user gave them), else a token
// model when the step has inputs "tokens" and "targets", else an image
// classifier when the step's inputs are exactly f32 [B, ...] and i32 [B],
// else named arrays. Errors say what trun expected.
absl::StatusOr<StepBinding> BindStep(const tcc_step_descriptor &descriptor,
                                     bool named_arrays = false);

// Image classifiers: checks that the data fits the bound step: values per
// sample and label range (when there are logits).
absl::Status CheckDataFits(const StepBinding &binding,
                           const tcc_step_descriptor &descriptor,
                           const LabeledImages &data);

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_DATA_STEPBINDING_H
