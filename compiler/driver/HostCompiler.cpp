#include "compiler/driver/HostCompiler.h"

#include <cstdlib>

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

namespace tcc {

std::optional<std::string> findHostCompiler(const std::string &requested, std::string &error) {
  std::string compiler = requested;
  if (compiler.empty())
    compiler = std::getenv("CXX") ? std::getenv("CXX") : "c++";
  llvm::ErrorOr<std::string> exe = llvm::sys::findProgramByName(compiler);
  if (!exe) {
    error = "host C++ compiler '" + compiler + "' not found (set CXX or --cxx)";
    return std::nullopt;
  }
  return *exe;
}

std::optional<std::string> resolveCpuArch(const std::string &requested, std::string &error) {
  std::string arch = requested;
  std::string from = "--cpu-arch";
  if (arch.empty()) {
    const char *env = std::getenv("TCC_CPU_ARCH");
    arch = env && *env ? env : "native";
    from = "TCC_CPU_ARCH";
  }
  for (char c : arch) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.';
    if (!ok) {
      error = from + " '" + arch + "' is not a CPU name (e.g. native, x86-64-v3, none)";
      return std::nullopt;
    }
  }
  return arch;
}

std::string commandLine(const std::vector<std::string> &args) {
  std::string s;
  for (const std::string &a : args)
    s += (s.empty() ? "" : " ") + a;
  return s;
}

bool compileSharedLibrary(const std::string &source, const std::string &output,
                          const HostCompileOptions &options, std::string &error) {
  std::optional<std::string> exe = findHostCompiler(options.compiler, error);
  if (!exe)
    return false;
  std::optional<std::string> arch = resolveCpuArch(options.cpuArch, error);
  if (!arch)
    return false;

  llvm::SmallString<128> dir;
  if (std::error_code ec = llvm::sys::fs::createUniqueDirectory("tcc-build", dir)) {
    error = "cannot create a temporary directory: " + ec.message();
    return false;
  }
  std::string src = (dir + "/step.cpp").str();
  std::string log = (dir + "/compiler.log").str();
  // Same directory as the output, so the final rename is atomic.
  std::string tmpOut = output + ".tmp";
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(src, ec);
    if (ec) {
      error = "cannot write " + src + ": " + ec.message();
      return false;
    }
    os << source;
    // Closed here so a failed write (a full disk, ulimit -f) is this error,
    // not LLVM's "IO failure" abort in the stream's destructor.
    os.close();
    if (os.has_error()) {
      error = "cannot write " + src + ": " + os.error().message();
      os.clear_error();
      llvm::sys::fs::remove(src);
      llvm::sys::fs::remove(dir);
      return false;
    }
  }

  // -fopenmp: the generated loops and gemm splits run on OpenMP threads
  // (libgomp ships with g++); OpenBLAS is kept to one thread by the step.
  // -z nodelete: dlclose leaves the library (and so libgomp, whose idle
  // worker threads would otherwise run unmapped code) in place.
  // -fno-trapping-math: without it g++ will not turn the selects of
  // tcc_cpu::exp (clamps, inf / 0 / NaN cases) into vector blends, so every
  // loop calling exp (softmax, cross-entropy, GELU, SiLU, attention) ran one
  // element at a time. The step reads no floating-point exception flags,
  // and nothing is reassociated: a vector loop does per element what the
  // scalar one did (a cross-entropy kernel gave the same bits both ways).
  std::vector<std::string> args = {*exe,       "-std=c++17", "-O3",
                                   "-fPIC",    "-shared",    "-fvisibility=hidden",
                                   "-fopenmp", "-fno-trapping-math", "-Wl,-z,nodelete"};
  // -march=native: the host's vector width and FMA shape the generated
  // loops' rounding (docs/runtime.md, "What is reproducible"); another
  // -march gives the results that CPU would.
  if (*arch != "none")
    args.push_back("-march=" + *arch);
  for (const std::string &f : options.extraFlags)
    args.push_back(f);
  args.insert(args.end(), {src, "-o", tmpOut, "-lopenblas"});
  std::vector<llvm::StringRef> argRefs(args.begin(), args.end());
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, log, log};
  std::string execError;
  int rc = llvm::sys::ExecuteAndWait(*exe, argRefs, std::nullopt, redirects, 0,
                                     0, &execError);
  bool ok = rc == 0;
  if (!ok) {
    auto text = llvm::MemoryBuffer::getFile(log);
    error = "host compiler failed (exit " + std::to_string(rc) + ")" +
            (execError.empty() ? "" : ": " + execError) + "\n  command: " + commandLine(args) +
            "\n" + (text ? (*text)->getBuffer().str() : std::string());
    llvm::sys::fs::remove(tmpOut);
  } else if (std::error_code ec = llvm::sys::fs::rename(tmpOut, output)) {
    error = "cannot move the library into place at " + output + ": " + ec.message();
    ok = false;
  }
  llvm::sys::fs::remove(src);
  llvm::sys::fs::remove(log);
  llvm::sys::fs::remove(dir);
  return ok;
}

} // namespace tcc
