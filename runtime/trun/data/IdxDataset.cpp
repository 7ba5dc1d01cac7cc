#include "runtime/trun/data/IdxDataset.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

namespace tcc::trun {
namespace {

absl::Status FileError(const std::string &path, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", message));
}

absl::Status OpenError(const std::string &path, int error) {
  std::string message =
      absl::StrCat("cannot open ", path, ": ", std::strerror(error));
  return error == ENOENT ? absl::NotFoundError(message)
                         : absl::InvalidArgumentError(message);
}

struct FileCloser {
  void operator()(std::FILE *f) const { std::fclose(f); }
};

absl::StatusOr<std::vector<uint8_t>> ReadRaw(const std::string &path) {
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "rb"));
  if (!file)
    return OpenError(path, errno);
  std::vector<uint8_t> bytes;
  uint8_t chunk[1 << 16];
  size_t n;
  while ((n = std::fread(chunk, 1, sizeof chunk, file.get())) > 0)
    bytes.insert(bytes.end(), chunk, chunk + n);
  if (std::ferror(file.get()))
    return FileError(path, absl::StrCat("read error: ", std::strerror(errno)));
  return bytes;
}

absl::StatusOr<std::vector<uint8_t>> ReadGzip(const std::string &path) {
  gzFile file = gzopen(path.c_str(), "rb");
  if (!file)
    return OpenError(path, errno);
  std::vector<uint8_t> bytes;
  std::vector<uint8_t> chunk(1 << 20);
  int n;
  while ((n = gzread(file, chunk.data(), static_cast<unsigned>(chunk.size()))) >
         0)
    bytes.insert(bytes.end(), chunk.begin(), chunk.begin() + n);
  int error = Z_OK;
  const char *message = gzerror(file, &error);
  std::string reason = message ? message : "unknown zlib error";
  // zlib prefixes its messages with the path; the caller adds it already.
  if (reason.rfind(path + ": ", 0) == 0)
    reason.erase(0, path.size() + 2);
  gzclose(file);
  // A cut-off stream reports Z_BUF_ERROR ("unexpected end of file").
  if (n < 0 || error != Z_OK)
    return FileError(path, error == Z_BUF_ERROR
                               ? "truncated gzip data (" + reason + ")"
                               : "corrupt gzip data (" + reason + ")");
  return bytes;
}

bool HasGzipMagic(const std::string &path) {
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "rb"));
  uint8_t magic[2] = {0, 0};
  return file && std::fread(magic, 1, 2, file.get()) == 2 && magic[0] == 0x1f &&
         magic[1] == 0x8b;
}

uint32_t BigEndian32(const uint8_t *p) {
  return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 |
         uint32_t{p[3]};
}

const char *MagicMeaning(uint32_t magic) {
  switch (magic) {
  case kIdxImagesMagic:
    return "IDX images";
  case kIdxLabelsMagic:
    return "IDX labels";
  default:
    return "IDX";
  }
}

} // namespace

absl::StatusOr<IdxArray> ReadIdxFile(const std::string &path,
                                     uint32_t expected_magic) {
  absl::StatusOr<std::vector<uint8_t>> bytes =
      HasGzipMagic(path) ? ReadGzip(path) : ReadRaw(path);
  if (!bytes.ok())
    return bytes.status();
  const std::vector<uint8_t> &data = *bytes;

  if (data.size() < 4)
    return FileError(path, absl::StrCat("not an IDX file (", data.size(),
                                        " bytes, shorter than the header)"));
  uint32_t magic = BigEndian32(data.data());
  if (magic != expected_magic)
    return FileError(
        path,
        absl::StrFormat("bad magic 0x%08x, expected 0x%08x (%s file)", magic,
                        expected_magic, MagicMeaning(expected_magic)));

  IdxArray array;
  size_t rank = expected_magic & 0xff;
  size_t header_bytes = 4 + 4 * rank;
  if (data.size() < header_bytes)
    return FileError(path, absl::StrCat("truncated IDX header (", data.size(),
                                        " bytes, need ", header_bytes, ")"));
  // The dimensions other than 0 must multiply within int64 too: with a 0
  // count the data is empty, but rows x cols of the images is still used.
  uint64_t expected_values = 1, nonzero = 1;
  for (size_t d = 0; d < rank; ++d) {
    uint32_t dim = BigEndian32(data.data() + 4 + 4 * d);
    array.dims.push_back(dim);
    if (dim != 0 && (__builtin_mul_overflow(nonzero, uint64_t{dim}, &nonzero) ||
                     nonzero > uint64_t{INT64_MAX}))
      return FileError(path, "IDX dimensions overflow");
    expected_values *= dim;
  }
  uint64_t actual_values = data.size() - header_bytes;
  if (actual_values != expected_values)
    return FileError(
        path,
        absl::StrCat("header says ", absl::StrJoin(array.dims, "x"), " = ",
                     expected_values, " bytes of data but the file has ",
                     actual_values,
                     actual_values < expected_values ? " (truncated)"
                                                     : " (trailing bytes)"));
  // Drop the header in place: no second copy of a 47 MB image file.
  array.values = std::move(*bytes);
  array.values.erase(array.values.begin(), array.values.begin() + header_bytes);
  return array;
}

absl::Status ReadIdxImages(const std::string &path, LabeledImages &set) {
  absl::StatusOr<IdxArray> images = ReadIdxFile(path, kIdxImagesMagic);
  if (!images.ok())
    return images.status();
  set.images_path = path;
  set.count = images->dims[0];
  set.rows = images->dims[1];
  set.cols = images->dims[2];
  if (set.rows == 0 || set.cols == 0)
    return FileError(path, absl::StrCat("images are ", set.rows, "x", set.cols,
                                        " (empty)"));
  set.pixels = std::move(images->values);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<uint8_t>> ReadIdxLabels(const std::string &path) {
  absl::StatusOr<IdxArray> labels = ReadIdxFile(path, kIdxLabelsMagic);
  if (!labels.ok())
    return labels.status();
  return std::move(labels->values);
}

absl::Status AttachLabels(LabeledImages &set, const std::string &labels_path,
                          std::vector<uint8_t> labels) {
  if (static_cast<int64_t>(labels.size()) != set.count)
    return absl::InvalidArgumentError(
        absl::StrCat(labels_path, ": ", labels.size(), " labels but ",
                     set.images_path, " has ", set.count, " images"));
  set.labels_path = labels_path;
  set.labels = std::move(labels);
  return absl::OkStatus();
}

} // namespace tcc::trun
