#include "runtime/trun/data/ArrayFiles.h"

#include "runtime/trun/base/PathChecks.h"
#include "runtime/trun/data/NpyFile.h"
#include "runtime/trun/io/Safetensors.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

#include <dirent.h>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <optional>

namespace tcc::trun {
namespace {

constexpr absl::string_view kNpy = ".npy";
constexpr absl::string_view kSafetensors = ".safetensors";

// "data/train_x.npy" -> "train_x".
std::string Stem(const std::string &path) {
  size_t slash = path.rfind('/');
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  return base.substr(0, base.size() - kNpy.size());
}

// The *.npy files of `dir`, sorted.
std::vector<std::string> NpyFilesIn(const std::string &dir) {
  std::vector<std::string> files;
  if (DIR *d = opendir(dir.c_str())) {
    while (dirent *entry = readdir(d)) {
      std::string name = entry->d_name;
      if (absl::EndsWith(name, kNpy) && name.size() > kNpy.size())
        files.push_back(absl::StrCat(dir, "/", name));
    }
    closedir(d);
  }
  std::sort(files.begin(), files.end());
  return files;
}

bool HasFashionMnist(const std::string &dir) {
  std::string images = absl::StrCat(dir, "/train-images-idx3-ubyte");
  return Exists(images) || Exists(images + ".gz");
}

absl::Status SpecError(absl::string_view flag, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(flag, ": ", message));
}

struct TypeEntry {
  ArrayType type;
  const char *name;       // numpy's
  const char *safetensors; // the safetensors dtype
  int64_t bytes;
};

constexpr TypeEntry kTypes[] = {
    {ArrayType::kBool, "bool", "BOOL", 1},
    {ArrayType::kU8, "uint8", "U8", 1},
    {ArrayType::kI8, "int8", "I8", 1},
    {ArrayType::kU16, "uint16", "U16", 2},
    {ArrayType::kI16, "int16", "I16", 2},
    {ArrayType::kU32, "uint32", "U32", 4},
    {ArrayType::kI32, "int32", "I32", 4},
    {ArrayType::kU64, "uint64", "U64", 8},
    {ArrayType::kI64, "int64", "I64", 8},
    {ArrayType::kF16, "float16", "F16", 2},
    {ArrayType::kBF16, "bfloat16", "BF16", 2},
    {ArrayType::kF32, "float32", "F32", 4},
    {ArrayType::kF64, "float64", "F64", 8},
};

const TypeEntry &EntryOf(ArrayType type) {
  for (const TypeEntry &entry : kTypes)
    if (entry.type == type)
      return entry;
  return kTypes[0]; // unreachable: every ArrayType is listed
}

ArrayType FromNpy(NpyType type) {
  switch (type) {
  case NpyType::kUint8: return ArrayType::kU8;
  case NpyType::kInt8: return ArrayType::kI8;
  case NpyType::kUint16: return ArrayType::kU16;
  case NpyType::kInt16: return ArrayType::kI16;
  case NpyType::kUint32: return ArrayType::kU32;
  case NpyType::kInt32: return ArrayType::kI32;
  case NpyType::kUint64: return ArrayType::kU64;
  case NpyType::kInt64: return ArrayType::kI64;
  case NpyType::kFloat32: return ArrayType::kF32;
  case NpyType::kFloat64: return ArrayType::kF64;
  case NpyType::kFloat16: return ArrayType::kF16;
  case NpyType::kBool: return ArrayType::kBool;
  }
  return ArrayType::kU8; // unreachable
}

std::optional<ArrayType> FromSafetensors(const std::string &dtype) {
  for (const TypeEntry &entry : kTypes)
    if (dtype == entry.safetensors)
      return entry.type;
  return std::nullopt;
}

// IEEE half -> float, exactly (subnormals included).
float HalfToFloat(uint16_t h) {
  uint32_t sign = (h >> 15) & 1, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  float magnitude;
  if (exponent == 0)
    magnitude = std::ldexp(static_cast<float>(mantissa), -24);
  else if (exponent == 31)
    magnitude = mantissa ? std::numeric_limits<float>::quiet_NaN()
                         : std::numeric_limits<float>::infinity();
  else
    magnitude = std::ldexp(static_cast<float>(mantissa | 0x400), exponent - 25);
  return sign ? -magnitude : magnitude;
}

template <typename T> T Load(const uint8_t *p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

// A safetensors file: every tensor of it, or the one `spec` names.
absl::Status ReadSafetensors(const std::vector<ArraySpec> &specs, size_t first,
                             const SafetensorsFile &file,
                             std::vector<StoredArray> &out) {
  // Every spec of this file (they follow one another after grouping).
  for (size_t i = first; i < specs.size() && specs[i].path == specs[first].path;
       ++i) {
    const ArraySpec &spec = specs[i];
    std::vector<std::pair<std::string, std::string>> wanted; // name, tensor
    if (spec.name.empty()) {
      for (const auto &[tensor, unused] : file.tensors())
        wanted.emplace_back(tensor, tensor);
      if (wanted.empty())
        return absl::InvalidArgumentError(
            absl::StrCat(spec.path, ": no tensors"));
    } else {
      wanted.emplace_back(spec.name, spec.tensor);
    }
    for (const auto &[name, tensor_name] : wanted) {
      auto found = file.tensors().find(tensor_name);
      if (found == file.tensors().end()) {
        std::vector<std::string> names;
        for (const auto &[tensor, unused] : file.tensors())
          names.push_back(tensor);
        return absl::NotFoundError(absl::StrCat(
            spec.path, ": no tensor '", tensor_name, "' (it holds ",
            names.empty() ? "none" : absl::StrJoin(names, ", "), ")"));
      }
      const SafetensorsFile::Tensor &t = found->second;
      std::optional<ArrayType> type = FromSafetensors(t.dtype);
      if (!type)
        return absl::InvalidArgumentError(absl::StrCat(
            spec.path, ": tensor '", tensor_name, "' has dtype ", t.dtype,
            "; trun reads BOOL, integer (U8 to I64), F16, BF16, F32 and F64 "
            "arrays"));
      StoredArray array;
      array.name = name;
      array.source = absl::StrCat(spec.path, ":", tensor_name);
      array.type = *type;
      array.shape = t.shape;
      if (t.size_bytes > 0)
        array.bytes.assign(t.data, t.data + t.size_bytes);
      out.push_back(std::move(array));
    }
  }
  return absl::OkStatus();
}

} // namespace

int64_t ArrayTypeBytes(ArrayType type) { return EntryOf(type).bytes; }
const char *ArrayTypeName(ArrayType type) { return EntryOf(type).name; }
bool IsFloatArrayType(ArrayType type) {
  return type == ArrayType::kF16 || type == ArrayType::kBF16 ||
         type == ArrayType::kF32 || type == ArrayType::kF64;
}

int64_t StoredArray::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d; // the bytes exist, so no overflow
  return n;
}

bool IsNamedArraysValue(const std::string &value) {
  std::vector<std::string> items = absl::StrSplit(value, ',');
  for (const std::string &item : items)
    if (item.find('=') != std::string::npos || absl::EndsWith(item, kSafetensors) ||
        item.find(absl::StrCat(kSafetensors, ":")) != std::string::npos)
      return true;
  if (items.size() != 1)
    return false; // IMAGES,LABELS
  if (absl::EndsWith(value, kNpy))
    return true; // image data needs two files
  return IsDirectory(value) && !HasFashionMnist(value) &&
         !NpyFilesIn(value).empty();
}

absl::StatusOr<std::vector<ArraySpec>> ParseArraySpecs(const std::string &value,
                                                       absl::string_view flag) {
  std::vector<ArraySpec> specs;
  std::vector<std::string> items = absl::StrSplit(value, ',');
  for (const std::string &item : items) {
    if (item.empty())
      return SpecError(flag, absl::StrCat("empty item in '", value, "'"));
    size_t equals = item.find('=');
    if (equals != std::string::npos) {
      ArraySpec spec;
      spec.name = item.substr(0, equals);
      std::string file = item.substr(equals + 1);
      if (spec.name.empty() || file.empty())
        return SpecError(flag, absl::StrCat("'", item,
                                            "' is not NAME=FILE.npy or "
                                            "NAME=FILE.safetensors[:TENSOR]"));
      size_t colon = file.rfind(absl::StrCat(kSafetensors, ":"));
      if (colon != std::string::npos) {
        spec.path = file.substr(0, colon + kSafetensors.size());
        spec.tensor = file.substr(colon + kSafetensors.size() + 1);
        if (spec.tensor.empty())
          return SpecError(flag, absl::StrCat("'", item,
                                              "' names no tensor after ':'"));
      } else if (absl::EndsWith(file, kSafetensors)) {
        spec.path = file;
        spec.tensor = spec.name;
      } else if (absl::EndsWith(file, kNpy)) {
        spec.path = file;
      } else {
        return SpecError(flag, absl::StrCat("'", item, "': '", file,
                                            "' is neither a .npy nor a "
                                            ".safetensors file"));
      }
      specs.push_back(std::move(spec));
    } else if (absl::EndsWith(item, kSafetensors)) {
      specs.push_back({"", item, ""});
    } else if (absl::EndsWith(item, kNpy)) {
      specs.push_back({Stem(item), item, ""});
    } else if (IsDirectory(item)) {
      std::vector<std::string> files = NpyFilesIn(item);
      if (files.empty())
        return SpecError(flag, absl::StrCat("directory '", item,
                                            "' holds no .npy files"));
      for (const std::string &file : files)
        specs.push_back({Stem(file), file, ""});
    } else {
      return SpecError(
          flag, Exists(item)
                    ? absl::StrCat("'", item,
                                   "' is neither NAME=FILE, a .npy or "
                                   ".safetensors file nor a directory of "
                                   ".npy files")
                    : absl::StrCat("'", item, "' not found"));
    }
  }
  return specs;
}

absl::StatusOr<std::vector<StoredArray>>
ReadArrays(const std::vector<ArraySpec> &specs) {
  // Each file once: the specs grouped by file, first appearance first.
  std::vector<ArraySpec> grouped;
  for (size_t i = 0; i < specs.size(); ++i) {
    bool seen = false;
    for (size_t j = 0; j < i; ++j)
      seen |= specs[j].path == specs[i].path;
    if (seen)
      continue;
    for (size_t j = i; j < specs.size(); ++j)
      if (specs[j].path == specs[i].path)
        grouped.push_back(specs[j]);
  }
  std::vector<StoredArray> arrays;
  for (size_t i = 0; i < grouped.size();) {
    const ArraySpec &spec = grouped[i];
    size_t next = i;
    while (next < grouped.size() && grouped[next].path == spec.path)
      ++next;
    if (absl::EndsWith(spec.path, kSafetensors)) {
      absl::StatusOr<SafetensorsFile> file = SafetensorsFile::Open(spec.path);
      if (!file.ok())
        return file.status();
      if (absl::Status s = ReadSafetensors(grouped, i, *file, arrays); !s.ok())
        return s;
    } else {
      absl::StatusOr<NpyArray> npy = ReadNpyArray(spec.path);
      if (!npy.ok())
        return npy.status();
      for (size_t j = i; j < next; ++j) { // the same file for several inputs
        StoredArray array;
        array.name = grouped[j].name;
        array.source = spec.path;
        array.type = FromNpy(npy->type);
        array.shape = npy->shape;
        int64_t bytes = npy->num_elements() * npy->item_bytes;
        if (bytes > 0)
          array.bytes.assign(npy->data(), npy->data() + bytes);
        arrays.push_back(std::move(array));
      }
    }
    i = next;
  }
  return arrays;
}

long double ArrayValue(const StoredArray &array, int64_t index) {
  const uint8_t *p = array.bytes.data() + index * ArrayTypeBytes(array.type);
  switch (array.type) {
  case ArrayType::kBool: return p[0] != 0;
  case ArrayType::kU8: return Load<uint8_t>(p);
  case ArrayType::kI8: return Load<int8_t>(p);
  case ArrayType::kU16: return Load<uint16_t>(p);
  case ArrayType::kI16: return Load<int16_t>(p);
  case ArrayType::kU32: return Load<uint32_t>(p);
  case ArrayType::kI32: return Load<int32_t>(p);
  case ArrayType::kU64: return Load<uint64_t>(p);
  case ArrayType::kI64: return Load<int64_t>(p);
  case ArrayType::kF16: return HalfToFloat(Load<uint16_t>(p));
  case ArrayType::kBF16: {
    uint32_t bits = uint32_t{Load<uint16_t>(p)} << 16;
    float value;
    std::memcpy(&value, &bits, sizeof(value));
    return value;
  }
  case ArrayType::kF32: return Load<float>(p);
  case ArrayType::kF64: return Load<double>(p);
  }
  return 0; // unreachable
}

} // namespace tcc::trun
