#include "runtime/trun/data/NpyFile.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"

#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <type_traits>

namespace tcc::trun {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicBytes = 6;

absl::Status FileError(const std::string &path, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", message));
}

// Python's spelling: (), (5,), (5, 28, 28).
std::string ShapeText(const std::vector<int64_t> &shape) {
  if (shape.size() == 1)
    return absl::StrCat("(", shape[0], ",)");
  return absl::StrCat("(", absl::StrJoin(shape, ", "), ")");
}

// The header as one printable line for error messages.
std::string Quote(absl::string_view header) {
  std::string text;
  for (char c : header.substr(0, 200))
    text += (c >= 0x20 && c < 0x7f) ? c : ' ';
  while (!text.empty() && text.back() == ' ')
    text.pop_back();
  return header.size() > 200 ? text + "..." : text;
}

struct HeaderDict {
  std::optional<std::string> descr;
  std::optional<bool> fortran_order;
  std::optional<std::vector<int64_t>> shape;
};

// A recursive-descent reader for the dict literal np.save writes. Only what
// that dict can hold: string keys, a string, True/False and a tuple of
// non-negative ints; any Python spacing and trailing commas.
class HeaderParser {
public:
  explicit HeaderParser(absl::string_view text) : text_(text) {}

  // Empty on success, else why the header is malformed.
  std::string Parse(HeaderDict &dict) {
    if (!Consume('{'))
      return Expected("'{'");
    while (true) {
      if (Consume('}'))
        break;
      std::string key;
      if (!ParseString(key))
        return Expected("a quoted key or '}'");
      if (!Consume(':'))
        return Expected(absl::StrCat("':' after key '", key, "'"));
      std::string error = ParseValue(key, dict);
      if (!error.empty())
        return error;
      if (Consume('}'))
        break;
      if (!Consume(','))
        return Expected("',' or '}'");
    }
    SkipSpace();
    if (pos_ != text_.size())
      return Expected("only spaces after the dict");
    if (!dict.descr)
      return "no 'descr' key";
    if (!dict.fortran_order)
      return "no 'fortran_order' key";
    if (!dict.shape)
      return "no 'shape' key";
    return "";
  }

  // Set when 'descr' is not a string: a structured dtype (a list).
  bool structured_descr() const { return structured_descr_; }

private:
  std::string ParseValue(const std::string &key, HeaderDict &dict) {
    if (key == "descr") {
      if (dict.descr)
        return "duplicate key 'descr'";
      SkipSpace();
      if (pos_ < text_.size() && text_[pos_] == '[') {
        structured_descr_ = true;
        return "structured dtype";
      }
      std::string descr;
      if (!ParseString(descr))
        return Expected("a dtype string for 'descr'");
      dict.descr = descr;
    } else if (key == "fortran_order") {
      if (dict.fortran_order)
        return "duplicate key 'fortran_order'";
      if (ConsumeWord("True"))
        dict.fortran_order = true;
      else if (ConsumeWord("False"))
        dict.fortran_order = false;
      else
        return Expected("True or False for 'fortran_order'");
    } else if (key == "shape") {
      if (dict.shape)
        return "duplicate key 'shape'";
      std::vector<int64_t> shape;
      std::string error = ParseTuple(shape);
      if (!error.empty())
        return error;
      dict.shape = std::move(shape);
    } else {
      return absl::StrCat("unexpected key '", key, "'");
    }
    return "";
  }

  // (), (N,), (N, M), (N, M,); "(N)" is an int in Python, not a tuple.
  std::string ParseTuple(std::vector<int64_t> &shape) {
    if (!Consume('('))
      return Expected("a tuple for 'shape'");
    bool comma_after_last = false;
    while (!Consume(')')) {
      if (!shape.empty() && !comma_after_last)
        return Expected("',' or ')' in 'shape'");
      int64_t dim;
      if (!ParseInt(dim))
        return Expected("a non-negative integer or ')' in 'shape'");
      shape.push_back(dim);
      comma_after_last = Consume(',');
    }
    if (shape.size() == 1 && !comma_after_last)
      return "'shape' (N) is not a tuple; a 1-d shape is written (N,)";
    return "";
  }

  bool ParseInt(int64_t &value) {
    SkipSpace();
    size_t start = pos_;
    value = 0;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      if (__builtin_mul_overflow(value, int64_t{10}, &value) ||
          __builtin_add_overflow(value, int64_t{text_[pos_] - '0'}, &value)) {
        pos_ = start; // point the error at the number
        return false;
      }
      ++pos_;
    }
    if (pos_ == start)
      return false;
    if (pos_ < text_.size() && text_[pos_] == 'L') // Python 2's long ints
      ++pos_;
    return true;
  }

  bool ParseString(std::string &out) {
    SkipSpace();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"'))
      return false;
    char quote = text_[pos_];
    size_t end = text_.find(quote, pos_ + 1);
    if (end == absl::string_view::npos)
      return false;
    absl::string_view body = text_.substr(pos_ + 1, end - pos_ - 1);
    // np.save never escapes; a backslash or newline is not a plain name.
    if (body.find_first_of("\\\n") != absl::string_view::npos)
      return false;
    out = std::string(body);
    pos_ = end + 1;
    return true;
  }

  bool ConsumeWord(absl::string_view word) {
    SkipSpace();
    if (text_.substr(pos_, word.size()) != word)
      return false;
    size_t next = pos_ + word.size();
    if (next < text_.size() &&
        (std::isalnum(static_cast<unsigned char>(text_[next])) ||
         text_[next] == '_'))
      return false;
    pos_ = next;
    return true;
  }

  bool Consume(char c) {
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  void SkipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r'))
      ++pos_;
  }

  std::string Expected(absl::string_view what) {
    SkipSpace();
    if (pos_ == text_.size())
      return absl::StrCat("expected ", what, " at the end of the header");
    return absl::StrCat("expected ", what, " at offset ", pos_);
  }

  absl::string_view text_;
  size_t pos_ = 0;
  bool structured_descr_ = false;
};

// numpy's name of a descr, for messages: '<f8' -> float64.
std::string TypeName(absl::string_view descr) {
  if (descr.size() < 3)
    return std::string(descr);
  absl::string_view bytes = descr.substr(2);
  int size = 0;
  for (char c : bytes) {
    if (c < '0' || c > '9' || size > 1000)
      return std::string(descr);
    size = size * 10 + (c - '0');
  }
  switch (descr[1]) {
  case 'f':
    return absl::StrCat("float", size * 8);
  case 'i':
    return absl::StrCat("int", size * 8);
  case 'u':
    return absl::StrCat("uint", size * 8);
  case 'c':
    return absl::StrCat("complex", size * 8);
  case 'b':
    return "bool";
  case 'S':
    return "bytes";
  case 'U':
    return "str";
  default:
    return std::string(descr);
  }
}

template <typename T> int64_t LabelAt(const uint8_t *data, int64_t i) {
  T value;
  std::memcpy(&value, data + i * sizeof(T), sizeof(T));
  // uint64 above int64's range is out of [0, 256) either way.
  if constexpr (std::is_same_v<T, uint64_t>)
    return value > 255 ? int64_t{256} : static_cast<int64_t>(value);
  else
    return static_cast<int64_t>(value);
}

// Copies the labels out; the index of the first outside [0, 256), if any.
template <typename T>
std::optional<int64_t> FirstBadLabel(const NpyArray &array,
                                     std::vector<uint8_t> &labels) {
  const uint8_t *data = array.data();
  for (int64_t i = 0; i < static_cast<int64_t>(labels.size()); ++i) {
    int64_t value = LabelAt<T>(data, i);
    if (value < 0 || value > 255)
      return i;
    labels[i] = static_cast<uint8_t>(value);
  }
  return std::nullopt;
}

// The label printed in an error, exactly as stored (uint64 values above
// int64's range too).
template <typename T> std::string LabelText(const NpyArray &array, int64_t i) {
  T value;
  std::memcpy(&value, array.data() + i * sizeof(T), sizeof(T));
  // Widened so that one-byte types print as numbers, not characters.
  if constexpr (std::is_signed_v<T>)
    return absl::StrCat(static_cast<int64_t>(value));
  else
    return absl::StrCat(static_cast<uint64_t>(value));
}

// Every element type trun reads, with how labels of that type are read
// (none for float32: labels must be integers).
struct TypeInfo {
  const char *code; // kind and size, e.g. "u1"
  NpyType type;
  int64_t bytes;
  std::optional<int64_t> (*first_bad_label)(const NpyArray &,
                                            std::vector<uint8_t> &);
  std::string (*label_text)(const NpyArray &, int64_t);
  bool arrays_only = false; // read by ReadNpyArray only
};

template <typename T> constexpr TypeInfo Integer(const char *code,
                                                 NpyType type) {
  return {code, type, sizeof(T), FirstBadLabel<T>, LabelText<T>};
}

constexpr TypeInfo kTypes[] = {
    Integer<uint8_t>("u1", NpyType::kUint8),
    Integer<int8_t>("i1", NpyType::kInt8),
    Integer<uint16_t>("u2", NpyType::kUint16),
    Integer<int16_t>("i2", NpyType::kInt16),
    Integer<uint32_t>("u4", NpyType::kUint32),
    Integer<int32_t>("i4", NpyType::kInt32),
    Integer<uint64_t>("u8", NpyType::kUint64),
    Integer<int64_t>("i8", NpyType::kInt64),
    {"f4", NpyType::kFloat32, 4, nullptr, nullptr},
    {"f8", NpyType::kFloat64, 8, nullptr, nullptr, true},
    {"f2", NpyType::kFloat16, 2, nullptr, nullptr, true},
    {"b1", NpyType::kBool, 1, nullptr, nullptr, true},
};

const TypeInfo &InfoOf(NpyType type) {
  for (const TypeInfo &info : kTypes)
    if (info.type == type)
      return info;
  return kTypes[0]; // unreachable: every NpyType is in kTypes
}

// Fills type and item_bytes from descr, or says why not.
// `any_type`: named arrays, which also take the arrays_only types.
absl::Status ParseDescr(const std::string &path, NpyArray &array,
                        bool any_type) {
  const std::string &descr = array.descr;
  auto unsupported = [&] {
    std::string name = TypeName(descr);
    return FileError(
        path, absl::StrCat("unsupported dtype '", descr, "'",
                           name == descr ? "" : absl::StrCat(" (", name, ")"),
                           any_type
                               ? "; trun reads bool, integer (8 to 64 bits) "
                                 "and float16/32/64 arrays"
                               : "; trun reads uint8 '|u1' or float32 '<f4' "
                                 "images and integer labels (|u1 |i1 <u2 "
                                 "<i2 <u4 <i4 <u8 <i8)"));
  };
  if (descr.size() < 3 ||
      std::string("<>|=").find(descr[0]) == std::string::npos)
    return unsupported();
  for (const TypeInfo &info : kTypes) {
    if (descr.substr(1) != info.code || (info.arrays_only && !any_type))
      continue;
    // Byte order matters only for multi-byte types ('|': not applicable).
    if (info.bytes > 1 && descr[0] == '>')
      return FileError(path, absl::StrCat("big-endian data ('", descr,
                                          "') is not supported; save with "
                                          "arr.astype('<",
                                          info.code, "')"));
    if (info.bytes > 1 && descr[0] == '|')
      return unsupported();
    array.type = info.type;
    array.item_bytes = info.bytes;
    return absl::OkStatus();
  }
  if (descr[0] == '>')
    return FileError(
        path, absl::StrCat("big-endian data ('", descr, "') is not supported"));
  return unsupported();
}

} // namespace

int64_t NpyArray::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d; // checked against overflow by ReadNpyFile
  return n;
}

bool IsNpyPath(const std::string &path) {
  return path.size() >= 4 && path.compare(path.size() - 4, 4, ".npy") == 0;
}

namespace {

absl::StatusOr<NpyArray> ReadNpy(const std::string &path, bool any_type) {
  absl::StatusOr<MappedFile> file = MappedFile::Open(path);
  if (!file.ok())
    return file.status();
  const uint8_t *bytes = file->data();
  size_t size = file->size();
  if (size < kMagicBytes + 2 || std::memcmp(bytes, kMagic, kMagicBytes) != 0)
    return FileError(path, "not a .npy file (no \\x93NUMPY magic)");

  NpyArray array;
  int major = bytes[6], minor = bytes[7];
  if ((major != 1 && major != 2 && major != 3) || minor != 0)
    return FileError(path, absl::StrCat("unsupported .npy version ", major, ".",
                                        minor, " (trun reads 1.0, 2.0, 3.0)"));
  array.version = major;
  size_t length_bytes = major == 1 ? 2 : 4;
  size_t prefix = kMagicBytes + 2 + length_bytes;
  if (size < prefix)
    return FileError(path, absl::StrCat("truncated .npy header (", size,
                                        " bytes, need ", prefix, ")"));
  size_t header_bytes = 0;
  for (size_t i = 0; i < length_bytes; ++i) // little-endian
    header_bytes |= size_t{bytes[8 + i]} << (8 * i);
  if (size - prefix < header_bytes)
    return FileError(path,
                     absl::StrCat("truncated .npy header (", size,
                                  " bytes, need ", prefix + header_bytes, ")"));
  absl::string_view header(reinterpret_cast<const char *>(bytes + prefix),
                           header_bytes);

  HeaderDict dict;
  HeaderParser parser(header);
  std::string malformed = parser.Parse(dict);
  if (parser.structured_descr())
    return FileError(path, absl::StrCat("unsupported dtype: structured arrays "
                                        "are not supported (header: ",
                                        Quote(header), ")"));
  if (!malformed.empty())
    return FileError(path, absl::StrCat("malformed .npy header: ", malformed,
                                        " (header: ", Quote(header), ")"));
  array.descr = *dict.descr;
  if (absl::Status s = ParseDescr(path, array, any_type); !s.ok())
    return s;
  if (*dict.fortran_order)
    return FileError(path, "Fortran-order arrays are not supported; save "
                           "with np.ascontiguousarray");
  array.shape = *dict.shape;

  // The product of the dimensions other than 0 must fit too: with a 0 in the
  // shape the data is empty, but products of the others (rows x cols of
  // images) are still computed.
  uint64_t expected = array.item_bytes, nonzero = array.item_bytes;
  for (int64_t d : array.shape) {
    if (d != 0 &&
        (__builtin_mul_overflow(nonzero, static_cast<uint64_t>(d), &nonzero) ||
         nonzero > uint64_t{INT64_MAX}))
      return FileError(
          path, absl::StrCat("shape ", ShapeText(array.shape), " overflows"));
    expected *= static_cast<uint64_t>(d);
  }
  uint64_t actual = size - prefix - header_bytes;
  if (actual != expected)
    return FileError(
        path,
        absl::StrCat("header says shape ", ShapeText(array.shape), " of '",
                     array.descr, "' = ", expected,
                     " bytes of data but the file has ", actual,
                     actual < expected ? " (truncated)" : " (trailing bytes)"));
  array.data_offset = prefix + header_bytes;
  array.file = std::move(*file);
  return array;
}

} // namespace

absl::StatusOr<NpyArray> ReadNpyFile(const std::string &path) {
  return ReadNpy(path, /*any_type=*/false);
}

absl::StatusOr<NpyArray> ReadNpyArray(const std::string &path) {
  return ReadNpy(path, /*any_type=*/true);
}

absl::Status ReadNpyImages(const std::string &path, LabeledImages &set) {
  absl::StatusOr<NpyArray> array = ReadNpyFile(path);
  if (!array.ok())
    return array.status();
  const std::vector<int64_t> &shape = array->shape;
  if (array->type != NpyType::kUint8 && array->type != NpyType::kFloat32)
    return FileError(path, absl::StrCat("images are '", array->descr, "' (",
                                        TypeName(array->descr),
                                        "); trun reads uint8 '|u1' or "
                                        "float32 '<f4' images"));
  if (shape.size() < 2)
    return FileError(path, absl::StrCat("images have shape ", ShapeText(shape),
                                        "; expected (count, values...) with "
                                        "at least 2 dimensions"));
  int64_t rows = 1;
  for (size_t d = 1; d + 1 < shape.size(); ++d)
    rows *= shape[d];
  int64_t cols = shape.back();
  if (rows == 0 || cols == 0)
    return FileError(
        path, absl::StrCat("images have shape ", ShapeText(shape), " (empty)"));
  set.images_path = path;
  set.count = shape[0];
  set.rows = rows;
  set.cols = cols;
  int64_t n = array->num_elements();
  if (array->type == NpyType::kUint8) {
    set.pixels.assign(array->data(), array->data() + n);
    set.float_pixels.clear();
    return absl::OkStatus();
  }
  set.pixels.clear();
  set.float_pixels.resize(n);
  if (n > 0)
    std::memcpy(set.float_pixels.data(), array->data(), n * sizeof(float));
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(set.float_pixels[i])) {
      float value = set.float_pixels[i];
      set.float_pixels.clear();
      return FileError(path,
                       absl::StrCat("value ", i, " (sample ", i / (rows * cols),
                                    ", element ", i % (rows * cols), ") is ",
                                    std::isnan(value) ? "nan"
                                    : value > 0       ? "inf"
                                                      : "-inf",
                                    "; float32 images must be finite"));
    }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<uint8_t>> ReadNpyLabels(const std::string &path) {
  absl::StatusOr<NpyArray> array = ReadNpyFile(path);
  if (!array.ok())
    return array.status();
  if (array->type == NpyType::kFloat32)
    return FileError(path, absl::StrCat("labels are '", array->descr,
                                        "' (float32); expected an integer "
                                        "type"));
  if (array->shape.size() != 1)
    return FileError(path,
                     absl::StrCat("labels have shape ", ShapeText(array->shape),
                                  "; expected (count,)"));
  const TypeInfo &info = InfoOf(array->type);
  std::vector<uint8_t> labels(array->shape[0]);
  if (std::optional<int64_t> bad = info.first_bad_label(*array, labels))
    return FileError(path, absl::StrCat("label ", info.label_text(*array, *bad),
                                        " at index ", *bad,
                                        " is out of range (labels must be in "
                                        "[0, 256))"));
  return labels;
}

} // namespace tcc::trun
