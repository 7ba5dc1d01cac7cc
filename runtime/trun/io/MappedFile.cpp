#include "runtime/trun/io/MappedFile.h"

#include "runtime/trun/io/ReadOnlyFile.h"

#include "absl/strings/str_cat.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace tcc::trun {

absl::StatusOr<MappedFile> MappedFile::Open(const std::string &path) {
  absl::StatusOr<ReadOnlyFile> opened = ReadOnlyFile::Open(path);
  if (!opened.ok())
    return opened.status();
  MappedFile file;
  file.path_ = path;
  file.size_ = opened->size();
  if (file.size_ > 0) {
    void *map =
        mmap(nullptr, file.size_, PROT_READ, MAP_PRIVATE, opened->fd(), 0);
    if (map == MAP_FAILED)
      return absl::InternalError(
          absl::StrCat("cannot map ", path, ": ", std::strerror(errno)));
    file.data_ = static_cast<const uint8_t *>(map);
  }
  return file; // the mapping stays valid once `opened` closes the descriptor
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
