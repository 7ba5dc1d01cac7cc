#include "runtime/trun/io/FileChecksum.h"

#include "runtime/trun/io/MappedFile.h"

#include <zlib.h>

#include <algorithm>

namespace tcc::trun {

uint32_t Crc32(absl::string_view bytes, uint32_t crc) {
  const auto *data = reinterpret_cast<const Bytef *>(bytes.data());
  size_t size = bytes.size();
  uLong value = crc;
  while (size > 0) { // crc32() takes a uInt length
    uInt n = static_cast<uInt>(std::min<size_t>(size, 1u << 30));
    value = ::crc32(value, data, n);
    data += n;
    size -= n;
  }
  return static_cast<uint32_t>(value);
}

absl::StatusOr<FileChecksum> ChecksumOfFile(const std::string &path) {
  absl::StatusOr<MappedFile> file = MappedFile::Open(path);
  if (!file.ok())
    return file.status();
  return FileChecksum{
      static_cast<int64_t>(file->size()),
      Crc32(absl::string_view(reinterpret_cast<const char *>(file->data()),
                              file->size()))};
}

} // namespace tcc::trun
