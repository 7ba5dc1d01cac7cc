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

} // namespace

absl::StatusOr<StepBinding> BindStep(const tcc_step_descriptor &d) {
  int32_t tokens_index = FindInput(d, "tokens");
  int32_t targets_index = FindInput(d, "targets");
  if (tokens_index != -1 && targets_index != -1)
    return BindTokenModel(d, tokens_index, targets_index);
  if (tokens_index != -1 || targets_index != -1)
    return BindError(absl::StrCat(
        "step has an input '", tokens_index != -1 ? "tokens" : "targets",
        "' but no '", tokens_index != -1 ? "targets" : "tokens",
        "'; a token model needs both (i32 [batch, context])"));

  StepBinding binding;
  binding.targets_per_sample = 1;
  for (int32_t i = 0; i < d.num_inputs; ++i) {
    int32_t dtype = d.inputs[i].dtype;
    int32_t &slot =
        IsFloatingDtype(dtype) ? binding.data_input : binding.target_input;
    if (!IsFloatingDtype(dtype) && !IsIntegerDtype(dtype))
      return BindError(absl::StrCat("step input '", d.inputs[i].name,
                                    "' has dtype ", DtypeName(dtype),
                                    "; trun feeds only images and labels"));
    if (slot != -1)
      return BindError(absl::StrCat(
          "step has more than one ",
          IsFloatingDtype(dtype) ? "floating" : "integer", " input ('",
          d.inputs[slot].name, "', '", d.inputs[i].name,
          "'); trun feeds one image input and one label input"));
    slot = i;
  }
  if (binding.data_input == -1 || binding.target_input == -1)
    return BindError(absl::StrCat(
        "step has no ", binding.data_input == -1 ? "floating" : "integer",
        " input; trun feeds one image input and one label input"));

  const tcc_tensor_desc &images = d.inputs[binding.data_input];
  const tcc_tensor_desc &labels = d.inputs[binding.target_input];
  if (images.dtype != TCC_DTYPE_F32)
    return BindError(absl::StrCat("step input '", images.name, "' is ",
                                  DtypeName(images.dtype),
                                  "; this trun feeds f32 images"));
  if (labels.dtype != TCC_DTYPE_I32)
    return BindError(absl::StrCat("step input '", labels.name, "' is ",
                                  DtypeName(labels.dtype),
                                  "; this trun feeds i32 labels"));
  if (images.rank < 2 || images.shape[0] <= 0)
    return BindError(absl::StrCat("step input '", images.name, "' has shape ",
                                  ShapeString(images),
                                  "; expected [batch, values...]"));
  binding.batch_size = images.shape[0];
  binding.values_per_sample = images.num_elements / binding.batch_size;
  if (labels.rank != 1 || labels.shape[0] != binding.batch_size)
    return BindError(absl::StrCat("step input '", labels.name, "' has shape ",
                                  ShapeString(labels), "; expected [",
                                  binding.batch_size, "] to match '",
                                  images.name, "' ", ShapeString(images)));

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
