#include "compiler/driver/CudaCompiler.h"
#include "compiler/codegen/common/EmbeddedSources.h"
#include "compiler/driver/HostCompiler.h"

#include <chrono>
#include <cstdlib>
#include <thread>

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/raw_ostream.h"

namespace tcc {
namespace {

bool writeFile(const std::string &path, llvm::StringRef text, std::string &error) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (ec) {
    error = "cannot write " + path + ": " + ec.message();
    return false;
  }
  os << text;
  os.close();
  if (os.has_error()) {
    error = "cannot write " + path + ": " + os.error().message();
    os.clear_error();
    return false;
  }
  return true;
}

std::string readFile(const std::string &path) {
  auto text = llvm::MemoryBuffer::getFile(path);
  return text ? (*text)->getBuffer().str() : std::string();
}

// Runs `args` and returns its stdout+stderr ("" if it cannot run).
std::string captureOutput(const std::vector<std::string> &args) {
  llvm::SmallString<128> log;
  if (llvm::sys::fs::createTemporaryFile("tcc-probe", "txt", log))
    return "";
  std::vector<llvm::StringRef> refs(args.begin(), args.end());
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, llvm::StringRef(log),
                                                llvm::StringRef(log)};
  int rc = llvm::sys::ExecuteAndWait(args[0], refs, std::nullopt, redirects, 10);
  std::string out = rc == 0 ? readFile(log.str().str()) : std::string();
  llvm::sys::fs::remove(log);
  return out;
}

std::string hashHex(llvm::ArrayRef<std::string> parts) {
  llvm::SHA256 sha;
  for (const std::string &p : parts) {
    sha.update(p);
    sha.update(llvm::StringRef("\0", 1));
  }
  std::array<uint8_t, 32> digest = sha.final();
  return llvm::toHex(llvm::ArrayRef<uint8_t>(digest.data(), 16), /*LowerCase=*/true);
}

std::string defaultCacheDir() {
  if (const char *d = std::getenv("TCC_CACHE_DIR"); d && *d)
    return d;
  if (const char *d = std::getenv("XDG_CACHE_HOME"); d && *d)
    return std::string(d) + "/tcc";
  if (const char *h = std::getenv("HOME"); h && *h)
    return std::string(h) + "/.cache/tcc";
  return "";
}

// One compile: its command, where its object goes, where it is cached.
struct Job {
  std::vector<std::string> args;
  std::string object, cached, log, what;
  llvm::sys::ProcessInfo process;
};

} // namespace

std::optional<std::string> findNvcc() {
  if (const char *env = std::getenv("TCC_NVCC"); env && *env)
    return llvm::sys::fs::can_execute(env) ? std::optional<std::string>(env) : std::nullopt;
  if (llvm::ErrorOr<std::string> p = llvm::sys::findProgramByName("nvcc"))
    return *p;
  if (llvm::sys::fs::can_execute("/usr/local/cuda/bin/nvcc"))
    return std::string("/usr/local/cuda/bin/nvcc");
  return std::nullopt;
}

std::optional<std::string> detectGpuArch() {
  llvm::ErrorOr<std::string> smi = llvm::sys::findProgramByName("nvidia-smi");
  if (!smi)
    return std::nullopt;
  std::string out = captureOutput(
      {*smi, "--query-gpu=compute_cap", "--format=csv,noheader", "--id=0"});
  llvm::StringRef cap = llvm::StringRef(out).trim();
  auto [major, minor] = cap.split('.');
  if (major.empty() || minor.empty() || !llvm::all_of(major, llvm::isDigit) ||
      !llvm::all_of(minor, llvm::isDigit))
    return std::nullopt;
  return "sm_" + major.str() + minor.str();
}

namespace {

// Where nvcc itself says its toolkit is: the `TOP=` line of a dry run.
std::string nvccTop(const std::string &nvcc) {
  std::string out = captureOutput({nvcc, "--dryrun", "-x", "cu", "-c", "/dev/null", "-o",
                                   "/dev/null"});
  for (llvm::StringRef line : llvm::split(out, '\n')) {
    line = line.trim();
    if (line.consume_front("#$ TOP="))
      return line.trim().str();
  }
  return "";
}

std::string realPath(const std::string &path) {
  llvm::SmallString<256> real;
  if (llvm::sys::fs::real_path(path, real))
    return path;
  return real.str().str();
}

} // namespace

std::optional<CudaToolkit> findCudaToolkit(const std::string &nvcc, std::string &error) {
  // nvcc on PATH may be a wrapper script or a symlink somewhere else
  // (/usr/local/bin/nvcc), so its own parent is only one guess.
  std::vector<std::string> candidates;
  if (std::string top = nvccTop(nvcc); !top.empty())
    candidates.push_back(realPath(top));
  candidates.push_back(llvm::sys::path::parent_path(
                           llvm::sys::path::parent_path(realPath(nvcc)))
                           .str());
  for (const char *var : {"CUDA_HOME", "CUDA_PATH"})
    if (const char *v = std::getenv(var); v && *v)
      candidates.push_back(realPath(v));
  candidates.push_back(realPath("/usr/local/cuda"));

  std::string tried;
  for (const std::string &root : candidates) {
    if (root.empty())
      continue;
    // Debian/NVIDIA layouts: <root>/include + <root>/lib64, or the
    // cross-target folder the two usually link to.
    for (auto [inc, lib] : {std::pair<const char *, const char *>{"include", "lib64"},
                            {"targets/x86_64-linux/include", "targets/x86_64-linux/lib"},
                            {"targets/sbsa-linux/include", "targets/sbsa-linux/lib"}}) {
      std::string include = root + "/" + inc, libDir = root + "/" + lib;
      if (llvm::sys::fs::exists(include + "/cuda_runtime_api.h") &&
          llvm::sys::fs::exists(libDir + "/libcublasLt.so"))
        return CudaToolkit{root, include, libDir};
    }
    tried += "\n  " + root;
  }
  error = "cannot find the CUDA toolkit of " + nvcc +
          " (no include/cuda_runtime_api.h with lib64/libcublasLt.so under any of:" + tried +
          ")\n  set CUDA_HOME to the toolkit, or TCC_NVCC to its bin/nvcc";
  return std::nullopt;
}

bool isValidCudaArch(const std::string &arch) {
  llvm::StringRef a(arch);
  if (!a.consume_front("sm_") || a.size() < 2)
    return false;
  a.consume_back("a");
  return llvm::all_of(a, llvm::isDigit) && a.size() >= 2 && a.size() <= 3;
}

std::optional<std::string> findCudnnFrontend() {
  std::vector<std::string> candidates;
  if (const char *env = std::getenv("TCC_CUDNN_FRONTEND_INCLUDE"); env && *env)
    candidates.push_back(env);
  candidates.push_back(TCC_CUDNN_FRONTEND_DEFAULT_INCLUDE);
  for (const std::string &dir : candidates)
    if (llvm::sys::fs::exists(dir + "/cudnn_frontend.h"))
      return dir;
  return std::nullopt;
}

std::optional<std::string> findCutlass() {
  std::vector<std::string> candidates;
  if (const char *env = std::getenv("TCC_CUTLASS_INCLUDE"); env && *env)
    candidates.push_back(env);
  candidates.push_back(TCC_CUTLASS_DEFAULT_INCLUDE);
  for (const std::string &dir : candidates)
    if (llvm::sys::fs::exists(dir + "/cutlass/cutlass.h") &&
        llvm::sys::fs::exists(dir + "/cute/tensor.hpp") &&
        llvm::sys::fs::exists(dir + "/cutlass/util/packed_stride.hpp"))
      return dir;
  return std::nullopt;
}

bool archRunsSm90a(const std::string &arch) {
  return arch == "sm_90" || arch == "sm_90a";
}

bool compileCudaLibrary(const std::string &hostSource,
                        const std::vector<std::string> &kernelUnits,
                        const std::string &cudnnFrontend, const std::string &cutlassInclude,
                        bool sm90Attention, const std::string &output,
                        const CudaCompileOptions &options,
                        CudaCompileStats &stats, std::string &error) {
  auto start = std::chrono::steady_clock::now();
  std::optional<std::string> cxxPath = findHostCompiler(options.hostCompiler, error);
  if (!cxxPath)
    return false;
  if (!isValidCudaArch(options.arch)) {
    error = "unknown CUDA architecture '" + options.arch + "' (expected e.g. sm_80, sm_90)";
    return false;
  }
  std::string toolkitError;
  std::optional<CudaToolkit> toolkit = findCudaToolkit(options.nvcc, toolkitError);
  if (!toolkit) {
    error = toolkitError;
    return false;
  }
  const std::string &include = toolkit->include, &lib = toolkit->lib;

  llvm::SmallString<128> dir;
  if (std::error_code ec = llvm::sys::fs::createUniqueDirectory("tcc-cuda-build", dir)) {
    error = "cannot create a temporary directory: " + ec.message();
    return false;
  }
  auto cleanup = [&] { llvm::sys::fs::remove_directories(dir); };

  std::string cacheDir;
  if (options.useCache) {
    std::string base = options.cacheDir.empty() ? defaultCacheDir() : options.cacheDir;
    if (!base.empty() && !llvm::sys::fs::create_directories(base + "/objects"))
      cacheDir = base + "/objects";
  }
  stats.cacheDir = cacheDir;

  // Compiler identities go into the cache keys.
  std::string nvccVersion = captureOutput({options.nvcc, "--version"});
  std::string cxxVersion = captureOutput({*cxxPath, "--version"});
  if (nvccVersion.empty()) {
    cleanup();
    error = "cannot run nvcc (" + options.nvcc + " --version failed)";
    return false;
  }
  std::string number = options.arch.substr(3);
  std::vector<std::string> nvccFlags = {
      "-std=c++17", "-O3", "--expt-relaxed-constexpr", "-Xcompiler", "-fPIC,-fvisibility=hidden",
      "-gencode", "arch=compute_" + number + ",code=[sm_" + number + ",compute_" + number + "]",
      "-ccbin", *cxxPath};
  std::vector<std::string> cxxFlags = {"-std=c++17", "-O2", "-fPIC", "-fvisibility=hidden",
                                       "-I" + include};

  std::vector<Job> jobs;
  auto addJob = [&](const std::string &name, const std::string &source,
                    const std::vector<std::string> &flags, const std::string &compiler,
                    const std::string &identity) -> bool {
    Job job;
    job.what = name;
    std::string key = hashHex({identity, commandLine(flags), source});
    job.object = (dir + "/" + name + ".o").str();
    job.log = (dir + "/" + name + ".log").str();
    if (!cacheDir.empty())
      job.cached = cacheDir + "/" + key + ".o";
    std::string src = (dir + "/" + name).str();
    if (!writeFile(src, source, error))
      return false;
    job.args = {compiler};
    job.args.insert(job.args.end(), flags.begin(), flags.end());
    job.args.insert(job.args.end(), {"-c", src, "-o", job.object});
    jobs.push_back(std::move(job));
    return true;
  };
  for (size_t i = 0; i < kernelUnits.size(); ++i)
    if (!addJob("kernels_" + std::to_string(i) + ".cu", kernelUnits[i], nvccFlags,
                options.nvcc, nvccVersion)) {
      cleanup();
      return false;
    }
  if (!addJob("step_host.cpp", hostSource, cxxFlags, *cxxPath, cxxVersion)) {
    cleanup();
    return false;
  }
  // cuDNN attention: the same source in every step, so one compile per
  // machine (the cache); the frontend opens libcudnn at run time.
  if (!cudnnFrontend.empty()) {
    std::vector<std::string> cudnnFlags = cxxFlags;
    cudnnFlags.insert(cudnnFlags.end(), {"-DNV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING",
                                         "-I" + cudnnFrontend, "-w"});
    if (!addJob("cudnn_attention.cpp", embedded::kCudnnAttentionUnit, cudnnFlags, *cxxPath,
                cxxVersion)) {
      cleanup();
      return false;
    }
  }
  // CUTLASS's Hopper epilogue GEMMs: one nvcc per instance (~1-2 minutes
  // each), the same source in every step, so cached once per machine.
  if (!cutlassInclude.empty()) {
    std::vector<std::string> cutlassFlags = {
        "-std=c++20", "-O3", "-DNDEBUG", "--expt-relaxed-constexpr", "-diag-suppress", "2908",
        "-Xcompiler", "-fPIC,-fvisibility=hidden", "-gencode", "arch=compute_90a,code=sm_90a",
        "-ccbin", *cxxPath, "-I" + cutlassInclude};
    for (int i = 0; i < embedded::kCutlassSm90Instances; ++i) {
      std::vector<std::string> flags = cutlassFlags;
      flags.push_back("-DTCC_CUTLASS_INSTANCE=" + std::to_string(i));
      if (!addJob("cutlass_sm90_" + std::to_string(i) + ".cu", embedded::kCutlassSm90Unit,
                  flags, options.nvcc, nvccVersion)) {
        cleanup();
        return false;
      }
    }
  }
  // tcc's Hopper attention: two units (~1 minute of nvcc each), the same
  // source in every step, so cached once per machine like CUTLASS's.
  if (sm90Attention) {
    std::vector<std::string> sm90Flags = {
        "-std=c++17", "-O3", "--expt-relaxed-constexpr", "-Xcompiler",
        "-fPIC,-fvisibility=hidden", "-gencode", "arch=compute_90a,code=sm_90a", "-ccbin",
        *cxxPath};
    if (!addJob("sm90_attention_forward.cu", embedded::kSm90AttentionForwardUnit, sm90Flags,
                options.nvcc, nvccVersion) ||
        !addJob("sm90_attention_backward.cu", embedded::kSm90AttentionBackwardUnit, sm90Flags,
                options.nvcc, nvccVersion)) {
      cleanup();
      return false;
    }
  }
  stats.units = static_cast<int>(jobs.size());

  // Reuse cached objects; run the rest, `parallel` at a time.
  std::vector<Job *> pending;
  for (Job &job : jobs) {
    if (!job.cached.empty() && llvm::sys::fs::exists(job.cached) &&
        !llvm::sys::fs::copy_file(job.cached, job.object)) {
      ++stats.fromCache;
      continue;
    }
    pending.push_back(&job);
  }
  unsigned parallel = options.jobs > 0 ? options.jobs : std::thread::hardware_concurrency();
  parallel = std::max(1u, parallel);
  std::vector<Job *> running;
  size_t next = 0;
  std::string failure;
  while ((next < pending.size() && failure.empty()) || !running.empty()) {
    while (failure.empty() && next < pending.size() && running.size() < parallel) {
      Job *job = pending[next++];
      std::vector<llvm::StringRef> refs(job->args.begin(), job->args.end());
      std::optional<llvm::StringRef> redirects[] = {std::nullopt, llvm::StringRef(job->log),
                                                    llvm::StringRef(job->log)};
      std::string execError;
      bool failedToStart = false;
      job->process = llvm::sys::ExecuteNoWait(job->args[0], refs, std::nullopt, redirects, 0,
                                              &execError, &failedToStart);
      if (failedToStart) {
        failure = "cannot run " + job->args[0] + ": " + execError;
        break;
      }
      running.push_back(job);
    }
    bool finished = false;
    for (size_t i = 0; i < running.size(); ++i) {
      Job *job = running[i];
      std::string waitError;
      llvm::sys::ProcessInfo done = llvm::sys::Wait(job->process, 0u, &waitError, nullptr,
                                                    /*Polling=*/true);
      if (done.Pid == 0)
        continue; // still running
      finished = true;
      running.erase(running.begin() + i--);
      if (done.ReturnCode != 0 && failure.empty()) {
        failure = job->what + ": compiler failed (exit " + std::to_string(done.ReturnCode) +
                  ")\n  command: " + commandLine(job->args) + "\n" + readFile(job->log);
      } else if (done.ReturnCode == 0 && !job->cached.empty()) {
        // Into the cache under a temporary name, then renamed: readers
        // never see half an object.
        std::string tmp = job->cached + ".tmp" + std::to_string(done.Pid);
        if (!llvm::sys::fs::copy_file(job->object, tmp))
          llvm::sys::fs::rename(tmp, job->cached);
        llvm::sys::fs::remove(tmp);
      }
    }
    if (!finished && !running.empty())
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!failure.empty()) {
    cleanup();
    error = failure;
    return false;
  }

  // Link: static CUDA runtime (no libcudart needed where it runs), cuBLASLt
  // from the toolkit (rpath to it).
  std::string tmpOut = output + ".tmp";
  // -z defs: a symbol no object or library defines fails here, not when
  // trun loads the step.
  std::vector<std::string> link = {*cxxPath, "-shared", "-Wl,-z,defs", "-o", tmpOut};
  for (const Job &job : jobs)
    link.push_back(job.object);
  link.insert(link.end(), {"-L" + lib, "-Wl,-rpath," + lib, "-lcublasLt", "-lcudart_static",
                           "-ldl", "-lrt", "-lpthread"});
  std::vector<llvm::StringRef> refs(link.begin(), link.end());
  std::string linkLog = (dir + "/link.log").str();
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, llvm::StringRef(linkLog),
                                                llvm::StringRef(linkLog)};
  int rc = llvm::sys::ExecuteAndWait(link[0], refs, std::nullopt, redirects);
  if (rc != 0) {
    error = "linking the step library failed (exit " + std::to_string(rc) +
            ")\n  command: " + commandLine(link) + "\n" + readFile(linkLog);
    llvm::sys::fs::remove(tmpOut);
    cleanup();
    return false;
  }
  if (std::error_code ec = llvm::sys::fs::rename(tmpOut, output)) {
    error = "cannot move the library into place at " + output + ": " + ec.message();
    cleanup();
    return false;
  }
  cleanup();
  stats.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return true;
}

} // namespace tcc
