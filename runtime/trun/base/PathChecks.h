// Whether a path exists / is a directory (stat; no exceptions), for the data
// arguments' forms (a folder, a file pair, named arrays).
#ifndef TCC_RUNTIME_TRUN_BASE_PATHCHECKS_H
#define TCC_RUNTIME_TRUN_BASE_PATHCHECKS_H

#include <string>

#include <sys/stat.h>

namespace tcc::trun {

inline bool IsDirectory(const std::string &path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

inline bool Exists(const std::string &path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0;
}

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_BASE_PATHCHECKS_H
