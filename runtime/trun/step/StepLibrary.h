// Loads a compiled step.so and hands out its checked descriptor.
#ifndef TCC_RUNTIME_TRUN_STEP_STEPLIBRARY_H
#define TCC_RUNTIME_TRUN_STEP_STEPLIBRARY_H

#include "tcc/step_abi.h"

#include "absl/status/statusor.h"

#include <memory>
#include <string>

namespace tcc::trun {

class StepLibrary {
public:
  // dlopens `path`, resolves TCC_STEP_DESCRIPTOR_SYMBOL and validates the
  // descriptor (ABI version first). Errors name the file.
  static absl::StatusOr<std::unique_ptr<StepLibrary>>
  Open(const std::string &path);

  ~StepLibrary();
  StepLibrary(const StepLibrary &) = delete;
  StepLibrary &operator=(const StepLibrary &) = delete;

  const tcc_step_descriptor &descriptor() const { return *descriptor_; }
  const std::string &path() const { return path_; }

private:
  StepLibrary(std::string path, void *handle,
              const tcc_step_descriptor *descriptor)
      : path_(std::move(path)), handle_(handle), descriptor_(descriptor) {}

  std::string path_;
  void *handle_;
  const tcc_step_descriptor *descriptor_;
};

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_STEP_STEPLIBRARY_H
