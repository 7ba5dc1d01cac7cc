// A read-only memory mapping of a whole file, for files checked against
// their size and copied out at load (safetensors, checkpoints, .npy). The
// mapping dies with SIGBUS if the file shrinks under it: inputs read during
// a whole run use ReadOnlyFile instead.
#ifndef TCC_RUNTIME_TRUN_IO_MAPPEDFILE_H
#define TCC_RUNTIME_TRUN_IO_MAPPEDFILE_H

#include "absl/status/statusor.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace tcc::trun {

class MappedFile {
public:
  // Maps `path` read-only. An empty file maps to size 0 and a null data().
  // Errors: "cannot open PATH: <strerror>", "PATH is a directory".
  static absl::StatusOr<MappedFile> Open(const std::string &path);

  MappedFile() = default;
  MappedFile(MappedFile &&other) noexcept;
  MappedFile &operator=(MappedFile &&other) noexcept;
  MappedFile(const MappedFile &) = delete;
  MappedFile &operator=(const MappedFile &) = delete;
  ~MappedFile();

  const uint8_t *data() const { return data_; }
  size_t size() const { return size_; }
  const std::string &path() const { return path_; }

private:
  void Reset();

  std::string path_;
  const uint8_t *data_ = nullptr;
  size_t size_ = 0;
};

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_IO_MAPPEDFILE_H
