#include "runtime/trun/step/StepLibrary.h"

#include "runtime/trun/step/ElfCheck.h"
#include "runtime/trun/step/StepDescriptor.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

#include <cstring>
#include <fstream>
#include <dlfcn.h>
#include <sys/stat.h>

namespace tcc::trun {
namespace {

std::string LastDlError() {
  const char *error = dlerror();
  return error ? error : "unknown dynamic loader error";
}

} // namespace

namespace {

// Whether `path` is a model file (what tcc compile reads): no ELF header,
// and a model file's name (.pb, .pbtxt, .txtpb, .textproto).
bool IsModelFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  in.read(magic, sizeof magic);
  if (in.gcount() == 4 && std::memcmp(magic, "\x7f" "ELF", 4) == 0)
    return false;
  for (const char *extension : {".pb", ".pbtxt", ".txtpb", ".textproto"})
    if (absl::EndsWith(path, extension))
      return true;
  return false;
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
  // A model file where the compiled step belongs: say what to run first.
  if (IsModelFile(path))
    return absl::InvalidArgumentError(absl::StrCat(
        "'", path, "' is a model file, not a compiled step: compile it first (tcc compile ", path,
        " -o step.so), then run trun step.so"));
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
