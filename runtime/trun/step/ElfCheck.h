// Checks a step library's ELF structure before dlopen maps it.
//
// dlopen maps every loadable segment straight from the file; a segment that
// runs past the end of a cut-short file (an interrupted copy, a full disk)
// is mapped anyway, and the first touch of its missing pages kills the
// process with SIGBUS. Checking the headers against the file size first
// turns that into an error.
#ifndef TCC_RUNTIME_TRUN_STEP_ELFCHECK_H
#define TCC_RUNTIME_TRUN_STEP_ELFCHECK_H

#include "absl/status/status.h"

#include <string>

namespace tcc::trun {

// Checks that `path` is a whole 64-bit little-endian ELF shared object
// (ET_DYN) for this machine: the ELF header, the program header table and
// every segment's file bytes [p_offset, p_offset + p_filesz), and the
// section header table if there is one, all inside the file. The error is
// one line "PATH is truncated or not a step library: WHAT" (DataLoss).
absl::Status CheckStepLibraryFile(const std::string &path);

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_STEP_ELFCHECK_H
