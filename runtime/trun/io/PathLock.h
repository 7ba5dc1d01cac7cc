// A run's claim on an output path it writes at the end (issue 36): a second
// trun given the same --save-weights path stops at its start, naming the
// first, instead of replacing that run's file hours later. The claim is a
// flock on PATH.lock (holding the owner's pid), removed on release; a lock
// file left by a killed run is harmless (the kernel dropped its flock).
#ifndef TCC_RUNTIME_TRUN_IO_PATHLOCK_H
#define TCC_RUNTIME_TRUN_IO_PATHLOCK_H

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include <memory>
#include <string>

namespace tcc::trun {

// "pid N" from a lock file's text (the holder writes its pid), else
// "pid unknown". Also read by checkpoint directories' D/.lock.
std::string LockHolder(int fd);

class PathLock {
public:
  // Locks `path`.lock. `flag` names the option in errors ("--save-weights"):
  //   "--save-weights W is being written by another trun (pid N): give each
  //    run its own"                     (the lock is held)
  //   "--save-weights W: cannot create W.lock: <strerror>"  (no such
  //    directory, not writable: said before training rather than after)
  // A file system without flock support is not an error: no lock is held.
  static absl::StatusOr<std::unique_ptr<PathLock>> Acquire(const std::string &path,
                                                           absl::string_view flag);
  ~PathLock(); // removes PATH.lock, then releases the flock

  PathLock(const PathLock &) = delete;
  PathLock &operator=(const PathLock &) = delete;

private:
  PathLock(std::string lock_path, int fd) : lock_path_(std::move(lock_path)), fd_(fd) {}
  std::string lock_path_;
  int fd_;
};

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_IO_PATHLOCK_H
