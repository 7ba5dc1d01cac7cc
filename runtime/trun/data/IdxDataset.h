// IDX files (the MNIST / Fashion-MNIST format), gzipped or raw.
//
// Layout: 4-byte big-endian magic 0x000008NN (0x08: unsigned bytes, NN: the
// number of dimensions), NN big-endian uint32 dimensions, then the values.
// Images are 0x00000803 [count, rows, cols]; labels 0x00000801 [count].
#ifndef TCC_RUNTIME_TRUN_DATA_IDXDATASET_H
#define TCC_RUNTIME_TRUN_DATA_IDXDATASET_H

#include "absl/status/statusor.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tcc::trun {

struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> values; // row-major, product(dims) bytes
};

// Reads a whole IDX file; gzip is detected by its magic bytes 0x1f 0x8b.
// The decompressed size must match the header exactly. Errors are one line
// naming the file.
absl::StatusOr<IdxArray> ReadIdxFile(const std::string &path,
                                     uint32_t expected_magic);

// Images with their labels, e.g. the Fashion-MNIST train split.
struct LabeledImages {
  std::string images_path;
  std::string labels_path;
  int64_t count = 0;
  int64_t rows = 0;
  int64_t cols = 0;
  std::vector<uint8_t> pixels; // (count, rows, cols)
  // float32 images (from a .npy file), fed as stored: when non-empty it
  // replaces `pixels` and no normalizer applies.
  std::vector<float> float_pixels; // (count, rows, cols)
  std::vector<uint8_t> labels;     // (count)

  int64_t pixels_per_image() const { return rows * cols; }
};

// Reads an images file (0x00000803) into `set` (images_path, count, rows,
// cols, pixels); rows or cols 0 is an error ("images are RxC (empty)").
absl::Status ReadIdxImages(const std::string &path, LabeledImages &set);

// Reads a labels file (0x00000801).
absl::StatusOr<std::vector<uint8_t>> ReadIdxLabels(const std::string &path);

// Gives `set` (images already read) its labels, read from `labels_path`:
// there must be one per image.
absl::Status AttachLabels(LabeledImages &set, const std::string &labels_path,
                          std::vector<uint8_t> labels);

inline constexpr uint32_t kIdxImagesMagic = 0x00000803;
inline constexpr uint32_t kIdxLabelsMagic = 0x00000801;

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_DATA_IDXDATASET_H
