#include "runtime/trun/data/StepBinding.h"

#include "runtime/trun/step/StepDescriptor.h"

#include "absl/strings/str_cat.h"

#include <cstring>

namespace tcc::trun {
namespace {

std::string BaseName(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

absl::Status BindError(absl::string_view message) {
  return absl::FailedPreconditionError(message);
}

int32_t FindInput(const tcc_step_descriptor &d, const char *name) {
  for (int32_t i = 0; i < d.num_inputs; ++i)
    if (std::strcmp(d.inputs[i].name, name) == 0)
      return i;
  return -1;
}

// tokens and targets: i32 [B, T]; logits, if present: f32 [B, T, V].
absl::StatusOr<StepBinding> BindTokenModel(const tcc_step_descriptor &d,
                                           int32_t tokens_index,
                                           int32_t targets_index) {
  for (int32_t i = 0; i < d.num_inputs; ++i)
    if (i != tokens_index && i != targets_index)
      return BindError(absl::StrCat(
          "step input '", d.inputs[i].name,
          "' is neither 'tokens' nor 'targets'; trun feeds a token model only "
          "those two"));
  const tcc_tensor_desc &tokens = d.inputs[tokens_index];
  const tcc_tensor_desc &targets = d.inputs[targets_index];
  for (const tcc_tensor_desc *t : {&tokens, &targets}) {
    if (t->dtype != TCC_DTYPE_I32)
      return BindError(absl::StrCat("step input '", t->name, "' is ",
                                    DtypeName(t->dtype),
                                    "; this trun feeds i32 tokens"));
    if (t->rank != 2 || t->shape[0] <= 0 || t->shape[1] <= 0)
      return BindError(absl::StrCat("step input '", t->name, "' has shape ",
                                    ShapeString(*t),
                                    "; expected [batch, context]"));
  }
  if (targets.shape[0] != tokens.shape[0] ||
      targets.shape[1] != tokens.shape[1])
    return BindError(absl::StrCat("step input 'targets' has shape ",
                                  ShapeString(targets), "; expected ",
                                  ShapeString(tokens), " like 'tokens'"));
  StepBinding binding;
  binding.kind = StepKind::kTokenModel;
  binding.data_input = tokens_index;
  binding.target_input = targets_index;
  binding.batch_size = tokens.shape[0];
  binding.values_per_sample = tokens.shape[1];
  binding.targets_per_sample = tokens.shape[1];
  for (int32_t i = 0; i < d.num_outputs; ++i) {
    const tcc_tensor_desc &out = d.outputs[i];
    if (std::strcmp(out.name, "logits") != 0)
      continue;
    if (out.dtype != TCC_DTYPE_F32 || out.rank != 3 ||
        out.shape[0] != tokens.shape[0] || out.shape[1] != tokens.shape[1] ||
        out.shape[2] <= 0)
      return BindError(absl::StrCat(
          "step output 'logits' is ", DtypeName(out.dtype), " ",
          ShapeString(out), "; expected f32 [", tokens.shape[0], ", ",
          tokens.shape[1], ", vocab]"));
    binding.token_logits_output = i;
    binding.vocab_size = out.shape[2];
  }
  return binding;
}

// Exactly two inputs: f32 images [B, ...] (rank >= 2) and i32 labels [B].
bool IsImageClassifier(const tcc_step_descriptor &d, int32_t &images,
                       int32_t &labels) {
  if (d.num_inputs != 2)
    return false;
  images = d.inputs[0].dtype == TCC_DTYPE_F32 ? 0 : 1;
  labels = 1 - images;
  const tcc_tensor_desc &x = d.inputs[images], &y = d.inputs[labels];
  return x.dtype == TCC_DTYPE_F32 && x.rank >= 2 && x.shape[0] > 0 &&
         y.dtype == TCC_DTYPE_I32 && y.rank == 1 && y.shape[0] == x.shape[0];
}

absl::StatusOr<StepBinding> BindImageClassifier(const tcc_step_descriptor &d,
                                                int32_t images_index,
                                                int32_t labels_index) {
  StepBinding binding;
  binding.data_input = images_index;
  binding.target_input = labels_index;
  binding.targets_per_sample = 1;
  const tcc_tensor_desc &images = d.inputs[images_index];
  binding.batch_size = images.shape[0];
  binding.values_per_sample = images.num_elements / binding.batch_size;
  for (int32_t i = 0; i < d.num_outputs; ++i) {
    const tcc_tensor_desc &out = d.outputs[i];
    if (std::strcmp(out.name, "logits") != 0)
      continue;
    if (out.dtype != TCC_DTYPE_F32 || out.rank != 2 ||
        out.shape[0] != binding.batch_size || out.shape[1] <= 0)
      return BindError(absl::StrCat("step output 'logits' is ",
                                    DtypeName(out.dtype), " ", ShapeString(out),
                                    "; expected f32 [", binding.batch_size,
                                    ", classes]"));
    binding.logits_output = i;
    binding.num_classes = out.shape[1];
  }
  return binding;
}

// The labels of the accuracy: the input the step's loss reads as class
// labels (its descriptor's label_input), when it is an integer input [B].
// A step built before label_input: the only integer input, when it is [B].
// -1: none.
absl::StatusOr<int32_t> LabelsInput(const tcc_step_descriptor &d, int64_t batch_size) {
  auto is_labels_shaped = [&](int32_t i) {
    const tcc_tensor_desc &t = d.inputs[i];
    return (t.dtype == TCC_DTYPE_I32 || t.dtype == TCC_DTYPE_I64) && t.rank == 1 &&
           t.shape[0] == batch_size;
  };
  if (tcc_step_descriptor_has_label_input(&d)) {
    if (d.label_input == nullptr)
      return -1;
    int32_t declared = FindInput(d, d.label_input);
    if (declared == -1)
      return BindError(absl::StrCat("step '", d.model_name, "' declares its labels input '",
                                    d.label_input, "', which is not one of its inputs"));
    return is_labels_shaped(declared) ? declared : -1;
  }
  int32_t label = -1, integer_inputs = 0;
  for (int32_t i = 0; i < d.num_inputs; ++i)
    if (d.inputs[i].dtype == TCC_DTYPE_I32 || d.inputs[i].dtype == TCC_DTYPE_I64) {
      ++integer_inputs;
      if (is_labels_shaped(i))
        label = i;
    }
  return integer_inputs == 1 ? label : -1;
}

// Every input [B, ...] with one B; accuracy from "logits" f32 [B, C] and the
// labels input (LabelsInput), when both are there.
absl::StatusOr<StepBinding> BindNamedArrays(const tcc_step_descriptor &d) {
  if (d.num_inputs == 0)
    return BindError(absl::StrCat("step '", d.model_name,
                                  "' has no inputs; trun has nothing to feed"));
  StepBinding binding;
  binding.kind = StepKind::kNamedArrays;
  int32_t first = -1;
  for (int32_t i = 0; i < d.num_inputs; ++i) {
    const tcc_tensor_desc &t = d.inputs[i];
    if (DtypeSize(t.dtype) == 0)
      return BindError(absl::StrCat("step input '", t.name, "' has dtype ",
                                    DtypeName(t.dtype),
                                    "; trun cannot feed it"));
    if (t.rank < 1 || t.shape[0] <= 0)
      return BindError(absl::StrCat(
          "step input '", t.name, "' has shape ", ShapeString(t),
          "; named arrays feed inputs [batch, ...], one row per sample"));
    if (first == -1) {
      first = i;
      binding.batch_size = t.shape[0];
    } else if (t.shape[0] != binding.batch_size) {
      return BindError(absl::StrCat(
          "step inputs '", d.inputs[first].name, "' ",
          ShapeString(d.inputs[first]), " and '", t.name, "' ",
          ShapeString(t),
          " differ in their first dimension; named arrays feed every input "
          "[batch, ...] from the same batch of samples"));
    }
    binding.array_batch_bytes.push_back(t.size_bytes);
  }
  absl::StatusOr<int32_t> label = LabelsInput(d, binding.batch_size);
  if (!label.ok())
    return label.status();
  for (int32_t i = 0; i < d.num_outputs; ++i) {
    const tcc_tensor_desc &out = d.outputs[i];
    if (std::strcmp(out.name, "logits") == 0 && out.dtype == TCC_DTYPE_F32 &&
        out.rank == 2 && out.shape[0] == binding.batch_size &&
        out.shape[1] > 0 && *label != -1) {
      binding.logits_output = i;
      binding.num_classes = out.shape[1];
      binding.target_input = *label;
    }
  }
  return binding;
}

} // namespace

absl::StatusOr<StepBinding> BindStep(const tcc_step_descriptor &d,
                                     bool named_arrays) {
  if (named_arrays)
    return BindNamedArrays(d);
  int32_t tokens_index = FindInput(d, "tokens");
  int32_t targets_index = FindInput(d, "targets");
  if (tokens_index != -1 && targets_index != -1)
    return BindTokenModel(d, tokens_index, targets_index);
  if (tokens_index != -1 || targets_index != -1)
    return BindError(absl::StrCat(
        "step has an input '", tokens_index != -1 ? "tokens" : "targets",
        "' but no '", tokens_index != -1 ? "targets" : "tokens",
        "'; a token model needs both (i32 [batch, context])"));
  int32_t images = -1, labels = -1;
  if (IsImageClassifier(d, images, labels))
    return BindImageClassifier(d, images, labels);
  return BindNamedArrays(d);
}

absl::Status CheckDataFits(const StepBinding &binding,
                           const tcc_step_descriptor &d,
                           const LabeledImages &data) {
  const tcc_tensor_desc &images = d.inputs[binding.data_input];
  if (binding.values_per_sample != data.pixels_per_image())
    return BindError(absl::StrCat(
        "step input '", images.name, "' expects ", binding.values_per_sample,
        " values per sample but ", BaseName(data.images_path), " has ",
        data.rows, "x", data.cols, " = ", data.pixels_per_image()));
  if (binding.logits_output == -1)
    return absl::OkStatus();
  for (int64_t i = 0; i < data.count; ++i)
    if (data.labels[i] >= binding.num_classes)
      return BindError(absl::StrCat(BaseName(data.labels_path), ": label ",
                                    int{data.labels[i]}, " of sample ", i,
                                    " is out of range for 'logits' width ",
                                    binding.num_classes));
  return absl::OkStatus();
}

} // namespace tcc::trun
