#include "runtime/trun/io/MappedFile.h"

#include "absl/strings/str_cat.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace tcc::trun {

absl::StatusOr<MappedFile> MappedFile::Open(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int error = errno;
    std::string message =
        absl::StrCat("cannot open ", path, ": ", std::strerror(error));
    return error == ENOENT ? absl::NotFoundError(message)
                           : absl::PermissionDeniedError(message);
  }
  struct stat info;
  if (fstat(fd, &info) != 0) {
    int error = errno;
    ::close(fd);
    return absl::InternalError(
        absl::StrCat("cannot stat ", path, ": ", std::strerror(error)));
  }
  if (S_ISDIR(info.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is a directory, not a file"));
  }
  MappedFile file;
  file.path_ = path;
  file.size_ = static_cast<size_t>(info.st_size);
  if (file.size_ > 0) {
    void *map = mmap(nullptr, file.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
      int error = errno;
      ::close(fd);
      return absl::InternalError(
          absl::StrCat("cannot map ", path, ": ", std::strerror(error)));
    }
    file.data_ = static_cast<const uint8_t *>(map);
  }
  ::close(fd); // the mapping stays valid without the descriptor
  return file;
}

MappedFile::MappedFile(MappedFile &&other) noexcept { *this = std::move(other); }

MappedFile &MappedFile::operator=(MappedFile &&other) noexcept {
  if (this != &other) {
    Reset();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

MappedFile::~MappedFile() { Reset(); }

void MappedFile::Reset() {
  if (data_)
    munmap(const_cast<uint8_t *>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

} // namespace tcc::trun
