#include "runtime/trun/data/DataFiles.h"

#include "runtime/trun/base/PathChecks.h"
#include "runtime/trun/data/NpyFile.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

#include <vector>

namespace tcc::trun {
namespace {

absl::StatusOr<SplitFiles> ParseFilePair(const std::string &arg,
                                         const char *flag) {
  std::vector<std::string> parts = absl::StrSplit(arg, ',');
  if (parts.size() != 2 || parts[0].empty() || parts[1].empty())
    return absl::InvalidArgumentError(absl::StrCat(
        flag, " expects IMAGES,LABELS (two files), got '", arg, "'"));
  return SplitFiles{parts[0], parts[1]};
}

absl::StatusOr<std::string> FindIdxFile(const std::string &dir,
                                        const std::string &base) {
  std::string plain = absl::StrCat(dir, "/", base);
  if (Exists(plain))
    return plain;
  if (Exists(plain + ".gz"))
    return plain + ".gz";
  return absl::NotFoundError(
      absl::StrCat("data directory '", dir, "' has no ", base, "[.gz]"));
}

absl::StatusOr<SplitFiles> FindSplit(const std::string &dir,
                                     const std::string &prefix) {
  absl::StatusOr<std::string> images =
      FindIdxFile(dir, prefix + "-images-idx3-ubyte");
  if (!images.ok())
    return images.status();
  absl::StatusOr<std::string> labels =
      FindIdxFile(dir, prefix + "-labels-idx1-ubyte");
  if (!labels.ok())
    return labels.status();
  return SplitFiles{*images, *labels};
}

} // namespace

absl::StatusOr<LabeledImages> ReadSplit(const SplitFiles &files) {
  LabeledImages set;
  absl::Status images = IsNpyPath(files.images)
                            ? ReadNpyImages(files.images, set)
                            : ReadIdxImages(files.images, set);
  if (!images.ok())
    return images;
  absl::StatusOr<std::vector<uint8_t>> labels =
      IsNpyPath(files.labels) ? ReadNpyLabels(files.labels)
                              : ReadIdxLabels(files.labels);
  if (!labels.ok())
    return labels.status();
  if (absl::Status s = AttachLabels(set, files.labels, std::move(*labels));
      !s.ok())
    return s;
  return set;
}

absl::StatusOr<DataFiles>
ResolveDataFiles(const std::string &data,
                 const std::optional<std::string> &test) {
  DataFiles files;
  if (test) {
    absl::StatusOr<SplitFiles> pair = ParseFilePair(*test, "--test");
    if (!pair.ok())
      return pair.status();
    files.test = *pair;
  }
  if (data.find(',') != std::string::npos) {
    absl::StatusOr<SplitFiles> pair = ParseFilePair(data, "--data");
    if (!pair.ok())
      return pair.status();
    files.train = *pair;
    return files;
  }
  if (!IsDirectory(data))
    return Exists(data) ? absl::InvalidArgumentError(absl::StrCat(
                              "--data '", data,
                              "' is a file; pass a directory or IMAGES,LABELS"))
                        : absl::NotFoundError(absl::StrCat(
                              "data directory '", data, "' not found"));
  absl::StatusOr<SplitFiles> train = FindSplit(data, "train");
  if (!train.ok())
    return train.status();
  files.train = *train;
  if (!files.test) {
    absl::StatusOr<SplitFiles> t10k = FindSplit(data, "t10k");
    if (!t10k.ok())
      return t10k.status();
    files.test = *t10k;
  }
  return files;
}

} // namespace tcc::trun
