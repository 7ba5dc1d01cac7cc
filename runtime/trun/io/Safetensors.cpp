#include "runtime/trun/io/Safetensors.h"

#include "runtime/initializers/Dtypes.h"
#include "runtime/trun/io/AtomicFile.h"
#include "runtime/trun/io/FileChecksum.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <set>

namespace tcc::trun {

// The metadata key of the data section's CRC-32 (decimal) in the files
// WriteSafetensors writes.
constexpr char kDataCrcKey[] = "tcc_data_crc32";
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors data is little-endian; this code copies it as is");

// A header larger than this is not a weights file (the reference
// implementation's limit).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

// Bytes per element of a safetensors dtype; 0 if unknown.
int64_t ElementBytes(const std::string &dtype) {
  static const std::map<std::string, int64_t> kSizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},      {"F8_E4M3", 1}, {"F8_E5M2", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2},     {"BF16", 2},    {"I32", 4},
      {"U32", 4},  {"F32", 4}, {"F64", 8},     {"I64", 8},     {"U64", 8}};
  auto found = kSizes.find(dtype);
  return found == kSizes.end() ? 0 : found->second;
}

std::string ShapeText(const std::vector<int64_t> &shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

absl::Status Corrupt(const std::string &path, absl::string_view what) {
  return absl::DataLossError(absl::StrCat(path, ": ", what));
}

// Reads a JSON array of non-negative integers.
bool ReadCounts(const nlohmann::json &json, std::vector<int64_t> &out) {
  if (!json.is_array())
    return false;
  for (const nlohmann::json &v : json) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0)
      return false;
    out.push_back(v.get<int64_t>());
  }
  return true;
}

} // namespace

const char *SafetensorsDtypeName(int32_t dtype) {
  switch (dtype) {
  case TCC_DTYPE_F32:
    return "F32";
  case TCC_DTYPE_F64:
    return "F64";
  case TCC_DTYPE_I32:
    return "I32";
  case TCC_DTYPE_I64:
    return "I64";
  case TCC_DTYPE_U8:
    return "U8";
  case TCC_DTYPE_BF16:
    return "BF16";
  case TCC_DTYPE_F16:
    return "F16";
  default:
    return "";
  }
}

absl::Status
WriteSafetensors(const std::string &path,
                 const std::vector<TensorToWrite> &tensors,
                 const std::map<std::string, std::string> &metadata,
                 FileChecksum *written) {
  nlohmann::json header = nlohmann::json::object();
  header["__metadata__"] = metadata;
  int64_t offset = 0;
  std::vector<absl::string_view> pieces(2); // header size, header
  for (const TensorToWrite &t : tensors) {
    const char *dtype = SafetensorsDtypeName(t.dtype);
    if (!*dtype)
      return absl::InvalidArgumentError(
          absl::StrCat("cannot write ", path, ": tensor '", t.name,
                       "' has dtype ", DtypeName(t.dtype),
                       ", which safetensors cannot hold"));
    if (t.name == "__metadata__" || header.contains(t.name))
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot write ", path, ": duplicate tensor name '", t.name, "'"));
    header[t.name] = {{"dtype", dtype},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.size_bytes}}};
    offset += t.size_bytes;
    pieces.emplace_back(static_cast<const char *>(t.data),
                        static_cast<size_t>(t.size_bytes));
  }
  // The data's CRC-32 in the metadata: a file trun wrote is checked when it
  // is read back (flipped bytes in the weights are an error, not training).
  uint32_t crc = 0;
  for (size_t i = 2; i < pieces.size(); ++i)
    crc = Crc32(pieces[i], crc);
  header["__metadata__"][kDataCrcKey] = absl::StrCat(crc);
  // replace: a model name that is not UTF-8 must not abort the write.
  std::string text =
      header.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  // Pad so the data section starts 8-byte aligned, as the reference writer does.
  text.append((8 - text.size() % 8) % 8, ' ');
  uint64_t size = text.size();
  char size_bytes[8];
  std::memcpy(size_bytes, &size, sizeof(size));
  pieces[0] = absl::string_view(size_bytes, sizeof(size_bytes));
  pieces[1] = text;
  return WriteFileAtomically(path, pieces, written);
}

absl::StatusOr<SafetensorsFile> SafetensorsFile::Open(const std::string &path,
                                                      bool verify_data) {
  absl::StatusOr<MappedFile> mapped = MappedFile::Open(path);
  if (!mapped.ok())
    return mapped.status();
  SafetensorsFile file;
  file.file_ = std::move(*mapped);
  size_t size = file.file_.size();
  if (size < 8)
    return Corrupt(path, absl::StrCat(size, " bytes, too short for the 8-byte "
                                            "safetensors header size "
                                            "(truncated or not safetensors)"));
  uint64_t header_size;
  std::memcpy(&header_size, file.file_.data(), sizeof(header_size));
  if (header_size > kMaxHeaderBytes)
    return Corrupt(path, absl::StrCat("header size ", header_size,
                                      " is implausible (not safetensors)"));
  if (header_size > size - 8)
    return Corrupt(path, absl::StrCat("header size ", header_size,
                                      " runs past the end of the file (",
                                      size, " bytes; truncated)"));
  absl::string_view text(reinterpret_cast<const char *>(file.file_.data() + 8),
                         header_size);
  // A key named twice (two tensors, or two __metadata__) would leave only
  // the last in the parsed object: caught while parsing.
  std::set<std::string> keys;
  std::string repeated;
  nlohmann::json::parser_callback_t note_keys =
      [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json &parsed) {
        if (event == nlohmann::json::parse_event_t::key && depth == 1 && repeated.empty() &&
            parsed.is_string() && !keys.insert(parsed.get<std::string>()).second)
          repeated = parsed.get<std::string>();
        return true;
      };
  nlohmann::json header =
      nlohmann::json::parse(text, note_keys, /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object())
    return Corrupt(path, "the header is not a JSON object (not safetensors)");
  if (!repeated.empty())
    return Corrupt(path, absl::StrCat("the header names '", repeated,
                                      "' twice (a file must name each tensor once)"));
  const uint8_t *data = file.file_.data() + 8 + header_size;
  int64_t data_size = static_cast<int64_t>(size - 8 - header_size);
  std::vector<std::pair<int64_t, int64_t>> ranges; // (begin, end)
  for (auto &[name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object())
        return Corrupt(path, "__metadata__ is not an object");
      for (auto &[key, value] : entry.items()) {
        if (!value.is_string())
          return Corrupt(path, absl::StrCat("__metadata__ value '", key,
                                            "' is not a string"));
        file.metadata_[key] = value.get<std::string>();
      }
      continue;
    }
    std::string what = absl::StrCat("tensor '", name, "'");
    if (!entry.is_object() || !entry.contains("dtype") ||
        !entry["dtype"].is_string() || !entry.contains("shape") ||
        !entry.contains("data_offsets"))
      return Corrupt(path, absl::StrCat(what, " needs dtype, shape and "
                                              "data_offsets"));
    Tensor tensor;
    tensor.dtype = entry["dtype"].get<std::string>();
    int64_t element_bytes = ElementBytes(tensor.dtype);
    if (element_bytes == 0)
      return Corrupt(path,
                     absl::StrCat(what, " has unknown dtype '", tensor.dtype,
                                  "'"));
    std::vector<int64_t> offsets;
    if (!ReadCounts(entry["shape"], tensor.shape))
      return Corrupt(path, absl::StrCat(what, " has a shape that is not a "
                                              "list of non-negative integers"));
    if (!ReadCounts(entry["data_offsets"], offsets) || offsets.size() != 2 ||
        offsets[0] > offsets[1] || offsets[1] > data_size)
      return Corrupt(path, absl::StrCat(
                               what, " has data_offsets outside the ",
                               data_size, "-byte data section (truncated?)"));
    int64_t bytes = element_bytes;
    for (int64_t d : tensor.shape)
      if (__builtin_mul_overflow(bytes, d, &bytes))
        return Corrupt(path, absl::StrCat(what, " is too large"));
    if (offsets[1] - offsets[0] != bytes)
      return Corrupt(path, absl::StrCat(what, ": ", tensor.dtype, " ",
                                        ShapeText(tensor.shape), " needs ",
                                        bytes, " bytes but data_offsets [",
                                        offsets[0], ", ", offsets[1],
                                        "] hold ", offsets[1] - offsets[0]));
    tensor.data = data + offsets[0];
    tensor.size_bytes = bytes;
    ranges.emplace_back(offsets[0], offsets[1]);
    file.tensors_.emplace(name, std::move(tensor));
  }
  // The tensors must tile the data section: no gaps, overlaps or tail.
  std::sort(ranges.begin(), ranges.end());
  int64_t covered = 0;
  for (const auto &[begin, end] : ranges) {
    if (begin != covered)
      return Corrupt(path, absl::StrCat("tensor data ",
                                        begin < covered ? "overlaps" : "has a gap",
                                        " at byte ", std::min(begin, covered),
                                        " of the data section"));
    covered = end;
  }
  if (covered != data_size)
    return Corrupt(path, absl::StrCat(data_size - covered,
                                      " bytes after the last tensor "
                                      "(corrupt or not safetensors)"));
  auto crc = file.metadata_.find(kDataCrcKey);
  if (verify_data && crc != file.metadata_.end()) {
    uint32_t actual = Crc32(absl::string_view(reinterpret_cast<const char *>(data),
                                              static_cast<size_t>(data_size)));
    if (absl::StrCat(actual) != crc->second)
      return Corrupt(path, absl::StrCat("the tensor data does not match its checksum (",
                                        kDataCrcKey, " ", crc->second, ", the data's ", actual,
                                        "): changed after trun wrote it"));
  }
  return file;
}

bool SafetensorsFile::has_data_checksum() const {
  return metadata_.count(kDataCrcKey) != 0;
}

void CopyTensorData(const std::vector<const SafetensorsFile::Tensor *> &tensors,
                    const std::vector<void *> &into) {
  for (size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i]->size_bytes > 0) // an empty tensor's data may be null
      std::memcpy(into[i], tensors[i]->data,
                  static_cast<size_t>(tensors[i]->size_bytes));
}

TensorToWrite TensorToWriteOf(const tcc_tensor_desc &t, const void *data) {
  return {t.name ? t.name : "", t.dtype,
          t.shape ? std::vector<int64_t>(t.shape, t.shape + t.rank) : std::vector<int64_t>(),
          data, t.size_bytes};
}

} // namespace tcc::trun
