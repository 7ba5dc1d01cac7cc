// Weights in the safetensors format (https://github.com/huggingface/safetensors),
// readable by PyTorch (safetensors.torch.load_file) and by a few lines of
// numpy:
//
//   8 bytes   little-endian uint64 N: the header size
//   N bytes   JSON object: for each tensor
//               "NAME": {"dtype": "F32", "shape": [d0, ...],
//                        "data_offsets": [begin, end]}
//             and "__metadata__": {string: string}; padded with spaces so
//             the data starts 8-byte aligned
//   the rest  tensor bytes, little-endian, row-major; offsets are relative to
//             the start of this section, and the tensors tile it exactly (no
//             gaps, no overlaps)
#ifndef TCC_RUNTIME_TRUN_IO_SAFETENSORS_H
#define TCC_RUNTIME_TRUN_IO_SAFETENSORS_H

#include "runtime/trun/io/FileChecksum.h"
#include "runtime/trun/io/MappedFile.h"
#include "tcc/step_abi.h"

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tcc::trun {

// "F32", "BF16", ... for a tcc dtype; "" for none.
const char *SafetensorsDtypeName(int32_t dtype);

// A tensor to write: `data` holds product(shape) elements of `dtype`.
struct TensorToWrite {
  std::string name;
  int32_t dtype; // tcc_dtype
  std::vector<int64_t> shape;
  const void *data;
  int64_t size_bytes;
};

// The tensor a descriptor entry describes, with its data at `data`.
TensorToWrite TensorToWriteOf(const tcc_tensor_desc &t, const void *data);

// Writes `tensors` (data in the given order) atomically (AtomicFile.h).
// With `written`, it receives the file's size and CRC32, computed while
// writing.
absl::Status WriteSafetensors(const std::string &path,
                              const std::vector<TensorToWrite> &tensors,
                              const std::map<std::string, std::string> &metadata,
                              FileChecksum *written = nullptr);

// A memory-mapped safetensors file, checked on open: header size, JSON,
// every entry's dtype, shape and offsets, byte counts, and that the data
// section is tiled exactly.
class SafetensorsFile {
public:
  struct Tensor {
    std::string dtype; // as written, e.g. "F32"
    std::vector<int64_t> shape;
    const uint8_t *data;
    int64_t size_bytes;
  };

  // Checks the data against its tcc_data_crc32, when the file has one,
  // unless `verify_data` is false (a caller that has just checksummed the
  // whole file against a record of its own: a checkpoint's state.json).
  static absl::StatusOr<SafetensorsFile> Open(const std::string &path,
                                              bool verify_data = true);

  const std::string &path() const { return file_.path(); }
  const std::map<std::string, Tensor> &tensors() const { return tensors_; }
  const std::map<std::string, std::string> &metadata() const {
    return metadata_;
  }
  // Whether the file carries trun's tcc_data_crc32 (every file trun writes
  // does; a file from elsewhere cannot, so its bytes were not checkable).
  bool has_data_checksum() const;

private:
  MappedFile file_;
  std::map<std::string, Tensor> tensors_;
  std::map<std::string, std::string> metadata_;
};

// Copies the data of tensors[i] to into[i] (tensors[i]->size_bytes each).
void CopyTensorData(const std::vector<const SafetensorsFile::Tensor *> &tensors,
                    const std::vector<void *> &into);

// Parameters as weights files (trun --save-weights, --init-from):
// Weights.h.

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_IO_SAFETENSORS_H
