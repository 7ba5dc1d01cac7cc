// Bookkeeping of the CUDA generator: the distinct generated kernels of a
// step (deduplicated by text), what each launch does (for the kernel list),
// and the launch-shape helpers every kernel family uses.
#ifndef TCC_COMPILER_CODEGEN_CUDA_KERNELREGISTRY_H
#define TCC_COMPILER_CODEGEN_CUDA_KERNELREGISTRY_H

#include <string>
#include <vector>

#include "compiler/codegen/common/CTypes.h"
#include "llvm/ADT/StringMap.h"

namespace tcc::codegen::cuda {

inline constexpr int kThreads = 256;
// Grid-stride loops: enough blocks to fill an H100/H200 (132 SMs x 8
// resident blocks of 256 threads) a few times over, no more.
inline constexpr int64_t kMaxBlocks = 4096;
inline constexpr int64_t kGemmWorkspaceBytes = 32ll << 20;

// Loading a stored element as its compute type, and back.
inline std::string load(Type et, const std::string &e) {
  return loadElement(et, e, CodeTarget::Cuda);
}
inline std::string store(Type et, const std::string &e) {
  return storeElement(et, e, CodeTarget::Cuda);
}

// Blocks of kThreads for a grid-stride loop over `items`.
int64_t blocksFor(int64_t items);

// Index arithmetic in 32 bits when every offset fits (cheaper division).
std::string indexType(int64_t n);

// `const T i0 = ...;` coordinates of flat index `var` over `sizes`, named
// `prefix`0, `prefix`1, ... (what LoopNest::index refers to as i0, i1...).
std::string coordinates(ArrayRef<int64_t> sizes, StringRef var, StringRef type,
                        StringRef prefix = "i");

// A generated kernel that runs `body` once per work item `var` in
// [0, items), one item per thread in a grid-stride loop, with its launcher
// `extern "C" void @NAME@(cudaStream_t s, <params>)` on blocksFor(items)
// blocks of kThreads. Every generated (non-prelude) kernel family has
// this skeleton; only `before` and `body` differ.
struct GridStrideKernel {
  std::string kind;      // the kernel's name suffix ("fill", "ew", "reduce")
  std::string params;    // of the kernel and of its launcher
  std::string args;      // what the launcher passes to the kernel
  std::string indexType; // of `var` (indexType())
  std::string var;       // the loop's index variable
  int64_t items = 0;
  std::string before;    // kernel statements before the loop
  std::string body;      // after the loop header: one statement, or "{\n ... }\n"
};

// What one launch does, for the kernel list.
struct Launch {
  std::string entry, kernel, shape, node;
  double flops = 0, bytes = 0;
};

// The distinct kernels of a step. A kernel's text names itself @NAME@; two
// requests with the same text get the same kernel.
class KernelRegistry {
public:
  // A kernel `tcc_kN_<kind>` launched as `void (cudaStream_t s, <params>)`
  // (or `<returnType> (...)`: the attention wrappers return the prelude
  // launcher's cudaError_t).
  std::string add(StringRef kind, const std::string &text, StringRef params,
                  StringRef returnType = "void");
  // A grid-stride kernel (above), deduplicated like add().
  std::string addGridStride(const GridStrideKernel &k);
  // Constants: device arrays with an accessor returning their address.
  std::string addConstant(const std::string &text);
  const std::vector<std::string> &defs() const { return defs_; }
  const std::vector<std::string> &decls() const { return decls_; }

private:
  // The name already given to `text`, or null.
  const std::string *find(const std::string &text) const;
  // Adds `text` as `name` (every @NAME@ replaced) with its declaration.
  std::string record(const std::string &text, const std::string &name, std::string decl);

  std::vector<std::string> defs_, decls_;
  llvm::StringMap<std::string> byText_;
};

} // namespace tcc::codegen::cuda

#endif // TCC_COMPILER_CODEGEN_CUDA_KERNELREGISTRY_H
