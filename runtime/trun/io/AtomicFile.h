// Writing a file so that readers see either the old file or the whole new
// one: write PATH.tmp.<pid>, fsync it, rename it over PATH, fsync the
// directory. A crash or a failed write never leaves a partial PATH.
#ifndef TCC_RUNTIME_TRUN_IO_ATOMICFILE_H
#define TCC_RUNTIME_TRUN_IO_ATOMICFILE_H

#include "runtime/trun/io/FileChecksum.h"

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

#include <string>
#include <vector>

namespace tcc::trun {

// Writes the concatenation of `pieces` to `path` atomically. Errors name
// `path` ("cannot write PATH: <strerror>"); the temporary file is removed.
// With `written`, it receives the size and CRC32 of the bytes written,
// computed on the way, so a caller recording them need not read the file
// back.
absl::Status WriteFileAtomically(const std::string &path,
                                 const std::vector<absl::string_view> &pieces,
                                 FileChecksum *written = nullptr);

// fsync of directory `dir`, which makes the renames and new entries in it
// durable. Errors: "cannot open DIR" / "cannot sync DIR" (with the errno).
absl::Status SyncDirectory(const std::string &dir);

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_IO_ATOMICFILE_H
