// kern.conv2d / kern.pool2d: wrappers around the prelude's launch_conv2d /
// launch_pool2d (prelude/conv_kernels.cuh), one per shape, type and product
// or mode (the shape is part of the wrapper's text, so identical layers
// share one). Direct NCHW or channels-last (layout "NHWC") kernels, one thread per output element (one block
// per weight-gradient element), gradients in gather form: deterministic, no
// atomics. The launchers return a cudaError_t, which the host body turns
// into a step failure naming the launch.
//
// cuDNN: a convolution on f32 / bf16 / f16 (when the step is built with the
// cuDNN frontend) also gets a file-scope tcc_cuda_host::ConvSite, planned
// before the entry's first call (host_support/attention.h); the host line
// runs cuDNN when the site's plan was built, else the wrapper.
#include "compiler/codegen/cuda/CudaStepEmitter.h"

#include "compiler/codegen/common/CTypes.h"
#include "llvm/Support/FormatVariadic.h"

namespace tcc::codegen::cuda {

namespace {

// A rank-4 shape in NCHW order: channels-last (N, H, W, C) -> (N, C, H, W),
// and a channels-last weight (O, KH, KW, C/g) -> (O, C/g, KH, KW).
SmallVector<int64_t> nchwDims(ArrayRef<int64_t> shape, bool nhwc) {
  if (!nhwc)
    return SmallVector<int64_t>(shape);
  return {shape[0], shape[3], shape[1], shape[2]};
}

// Wrapper parameters p0..pN (storage types), the launcher's arguments (the
// prelude's bf16 / f16 pointer types) and the host call's arguments.
struct ConvWrapper {
  std::string params, launcherArgs, hostArgs;
  double bytes = 0;
  int next = 0;

  void add(Value v, bool written, const ValueNames &names) {
    Type et = mrt(v).getElementType();
    std::string p = "p" + std::to_string(next++);
    params += llvm::formatv("{0}{1}{2} *{3}", params.empty() ? "" : ", ", written ? "" : "const ",
                            storageType(et), p)
                  .str();
    launcherArgs += ", " + familyPointer(et, p, written, CodeTarget::Cuda);
    hostArgs += ", " + names(v);
    bytes += bufferBytes(mrt(v));
  }
  void addNull(Type et) {
    launcherArgs += llvm::formatv(", static_cast<const {0} *>(nullptr)",
                                  familyElementType(et, CodeTarget::Cuda))
                        .str();
  }
};

} // namespace

LogicalResult CudaStepEmitter::emitConv2d(kern::Conv2dOp op, llvm::raw_ostream &os,
                                          double &flops) {
  StringRef product = op.getProduct();
  int code = product == "forward" ? 0 : product == "input_grad" ? 1 : product == "weight_grad" ? 2 : -1;
  if (code < 0)
    return op.emitOpError("unknown product '") << product << "'";
  // x (N, C, H, W), w (O, C/g, KH, KW), y (N, O, HO, WO) from the operands,
  // in this order also for channels-last buffers (the kernels and cuDNN
  // take the layout apart).
  Value x = code == 0 ? op.getA() : code == 1 ? op.getOut() : op.getB();
  Value w = code == 2 ? op.getOut() : op.getB();
  Value y = code == 0 ? op.getOut() : op.getA();
  const bool nhwc = op.getLayout() == "NHWC";
  if (!nhwc && op.getLayout() != "NCHW")
    return op.emitOpError("unknown layout '") << op.getLayout() << "'";
  SmallVector<int64_t> xs = nchwDims(mrt(x).getShape(), nhwc),
                       ws = nchwDims(mrt(w).getShape(), nhwc),
                       ys = nchwDims(mrt(y).getShape(), nhwc);
  ArrayRef<int64_t> s = op.getStride(), p = op.getPadding(), d = op.getDilation();
  Type et = mrt(op.getOut()).getElementType();
  ConvWrapper wr;
  wr.add(op.getA(), false, names_);
  wr.add(op.getB(), false, names_);
  wr.add(op.getOut(), true, names_);
  double work = 2.0 * ys[0] * ys[1] * ys[2] * ys[3] * ws[1] * ws[2] * ws[3];
  flops += work;
  std::string text = llvm::formatv(
      "extern \"C\" cudaError_t @NAME@(cudaStream_t s, {0}) {{\n"
      "  return tcc_cuda::launch_conv2d<{1}>({2}, tcc_cuda::Conv2dShape{{{3}, {4}, {5}, {6}, "
      "{7}, {8}, {9}, {10}, {11}, {12}, {13}, {14}, {15}, {16}, {17}, {18}{20}}{19}, s);\n}\n",
      wr.params, familyElementType(et, CodeTarget::Cuda), code, xs[0], xs[1], xs[2], xs[3],
      ws[0], ws[2], ws[3], ys[2], ys[3], s[0], s[1], p[0], p[1], d[0], d[1], op.getGroups(),
      wr.launcherArgs, nhwc ? ", true" : "");
  std::string kernel = kernels_.add(("conv2d_" + product).str(), text, wr.params, "cudaError_t");
  int32_t id = nextId();
  std::string call =
      llvm::formatv("if (cudaError_t e = {0}(s{1}); e != cudaSuccess) "
                    "return tcc_cuda_host::cuda_error(e, tcc_cuda_host::where({2}).c_str());",
                    kernel, wr.hostArgs, id)
          .str();
  std::string site = cudnnConvSite(op, code, xs, ws, ys, nhwc);
  if (!site.empty()) // cuDNN when its plan was built, else the kernel
    call = llvm::formatv("if ({0}.cudnn) {{ if (int32_t rc = tcc_cuda_host::cudnn_conv({0}, s{1}, "
                         "ws + tcc_gemm_workspace_offset, tcc_shared_workspace_bytes)) return rc; "
                         "} else {2}",
                         site, wr.hostArgs, call)
               .str();
  // x * w with stride, padding, dilation, groups (the product is in the
  // kernel's name).
  std::string shape = llvm::formatv("{0}x{1}x{2}x{3} * {4}x{5}x{6}x{7} s{8},{9} p{10},{11} "
                                    "d{12},{13} g{14}{15}",
                                    xs[0], xs[1], xs[2], xs[3], ws[0], ws[1], ws[2], ws[3], s[0],
                                    s[1], p[0], p[1], d[0], d[1], op.getGroups(),
                                    nhwc ? " NHWC" : "")
                          .str();
  launch(os, op, kernel, call, shape, work, wr.bytes);
  return success();
}

std::string CudaStepEmitter::cudnnConvSite(kern::Conv2dOp c, int product, ArrayRef<int64_t> x,
                                           ArrayRef<int64_t> w, ArrayRef<int64_t> y,
                                           bool nhwc) {
  Type et = mrt(c.getOut()).getElementType();
  if (!options_.cudnnAttention || !(et.isF32() || et.isBF16() || et.isF16()))
    return "";
  int32_t id = nextId();
  std::string site = llvm::formatv("tcc_{0}_conv_{1}", entry_, id).str();
  ArrayRef<int64_t> s = c.getStride(), p = c.getPadding(), d = c.getDilation();
  attentionDecls_ += llvm::formatv(
      "// {0}\nstatic tcc_cuda_host::ConvSite {1} = {{{{{2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}, "
      "{10}, {11}, {12}, {13}, {14}, {15}, {16}, {17}, {18}, {19}, {21}}, {20}};\n",
      locName(c->getLoc()), site, product, et.isBF16() ? 1 : et.isF16() ? 2 : 0, x[0], x[1],
      x[2], x[3], w[0], w[2], w[3], y[2], y[3], s[0], s[1], p[0], p[1], d[0], d[1],
      c.getGroups(), id, nhwc ? 1 : 0);
  convSites_.push_back(site);
  return site;
}

LogicalResult CudaStepEmitter::emitPool2d(kern::Pool2dOp op, llvm::raw_ostream &os,
                                          double &flops) {
  StringRef mode = op.getMode();
  int code = mode == "max" ? 0 : mode == "avg" ? 1 : mode == "max_grad" ? 2 : mode == "avg_grad" ? 3 : -1;
  if (code < 0)
    return op.emitOpError("unknown mode '") << mode << "'";
  bool grad = code >= 2;
  if (grad != static_cast<bool>(op.getGrad()))
    return op.emitOpError(grad ? "needs a grad operand" : "takes no grad operand");
  const bool nhwc = op.getLayout() == "NHWC";
  if (!nhwc && op.getLayout() != "NCHW")
    return op.emitOpError("unknown layout '") << op.getLayout() << "'";
  // x (N, C, H, W), y (N, C, HO, WO), in this order for NHWC buffers too.
  SmallVector<int64_t> xs = nchwDims(mrt(op.getInput()).getShape(), nhwc);
  SmallVector<int64_t> ys = nchwDims(mrt(grad ? op.getGrad() : op.getOut()).getShape(), nhwc);
  ArrayRef<int64_t> k = op.getKernel(), s = op.getStride(), p = op.getPadding();
  Type et = mrt(op.getOut()).getElementType();
  ConvWrapper wr;
  wr.add(op.getInput(), false, names_);
  if (grad)
    wr.add(op.getGrad(), false, names_);
  else
    wr.addNull(et);
  wr.add(op.getOut(), true, names_);
  double work = static_cast<double>(ys[0]) * ys[1] * ys[2] * ys[3] * k[0] * k[1];
  flops += work;
  std::string text = llvm::formatv(
      "extern \"C\" cudaError_t @NAME@(cudaStream_t s, {0}) {{\n"
      "  return tcc_cuda::launch_pool2d<{1}>({2}, tcc_cuda::Pool2dShape{{{3}, {4}, {5}, {6}, "
      "{7}, {8}, {9}, {10}, {11}, {12}, {13}{15}}{14}, s);\n}\n",
      wr.params, familyElementType(et, CodeTarget::Cuda), code, xs[0] * xs[1], xs[2], xs[3],
      ys[2], ys[3], k[0], k[1], s[0], s[1], p[0], p[1], wr.launcherArgs,
      nhwc ? ", " + std::to_string(xs[1]) : std::string());
  std::string kernel = kernels_.add(("pool2d_" + mode).str(), text, wr.params, "cudaError_t");
  int32_t id = nextId();
  std::string call =
      llvm::formatv("if (cudaError_t e = {0}(s{1}); e != cudaSuccess) "
                    "return tcc_cuda_host::cuda_error(e, tcc_cuda_host::where({2}).c_str());",
                    kernel, wr.hostArgs, id)
          .str();
  std::string shape = llvm::formatv("{0}x{1}x{2}x{3} k{4},{5} s{6},{7} p{8},{9}{10}", xs[0],
                                    xs[1], xs[2], xs[3], k[0], k[1], s[0], s[1], p[0], p[1],
                                    nhwc ? " NHWC" : "")
                          .str();
  launch(os, op, kernel, call, shape, work, wr.bytes);
  return success();
}

} // namespace tcc::codegen::cuda
