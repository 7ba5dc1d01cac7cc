// safetensors weights (runtime/trun/io/Safetensors.h): --init-from,
// checkpoints' model/optimizer files. A file that opens has every tensor's
// data read and copied out (CopyTensorData), and its metadata walked.
#include "FuzzInput.h"

#include "runtime/trun/io/Safetensors.h"

#include <vector>

using namespace tcc::trun;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string path = tcc_fuzz::WriteInput("input.safetensors", data, size);
  absl::StatusOr<SafetensorsFile> file = SafetensorsFile::Open(path);
  tcc_fuzz::Note("SafetensorsFile::Open", file);
  if (!file.ok())
    return 0;
  std::vector<const SafetensorsFile::Tensor *> tensors;
  std::vector<std::vector<uint8_t>> buffers;
  std::vector<void *> into;
  size_t total = 0;
  for (const auto &[name, t] : file->tensors()) {
    if (t.size_bytes < 0 || static_cast<size_t>(t.size_bytes) > size)
      __builtin_trap(); // more bytes than the file has
    total += name.size() + t.dtype.size() + t.shape.size();
    if (t.size_bytes > 0)
      tcc_fuzz::TouchBytes(t.data, static_cast<size_t>(t.size_bytes));
    tensors.push_back(&t);
    buffers.emplace_back(static_cast<size_t>(t.size_bytes));
  }
  for (auto &b : buffers)
    into.push_back(b.data());
  CopyTensorData(tensors, into);
  for (const auto &[key, value] : file->metadata())
    total += key.size() + value.size();
  return total == 0 ? 0 : 0;
}
