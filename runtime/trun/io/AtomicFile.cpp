#include "runtime/trun/io/AtomicFile.h"

#include "absl/strings/str_cat.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace tcc::trun {
namespace {

absl::Status WriteError(const std::string &path, int error) {
  return absl::PermissionDeniedError(
      absl::StrCat("cannot write ", path, ": ", std::strerror(error)));
}

// Writes all of `bytes`, retrying short writes and EINTR.
bool WriteAll(int fd, absl::string_view bytes) {
  const char *p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    p += n;
    left -= static_cast<size_t>(n);
  }
  return true;
}

std::string DirectoryOf(const std::string &path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

} // namespace

absl::Status WriteFileAtomically(const std::string &path,
                                 const std::vector<absl::string_view> &pieces,
                                 FileChecksum *written) {
  std::string temp = absl::StrCat(path, ".tmp.", ::getpid());
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return WriteError(path, errno);
  FileChecksum checksum;
  for (absl::string_view piece : pieces) {
    if (!WriteAll(fd, piece)) {
      int error = errno ? errno : EIO;
      ::close(fd);
      ::unlink(temp.c_str());
      return WriteError(path, error);
    }
    if (written) {
      checksum.bytes += static_cast<int64_t>(piece.size());
      checksum.crc32 = Crc32(piece, checksum.crc32);
    }
  }
  int error = ::fsync(fd) == 0 ? 0 : errno;
  if (::close(fd) != 0 && error == 0)
    error = errno;
  if (error != 0) {
    ::unlink(temp.c_str());
    return WriteError(path, error);
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    error = errno;
    ::unlink(temp.c_str());
    return WriteError(path, error);
  }
  // The rename itself is durable only once the directory entry is synced;
  // the file is complete either way, so a failed sync is not an error here.
  SyncDirectory(DirectoryOf(path)).IgnoreError();
  if (written)
    *written = checksum;
  return absl::OkStatus();
}

absl::Status SyncDirectory(const std::string &dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot open ", dir));
  int error = ::fsync(fd) == 0 ? 0 : errno;
  ::close(fd);
  if (error != 0)
    return absl::ErrnoToStatus(error, absl::StrCat("cannot sync ", dir));
  return absl::OkStatus();
}

} // namespace tcc::trun
