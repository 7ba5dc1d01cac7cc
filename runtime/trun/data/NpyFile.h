// .npy files (numpy's np.save format) as image-classifier data.
//
// Layout: magic "\x93NUMPY", major and minor version bytes (1.0, 2.0 or 3.0),
// a little-endian header length (uint16 for 1.0, uint32 for 2.0 and 3.0),
// then the header: a Python dict literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (60000, 28, 28), }
// padded with spaces and ended by '\n'; then the values, row-major.
#ifndef TCC_RUNTIME_TRUN_DATA_NPYFILE_H
#define TCC_RUNTIME_TRUN_DATA_NPYFILE_H

#include "runtime/trun/data/IdxDataset.h"
#include "runtime/trun/io/MappedFile.h"

#include "absl/status/statusor.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tcc::trun {

// The element types trun reads: '|u1' and '<f4' images, integer labels;
// named arrays (ReadNpyArray) also float64, float16 and bool.
enum class NpyType {
  kUint8,
  kInt8,
  kUint16,
  kInt16,
  kUint32,
  kInt32,
  kUint64,
  kInt64,
  kFloat32,
  kFloat64, // named arrays only
  kFloat16, // named arrays only
  kBool,    // named arrays only
};

struct NpyArray {
  int version = 0;   // major version: 1, 2 or 3
  std::string descr; // as in the header, e.g. "<f4" or "=i8"
  NpyType type = NpyType::kUint8;
  int64_t item_bytes = 0;     // 1, 2, 4 or 8
  std::vector<int64_t> shape; // () is a scalar (one element)
  MappedFile file;            // the data lives in the mapping
  size_t data_offset = 0;     // where the values start in `file`

  int64_t num_elements() const;
  // The values, row-major; possibly unaligned (read them with memcpy).
  const uint8_t *data() const { return file.data() + data_offset; }
};

// True when `path` ends with ".npy" (case-sensitive): such --data / --test
// files are read as .npy, anything else as IDX.
bool IsNpyPath(const std::string &path);

// Maps and checks a .npy file. The dict must have exactly the keys 'descr',
// 'fortran_order' and 'shape' (any order, any spacing, trailing commas
// allowed; shape () or (N,) or (N, ...)). descr: '|u1', '|i1', '<u2', '<i2',
// '<u4', '<i4', '<u8', '<i8' or '<f4' ('=' is '<' on this little-endian
// machine; one-byte types take any byte-order character). Errors are one
// line "PATH: ...": cannot open, not a .npy file (bad magic), unsupported
// version, truncated header, malformed header (what was expected where),
// big-endian data, unsupported dtype (named), Fortran order, a shape whose
// size overflows (its dimensions other than 0 alone, too), and a data size that does not match the shape (truncated
// / trailing bytes, both sizes given).
absl::StatusOr<NpyArray> ReadNpyFile(const std::string &path);

// ReadNpyFile for named arrays (NamedArrays.h): also '<f8', '<f2' and '|b1'.
absl::StatusOr<NpyArray> ReadNpyArray(const std::string &path);

// Images from a .npy file into `set` (count, rows, cols, images_path):
// uint8 [N, d1, ..., dk] (k >= 1) goes to `pixels`, exactly like IDX pixels;
// float32 [N, d1, ..., dk] goes to `float_pixels`, as stored, and must be
// finite (the error names the first bad element). rows x cols is
// d1*...*d(k-1) x dk ([N, D]: 1 x D). No dimension after N may be 0.
absl::Status ReadNpyImages(const std::string &path, LabeledImages &set);

// Labels from a .npy file of any integer type above, shape [N]; each must be
// in [0, 256) (the error names the first bad index).
absl::StatusOr<std::vector<uint8_t>> ReadNpyLabels(const std::string &path);

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_DATA_NPYFILE_H
