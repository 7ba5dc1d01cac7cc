// kern.layer_norm / kern.layer_norm_grad: wrappers around the prelude's
// launch_layer_norm / launch_layer_norm_backward (norm_kernels.cuh,
// norm_backward_kernels.cuh / norm_launchers.cuh), one per shape and type
// combination. Absent weight, bias or gradient buffers are null pointers
// in the wrapper's text, so each combination is a kernel of its own in the
// list. The backward's launcher returns a cudaError_t (a row too long for
// shared memory), which the host body turns into a step failure naming the
// launch. Batch norm's two reductions wrap launch_batch_norm_stats /
// launch_batch_norm_grad_sums (batch_norm_kernels.cuh /
// batch_norm_launchers.cuh) the same way, with kern::batchNormParts blocks
// per channel. A layer norm whose 16-bit output only FP8 products read is
// left to its first reader's cast (fp8NormCastComputes):
// launch_layer_norm_fp8_quantize normalizes and casts in one pass
// (norm_fp8_kernels.cuh). Likewise a norm backward whose 16-bit copy of dx
// only FP8 products read (fp8NormGradCastComputes):
// launch_layer_norm_backward_fp8_quantize writes dx and its FP8 bytes.
#include "compiler/codegen/cuda/CudaStepEmitter.h"

#include "dialects/kern/NormWorkspace.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

namespace tcc::codegen::cuda {

namespace {

// The wrapper's parameters p0..pN (storage types) for the present buffers,
// the launcher's arguments (null for absent ones, family pointer types
// otherwise) and the host call's arguments.
struct NormWrapper {
  std::string params, launcherArgs, hostArgs;
  SmallVector<Value> buffers;
  int next = 0;

  void add(Value v, bool written, Type nullElement, const ValueNames &names) {
    if (!launcherArgs.empty())
      launcherArgs += ", ";
    if (!v) {
      launcherArgs += llvm::formatv("static_cast<{0}{1} *>(nullptr)", written ? "" : "const ",
                                    familyElementType(nullElement, CodeTarget::Cuda))
                          .str();
      return;
    }
    Type et = mrt(v).getElementType();
    std::string p = "p" + std::to_string(next++);
    params += llvm::formatv("{0}{1}{2} *{3}", params.empty() ? "" : ", ", written ? "" : "const ",
                            storageType(et), p)
                  .str();
    launcherArgs += familyPointer(et, p, written, CodeTarget::Cuda);
    hostArgs += ", " + names(v);
    buffers.push_back(v);
  }

  // A literal launcher argument between buffers (a flag).
  void addLiteral(StringRef text) {
    launcherArgs += (launcherArgs.empty() ? "" : ", ") + text.str();
  }

  double bytes() const {
    double b = 0;
    for (Value v : buffers)
      b += bufferBytes(mrt(v));
    return b;
  }
};

struct Rows {
  int64_t rows, c;
  static Rows of(Value input) {
    MemRefType x = mrt(input);
    int64_t c = x.getShape().back();
    return {c == 0 ? 0 : x.getNumElements() / c, c};
  }
};

// "bf16", "f32", ... for the kernel list.
std::string elementName(Value v) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << mrt(v).getElementType();
  return s;
}

std::string familyType(Value v) {
  return familyElementType(mrt(v).getElementType(), CodeTarget::Cuda);
}

// The backward's buffers in its launchers' order: grad, x, weight,
// addend, dx, the 16-bit copy of dx (withCopy: launch_layer_norm_backward;
// the FP8 launcher has none), dweight, dbias, dx's column sum, sum_of_cast,
// the workspace.
NormWrapper normGradBuffers(kern::LayerNormGradOp g, bool withCopy, const ValueNames &names) {
  Type et = mrt(g.getInput()).getElementType();
  Type acc = et.isF64() ? et : Float32Type::get(g.getContext());
  NormWrapper w;
  for (Value in : {g.getGrad(), g.getInput(), g.getWeight(), g.getAddend()})
    w.add(in, false, et, names);
  w.add(g.getInputGrad(), true, et, names);
  if (withCopy)
    w.add(g.getInputGradCast(), true, et, names);
  for (Value out : {g.getWeightGrad(), g.getBiasGrad(), g.getInputGradSum()})
    w.add(out, true, et, names);
  w.addLiteral(g.getSumOfCast() ? "true" : "false");
  w.add(g.getWorkspace(), true, acc, names);
  return w;
}

// The row length, the sums wanted and rms are known when the step is
// generated: the backward is compiled for them (NormGradFixed; its branches
// and guards fold away). An empty row (c 0) keeps the runtime kernel,
// which writes zero sums.
std::string normGradFixed(kern::LayerNormGradOp g) {
  const Rows s = Rows::of(g.getInput());
  auto flag = [](bool b) { return b ? "true" : "false"; };
  return s.c <= 0 ? std::string("tcc_cuda::detail::NormGradRuntime")
                  : llvm::formatv("tcc_cuda::NormGradFixed<{0}, {1}, {2}, {3}, {4}, {5}>", s.c,
                                  flag(g.getWeightGrad() != nullptr),
                                  flag(g.getBiasGrad() != nullptr),
                                  flag(g.getInputGradSum() != nullptr), flag(g.getSumOfCast()),
                                  flag(g.getRms()))
                        .str();
}

} // namespace

LogicalResult CudaStepEmitter::emitLayerNorm(kern::LayerNormOp n, llvm::raw_ostream &os,
                                             double &flops) {
  Rows s = Rows::of(n.getInput());
  Type et = mrt(n.getInput()).getElementType();
  NormWrapper w;
  w.add(n.getInput(), false, et, names_);
  w.add(n.getWeight(), false, et, names_);
  w.add(n.getBias(), false, et, names_);
  w.add(n.getOut(), true, et, names_);
  double work = 8.0 * s.rows * s.c;
  flops += work;
  std::string text = llvm::formatv(
      "extern \"C\" void @NAME@(cudaStream_t s, {0}) {{\n"
      "  tcc_cuda::launch_layer_norm<{1}, {2}>({3}, {4}, {5}, {6:e17}, {7}, s);\n}\n",
      w.params, familyType(n.getInput()), familyType(n.getOut()), w.launcherArgs, s.rows, s.c,
      n.getEps().convertToDouble(), n.getRms() ? "true" : "false");
  std::string kernel = kernels_.add(n.getRms() ? "rms_norm" : "layer_norm", text, w.params);
  launch(os, n, kernel, kernel + "(s" + w.hostArgs + ");",
         llvm::formatv("{0} rows of {1}{2}", s.rows, s.c, n.getRms() ? ", rms" : "").str(), work,
         w.bytes());
  return success();
}

LogicalResult CudaStepEmitter::emitLayerNormGrad(kern::LayerNormGradOp g, llvm::raw_ostream &os,
                                                 double &flops) {
  Rows s = Rows::of(g.getInput());
  NormWrapper w = normGradBuffers(g, /*withCopy=*/true, names_);
  double work = 16.0 * s.rows * s.c;
  flops += work;
  std::string fixed = normGradFixed(g);
  std::string text = llvm::formatv(
      "extern \"C\" cudaError_t @NAME@(cudaStream_t s, {0}) {{\n"
      "  return tcc_cuda::launch_layer_norm_backward<{1}, {2}, {9}>({3}, {4}, {5}, {6}, {7:e17}, "
      "{8}, s);\n}\n",
      w.params, familyType(g.getGrad()), familyType(g.getInput()), w.launcherArgs,
      kern::normGradParts(s.rows), s.rows, s.c, g.getEps().convertToDouble(),
      g.getRms() ? "true" : "false", fixed);
  std::string kernel = kernels_.add(g.getRms() ? "rms_norm_grad" : "layer_norm_grad", text,
                                    w.params, "cudaError_t");
  int32_t id = nextId();
  std::string call =
      llvm::formatv("if (cudaError_t e = {0}(s{1}); e != cudaSuccess) "
                    "return tcc_cuda_host::cuda_error(e, tcc_cuda_host::where({2}).c_str());",
                    kernel, w.hostArgs, id)
          .str();
  bool sums = g.getWeightGrad() || g.getBiasGrad() || g.getInputGradSum();
  std::string columnSum;
  if (Value sum = g.getInputGradSum())
    columnSum = ", column sum of " +
                (g.getSumOfCast() ? elementName(g.getInputGradCast())
                                  : elementName(g.getInputGrad())) +
                " as " + elementName(sum);
  launch(os, g, kernel, call,
         llvm::formatv("{0} rows of {1}{2}{4}{5}{6}{3}", s.rows, s.c, g.getRms() ? ", rms" : "",
                       sums ? llvm::formatv(", {0} parts", kern::normGradParts(s.rows)).str()
                            : std::string(),
                       g.getAddend() ? ", plus residual" : "",
                       g.getInputGradCast() ? ", also as " + elementName(g.getInputGradCast())
                                            : std::string(),
                       columnSum)
             .str(),
         work, w.bytes());
  return success();
}

namespace {

// x (N, C, S...) as N, C, S and its parts (kern::batchNormDims).
kern::BatchNormDims channelsOf(Value input) {
  MemRefType x = mrt(input);
  return kern::batchNormDims(x.getDimSize(0), x.getDimSize(1), x.getNumElements());
}

} // namespace

// One launch of `launcher` (launch_batch_norm_stats / _grad_sums) on
// `buffers` (inputs, then outputs from `firstWritten` on; an absent
// workspace a typed null), `flopsPerValue` per element of `input`.
LogicalResult CudaStepEmitter::emitBatchNormReduction(Operation *op, Value input,
                                                      ArrayRef<Value> buffers,
                                                      size_t firstWritten, StringRef launcher,
                                                      double flopsPerValue,
                                                      llvm::raw_ostream &os, double &flops) {
  kern::BatchNormDims d = channelsOf(input);
  Type stats = kern::batchNormStatsType(mrt(input).getElementType());
  NormWrapper w;
  for (auto [i, v] : llvm::enumerate(buffers))
    w.add(v, i >= firstWritten, stats, names_);
  double work = flopsPerValue * d.n * d.c * d.s;
  flops += work;
  std::string text = llvm::formatv("extern \"C\" void @NAME@(cudaStream_t s, {0}) {{\n"
                                   "  tcc_cuda::launch_{1}({2}, {3}, {4}, {5}, {6}, s);\n}\n",
                                   w.params, launcher, w.launcherArgs, d.n, d.c, d.s, d.parts);
  std::string kernel = kernels_.add(launcher, text, w.params);
  std::string shape =
      llvm::formatv("{0} channels of {1} x {2}{3}", d.c, d.n, d.s,
                    d.parts > 1 ? llvm::formatv(", {0} parts", d.parts).str() : std::string())
          .str();
  launch(os, op, kernel, kernel + "(s" + w.hostArgs + ");", shape, work, w.bytes());
  return success();
}

LogicalResult CudaStepEmitter::emitBatchNormStats(kern::BatchNormStatsOp op, llvm::raw_ostream &os,
                                                  double &flops) {
  return emitBatchNormReduction(
      op, op.getInput(), {op.getInput(), op.getMean(), op.getVar(), op.getWorkspace()},
      /*firstWritten=*/1, "batch_norm_stats", 3.0, os, flops);
}

LogicalResult CudaStepEmitter::emitBatchNormGradSums(kern::BatchNormGradSumsOp op,
                                                     llvm::raw_ostream &os, double &flops) {
  return emitBatchNormReduction(op, op.getInput(),
                                {op.getGrad(), op.getInput(), op.getMean(), op.getRstd(),
                                 op.getGradSum(), op.getGradXhatSum(), op.getWorkspace()},
                                /*firstWritten=*/4, "batch_norm_grad_sums", 4.0, os, flops);
}

// Vec16<T>::n of the prelude: the elements of `t` in one 16-byte access.
static int64_t vec16(Type t) { return 16 / std::max<int64_t>(1, kern::elementBytes(t)); }

std::optional<std::string> CudaStepEmitter::fp8NormCastComputes(kern::LayerNormOp n) {
  // Not looked for in a module without FP8 products, or for an output that
  // is a step argument (its bytes outlive the step).
  if (!fp8ProductsIn(n))
    return std::nullopt;
  Value y = n.getOut();
  const Footprint out = footprint(y);
  if (out.argument)
    return std::nullopt;
  std::string why;
  SmallVector<std::pair<Operation *, int>> readers = fp8ReadersOf(n, y, why);
  if (readers.empty()) // said only where FP8 products read it
    return std::nullopt;
  if (!why.empty())
    return why;
  if (n->getParentOp() != f_.getOperation())
    return std::string("not in the step's top-level block");
  Type xt = mrt(n.getInput()).getElementType(), yt = mrt(y).getElementType();
  if (!yt.isBF16() && !yt.isF16())
    return std::string("its output is not 16-bit");
  if (!xt.isF32() && !xt.isBF16() && !xt.isF16())
    return std::string("its input is not f32, bf16 or f16");
  const Rows s = Rows::of(n.getInput());
  // The fused kernel sums each row as the vector norm kernel does.
  const int64_t v = std::min(vec16(xt), vec16(yt));
  if (s.c % v != 0)
    return llvm::formatv("its rows ({0}) are not a multiple of the vector kernel's {1}", s.c, v)
        .str();
  if (4 * (s.c + 4) > 96 * 1024) // prelude kNormFp8SharedBudget: a band of 4 rows
    return std::string("its rows are too long for the fused kernel's shared band");
  OperandCast first = operandOf(Fp8Gemm::of(readers.front().first), readers.front().second);
  if (first.rows != s.rows || first.cols != s.c)
    return std::string("its FP8 reader takes it in another shape");
  SmallVector<Value> inputs = {n.getInput()};
  for (Value in : {n.getWeight(), n.getBias()})
    if (in)
      inputs.push_back(in);
  if (llvm::any_of(inputs, [&](Value in) { return overlaps(footprint(in), out); }))
    return std::string("it works in place");
  if (std::optional<std::string> no = fp8OneCastFor(readers))
    return no;
  // The inputs must still hold n's operands when the first reader casts.
  if (std::optional<std::string> written =
          fp8InputWrittenBefore(n, inputs, readers.front().first))
    return written;
  fp8Deferred_.push_back({out, n.getOperation()});
  return std::string();
}

CudaStepEmitter::Fp8NormCastKernel
CudaStepEmitter::fp8NormCastKernel(kern::LayerNormOp n, const OperandCast &c, bool plain,
                                   bool transposed, bool delayed) {
  const Rows s = Rows::of(n.getInput());
  Type et = mrt(n.getInput()).getElementType();
  NormWrapper w;
  w.add(n.getInput(), false, et, names_);
  w.add(n.getWeight(), false, et, names_);
  w.add(n.getBias(), false, et, names_);
  const char *f8 = c.e5m2 ? "tcc_cuda::e5m2" : "tcc_cuda::e4m3";
  Fp8NormCastKernel k;
  k.params = w.params + ", uint8_t *q8, uint8_t *q8t, void *qscale" +
             (delayed ? ", float *qrecord" : "");
  k.text =
      llvm::formatv(
          "extern \"C\" cudaError_t @NAME@(cudaStream_t s, {0}) {{\n"
          "  return tcc_cuda::launch_layer_norm_fp8_quantize<{1}, {2}, {3}>({4}, {5}, {6}, "
          "{7:e17}, {8}, {9}, {10}, static_cast<tcc_cuda::Fp8TensorScale *>(qscale), {11}, s);\n"
          "}\n",
          k.params, familyType(n.getInput()), familyType(n.getOut()), f8, w.launcherArgs, s.rows,
          s.c, n.getEps().convertToDouble(), n.getRms() ? "true" : "false",
          plain ? llvm::formatv("reinterpret_cast<{0} *>(q8)", f8).str() : "nullptr",
          transposed ? llvm::formatv("reinterpret_cast<{0} *>(q8t)", f8).str() : "nullptr",
          delayed ? "reinterpret_cast<tcc_cuda::Fp8ScalingRecord *>(qrecord)" : "nullptr")
          .str();
  k.args = w.hostArgs.substr(2); // without the leading ", "
  k.flops = 8.0 * s.rows * s.c;  // emitLayerNorm's
  k.bytes = w.bytes();
  return k;
}

std::optional<std::string> CudaStepEmitter::fp8NormGradCastComputes(kern::LayerNormGradOp g) {
  // Looked for where the backward's 16-bit copy of dx (the residual
  // gradient as a product's operand) is not a step argument and FP8
  // products read it; said only then.
  Value y = g.getInputGradCast();
  if (!y || !fp8ProductsIn(g))
    return std::nullopt;
  const Footprint copy = footprint(y);
  if (copy.argument)
    return std::nullopt;
  std::string why;
  SmallVector<std::pair<Operation *, int>> readers = fp8ReadersOf(g, y, why);
  if (readers.empty())
    return std::nullopt;
  if (!why.empty())
    return why;
  if (g->getParentOp() != f_.getOperation())
    return std::string("not in the step's top-level block");
  Type xt = mrt(g.getInput()).getElementType(), gt = mrt(g.getGrad()).getElementType(),
       yt = mrt(y).getElementType();
  auto floating = [](Type t) { return t.isF32() || t.isBF16() || t.isF16(); };
  if (!yt.isBF16() && !yt.isF16())
    return std::string("its copy of dx is not 16-bit");
  if (!floating(xt) || !floating(gt) || mrt(g.getInputGrad()).getElementType() != xt)
    return std::string("its rows, gradient or dx are not f32, bf16 or f16 (dx as the rows)");
  const Rows s = Rows::of(g.getInput());
  // The fused kernel is the vector backward (prelude
  // launch_layer_norm_backward_fp8_quantize): V elements a chunk, whole
  // words of FP8 bytes.
  const int64_t v = std::min({vec16(xt), vec16(gt), vec16(yt)});
  if (s.c % v != 0)
    return llvm::formatv("its rows ({0}) are not a multiple of the vector kernel's {1}", s.c, v)
        .str();
  // Its shared memory: the warps' sums (prelude layer_norm_backward_warps:
  // as many of 8 as fit 64 KiB) and a band of FP8 bytes, a row a warp.
  const int64_t slices = (g.getWeightGrad() ? 1 : 0) + (g.getBiasGrad() ? 1 : 0) +
                         (g.getInputGradSum() ? 1 : 0);
  const int64_t warps =
      slices == 0 ? 8 : std::clamp<int64_t>(64 * 1024 / std::max<int64_t>(1, slices * s.c * 4),
                                            1, 8);
  if (warps * slices * s.c * 4 + warps * (s.c + 4) > 227 * 1024)
    return std::string("its rows are too long for the fused kernel's shared band beside its sums");
  OperandCast first = operandOf(Fp8Gemm::of(readers.front().first), readers.front().second);
  if (first.rows != s.rows || first.cols != s.c)
    return std::string("its FP8 reader takes it in another shape");
  if (std::optional<std::string> no = fp8OneCastFor(readers))
    return no;
  // It runs at its first reader's cast instead: nothing between may write
  // what it reads or writes, or read what it writes.
  SmallVector<Value> touched = {g.getGrad(), g.getInput(), g.getInputGrad()};
  SmallVector<Value> written = {g.getInputGrad()};
  for (Value in : {g.getWeight(), g.getAddend()})
    if (in)
      touched.push_back(in);
  for (Value out : {g.getWeightGrad(), g.getBiasGrad(), g.getInputGradSum(), g.getWorkspace()})
    if (out) {
      touched.push_back(out);
      written.push_back(out);
    }
  Operation *maker = readers.front().first;
  if (std::optional<std::string> no = fp8InputWrittenBefore(g, touched, maker))
    return no;
  for (Operation *op = g->getNextNode(); op != maker; op = op->getNextNode())
    for (Value out : written)
      if (mayRead(op, footprint(out)))
        return "an output is read (by " + op->getName().getStringRef().str() +
               ") before its FP8 reader";
  fp8Deferred_.push_back({copy, g.getOperation()});
  return std::string();
}

CudaStepEmitter::Fp8NormCastKernel
CudaStepEmitter::fp8NormGradCastKernel(kern::LayerNormGradOp g, const OperandCast &c, bool plain,
                                       bool transposed, bool delayed) {
  const Rows s = Rows::of(g.getInput());
  NormWrapper w = normGradBuffers(g, /*withCopy=*/false, names_);
  const char *f8 = c.e5m2 ? "tcc_cuda::e5m2" : "tcc_cuda::e4m3";
  Fp8NormCastKernel k;
  k.params = w.params + ", uint8_t *q8, uint8_t *q8t, void *qscale" +
             (delayed ? ", float *qrecord" : "");
  k.text =
      llvm::formatv(
          "extern \"C\" cudaError_t @NAME@(cudaStream_t s, {0}) {{\n"
          "  return tcc_cuda::launch_layer_norm_backward_fp8_quantize<{1}, {2}, {3}, {4}, {5}>("
          "{6}, {7}, {8}, {9}, {10:e17}, {11}, {12}, {13}, "
          "static_cast<tcc_cuda::Fp8TensorScale *>(qscale), {14}, s);\n}\n",
          k.params, familyType(g.getGrad()), familyType(g.getInput()),
          familyType(g.getInputGradCast()), f8, normGradFixed(g), w.launcherArgs,
          kern::normGradParts(s.rows), s.rows, s.c, g.getEps().convertToDouble(),
          g.getRms() ? "true" : "false",
          plain ? llvm::formatv("reinterpret_cast<{0} *>(q8)", f8).str() : "nullptr",
          transposed ? llvm::formatv("reinterpret_cast<{0} *>(q8t)", f8).str() : "nullptr",
          delayed ? "reinterpret_cast<tcc_cuda::Fp8ScalingRecord *>(qrecord)" : "nullptr")
          .str();
  k.args = w.hostArgs.substr(2); // without the leading ", "
  k.flops = 16.0 * s.rows * s.c; // emitLayerNormGrad's
  k.bytes = w.bytes();
  return k;
}

} // namespace tcc::codegen::cuda
