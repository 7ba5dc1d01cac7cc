#include "runtime/trun/io/PathLock.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

#include <cerrno>
#include <charconv>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace tcc::trun {
std::string LockHolder(int fd) {
  char text[32] = {};
  ssize_t n = ::pread(fd, text, sizeof(text) - 1, 0);
  const char *end = text + (n > 0 ? n : 0);
  while (end > text && (end[-1] == '\n' || end[-1] == ' '))
    --end;
  long long pid = 0;
  auto [stop, error] = std::from_chars(text, end, pid);
  if (end > text && error == std::errc() && stop == end && pid > 0)
    return absl::StrCat("pid ", pid);
  return "pid unknown";
}

absl::StatusOr<std::unique_ptr<PathLock>> PathLock::Acquire(const std::string &path,
                                                            absl::string_view flag) {
  const std::string lock = path + ".lock";
  // The owner removes the file when it lets go, so a lock taken on a file
  // that was removed (or replaced) in between is no claim: take it again.
  for (int attempt = 0; attempt < 100; ++attempt) {
    int fd = ::open(lock.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    if (fd < 0)
      return absl::ErrnoToStatus(errno, absl::StrCat(flag, " ", path, ": cannot create ", lock));
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int error = errno;
      if (error != EWOULDBLOCK) { // no locks on this file system: go on
        ::close(fd);
        return std::unique_ptr<PathLock>();
      }
      std::string holder = LockHolder(fd);
      ::close(fd);
      return absl::FailedPreconditionError(
          absl::StrCat(flag, " ", path, " is being written by another trun (", holder,
                       "): give each run its own"));
    }
    struct stat held, named;
    if (::fstat(fd, &held) == 0 && ::stat(lock.c_str(), &named) == 0 &&
        held.st_dev == named.st_dev && held.st_ino == named.st_ino) {
      // The pid only names the holder in the other run's error: a failed
      // write (a full disk) leaves "pid unknown", the flock still holds.
      std::string pid = absl::StrCat(::getpid(), "\n");
      if (::ftruncate(fd, 0) == 0)
        (void)::pwrite(fd, pid.data(), pid.size(), 0);
      return std::unique_ptr<PathLock>(new PathLock(lock, fd));
    }
    ::close(fd);
  }
  return absl::UnavailableError(
      absl::StrCat(flag, " ", path, ": ", lock, " kept being replaced while locking it"));
}

PathLock::~PathLock() {
  // Unlinked while still held: a waiting process that opened the old file
  // sees it is gone (Acquire's inode check) and takes the new one.
  ::unlink(lock_path_.c_str());
  ::close(fd_);
}

} // namespace tcc::trun
