#include "compiler/codegen/cuda/KernelRegistry.h"

#include <algorithm>

#include "llvm/Support/FormatVariadic.h"

namespace tcc::codegen::cuda {

int64_t blocksFor(int64_t items) {
  return std::max<int64_t>(1, std::min(kMaxBlocks, (items + kThreads - 1) / kThreads));
}

std::string indexType(int64_t n) { return n < (1ll << 31) ? "uint32_t" : "uint64_t"; }

std::string coordinates(ArrayRef<int64_t> sizes, StringRef var, StringRef type,
                        StringRef prefix) {
  std::string s;
  int64_t inner = 1;
  SmallVector<int64_t> innerSizes(sizes.size(), 1);
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    innerSizes[d] = inner;
    inner *= sizes[d];
  }
  for (auto [d, size] : llvm::enumerate(sizes)) {
    std::string e = var.str();
    if (innerSizes[d] != 1)
      e = "(" + e + " / " + std::to_string(innerSizes[d]) + ")";
    if (d != 0)
      e = "(" + e + " % " + std::to_string(size) + ")";
    s += llvm::formatv("    const {0} {1}{2} = {3};\n", type, prefix, d, e).str();
  }
  return s;
}

std::string KernelRegistry::add(StringRef kind, const std::string &text, StringRef params,
                                StringRef returnType) {
  if (const std::string *known = find(text))
    return *known;
  std::string name = llvm::formatv("tcc_k{0}_{1}", defs_.size(), kind).str();
  return record(text, name,
                "extern \"C\" " + returnType.str() + " " + name + "(cudaStream_t s" +
                    (params.empty() ? "" : ", ") + params.str() + ");");
}

std::string KernelRegistry::addGridStride(const GridStrideKernel &k) {
  std::string text =
      llvm::formatv("static __global__ void __launch_bounds__({0}) @NAME@_kernel({1}) {{\n",
                    kThreads, k.params)
          .str() +
      k.before +
      llvm::formatv("  for ({0} {1} = blockIdx.x * ({0}){2} + threadIdx.x; {1} < {3}u; "
                    "{1} += ({0})gridDim.x * {2}) ",
                    k.indexType, k.var, kThreads, k.items)
          .str() +
      k.body + "}\n" +
      llvm::formatv("extern \"C\" void @NAME@(cudaStream_t s, {0}) {{\n"
                    "  @NAME@_kernel<<<{1}, {2}, 0, s>>>({3});\n}\n",
                    k.params, blocksFor(k.items), kThreads, k.args)
          .str();
  return add(k.kind, text, k.params);
}

std::string KernelRegistry::addConstant(const std::string &text) {
  if (const std::string *known = find(text))
    return *known;
  std::string name = llvm::formatv("tcc_c{0}", defs_.size()).str();
  return record(text, name, "extern \"C\" void *" + name + "(void);");
}

const std::string *KernelRegistry::find(const std::string &text) const {
  auto it = byText_.find(text);
  return it == byText_.end() ? nullptr : &it->second;
}

std::string KernelRegistry::record(const std::string &text, const std::string &name,
                                   std::string decl) {
  std::string def = text;
  for (size_t pos; (pos = def.find("@NAME@")) != std::string::npos;)
    def.replace(pos, 6, name);
  defs_.push_back(std::move(def));
  decls_.push_back(std::move(decl));
  byText_[text] = name;
  return name;
}

} // namespace tcc::codegen::cuda
