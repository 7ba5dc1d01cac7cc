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
  tcc_fuzz::Note("ReadNpyImages", ReadNpyImages(path, set));
  return 0;
}
