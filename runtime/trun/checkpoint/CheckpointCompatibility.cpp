#include "runtime/trun/checkpoint/CheckpointCompatibility.h"

#include "runtime/initializers/Dtypes.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include <algorithm>
#include <optional>

namespace tcc::trun {

absl::Status CheckResumeSeed(const LoadedCheckpoint &loaded, uint64_t seed) {
  if (seed == loaded.state.seed)
    return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "--resume: ", loaded.path, " was written by a run with --seed ",
      loaded.state.seed, ", this run asks for --seed ", seed,
      "; the data order and dropout would not continue (leave out "
      "--seed to use the checkpoint's)"));
}

absl::Status CheckResumeDataOrder(const LoadedCheckpoint &loaded,
                                  const std::string &data_order) {
  if (data_order == loaded.state.data_order)
    return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "--resume: ", loaded.path, " was written with data order '",
      loaded.state.data_order, "', this run uses '", data_order, "'"));
}

} // namespace tcc::trun

namespace tcc::trun::checkpoint {
namespace {

// The first difference between recorded tensor specs and the step's.
std::optional<std::string>
TensorDifference(absl::string_view kind, const std::vector<TensorSpec> &there,
                 int32_t n, const tcc_tensor_desc *here) {
  auto find = [&there](const std::string &name) -> const TensorSpec * {
    for (const TensorSpec &spec : there)
      if (spec.name == name)
        return &spec;
    return nullptr;
  };
  for (int32_t i = 0; i < n; ++i) {
    const tcc_tensor_desc &t = here[i];
    const TensorSpec *spec = find(OrEmpty(t.name));
    if (!spec)
      return absl::StrCat(kind, " '", OrEmpty(t.name), "' (", SpecText(t),
                          ") of this step.so is not in the checkpoint");
    if (spec->dtype != DtypeName(t.dtype) || spec->shape != ShapeOf(t))
      return absl::StrCat(kind, " '", spec->name, "' is ",
                          SpecText(spec->dtype, spec->shape), " there and ",
                          SpecText(t), " in this step.so");
  }
  for (const TensorSpec &spec : there) {
    bool known = false;
    for (int32_t i = 0; i < n && !known; ++i)
      known = spec.name == OrEmpty(here[i].name);
    if (!known)
      return absl::StrCat(kind, " '", spec.name, "' (",
                          SpecText(spec.dtype, spec.shape),
                          ") is in the checkpoint but not in this step.so");
  }
  for (int32_t i = 0; i < n; ++i)
    if (there[i].name != OrEmpty(here[i].name))
      for (size_t j = 0; j < there.size(); ++j)
        if (there[j].name == OrEmpty(here[i].name))
          return absl::StrCat(kind, " '", there[j].name, "' is at position ", j,
                              " there and ", i, " in this step.so");
  return std::nullopt;
}

} // namespace

absl::StatusOr<SafetensorsFile>
ReadRecordedTensors(const std::string &path, const char *name,
                    const FileChecksum &recorded,
                    const std::vector<TensorSpec> &specs) {
  std::string file = absl::StrCat(path, "/", name);
  absl::StatusOr<FileChecksum> actual = ChecksumOfFile(file);
  if (!actual.ok())
    return actual.status();
  if (actual->bytes != recorded.bytes)
    return absl::DataLossError(
        absl::StrCat(name, " has ", actual->bytes, " bytes, ", kStateFile,
                     " recorded ", recorded.bytes, " (truncated or replaced)"));
  if (actual->crc32 != recorded.crc32)
    return absl::DataLossError(
        absl::StrFormat("%s has CRC32 %08x, %s recorded %08x (corrupt)", name,
                        actual->crc32, kStateFile, recorded.crc32));
  // The whole file's CRC matched state.json's: its data's is not read again.
  absl::StatusOr<SafetensorsFile> tensors = SafetensorsFile::Open(file, /*verify_data=*/false);
  if (!tensors.ok())
    return tensors.status();
  if (tensors->tensors().size() != specs.size())
    return absl::DataLossError(
        absl::StrCat(name, " has ", tensors->tensors().size(), " tensors, ",
                     kStateFile, " recorded ", specs.size()));
  for (const TensorSpec &spec : specs) {
    auto found = tensors->tensors().find(spec.name);
    if (found == tensors->tensors().end())
      return absl::DataLossError(
          absl::StrCat(name, " has no tensor '", spec.name, "'"));
    const SafetensorsFile::Tensor &t = found->second;
    if (t.dtype != SafetensorsDtypeName(DtypeFromName(spec.dtype)) ||
        t.shape != spec.shape)
      return absl::DataLossError(
          absl::StrCat(name, " tensor '", spec.name, "' is ", t.dtype, " ",
                       SpecText("", t.shape), ", ", kStateFile, " recorded ",
                       SpecText(spec.dtype, spec.shape)));
  }
  return tensors;
}

std::string StepDifference(const RecordedState &c,
                           const tcc_step_descriptor &d, int world_size) {
  if (auto diff =
          TensorDifference("parameter", c.params, d.num_params, d.params))
    return *diff;
  if (auto diff = TensorDifference("optimizer state", c.optimizer_state,
                                   d.num_optimizer_state, d.optimizer_state)) {
    if (c.optimizer != OrEmpty(d.optimizer))
      absl::StrAppend(&*diff, " (the optimizer is ", c.optimizer, " there and ",
                      OrEmpty(d.optimizer), " in this step.so)");
    return *diff;
  }
  std::vector<std::string> here = InterfaceLines(d, world_size);
  const std::vector<std::string> &there = c.interface;
  for (size_t i = 0; i < std::max(here.size(), there.size()); ++i) {
    if (i >= there.size())
      return absl::StrCat("this step.so has '", here[i],
                          "', the checkpoint not");
    if (i >= here.size())
      return absl::StrCat("the checkpoint has '", there[i],
                          "', this step.so not");
    if (here[i] != there[i])
      return absl::StrCat("'", there[i], "' there and '", here[i],
                          "' in this step.so");
  }
  return absl::StrCat("fingerprint ", c.fingerprint, " there and ",
                      Fingerprint(here), " in this step.so");
}

absl::Status MatchBuffers(const SafetensorsFile &file, const char *name,
                          int32_t n, const tcc_tensor_desc *list,
                          std::vector<const SafetensorsFile::Tensor *> &out) {
  for (int32_t i = 0; i < n; ++i) {
    auto found = file.tensors().find(OrEmpty(list[i].name));
    if (found == file.tensors().end() ||
        found->second.size_bytes != list[i].size_bytes ||
        found->second.dtype != SafetensorsDtypeName(list[i].dtype) ||
        found->second.shape != ShapeOf(list[i]))
      return absl::DataLossError(absl::StrCat(
          name, " does not hold tensor '", OrEmpty(list[i].name), "' as ",
          SpecText(list[i]), " although the fingerprints match (corrupt)"));
    out.push_back(&found->second);
  }
  return absl::OkStatus();
}

absl::Status CheckBufferCounts(const tcc_step_descriptor &d, size_t params,
                               size_t optimizer_state, absl::string_view what) {
  if (params != static_cast<size_t>(d.num_params) ||
      optimizer_state != static_cast<size_t>(d.num_optimizer_state))
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", params, " parameter and ", optimizer_state,
                     " optimizer state buffers for a step with ", d.num_params,
                     " and ", d.num_optimizer_state));
  return absl::OkStatus();
}


} // namespace tcc::trun::checkpoint
