// Size and CRC32 of a file's bytes: what a checkpoint's state.json records
// of its safetensors files. The writer gets them while writing
// (WriteFileAtomically), a reader by reading the file (ChecksumOfFile); both
// go through Crc32, so the two agree byte for byte.
#ifndef TCC_RUNTIME_TRUN_IO_FILECHECKSUM_H
#define TCC_RUNTIME_TRUN_IO_FILECHECKSUM_H

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include <cstdint>
#include <string>

namespace tcc::trun {

struct FileChecksum {
  int64_t bytes = 0;
  uint32_t crc32 = 0; // zlib's crc32
};

// The CRC32 of `bytes` continuing `crc` (0 starts a new one), so a file
// written in pieces is checksummed piece by piece.
uint32_t Crc32(absl::string_view bytes, uint32_t crc = 0);

// Maps `path` and checksums it. Errors are MappedFile::Open's.
absl::StatusOr<FileChecksum> ChecksumOfFile(const std::string &path);

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_IO_FILECHECKSUM_H
