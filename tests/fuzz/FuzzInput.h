// Shared by the fuzz targets: the parsers under test read files, so each
// input is written to a per-process file (in /dev/shm when it exists, else
// /tmp) that is removed when the process exits.
#ifndef TCC_TESTS_FUZZ_FUZZINPUT_H
#define TCC_TESTS_FUZZ_FUZZINPUT_H

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace tcc_fuzz {

// A scratch directory of this process: /dev/shm/tcc-fuzz-PID (or /tmp/...).
inline const std::string &ScratchDir() {
  static const std::string dir = [] {
    struct stat st;
    std::string base = ::stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) &&
                               ::access("/dev/shm", W_OK) == 0
                           ? "/dev/shm"
                           : "/tmp";
    std::string d = base + "/tcc-fuzz-" + std::to_string(::getpid());
    ::mkdir(d.c_str(), 0700);
    return d;
  }();
  return dir;
}

// Removes the files named so far and the scratch directory at exit.
inline void NoteForCleanup(const std::string &path) {
  static std::string *paths[16];
  static int count = 0;
  for (int i = 0; i < count; ++i)
    if (*paths[i] == path)
      return;
  if (count == 0)
    std::atexit([] {
      for (int i = 0; i < count; ++i)
        ::unlink(paths[i]->c_str());
      ::rmdir(ScratchDir().c_str());
    });
  if (count < 16)
    paths[count++] = new std::string(path);
}

// Writes data[0, size) to ScratchDir()/name (replacing it) and returns the
// path. Aborts when the file cannot be written: that is a harness problem.
inline std::string WriteInput(const char *name, const uint8_t *data,
                              size_t size) {
  std::string path = ScratchDir() + "/" + name;
  NoteForCleanup(path);
  std::FILE *f = std::fopen(path.c_str(), "wb");
  if (!f || (size && std::fwrite(data, 1, size, f) != size) ||
      std::fclose(f) != 0) {
    std::perror(path.c_str());
    std::abort();
  }
  return path;
}

// Reads every byte of [p, p + n) so AddressSanitizer (or a SIGSEGV past a
// mapping) catches a range a parser handed out that is not really there.
inline uint64_t TouchBytes(const uint8_t *p, size_t n) {
  uint64_t sum = 0;
  for (size_t i = 0; i < n; ++i)
    sum += p[i];
  return sum;
}

// With TCC_FUZZ_VERBOSE=1 in the environment, each parser's result is
// printed ("fuzz_npy: ReadNpyFile: OK"): run a target on a seed file to see
// that the seed is valid (run.sh --check-seeds does this for all).
inline bool Verbose() {
  static const bool verbose = [] {
    const char *v = std::getenv("TCC_FUZZ_VERBOSE");
    return v && *v && *v != '0';
  }();
  return verbose;
}
inline void Note(const char *what, const absl::Status &status) {
  if (Verbose())
    std::fprintf(stderr, "%s: %s\n", what,
                 status.ok() ? "OK" : std::string(status.ToString()).c_str());
}
template <typename T>
inline void Note(const char *what, const absl::StatusOr<T> &result) {
  Note(what, result.status());
}

} // namespace tcc_fuzz

#endif // TCC_TESTS_FUZZ_FUZZINPUT_H
