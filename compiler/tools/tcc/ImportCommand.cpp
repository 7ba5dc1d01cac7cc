// `tcc import MODEL.onnx -o MODEL.pb [recipe flags]`: runs the Python front
// end's ONNX importer (python/tcc/onnx_import.py, docs/pytorch-import.md)
// with every argument passed through, so its flags, help and errors are the
// importer's own. The importer needs Debian's python3 with python3-onnx and
// numpy; the python/ folder is found from TCC_PYTHON_PATH, else the source
// tree this tcc was built from (TCC_SOURCE_DIR), else next to the binary
// (BIN/../python, BIN/../../python, BIN/../share/tcc/python).
#include "compiler/tools/tcc/ImportCommand.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#ifndef TCC_SOURCE_DIR
#define TCC_SOURCE_DIR ""
#endif

namespace tcc {
namespace {

bool isFile(const std::string &path) { return access(path.c_str(), R_OK) == 0; }

std::string executableDir(const char *argv0) {
  std::vector<char> buf(4096);
  ssize_t n = readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  std::string exe = n > 0 ? std::string(buf.data(), n) : std::string(argv0 ? argv0 : "");
  size_t slash = exe.rfind('/');
  return slash == std::string::npos ? "." : exe.substr(0, slash);
}

// The folder holding the `tcc` Python package, or "" when none is found.
std::string pythonDir(const char *argv0) {
  const std::string marker = "/tcc/onnx_import.py";
  if (const char *env = std::getenv("TCC_PYTHON_PATH"); env && *env)
    return env;  // the user's word: a wrong one is Python's error
  std::vector<std::string> candidates;
  if (*TCC_SOURCE_DIR)
    candidates.push_back(std::string(TCC_SOURCE_DIR) + "/python");
  std::string bin = executableDir(argv0);
  for (const char *rel : {"/../python", "/../../python", "/../share/tcc/python"})
    candidates.push_back(bin + rel);
  for (const std::string &dir : candidates)
    if (isFile(dir + marker))
      return dir;
  return "";
}

} // namespace

int importCommandMain(int argc, char **argv, const char *argv0) {
  std::string dir = pythonDir(argv0);
  if (dir.empty()) {
    std::fprintf(stderr,
                 "tcc: error: import: cannot find the Python front end (python/tcc/"
                 "onnx_import.py) in the source tree or next to this tcc; set "
                 "TCC_PYTHON_PATH to the repository's python/ folder\n");
    return 1;
  }
  std::string python = "/usr/bin/python3";
  if (const char *env = std::getenv("TCC_PYTHON"); env && *env)
    python = env;
  std::string path = dir;
  if (const char *old = std::getenv("PYTHONPATH"); old && *old)
    path += ":" + std::string(old);
  setenv("PYTHONPATH", path.c_str(), 1);
  std::vector<char *> args;
  std::string dashM = "-m", module = "tcc.onnx_import", prog = "--prog=tcc import";
  args.push_back(python.data());
  args.push_back(dashM.data());
  args.push_back(module.data());
  args.push_back(prog.data());
  for (int i = 0; i < argc; ++i)
    args.push_back(argv[i]);
  args.push_back(nullptr);
  execv(python.c_str(), args.data());
  std::fprintf(stderr, "tcc: error: import: cannot run %s: %s (set TCC_PYTHON to a python3 "
               "with the onnx and numpy packages)\n", python.c_str(), std::strerror(errno));
  return 1;
}

} // namespace tcc
