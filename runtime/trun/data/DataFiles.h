// Turns the --data / --test arguments into image and label files (IDX or
// .npy) and reads them.
#ifndef TCC_RUNTIME_TRUN_DATA_DATAFILES_H
#define TCC_RUNTIME_TRUN_DATA_DATAFILES_H

#include "runtime/trun/data/IdxDataset.h"

#include "absl/status/statusor.h"

#include <optional>
#include <string>

namespace tcc::trun {

struct SplitFiles {
  std::string images;
  std::string labels;
};

struct DataFiles {
  SplitFiles train;
  std::optional<SplitFiles> test; // none: skip evaluation
};

// data: a directory holding the four Fashion-MNIST files
//   train-images-idx3-ubyte[.gz]  train-labels-idx1-ubyte[.gz]
//   t10k-images-idx3-ubyte[.gz]   t10k-labels-idx1-ubyte[.gz]
// (the uncompressed file wins when both exist), or "IMAGES,LABELS".
// test: optional "IMAGES,LABELS"; it replaces the directory's t10k files.
absl::StatusOr<DataFiles>
ResolveDataFiles(const std::string &data,
                 const std::optional<std::string> &test);

// Reads a split. Each file is a .npy array when its name ends with ".npy"
// (NpyFile.h), else IDX (IdxDataset.h), so the two can be mixed; image and
// label counts must match (AttachLabels).
absl::StatusOr<LabeledImages> ReadSplit(const SplitFiles &files);

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_DATA_DATAFILES_H
