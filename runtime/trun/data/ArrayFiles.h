// The files behind named arrays (NamedArrays.h): what --data / --test name,
// and the arrays read from them as stored.
//
// A value is a comma-separated list of items:
//   NAME=FILE.npy                  the array in FILE.npy feeds input NAME
//   NAME=FILE.safetensors[:TENSOR] tensor TENSOR (default NAME) of the file
//   FILE.safetensors               every tensor of the file, by its name
//   FILE.npy                       the array feeds the input named like the
//                                  file (train/x.npy: input 'x')
//   DIR                            every DIR/*.npy, named like its file
#ifndef TCC_RUNTIME_TRUN_DATA_ARRAYFILES_H
#define TCC_RUNTIME_TRUN_DATA_ARRAYFILES_H

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tcc::trun {

// One item of the list. `name` empty: every tensor of a safetensors file.
struct ArraySpec {
  std::string name;   // the step input it feeds
  std::string path;   // a .npy or .safetensors file
  std::string tensor; // safetensors: the tensor ("" with an empty name)
};

// True when `value` can only mean named arrays, whatever the step: an item
// NAME=..., a .safetensors file, a single .npy file, or a directory that
// holds .npy files and no train-images-idx3-ubyte[.gz] (Fashion-MNIST).
bool IsNamedArraysValue(const std::string &value);

// Parses `flag`'s value (the list above); a directory is listed here. Errors
// are one line naming the flag and the item.
absl::StatusOr<std::vector<ArraySpec>> ParseArraySpecs(const std::string &value,
                                                       absl::string_view flag);

// Element types of stored arrays.
enum class ArrayType {
  kBool, kU8, kI8, kU16, kI16, kU32, kI32, kU64, kI64, kF16, kBF16, kF32, kF64,
};

// Bytes per element.
int64_t ArrayTypeBytes(ArrayType type);
// numpy's name: "float64", "int32", "bool", ...
const char *ArrayTypeName(ArrayType type);
bool IsFloatArrayType(ArrayType type);

// One array as stored, copied out of its file (a mapping must not outlive
// the load: MappedFile.h).
struct StoredArray {
  std::string name;   // the input it is meant for
  std::string source; // "x.npy" or "train.safetensors:x", for messages
  ArrayType type = ArrayType::kF32;
  std::vector<int64_t> shape; // as stored: (samples, ...)
  std::vector<uint8_t> bytes; // row-major, little-endian

  int64_t num_elements() const;
};

// Reads every array `specs` name (each file opened once, in order; a whole
// safetensors file gives its tensors in name order). Errors name the file
// (missing, corrupt, unsupported dtype) or the tensor (not in the file).
absl::StatusOr<std::vector<StoredArray>>
ReadArrays(const std::vector<ArraySpec> &specs);

// Value `index` of `array` as an exact long double (x86-64's 64-bit
// mantissa holds every int64, uint64 and float64 value).
long double ArrayValue(const StoredArray &array, int64_t index);

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_DATA_ARRAYFILES_H
