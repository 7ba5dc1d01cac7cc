// Builds step.so from generated C++ with the system compiler.
#ifndef TCC_COMPILER_DRIVER_HOSTCOMPILER_H
#define TCC_COMPILER_DRIVER_HOSTCOMPILER_H

#include <optional>
#include <string>
#include <vector>

namespace tcc {

struct HostCompileOptions {
  std::string compiler;       // default: $CXX, else "c++"
  // -march=: "" is $TCC_CPU_ARCH when set, else "native" (the library runs
  // where it is built); "none" passes no -march (the compiler's baseline).
  std::string cpuArch;
  std::vector<std::string> extraFlags;
};

// The host C++ compiler to run: `requested`, else $CXX, else "c++", found
// on PATH; nullopt with `error` set when there is none.
std::optional<std::string> findHostCompiler(const std::string &requested, std::string &error);

// The -march value `requested` resolves to (see HostCompileOptions::cpuArch):
// "native", a name such as "x86-64-v3", or "none"; an error when the name
// (from the flag or $TCC_CPU_ARCH) holds anything but letters, digits, '-',
// '_' and '.'.
std::optional<std::string> resolveCpuArch(const std::string &requested, std::string &error);

// `args` joined by spaces, for error messages.
std::string commandLine(const std::vector<std::string> &args);

// Compiles `source` into the shared library `output` (written atomically).
// On failure returns false and fills `error` with the compiler's message.
bool compileSharedLibrary(const std::string &source, const std::string &output,
                          const HostCompileOptions &options, std::string &error);

} // namespace tcc

#endif
