// Builds a CUDA step.so: nvcc on each kernel unit and the host compiler on
// the host unit, in parallel, each object reused from a cache keyed by its
// source, flags and compiler version; then one link with the CUDA runtime
// (static) and cuBLASLt.
#ifndef TCC_COMPILER_DRIVER_CUDACOMPILER_H
#define TCC_COMPILER_DRIVER_CUDACOMPILER_H

#include <optional>
#include <string>
#include <vector>

namespace tcc {

// nvcc: $TCC_NVCC, else `nvcc` on PATH, else /usr/local/cuda/bin/nvcc.
std::optional<std::string> findNvcc();

// The toolkit an nvcc belongs to: the root nvcc reports (`--dryrun` TOP),
// else the parent of its real bin/ folder, else $CUDA_HOME, $CUDA_PATH,
// /usr/local/cuda -- the first with cuda_runtime_api.h and libcublasLt.so.
struct CudaToolkit {
  std::string root, include, lib;
};
std::optional<CudaToolkit> findCudaToolkit(const std::string &nvcc, std::string &error);

// The cuDNN frontend's include folder (header-only; cuDNN attention's unit
// needs it): $TCC_CUDNN_FRONTEND_INCLUDE, else the one scripts/setup.sh
// unpacks into the source tree (.deps/cudnn-frontend/include), if it holds
// cudnn_frontend.h.
std::optional<std::string> findCudnnFrontend();

// CUTLASS's include folder (header-only; the Hopper epilogue GEMMs' unit,
// cuda/cutlass/gemm_sm90_epilogues.cu, needs it): $TCC_CUTLASS_INCLUDE,
// else the one scripts/setup.sh unpacks into the source tree
// (.deps/cutlass/include), if it holds cutlass/cutlass.h, cute/tensor.hpp
// and cutlass/util/packed_stride.hpp.
std::optional<std::string> findCutlass();

// Whether `arch` runs sm_90a code (the CUTLASS instances, tcc's sm90
// attention): sm_90 or sm_90a.
bool archRunsSm90a(const std::string &arch);

// The compute capability of GPU 0 as "sm_XY" (from nvidia-smi), if any.
std::optional<std::string> detectGpuArch();

// "sm_80", "sm_90", "sm_90a", ...: true if well formed.
bool isValidCudaArch(const std::string &arch);

struct CudaCompileOptions {
  std::string nvcc;         // required (findNvcc)
  std::string arch = "sm_90";
  std::string hostCompiler; // default: $CXX, else "c++"
  int jobs = 0;             // parallel compiles; 0: hardware threads
  // Object cache; empty: $TCC_CACHE_DIR, else $XDG_CACHE_HOME/tcc, else
  // ~/.cache/tcc (objects go to <dir>/objects). useCache=false: none.
  std::string cacheDir;
  bool useCache = true;
};

struct CudaCompileStats {
  int units = 0;      // translation units (kernel units + the host unit)
  int fromCache = 0;  // of those, objects reused
  double seconds = 0; // wall time, link included
  std::string cacheDir; // "" when no cache was used
};

// Compiles and links into `output` (written atomically). On failure returns
// false with the failing command and its output in `error`.
// `cudnnFrontend`: non-empty when the step uses cuDNN attention: the unit
// embedded::kCudnnAttentionUnit is compiled (against those headers) and
// linked in too. `cutlassInclude`: non-empty when the host unit defines
// TCC_STEP_CUTLASS_SM90: embedded::kCutlassSm90Unit is compiled once per
// instance (for sm_90a, against those headers; each object cached like the
// others, so a machine compiles them once) and linked in. `sm90Attention`:
// the host unit defines TCC_STEP_SM90_ATTENTION: the units
// embedded::kSm90AttentionForwardUnit and kSm90AttentionBackwardUnit are
// compiled for sm_90a (cached the same way) and linked in.
bool compileCudaLibrary(const std::string &hostSource,
                        const std::vector<std::string> &kernelUnits,
                        const std::string &cudnnFrontend, const std::string &cutlassInclude,
                        bool sm90Attention, const std::string &output,
                        const CudaCompileOptions &options,
                        CudaCompileStats &stats, std::string &error);

} // namespace tcc

#endif
