// CUDA code generator: walks the kern functions @train_step and @forward and
// prints
//   - a host translation unit (C++): per entry point, a function enqueuing
//     every kernel and cuBLASLt product on the step's stream, the step
//     descriptor and the tcc_device_api (cuda_host_support.h),
//   - kernel translation units (.cu): one kernel per distinct (shape, body)
//     — generated elementwise and copy kernels, and wrappers around the fixed
//     kernel families of cuda_prelude.cuh (reductions, softmax cross-entropy,
//     gather, scatter-add). Twelve identical transformer blocks share their
//     kernels: a kernel is keyed by its whole text, shapes included.
// Each launch gets an index in its entry point's label table, which CUDA
// errors are reported with ("kernel fc1: kern.elementwise (k12_ew), train
// step 17").
#include "compiler/codegen/CudaCodegen.h"

#include <algorithm>

#include "compiler/codegen/CodegenSupport.h"
#include "compiler/codegen/EmbeddedSources.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"

using namespace mlir;

namespace tcc {
namespace {

using namespace codegen;

constexpr int kThreads = 256;
// Grid-stride loops: enough blocks to fill an H100/H200 (132 SMs x 8
// resident blocks of 256 threads) a few times over, no more.
constexpr int64_t kMaxBlocks = 4096;
constexpr int64_t kGemmWorkspaceBytes = 32ll << 20;

std::string load(Type et, const std::string &e) { return loadElement(et, e, CodeTarget::Cuda); }
std::string store(Type et, const std::string &e) { return storeElement(et, e, CodeTarget::Cuda); }

int64_t blocksFor(int64_t items) {
  return std::max<int64_t>(1, std::min(kMaxBlocks, (items + kThreads - 1) / kThreads));
}

// Index arithmetic in 32 bits when every offset fits (cheaper division).
std::string indexType(int64_t n) { return n < (1ll << 31) ? "uint32_t" : "uint64_t"; }

// `const T i0 = ...;` coordinates of flat index `var` over `sizes`, named
// `prefix`0, `prefix`1, ... (what LoopNest::index refers to as i0, i1...).
std::string coordinates(ArrayRef<int64_t> sizes, StringRef var, StringRef type,
                        StringRef prefix = "i") {
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

// What one launch does, for the kernel list.
struct Launch {
  std::string entry, kernel, shape, node;
  double flops = 0, bytes = 0;
};

// The distinct kernels of a step. A kernel's text names itself @NAME@; two
// requests with the same text get the same kernel.
class KernelRegistry {
public:
  std::string add(StringRef kind, const std::string &text, StringRef params) {
    auto it = byText_.find(text);
    if (it != byText_.end())
      return it->second;
    std::string name = llvm::formatv("tcc_k{0}_{1}", defs_.size(), kind).str();
    std::string def = text;
    for (size_t pos; (pos = def.find("@NAME@")) != std::string::npos;)
      def.replace(pos, 6, name);
    defs_.push_back(def);
    decls_.push_back("extern \"C\" void " + name + "(cudaStream_t s" +
                     (params.empty() ? "" : ", ") + params.str() + ");");
    byText_[text] = name;
    return name;
  }
  // Constants: device arrays with an accessor returning their address.
  std::string addConstant(const std::string &text) {
    auto it = byText_.find(text);
    if (it != byText_.end())
      return it->second;
    std::string name = llvm::formatv("tcc_c{0}", defs_.size()).str();
    std::string def = text;
    for (size_t pos; (pos = def.find("@NAME@")) != std::string::npos;)
      def.replace(pos, 6, name);
    defs_.push_back(def);
    decls_.push_back("extern \"C\" void *" + name + "(void);");
    byText_[text] = name;
    return name;
  }
  const std::vector<std::string> &defs() const { return defs_; }
  const std::vector<std::string> &decls() const { return decls_; }

private:
  std::vector<std::string> defs_, decls_;
  llvm::StringMap<std::string> byText_;
};

class CudaFunctionEmitter {
public:
  CudaFunctionEmitter(func::FuncOp f, StringRef entry, KernelRegistry &kernels,
                      const CudaCodegenOptions &options, int &gemmSites)
      : f_(f), entry_(entry.str()), kernels_(kernels), options_(options),
        gemmSites_(gemmSites) {}

  LogicalResult emit(int64_t outputScratchBase, double &flops) {
    llvm::raw_string_ostream os(body_);
    scratch_.base = outputScratchBase;
    os << "static int32_t tcc_" << entry_
       << "_body(const tcc_step_args *args, cudaStream_t s, char *ws) {\n";
    os << "  int32_t *status = reinterpret_cast<int32_t *>(ws + tcc_control_offset);\n";
    os << "  (void)status;\n";
    if (failed(emitArguments(os)))
      return failure();
    for (Operation &op : f_.getBody().front().without_terminator())
      if (failed(emitOp(&op, os, flops)))
        return failure();
    os << "  return 0;\n}\n\n";
    return success();
  }

  // The body, hyper, finish functions, label table and entry.
  std::string source() const {
    std::string s = body_;
    s += "static void tcc_" + entry_ + "_hyper(const tcc_step_args *args, char *control) {\n" +
         hyper_ + "  (void)args;\n  (void)control;\n}\n\n";
    s += "static void tcc_" + entry_ +
         "_finish(const tcc_step_args *args, const char *control) {\n" + finish_ +
         "  (void)args;\n  (void)control;\n}\n\n";
    if (!labels_.empty()) {
      s += "static const char *const tcc_" + entry_ + "_labels[] = {\n";
      for (const std::string &l : labels_) {
        std::string escaped;
        llvm::raw_string_ostream e(escaped);
        llvm::printEscapedString(l, e);
        s += "  \"" + escaped + "\",\n";
      }
      s += "};\n";
      // For profiling: each launch's kernel and its FLOPs and bytes.
      s += "static const char *const tcc_" + entry_ + "_kernels[] = {\n";
      for (const Launch &l : launches_)
        s += "  \"" + l.kernel + "\",\n";
      s += "};\n";
      s += "static const double tcc_" + entry_ + "_costs[] = {\n";
      for (const Launch &l : launches_)
        s += llvm::formatv("  {0:e}, {1:e},\n", l.flops, l.bytes).str();
      s += "};\n";
    }
    std::string table = labels_.empty() ? "nullptr" : "tcc_" + entry_ + "_labels";
    std::string kernelTable = labels_.empty() ? "nullptr" : "tcc_" + entry_ + "_kernels";
    std::string costTable = labels_.empty() ? "nullptr" : "tcc_" + entry_ + "_costs";
    s += llvm::formatv(
        "static const tcc_cuda_host::Entry tcc_{0}_entry = {{\"{0}\", {1}, {4}, {5}, {2}, "
        "tcc_control_offset, {3}, tcc_{0}_hyper, tcc_{0}_body, tcc_{0}_finish};\n"
        "static tcc_cuda_host::EntryState tcc_{0}_state;\n"
        "static int32_t tcc_{0}(const tcc_step_args *args) {{\n"
        "  return tcc_cuda_host::run_call(tcc_{0}_entry, tcc_{0}_state, "
        "*tcc_step_get_descriptor(), args);\n}\n\n",
        entry_, table, labels_.size(), controlBytes_, kernelTable, costTable);
    return s;
  }

  int64_t outputScratchBytes() const { return scratch_.bytes; }
  int64_t controlBytes() const { return controlBytes_; }
  const std::vector<Launch> &launches() const { return launches_; }

private:
  std::string fresh(Value v) { return names_.fresh(v); }
  std::string name(Value v) { return names_(v); }

  LogicalResult emitArguments(llvm::raw_ostream &os) {
    FailureOr<SmallVector<ArgumentRole>> roles = classifyArguments(f_, "cuda codegen");
    if (failed(roles))
      return failure();
    int hyper = 0;
    int64_t controlTail = 64; // train outputs after the control header
    for (auto [a, role] : llvm::zip_equal(f_.getArguments(), *roles)) {
      MemRefType t = mrt(a);
      std::string st = storageType(t.getElementType());
      std::string n = fresh(a);
      switch (role.kind) {
      case ArgumentRole::Param:
      case ArgumentRole::Input:
      case ArgumentRole::OptimizerState:
        os << stepArgsBuffer(role, n, t);
        break;
      case ArgumentRole::Hyper: {
        // Hyper-parameters live in the control block (slots of 8 bytes at
        // 16..63), written from the host before each call.
        if (hyper >= 6)
          return f_.emitError("cuda codegen: more than 6 hyper-parameters");
        int64_t offset = 16 + 8 * hyper++;
        os << llvm::formatv("  {0} *{1} = reinterpret_cast<{0} *>(ws + tcc_control_offset + "
                            "{2}); // {3}\n",
                            st, n, offset, role.label);
        hyper_ += llvm::formatv("  {{ const {0} v = static_cast<{0}>({1}); "
                                "std::memcpy(control + {2}, &v, sizeof(v)); }\n",
                                st, role.hyperValue, offset);
        break;
      }
      case ArgumentRole::Loss:
        os << llvm::formatv("  {0} *{1} = reinterpret_cast<{0} *>(ws + tcc_control_offset + "
                            "8); // loss\n",
                            st, n);
        finish_ += llvm::formatv("  {{ {0} v; std::memcpy(&v, control + 8, sizeof(v)); "
                                 "*args->loss = static_cast<float>(v); }\n",
                                 st);
        break;
      case ArgumentRole::Output:
        os << llvm::formatv("  {0} *{1} = {2}; // output {3} {4}\n", st, n,
                            scratch_.buffer("outputs", role.index, t), role.label,
                            shapeComment(t));
        break;
      case ArgumentRole::TrainOutput:
        os << llvm::formatv("  {0} *{1} = reinterpret_cast<{0} *>(ws + tcc_control_offset + "
                            "{2}); // train output {3} {4}\n",
                            st, n, controlTail, role.label, shapeComment(t));
        finish_ += llvm::formatv(
            "  if (args->train_outputs && args->train_outputs[{0}]) "
            "std::memcpy(args->train_outputs[{0}], control + {1}, {2});\n",
            role.index, controlTail, bufferBytes(t));
        controlTail += (bufferBytes(t) + 63) / 64 * 64;
        break;
      }
    }
    controlBytes_ = controlTail;
    return success();
  }

  // A launch of `kernel`: the call, its check, its label and list entry.
  void launch(llvm::raw_ostream &os, Operation *op, const std::string &kernel,
              const std::string &call, const std::string &shape, double flops,
              double bytes) {
    int32_t id = static_cast<int32_t>(labels_.size());
    std::string node = locName(op->getLoc());
    labels_.push_back((node.empty() ? std::string("?") : node) + ": " +
                      op->getName().getStringRef().str() + " (" + kernel + ")");
    os << "  " << call << "\n";
    if (call.find("return rc;") == std::string::npos) // not self-checking
      os << "  if (int32_t rc = tcc_cuda_host::after_launch(s, " << id << ")) return rc;\n";
    launches_.push_back({entry_, kernel, shape, node, flops, bytes});
  }
  int32_t nextId() const { return static_cast<int32_t>(labels_.size()); }

  LogicalResult emitOp(Operation *op, llvm::raw_ostream &os, double &flops) {
    if (!isa<kern::WorkspaceViewOp, kern::ReshapeOp, kern::ConstantOp>(op)) {
      std::string node = locName(op->getLoc());
      os << "  // " << (node.empty() ? std::string("?") : node) << ": "
         << op->getName().getStringRef() << "\n";
    }
    return llvm::TypeSwitch<Operation *, LogicalResult>(op)
        .Case([&](kern::WorkspaceViewOp v) {
          std::string st = storageType(v.getType().getElementType());
          os << llvm::formatv("  {0} *{1} = reinterpret_cast<{0} *>(ws + {2}); // {3}\n",
                              st, fresh(v.getResult()), v.getOffset(),
                              shapeComment(v.getType()));
          return success();
        })
        .Case([&](kern::ReshapeOp r) {
          os << llvm::formatv("  auto *{0} = {1}; // viewed as {2}\n", fresh(r.getResult()),
                              name(r.getInput()), shapeComment(mrt(r.getResult())));
          return success();
        })
        .Case([&](kern::ConstantOp c) { return emitConstant(c, os); })
        .Case([&](kern::GemmOp g) { return emitGemm(g, os, flops); })
        .Case([&](kern::ElementwiseOp e) { return emitElementwise(e, os, flops); })
        .Case([&](kern::ReduceOp r) { return emitReduce(r, os, flops); })
        .Case([&](kern::FillOp f) { return emitFill(f, os); })
        .Case<kern::TransposeOp, kern::SliceOp, kern::ConcatOp>([&](Operation *copy) {
          std::string family = isa<kern::TransposeOp>(copy) ? "transpose"
                               : isa<kern::SliceOp>(copy)   ? "slice"
                                                            : "concat";
          for (const StridedCopy &c : stridedCopies(copy))
            if (failed(emitCopy(op, os, c.shape, c.src, c.srcStrides, c.srcBase, c.dst,
                                c.dstStrides, c.dstBase, family)))
              return failure();
          return success();
        })
        .Case([&](kern::GatherOp g) {
          MemRefType table = mrt(g.getTable());
          int64_t v = table.getDimSize(0), row = table.getNumElements() / std::max<int64_t>(v, 1);
          int64_t n = mrt(g.getIds()).getNumElements();
          return emitFamily(op, os, "gather",
                            llvm::formatv("tcc_cuda::launch_gather_rows<{0}, {1}>(p0, p1, p2, "
                                          "{2}, {3}, {4}, status, code, s);",
                                          storageType(table.getElementType()),
                                          storageType(mrt(g.getIds()).getElementType()), n, v,
                                          row),
                            {g.getTable(), g.getIds(), g.getOut()}, {false, false, true}, true,
                            0, static_cast<double>(n) * row * 2 *
                                   kern::elementBytes(table.getElementType()),
                            llvm::formatv("{0} rows of {1}", n, row).str());
        })
        .Case([&](kern::ScatterAddOp sa) {
          MemRefType out = mrt(sa.getOut());
          int64_t v = out.getDimSize(0), row = out.getNumElements() / std::max<int64_t>(v, 1);
          int64_t n = mrt(sa.getIds()).getNumElements();
          flops += static_cast<double>(n) * row;
          return emitFamily(op, os, "scatter_add",
                            llvm::formatv("tcc_cuda::launch_scatter_add_rows<{0}, {1}>(p0, p1, "
                                          "p2, {2}, {3}, {4}, status, code, s);",
                                          storageType(out.getElementType()),
                                          storageType(mrt(sa.getIds()).getElementType()), n, v,
                                          row),
                            {sa.getUpdates(), sa.getIds(), sa.getOut()}, {false, false, true},
                            true, static_cast<double>(n) * row,
                            static_cast<double>(bufferBytes(out)) * 2 +
                                bufferBytes(mrt(sa.getUpdates())),
                            llvm::formatv("{0} rows of {1}", n, row).str());
        })
        .Case([&](kern::SoftmaxCrossEntropyOp x) {
          MemRefType l = mrt(x.getLogits());
          flops += 4.0 * l.getNumElements();
          return emitFamily(op, os, "xent",
                            llvm::formatv("tcc_cuda::launch_softmax_xent_forward<{0}, {1}>(p0, "
                                          "p1, p2, {2}, {3}, status, code, s);",
                                          storageType(l.getElementType()),
                                          storageType(mrt(x.getLabels()).getElementType()),
                                          l.getDimSize(0), l.getDimSize(1)),
                            {x.getLogits(), x.getLabels(), x.getLoss()}, {false, false, true},
                            true, 4.0 * l.getNumElements(), bufferBytes(l),
                            llvm::formatv("{0} rows of {1}", l.getDimSize(0), l.getDimSize(1))
                                .str());
        })
        .Case([&](kern::SoftmaxCrossEntropyGradOp x) {
          MemRefType l = mrt(x.getLogits());
          flops += 5.0 * l.getNumElements();
          return emitFamily(
              op, os, "xent_grad",
              llvm::formatv("tcc_cuda::launch_softmax_xent_backward<{0}, {1}>(p0, p1, p2, p3, "
                            "{2}, {3}, status, code, s);",
                            storageType(l.getElementType()),
                            storageType(mrt(x.getLabels()).getElementType()), l.getDimSize(0),
                            l.getDimSize(1)),
              {x.getLogits(), x.getLabels(), x.getGrad(), x.getOut()},
              {false, false, false, true}, true, 5.0 * l.getNumElements(),
              2.0 * bufferBytes(l),
              llvm::formatv("{0} rows of {1}", l.getDimSize(0), l.getDimSize(1)).str());
        })
        .Default([&](Operation *other) {
          return other->emitError("cuda codegen: cannot generate code for ")
                 << other->getName()
                 << (isa<kern::AllocOp>(other) ? " (run kern-plan-memory first)" : "");
        });
  }

  // A wrapper around a prelude launcher: parameters p0..pN (the buffers,
  // `written` says which are outputs), plus status/code when `checked`.
  LogicalResult emitFamily(Operation *op, llvm::raw_ostream &os, StringRef kind,
                           const std::string &launcherCall, ArrayRef<Value> buffers,
                           ArrayRef<bool> written, bool checked, double flops,
                           double bytes, const std::string &shape) {
    std::string params, args;
    for (auto [k, v] : llvm::enumerate(buffers)) {
      params += llvm::formatv("{0}{1}{2} *p{3}", k ? ", " : "", written[k] ? "" : "const ",
                              storageType(mrt(v).getElementType()), k)
                    .str();
      args += ", " + name(v);
    }
    if (checked) {
      params += ", int32_t *status, int32_t code";
      args += ", status, " + std::to_string(nextId() + 1);
    }
    std::string text = "extern \"C\" void @NAME@(cudaStream_t s, " + params + ") {\n  " +
                       launcherCall + "\n}\n";
    std::string kernel = kernels_.add(kind, text, params);
    launch(os, op, kernel, kernel + "(s" + args + ");", shape, flops, bytes);
    return success();
  }

  // dst[dstIndex] = src[srcIndex] over `shape` (transpose, slice, concat).
  LogicalResult emitCopy(Operation *op, llvm::raw_ostream &os, ArrayRef<int64_t> shape,
                         Value src, ArrayRef<int64_t> srcStrides, int64_t srcBase, Value dst,
                         ArrayRef<int64_t> dstStrides, int64_t dstBase, StringRef kind) {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    if (n == 0)
      return success();
    LoopNest nest = LoopNest::build(
        shape, {SmallVector<int64_t>(srcStrides), SmallVector<int64_t>(dstStrides)});
    std::string st = storageType(mrt(src).getElementType());
    std::string it = indexType(std::max<int64_t>(bufferBytes(mrt(src)), bufferBytes(mrt(dst))));
    std::string params = "const " + st + " *src, " + st + " *dst";
    std::string text = llvm::formatv(
        "static __global__ void __launch_bounds__({0}) @NAME@_kernel(const {1} *src, {1} *dst) "
        "{{\n"
        "  for ({2} i = blockIdx.x * ({2}){0} + threadIdx.x; i < {3}u; i += ({2})gridDim.x * {0}) "
        "{{\n{4}"
        "    dst[{5}] = src[{6}];\n  }\n}\n"
        "extern \"C\" void @NAME@(cudaStream_t s, {7}) {{\n"
        "  @NAME@_kernel<<<{8}, {0}, 0, s>>>(src, dst);\n}\n",
        kThreads, st, it, n, coordinates(nest.sizes, "i", it), nest.index(1, dstBase),
        nest.index(0, srcBase), params, blocksFor(n));
    std::string kernel = kernels_.add(kind, text, params);
    launch(os, op, kernel, kernel + "(s, " + name(src) + ", " + name(dst) + ");",
           llvm::formatv("{0}x{1}", blocksFor(n), kThreads).str(), 0,
           2.0 * n * kern::elementBytes(mrt(src).getElementType()));
    return success();
  }

  LogicalResult emitFill(kern::FillOp fill, llvm::raw_ostream &os) {
    MemRefType t = mrt(fill.getOut());
    Type et = t.getElementType();
    double v = fill.getValue().convertToDouble();
    int64_t n = t.getNumElements();
    if (n == 0)
      return success();
    if (v == 0 && !std::signbit(v)) {
      int32_t id = nextId();
      launch(os, fill, "cudaMemsetAsync",
             llvm::formatv("if (int32_t rc = tcc_cuda_host::memset_zero(s, {0}, {1}, {2})) "
                           "return rc;",
                           name(fill.getOut()), bufferBytes(t), id),
             "memset", 0, bufferBytes(t));
      return success();
    }
    std::string value = fillValue(et, v, CodeTarget::Cuda);
    std::string st = storageType(et), it = indexType(n);
    std::string params = st + " *dst";
    std::string text = llvm::formatv(
        "static __global__ void __launch_bounds__({0}) @NAME@_kernel({1} *dst) {{\n"
        "  for ({2} i = blockIdx.x * ({2}){0} + threadIdx.x; i < {3}u; i += ({2})gridDim.x * {0}) "
        "dst[i] = {4};\n}\n"
        "extern \"C\" void @NAME@(cudaStream_t s, {5}) {{\n"
        "  @NAME@_kernel<<<{6}, {0}, 0, s>>>(dst);\n}\n",
        kThreads, st, it, n, value, params, blocksFor(n));
    std::string kernel = kernels_.add("fill", text, params);
    launch(os, fill, kernel, kernel + "(s, " + name(fill.getOut()) + ");",
           llvm::formatv("{0}x{1}", blocksFor(n), kThreads).str(), 0, bufferBytes(t));
    return success();
  }

  LogicalResult emitConstant(kern::ConstantOp c, llvm::raw_ostream &os) {
    MemRefType t = c.getType();
    Type et = t.getElementType();
    auto dense = dyn_cast<DenseElementsAttr>(c.getValue());
    if (!dense)
      return c.emitError("cuda codegen: only dense constants are supported");
    std::string st = storageType(et), values = denseInitializer(dense, et);
    std::string text = llvm::formatv(
        "static __device__ const {0} @NAME@_data[] = {{{1}\n}};\n"
        "extern \"C\" void *@NAME@(void) {{\n"
        "  void *p = nullptr;\n"
        "  return cudaGetSymbolAddress(&p, @NAME@_data) == cudaSuccess ? p : nullptr;\n}\n",
        st, values);
    std::string accessor = kernels_.addConstant(text);
    std::string n = fresh(c.getResult());
    os << llvm::formatv("  {0} *{1} = static_cast<{0} *>({2}()); // constant {3}\n", st, n,
                        accessor, shapeComment(t));
    os << llvm::formatv("  if (!{0}) return tcc_cuda_host::set_error(\"cannot find the "
                        "device constant {1}\");\n",
                        n, accessor);
    return success();
  }

  // out (batch..., M, N) = op(a) x op(b) per batch, batch dims broadcast.
  LogicalResult emitGemm(kern::GemmOp g, llvm::raw_ostream &os, double &flops) {
    GemmShape s = GemmShape::of(g);
    MemRefType a = mrt(g.getA()), b = mrt(g.getB()), c = mrt(g.getOut());
    double work = s.flops();
    flops += work;
    if (s.batchCount * s.m * s.n == 0)
      return success();
    Type et = c.getElementType();
    const char *type = et.isF64() ? "tcc_cuda_host::kGemmF64"
                       : et.isBF16() ? "tcc_cuda_host::kGemmBF16"
                       : et.isF16()  ? "tcc_cuda_host::kGemmF16"
                                     : "tcc_cuda_host::kGemmF32";
    double alpha = g.getAlpha().convertToDouble(), beta = g.getBeta().convertToDouble();
    std::string wsArg = "ws + tcc_gemm_workspace_offset, tcc_gemm_workspace_bytes";
    double bytes = bufferBytes(a) + bufferBytes(b) + 2.0 * bufferBytes(c);
    auto call = [&](int64_t mm, int64_t count, int64_t sa, int64_t sb, int64_t sc,
                    const std::string &pa, const std::string &pb, const std::string &pc) {
      int site = gemmSites_++;
      return llvm::formatv(
                 "static tcc_cuda_host::GemmPlan tcc_gemm_plan_{0};\n"
                 "  if (int32_t rc = tcc_cuda_host::gemm(tcc_gemm_plan_{0}, s, {1}, {2}, {3}, "
                 "{4}, {5}, {6}, {7}, {8}, {9}, {10}, {11}, {12}, {13:e}, {14:e}, {15}, {16}, "
                 "{17}, {18})) return rc;",
                 site, nextId(), type, options_.tf32 ? "true" : "false",
                 s.ta ? "true" : "false", s.tb ? "true" : "false", mm, s.n, s.k, count, sa, sb,
                 sc, alpha, beta, pa, pb, pc, wsArg)
          .str();
    };
    std::string shape =
        llvm::formatv("{0}x{1}x{2}{3}", s.m, s.n, s.k,
                      s.batchCount > 1 ? " x" + std::to_string(s.batchCount) : std::string())
            .str();
    if (s.foldsBatchIntoM()) {
      launch(os, g, "cublasLtMatmul",
             call(s.batchCount * s.m, 1, 0, 0, 0, name(g.getA()), name(g.getB()),
                  name(g.getOut())),
             shape, work, bytes);
      return success();
    }
    if (s.fullyBatched()) {
      launch(os, g, "cublasLtMatmul",
             call(s.m, s.batchCount, s.m * s.k, s.k * s.n, s.m * s.n, name(g.getA()),
                  name(g.getB()), name(g.getOut())),
             shape, work, bytes);
      return success();
    }
    // Broadcast batch (rare: a shared operand of rank > 2): one product per
    // batch element.
    LoopNest nest = s.batchLoop();
    std::string loop;
    for (auto [d, size] : llvm::enumerate(nest.sizes))
      loop += llvm::formatv("for (int64_t i{0} = 0; i{0} < {1}; ++i{0}) ", d, size).str();
    std::string inner = call(s.m, 1, 0, 0, 0, name(g.getA()) + " + " + nest.index(0),
                             name(g.getB()) + " + " + nest.index(1),
                             name(g.getOut()) + " + " + nest.index(2));
    // The plan declaration stays outside the loop.
    size_t split = inner.find('\n');
    launch(os, g, "cublasLtMatmul",
           inner.substr(0, split + 1) + "  " + loop + "{\n  " + inner.substr(split + 3) +
               "\n  }",
           shape, work, bytes);
    return success();
  }

  // outputs[i] = body(inputs broadcast to the shape [i], i): one thread per
  // element (grid-stride), or per 4 elements with 16-byte loads and stores
  // when every non-scalar operand is a full, contiguous 4-byte buffer.
  LogicalResult emitElementwise(kern::ElementwiseOp e, llvm::raw_ostream &os, double &flops) {
    ArrayRef<int64_t> shape = e.getShape();
    int64_t n = mrt(e.getOutputs()[0]).getNumElements();
    Block &body = e.getBodyBlock();
    SmallVector<SmallVector<int64_t>> strides;
    for (Value in : e.getInputs())
      strides.push_back(broadcastStrides(mrt(in).getShape(), shape));
    strides.push_back(contiguousStrides(shape));
    LoopNest nest = LoopNest::build(shape, strides);

    llvm::DenseMap<Value, std::string> scalars;
    llvm::DenseSet<Value> invariant;
    std::string preamble, text, params, lambdaParams, loads, vecLoads;
    bool vectorize = n % 4 == 0 && n >= 4;
    SmallVector<std::string> perElement; // lambda argument names in order
    SmallVector<size_t> perElementInput;
    for (auto [k, in] : llvm::enumerate(e.getInputs())) {
      MemRefType t = mrt(in);
      Type et = t.getElementType();
      params += llvm::formatv("{0}const {1} *in{2}", k ? ", " : "", storageType(et), k).str();
      BlockArgument arg = body.getArgument(k);
      if (arg.use_empty())
        continue;
      std::string sn = "a" + std::to_string(k);
      scalars[arg] = sn;
      if (t.getNumElements() == 1) {
        preamble += "  const " + scalarType(et) + " " + sn + " = " +
                    load(et, "in" + std::to_string(k) + "[0]") + ";\n";
        invariant.insert(arg);
        continue;
      }
      perElement.push_back(sn);
      perElementInput.push_back(k);
      lambdaParams += (lambdaParams.empty() ? "" : ", ") + scalarType(et) + " " + sn;
      loads += "    const " + scalarType(et) + " " + sn + " = " +
               load(et, "in" + std::to_string(k) + "[" + nest.index(k) + "]") + ";\n";
      bool full = t.getNumElements() == n && kern::elementBytes(et) == 4 &&
                  (et.isF32() || et.isInteger(32));
      vectorize &= full;
    }
    for (auto [j, out] : llvm::enumerate(e.getOutputs())) {
      Type et = mrt(out).getElementType();
      params += llvm::formatv("{0}{1} *out{2}", params.empty() ? "" : ", ", storageType(et), j)
                    .str();
      vectorize &= et.isF32() || et.isInteger(32);
    }
    scalars[e.getFlatIndex()] = "flat";
    ScalarPrinter printer(scalars, CodeTarget::Cuda);
    int64_t ops = 0;
    for (Operation &op : body.without_terminator()) {
      bool hoist = llvm::all_of(op.getOperands(), [&](Value v) { return invariant.contains(v); });
      std::string stmt;
      if (failed(printer.print(&op, stmt)))
        return failure();
      (hoist ? preamble : text) += (hoist ? "  " : "      ") + stmt;
      if (hoist)
        invariant.insert(op.getResult(0));
      else if (!isa<arith::ConstantOp>(op))
        ++ops;
    }
    auto yield = cast<kern::YieldOp>(body.getTerminator());
    std::string outParams, outDecls, outStores, vecOut;
    for (auto [j, pair] : llvm::enumerate(llvm::zip(e.getOutputs(), yield.getValues()))) {
      auto [out, v] = pair;
      Type et = mrt(out).getElementType();
      outParams += ", " + scalarType(et) + " &o" + std::to_string(j);
      text += "      o" + std::to_string(j) + " = " + scalars.lookup(v) + ";\n";
      outDecls += "    " + scalarType(et) + " o" + std::to_string(j) + ";\n";
      outStores += "    out" + std::to_string(j) + "[i] = " + store(et, "o" + std::to_string(j)) + ";\n";
    }
    double bytes = 0;
    for (Value v : e.getInputs())
      bytes += bufferBytes(mrt(v));
    for (Value v : e.getOutputs())
      bytes += bufferBytes(mrt(v));
    double work = static_cast<double>(n) * ops;
    flops += work;
    if (n == 0)
      return success();

    std::string it = indexType(n);
    std::string lambda = "  auto body = [&](" + lambdaParams +
                         (lambdaParams.empty() ? "" : ", ") + "int64_t flat" + outParams +
                         ") {\n" + text + "  };\n";
    std::string argList = llvm::join(perElement, ", ");
    std::string loop;
    int64_t items = vectorize ? n / 4 : n;
    if (vectorize) {
      loop = llvm::formatv("  for ({0} q = blockIdx.x * ({0}){1} + threadIdx.x; q < {2}u; "
                           "q += ({0})gridDim.x * {1}) {{\n"
                           "    const int64_t i = static_cast<int64_t>(q) * 4;\n",
                           it, kThreads, items)
                 .str();
      for (auto [p, k] : llvm::zip(perElement, perElementInput)) {
        Type et = mrt(e.getInputs()[k]).getElementType();
        loop += llvm::formatv("    const {0} x{1} = reinterpret_cast<const {0} *>(in{1})[q];\n",
                              et.isF32() ? "float4" : "int4", k)
                    .str();
      }
      SmallVector<std::string> outVecs;
      for (auto [j, out] : llvm::enumerate(e.getOutputs())) {
        Type et = mrt(out).getElementType();
        loop += llvm::formatv("    {0} y{1};\n", et.isF32() ? "float4" : "int4", j).str();
      }
      for (const char *lane : {"x", "y", "z", "w"}) {
        std::string call = "    body(";
        for (auto [p, k] : llvm::zip(perElement, perElementInput))
          call += "x" + std::to_string(k) + "." + lane + ", ";
        call += std::string("i + ") + std::to_string(lane[0] == 'w' ? 3 : lane[0] - 'x');
        for (size_t j = 0; j < e.getOutputs().size(); ++j)
          call += ", y" + std::to_string(j) + "." + lane;
        loop += call + ");\n";
      }
      for (size_t j = 0; j < e.getOutputs().size(); ++j) {
        Type et = mrt(e.getOutputs()[j]).getElementType();
        loop += llvm::formatv("    reinterpret_cast<{0} *>(out{1})[q] = y{1};\n",
                              et.isF32() ? "float4" : "int4", j)
                    .str();
      }
      loop += "  }\n";
    } else {
      loop = llvm::formatv("  for ({0} i = blockIdx.x * ({0}){1} + threadIdx.x; i < {2}u; "
                           "i += ({0})gridDim.x * {1}) {{\n",
                           it, kThreads, items)
                 .str();
      loop += coordinates(nest.sizes, "i", it);
      loop += loads + outDecls + "    body(" + argList + (argList.empty() ? "" : ", ") +
              "static_cast<int64_t>(i)";
      for (size_t j = 0; j < e.getOutputs().size(); ++j)
        loop += ", o" + std::to_string(j);
      loop += ");\n" + outStores + "  }\n";
    }
    std::string kernelText =
        llvm::formatv("static __global__ void __launch_bounds__({0}) @NAME@_kernel({1}) {{\n",
                      kThreads, params)
            .str() +
        preamble + lambda + loop + "}\n";
    std::string argNames;
    for (size_t k = 0; k < e.getInputs().size(); ++k)
      argNames += (k ? ", in" : "in") + std::to_string(k);
    for (size_t j = 0; j < e.getOutputs().size(); ++j)
      argNames += (argNames.empty() ? "out" : ", out") + std::to_string(j);
    kernelText += llvm::formatv("extern \"C\" void @NAME@(cudaStream_t s, {0}) {{\n"
                                "  @NAME@_kernel<<<{1}, {2}, 0, s>>>({3});\n}\n",
                                params, blocksFor(items), kThreads, argNames)
                      .str();
    std::string kernel = kernels_.add(vectorize ? "ew4" : "ew", kernelText, params);
    std::string call = kernel + "(s";
    for (Value v : e.getInputs())
      call += ", " + name(v);
    for (Value v : e.getOutputs())
      call += ", " + name(v);
    launch(os, e, kernel, call + ");",
           llvm::formatv("{0}x{1}", blocksFor(items), kThreads).str(), work, bytes);
    return success();
  }

  // out = sum / mean / max of input over axes, as one of the prelude's
  // families after merging neighbouring dimensions: rows (innermost
  // reduced), middle (outer x reduced x inner), or a generated kernel with
  // one thread per output for the rare interleaved cases.
  LogicalResult emitReduce(kern::ReduceOp r, llvm::raw_ostream &os, double &flops) {
    MemRefType in = mrt(r.getInput()), out = mrt(r.getOut());
    ArrayRef<int64_t> shape = in.getShape();
    Type et = out.getElementType();
    int kind = r.getKind() == kern::ReduceKind::sum ? 0
               : r.getKind() == kern::ReduceKind::mean ? 1
                                                        : 2;
    // Runs of kept (false) / reduced (true) dimensions, size-1 dims dropped.
    SmallVector<std::pair<bool, int64_t>> runs;
    for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
      if (shape[d] == 1)
        continue;
      bool reduced = llvm::is_contained(r.getAxes(), d);
      if (!runs.empty() && runs.back().first == reduced)
        runs.back().second *= shape[d];
      else
        runs.push_back({reduced, shape[d]});
    }
    flops += in.getNumElements();
    if (in.getNumElements() == 0 || out.getNumElements() == 0)
      return success(); // (an empty input: the output is left to the plan)
    std::string st = storageType(et);
    double bytes = bufferBytes(in) + bufferBytes(out);
    auto family = [&](StringRef launcher, const std::string &sizes) {
      return emitFamily(r, os, "reduce",
                        llvm::formatv("tcc_cuda::{0}<{1}, {2}>(p0, p1, {3}, s);", launcher, st,
                                      kind, sizes),
                        {r.getInput(), r.getOut()}, {false, true}, false,
                        in.getNumElements(), bytes, launcher.drop_front(7).str() + "(" + sizes + ")");
    };
    auto isPattern = [&](std::initializer_list<bool> p) {
      if (runs.size() != p.size())
        return false;
      size_t i = 0;
      for (bool b : p)
        if (runs[i++].first != b)
          return false;
      return true;
    };
    if (runs.empty())
      return family("launch_reduce_rows", "1, 1");
    if (isPattern({true}))
      return family("launch_reduce_rows", "1, " + std::to_string(runs[0].second));
    if (isPattern({false}))
      return family("launch_reduce_rows", std::to_string(runs[0].second) + ", 1");
    if (isPattern({false, true}))
      return family("launch_reduce_rows", llvm::formatv("{0}, {1}", runs[0].second,
                                                        runs[1].second));
    if (isPattern({true, false}))
      return family("launch_reduce_middle",
                    llvm::formatv("1, {0}, {1}", runs[0].second, runs[1].second));
    if (isPattern({false, true, false}))
      return family("launch_reduce_middle", llvm::formatv("{0}, {1}, {2}", runs[0].second,
                                                          runs[1].second, runs[2].second));
    return emitGenericReduce(r, os, kind, bytes);
  }

  LogicalResult emitGenericReduce(kern::ReduceOp r, llvm::raw_ostream &os, int kind,
                                  double bytes) {
    MemRefType in = mrt(r.getInput()), out = mrt(r.getOut());
    Type et = out.getElementType();
    ReduceAxes axes = ReduceAxes::of(r);
    const SmallVector<int64_t> &keptSizes = axes.keptSizes, &keptStrides = axes.keptStrides,
                               &redSizes = axes.reducedSizes, &redStrides = axes.reducedStrides;
    int64_t count = axes.count;
    std::string st = storageType(et), ct = scalarType(et);
    std::string acc = kind == 2 ? ct : "double";
    std::string it = indexType(in.getNumElements());
    std::string keptOff = "0", redOff = "0";
    for (auto [d, s] : llvm::enumerate(keptStrides))
      keptOff += llvm::formatv(" + o{0} * {1}", d, s).str();
    for (auto [d, s] : llvm::enumerate(redStrides))
      redOff += llvm::formatv(" + j{0} * {1}", d, s).str();
    std::string init = kind == 2 ? "-std::numeric_limits<" + ct + ">::infinity()" : "0.0";
    std::string combine =
        kind == 2 ? "{ const " + ct + " v = " + load(et, "in[base + " + redOff + "]") +
                        "; acc = (v > acc || v != v) ? v : acc; }"
                  : "acc += " + load(et, "in[base + " + redOff + "]") + ";";
    std::string scale = kind == 1 ? llvm::formatv(" * (1.0 / {0})", count).str() : "";
    int64_t n = out.getNumElements();
    std::string params = "const " + st + " *in, " + st + " *out";
    std::string text = llvm::formatv(
        "static __global__ void __launch_bounds__({0}) @NAME@_kernel({1}) {{\n"
        "  for ({2} o = blockIdx.x * ({2}){0} + threadIdx.x; o < {3}u; o += ({2})gridDim.x * {0}) "
        "{{\n{4}"
        "    const {2} base = {5};\n"
        "    {6} acc = {7};\n"
        "    for ({2} r = 0; r < {8}u; ++r) {{\n{9}"
        "      {10}\n    }\n"
        "    out[o] = {11};\n  }\n}\n"
        "extern \"C\" void @NAME@(cudaStream_t s, {1}) {{\n"
        "  @NAME@_kernel<<<{12}, {0}, 0, s>>>(in, out);\n}\n",
        kThreads, params, it, n, coordinates(keptSizes, "o", it, "o"), keptOff, acc, init,
        count, coordinates(redSizes, "r", it, "j"), combine,
        store(et, "static_cast<" + ct + ">(acc" + scale + ")"), blocksFor(n));
    std::string kernel = kernels_.add("reduce", text, params);
    launch(os, r, kernel, kernel + "(s, " + name(r.getInput()) + ", " + name(r.getOut()) + ");",
           llvm::formatv("{0}x{1}", blocksFor(n), kThreads).str(), in.getNumElements(), bytes);
    return success();
  }

  func::FuncOp f_;
  std::string entry_;
  KernelRegistry &kernels_;
  std::vector<Launch> launches_; // in label order
  const CudaCodegenOptions &options_;
  int &gemmSites_;
  ValueNames names_;
  OutputScratch scratch_{0, 0, 256};
  std::string body_, hyper_, finish_;
  std::vector<std::string> labels_;
  int64_t controlBytes_ = 64;
};

std::string formatCount(double v) {
  const char *units[] = {"", "K", "M", "G", "T"};
  int u = 0;
  while (v >= 1000 && u < 4) {
    v /= 1000;
    ++u;
  }
  return llvm::formatv("{0:f1}{1}", v, units[u]).str();
}

} // namespace

FailureOr<GeneratedCudaStep> generateCudaStep(ModuleOp module,
                                              const CudaCodegenOptions &options) {
  FailureOr<StepInterface> iface = collectStepInterface(module, "cuda codegen");
  if (failed(iface))
    return failure();

  GeneratedCudaStep step;
  KernelRegistry kernels;
  int gemmSites = 0;
  int64_t planned = iface->plannedWorkspace;
  CudaFunctionEmitter train(iface->train, "train", kernels, options, gemmSites);
  if (failed(train.emit(planned, step.trainFlops)))
    return failure();
  CudaFunctionEmitter eval(iface->eval, "eval", kernels, options, gemmSites);
  if (failed(eval.emit(planned, step.evalFlops)))
    return failure();
  // The kernel list: train's launches, then eval's.
  std::vector<Launch> launches = train.launches();
  llvm::append_range(launches, eval.launches());
  // Workspace: [plan][output scratch][control block][cuBLASLt workspace].
  int64_t scratch = std::max(train.outputScratchBytes(), eval.outputScratchBytes());
  int64_t control = (planned + scratch + 255) / 256 * 256;
  int64_t controlBytes = std::max(train.controlBytes(), eval.controlBytes());
  int64_t gemmWorkspace = (control + controlBytes + 255) / 256 * 256;
  step.workspaceBytes = gemmWorkspace + kGemmWorkspaceBytes;
  step.launches = static_cast<int64_t>(launches.size());

  std::string src;
  llvm::raw_string_ostream s(src);
  s << "// Generated by tcc from model '" << iface->modelName << "' for target cuda ("
    << options.arch << "). Do not edit: regenerate with tcc compile.\n"
    << "// Host side: compiled by the host C++ compiler, linked with the kernel\n"
    << "// units (kernels_*.cu), the CUDA runtime and cuBLASLt.\n\n";
  s << "// ---- step ABI (runtime/include/tcc/step_abi.h) ----\n"
    << embedded::kStepAbiHeader << "\n";
  s << "// ---- CUDA host support (compiler/codegen/cuda_host_support.h) ----\n"
    << "#define TCC_STEP_ARCH \"" << options.arch << "\"\n"
    << embedded::kCudaHostSupport << "\n";
  s << "// ---- kernels (defined in the kernel units) ----\n";
  for (const std::string &d : kernels.decls())
    s << d << "\n";
  s << "extern \"C\" __attribute__((visibility(\"default\"))) const tcc_step_descriptor *\n"
    << "tcc_step_get_descriptor(void);\n\n";
  s << "// ---- the step ----\n";
  s << "static constexpr uint64_t tcc_control_offset = " << control << ";\n";
  s << "static constexpr uint64_t tcc_gemm_workspace_offset = " << gemmWorkspace << ";\n";
  s << "static constexpr uint64_t tcc_gemm_workspace_bytes = " << kGemmWorkspaceBytes << ";\n\n";
  s << train.source() << eval.source();
  emitDescriptor(s, *iface, "cuda", "  \"" + options.arch + "\",\n", step.workspaceBytes,
                 step.trainFlops, step.evalFlops, "&tcc_cuda_host::kDeviceApi");
  step.hostSource = std::move(src);

  // Kernel units: distinct kernels spread round-robin, each unit with the
  // prelude, so nvcc can compile them in parallel.
  const std::vector<std::string> &defs = kernels.defs();
  step.distinctKernels = static_cast<int64_t>(defs.size());
  int units = options.kernelUnits > 0
                  ? options.kernelUnits
                  : static_cast<int>(std::clamp<int64_t>((defs.size() + 11) / 12, 1, 8));
  units = std::max(1, std::min<int>(units, std::max<size_t>(defs.size(), 1)));
  step.kernelUnits.assign(units, "");
  for (int u = 0; u < units; ++u)
    step.kernelUnits[u] = "// Generated by tcc from model '" + iface->modelName +
                          "': kernel unit " + std::to_string(u) + " of " +
                          std::to_string(units) + ". Do not edit.\n" +
                          "// ---- CUDA kernels (compiler/codegen/cuda_prelude.cuh) ----\n" +
                          embedded::kCudaPrelude + "\n// ---- generated kernels ----\n";
  for (auto [i, d] : llvm::enumerate(defs))
    step.kernelUnits[i % units] += "\n" + d;

  // The kernel list.
  std::string list;
  llvm::raw_string_ostream l(list);
  l << "# tcc kernel list: model '" << iface->modelName << "', target cuda " << options.arch
    << "\n# " << launches.size() << " launches, " << defs.size()
    << " distinct generated kernels (plus cuBLASLt products)\n";
  l << llvm::formatv("# {0,-6} {1,4} {2,-24} {3,-22} {4,9} {5,9}  {6}\n", "entry", "#",
                     "kernel", "launch (grid x block)", "FLOPs", "bytes", "model node");
  std::string previous;
  int index = 0;
  for (const Launch &launch : launches) {
    if (launch.entry != previous)
      index = 0;
    previous = launch.entry;
    l << llvm::formatv("  {0,-6} {1,4} {2,-24} {3,-22} {4,9} {5,9}  {6}\n", launch.entry,
                       index++, launch.kernel, launch.shape, formatCount(launch.flops),
                       formatCount(launch.bytes), launch.node);
  }
  step.kernelList = std::move(list);
  return step;
}

} // namespace tcc
