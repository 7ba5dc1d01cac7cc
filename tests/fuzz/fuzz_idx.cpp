// IDX files, raw or gzipped (runtime/trun/data/IdxDataset.h): the MNIST /
// Fashion-MNIST --data/--test images and labels. Besides the images and
// labels readers, ReadIdxFile runs with the magic the input starts with, so
// other ranks (up to 255 dimensions) are parsed too.
#include "FuzzInput.h"

#include "runtime/trun/data/IdxDataset.h"

using namespace tcc::trun;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string path = tcc_fuzz::WriteInput("input.idx", data, size);
  LabeledImages set;
  absl::Status images = ReadIdxImages(path, set);
  tcc_fuzz::Note("ReadIdxImages", images);
  if (images.ok()) {
    // As trun uses them: rows x cols, then the pixel count.
    int64_t per_image = set.pixels_per_image();
    if (static_cast<int64_t>(set.pixels.size()) != set.count * per_image)
      __builtin_trap();
  }
  absl::StatusOr<std::vector<uint8_t>> labels = ReadIdxLabels(path);
  tcc_fuzz::Note("ReadIdxLabels", labels);
  if (labels.ok())
    (void)AttachLabels(set, path, std::move(*labels));
  if (size >= 4) {
    uint32_t magic = uint32_t{data[0]} << 24 | uint32_t{data[1]} << 16 |
                     uint32_t{data[2]} << 8 | uint32_t{data[3]};
    tcc_fuzz::Note("ReadIdxFile(its own magic)", ReadIdxFile(path, magic));
  }
  return 0;
}
