#include "runtime/trun/step/StepLibrary.h"

#include "runtime/trun/step/ElfCheck.h"
#include "runtime/trun/step/StepDescriptor.h"

#include "absl/strings/str_cat.h"

#include <dlfcn.h>
#include <sys/stat.h>

namespace tcc::trun {
namespace {

std::string LastDlError() {
  const char *error = dlerror();
  return error ? error : "unknown dynamic loader error";
}

} // namespace

absl::StatusOr<std::unique_ptr<StepLibrary>>
StepLibrary::Open(const std::string &path) {
  struct stat info;
  if (stat(path.c_str(), &info) != 0)
    return absl::NotFoundError(
        absl::StrCat("step library '", path, "' not found"));
  if (!S_ISREG(info.st_mode))
    return absl::InvalidArgumentError(
        absl::StrCat("step library '", path, "' is not a regular file"));
  // dlopen of a cut-short file dies with SIGBUS instead of failing.
  if (absl::Status status = CheckStepLibraryFile(path); !status.ok())
    return status;

  // Without a slash dlopen searches the library path instead of the file the
  // user named.
  std::string load_path =
      path.find('/') == std::string::npos ? "./" + path : path;
  void *handle = dlopen(load_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle)
    return absl::InvalidArgumentError(
        absl::StrCat("cannot load step library '", path, "': ", LastDlError()));

  dlerror(); // clear a stale error so the dlsym check below is exact
  void *symbol = dlsym(handle, TCC_STEP_DESCRIPTOR_SYMBOL);
  if (!symbol) {
    dlclose(handle);
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a tcc step library (no '",
                     TCC_STEP_DESCRIPTOR_SYMBOL, "' symbol)"));
  }
  auto get_descriptor = reinterpret_cast<tcc_step_get_descriptor_fn>(symbol);
  const tcc_step_descriptor *descriptor = get_descriptor();
  if (!descriptor) {
    dlclose(handle);
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": ", TCC_STEP_DESCRIPTOR_SYMBOL, "() returned null"));
  }
  if (absl::Status status = ValidateDescriptor(*descriptor, path);
      !status.ok()) {
    dlclose(handle);
    return status;
  }
  return std::unique_ptr<StepLibrary>(
      new StepLibrary(path, handle, descriptor));
}

StepLibrary::~StepLibrary() { dlclose(handle_); }

} // namespace tcc::trun
