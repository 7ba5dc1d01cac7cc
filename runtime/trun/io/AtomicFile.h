// Writing a file so that readers see either the old file or the whole new
// one: write PATH.tmp.<pid>, fsync it, rename it over PATH, fsync the
// directory. A crash or a failed write never leaves a partial PATH.
#ifndef TCC_RUNTIME_TRUN_IO_ATOMICFILE_H
#define TCC_RUNTIME_TRUN_IO_ATOMICFILE_H

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

#include <string>
#include <vector>

namespace tcc::trun {

// Writes the concatenation of `pieces` to `path` atomically. Errors name
// `path` ("cannot write PATH: <strerror>"); the temporary file is removed.
absl::Status WriteFileAtomically(const std::string &path,
                                 const std::vector<absl::string_view> &pieces);

// fsync of directory `dir`, which makes the renames and new entries in it
// durable. Errors: "cannot open DIR" / "cannot sync DIR" (with the errno).
absl::Status SyncDirectory(const std::string &dir);

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_IO_ATOMICFILE_H
