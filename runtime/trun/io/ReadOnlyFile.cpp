#include "runtime/trun/io/ReadOnlyFile.h"

#include "absl/strings/str_cat.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace tcc::trun {

absl::StatusOr<ReadOnlyFile> ReadOnlyFile::Open(const std::string &path) {
  ReadOnlyFile file;
  file.path_ = path;
  file.fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (file.fd_ < 0) {
    int error = errno;
    std::string message =
        absl::StrCat("cannot open ", path, ": ", std::strerror(error));
    return error == ENOENT ? absl::NotFoundError(message)
                           : absl::PermissionDeniedError(message);
  }
  struct stat info;
  if (fstat(file.fd_, &info) != 0)
    return absl::InternalError(
        absl::StrCat("cannot stat ", path, ": ", std::strerror(errno)));
  if (S_ISDIR(info.st_mode))
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is a directory, not a file"));
  file.size_ = static_cast<size_t>(info.st_size);
  return file;
}

absl::Status ReadOnlyFile::ReadAt(uint64_t offset, size_t size,
                                  void *out) const {
  auto *bytes = static_cast<char *>(out);
  uint64_t at = offset;
  size_t left = size;
  while (left > 0) {
    ssize_t n = pread(fd_, bytes, left, static_cast<off_t>(at));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return absl::DataLossError(
          absl::StrCat(path_, ": cannot read bytes ", offset, " to ",
                       offset + size, ": ", std::strerror(errno)));
    if (n == 0) {
      struct stat info;
      std::string now = fstat(fd_, &info) == 0
                            ? absl::StrCat(info.st_size, " bytes")
                            : std::string("shorter");
      return absl::DataLossError(absl::StrCat(
          path_, ": cannot read bytes ", offset, " to ", offset + size,
          ": the file is now ", now, ", was ", size_,
          " when opened (truncated while trun was reading it?)"));
    }
    bytes += n;
    at += static_cast<uint64_t>(n);
    left -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

ReadOnlyFile::ReadOnlyFile(ReadOnlyFile &&other) noexcept {
  *this = std::move(other);
}

ReadOnlyFile &ReadOnlyFile::operator=(ReadOnlyFile &&other) noexcept {
  if (this != &other) {
    Reset();
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

ReadOnlyFile::~ReadOnlyFile() { Reset(); }

void ReadOnlyFile::Reset() {
  if (fd_ >= 0)
    ::close(fd_);
  fd_ = -1;
  size_ = 0;
}

} // namespace tcc::trun
