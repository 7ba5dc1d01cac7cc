// A file opened read-only and read with pread: for inputs trun reads during
// a whole run (token shards). A memory mapping of such a file kills the
// process with SIGBUS when the file shrinks under it; a read reports the
// short read as an error instead.
#ifndef TCC_RUNTIME_TRUN_IO_READONLYFILE_H
#define TCC_RUNTIME_TRUN_IO_READONLYFILE_H

#include "absl/status/statusor.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace tcc::trun {

class ReadOnlyFile {
public:
  // Opens `path` and records its size. Errors: "cannot open PATH:
  // <strerror>" (NotFound for a missing file), "PATH is a directory, not a
  // file".
  static absl::StatusOr<ReadOnlyFile> Open(const std::string &path);

  ReadOnlyFile() = default;
  ReadOnlyFile(ReadOnlyFile &&other) noexcept;
  ReadOnlyFile &operator=(ReadOnlyFile &&other) noexcept;
  ReadOnlyFile(const ReadOnlyFile &) = delete;
  ReadOnlyFile &operator=(const ReadOnlyFile &) = delete;
  ~ReadOnlyFile();

  int fd() const { return fd_; }
  // The size when opened.
  size_t size() const { return size_; }
  const std::string &path() const { return path_; }

  // Reads exactly `size` bytes at `offset` (safe from several threads).
  // Error (DataLoss): "PATH: cannot read bytes A to B: the file is now N
  // bytes (truncated while trun was reading it?)", or the read's strerror.
  absl::Status ReadAt(uint64_t offset, size_t size, void *out) const;

private:
  void Reset();

  std::string path_;
  int fd_ = -1;
  size_t size_ = 0;
};

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_IO_READONLYFILE_H
