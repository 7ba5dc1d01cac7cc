// .npy files (runtime/trun/data/NpyFile.h): --data/--test images and labels,
// and named arrays. Every reader runs on each input; an array that opens has
// its whole data range read.
#include "FuzzInput.h"

#include "runtime/trun/data/NpyFile.h"

using namespace tcc::trun;

namespace {
void Walk(const char *what, const absl::StatusOr<NpyArray> &array) {
  tcc_fuzz::Note(what, array);
  if (!array.ok())
    return;
  int64_t n = array->num_elements();
  tcc_fuzz::TouchBytes(array->data(),
                       static_cast<size_t>(n * array->item_bytes));
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string path = tcc_fuzz::WriteInput("input.npy", data, size);
  Walk("ReadNpyFile", ReadNpyFile(path));
  Walk("ReadNpyArray", ReadNpyArray(path));
  tcc_fuzz::Note("ReadNpyLabels", ReadNpyLabels(path));
  LabeledImages set;
  absl::Status images = ReadNpyImages(path, set);
  tcc_fuzz::Note("ReadNpyImages", images);
  if (images.ok()) { // as trun uses them: rows x cols, then the pixel count
    int64_t n = set.count * set.pixels_per_image();
    if (static_cast<size_t>(n) != (set.float_pixels.empty() ? set.pixels.size()
                                                            : set.float_pixels.size()))
      __builtin_trap();
  }
  return 0;
}
