// kern.attention / kern.attention_grad: calls of the prelude's flash-
// attention launchers (tcc_cuda::launch_attention_forward / _backward, in
// the cuda/prelude attention pieces) through a generated wrapper per shape.
// The launchers return a cudaError_t, which the host body turns into a
// step failure naming the launch, as after_launch does for other kernels.
//
// Dropout: the launchers take the seed key (rng_seed ^ mix64(op_id)) and the
// step by value, read on the host from tcc_step_args. A CUDA graph captures
// launch arguments, so an entry with attention dropout refuses capture
// (tcc_cuda_host::refuse_graph_capture) and runs its kernels one by one.
#include "compiler/codegen/cuda/CudaStepEmitter.h"

#include "compiler/codegen/common/AttentionCall.h"
#include "llvm/Support/FormatVariadic.h"

namespace tcc::codegen::cuda {

namespace {

// Wrapper parameters p0..pN of `buffers` (storage types) and the launcher's
// arguments (bf16 / f16 as tcc_cuda::bf16 / f16 pointers).
struct WrapperArguments {
  std::string params, launcherArgs, hostArgs;
};

// Host arguments point at each strided tensor's first element (buffer +
// its layout offset); tensorIndex[k]: buffer k's index in c.layouts, or -1
// (lse, workspace).
WrapperArguments wrapperArguments(ArrayRef<Value> buffers, ArrayRef<bool> written,
                                  const ValueNames &names, const AttentionCall &c,
                                  ArrayRef<int> tensorIndex) {
  WrapperArguments w;
  for (auto [k, v] : llvm::enumerate(buffers)) {
    Type et = mrt(v).getElementType();
    std::string p = "p" + std::to_string(k);
    w.params += llvm::formatv("{0}{1}{2} *{3}", k ? ", " : "", written[k] ? "" : "const ",
                              storageType(et), p)
                    .str();
    w.launcherArgs += (k ? ", " : "") + familyPointer(et, p, written[k], CodeTarget::Cuda);
    w.hostArgs += ", " + names(v) + (tensorIndex[k] < 0 ? "" : c.offsetSuffix(tensorIndex[k]));
  }
  return w;
}

// ", tcc_cuda::AttnLayout{...}" after the sizes for the _strided launchers
// (an op with `layout`), "" for the contiguous ones.
std::string stridedLayoutArgument(const AttentionCall &c) {
  return c.strided ? ", tcc_cuda::AttnLayout{" + c.layoutInitializer() + "}" : "";
}

} // namespace

// The element type the launchers are instantiated with; f64 has none.
static FailureOr<std::string> attentionElementType(Operation *op, Value q) {
  Type et = mrt(q).getElementType();
  if (et.isF64())
    return op->emitError("cuda codegen: ")
           << op->getName()
           << " on f64 has no CUDA kernel (the flash-attention kernels take bf16, f16 and "
              "f32); compile for --target cpu, or keep f64 attention unfused";
  return familyElementType(et, CodeTarget::Cuda);
}

// "seed_key, step" on the host: rng_seed ^ mix64(op_id) and the step, from
// tcc_step_args (the dropout operands must be the step's hyper-parameter
// arguments), or "0, 0" without dropout.
FailureOr<std::string> CudaStepEmitter::attentionDropoutKey(Operation *op,
                                                           const AttentionCall &c) {
  if (!c.rngSeed)
    return std::string("0ull, 0ull");
  auto hyperNamed = [&](Value v, StringRef hyper) {
    auto arg = dyn_cast<BlockArgument>(v);
    if (!arg || arg.getOwner() != &f_.getBody().front())
      return false;
    auto h = f_.getArgAttrOfType<StringAttr>(arg.getArgNumber(), model::kHyperAttr);
    return h && h.getValue() == hyper;
  };
  if (!hyperNamed(c.rngSeed, model::kRngSeedHyper) || !hyperNamed(c.step, model::kStepHyper))
    return op->emitError("cuda codegen: the dropout operands of ")
           << op->getName() << " must be the step's rng_seed and step arguments";
  return llvm::formatv("static_cast<uint64_t>(args->rng_seed) ^ {0:x}ull, "
                       "static_cast<uint64_t>(args->step)",
                       c.opKey)
      .str();
}

// The host lines of one wrapper call: refuse graph capture when it takes
// dropout values, call, turn a launcher error into a step failure.
void CudaStepEmitter::launchAttention(llvm::raw_ostream &os, Operation *op,
                                      const std::string &kernel, const std::string &hostArgs,
                                      const std::string &dropoutKey, const AttentionCall &c,
                                      double flops, double bytes) {
  int32_t id = nextId();
  std::string call;
  if (c.rngSeed)
    call += llvm::formatv("if (int32_t rc = tcc_cuda_host::refuse_graph_capture(s, {0})) "
                          "return rc;\n  ",
                          id)
                .str();
  call += llvm::formatv("if (cudaError_t e = {0}(s{1}, {2}); e != cudaSuccess) "
                        "return tcc_cuda_host::cuda_error(e, tcc_cuda_host::where({3}).c_str());",
                        kernel, hostArgs, dropoutKey, id)
              .str();
  launch(os, op, kernel, call, c.shapeText(), flops, bytes);
}

LogicalResult CudaStepEmitter::emitAttention(kern::AttentionOp a, llvm::raw_ostream &os,
                                             double &flops) {
  FailureOr<std::string> type = attentionElementType(a, a.getQ());
  if (failed(type))
    return failure();
  AttentionCall c = AttentionCall::of(a);
  FailureOr<std::string> key = attentionDropoutKey(a, c);
  if (failed(key))
    return failure();
  flops += c.forwardFlops();
  SmallVector<Value> buffers = {a.getQ(), a.getK(), a.getV(), a.getOut(), a.getLse()};
  WrapperArguments w =
      wrapperArguments(buffers, {false, false, false, true, true}, names_, c, {0, 1, 2, 3, -1});
  std::string text = llvm::formatv(
      "extern \"C\" cudaError_t @NAME@(cudaStream_t s, {0}, uint64_t seed_key, uint64_t step) "
      "{{\n  return tcc_cuda::launch_attention_forward{5}<{1}>({2}, {3}, {4}, seed_key, step, "
      "s);\n}\n",
      w.params, *type, w.launcherArgs, c.sizeArguments() + stridedLayoutArgument(c),
      c.scaleCausalRate(/*asFloat=*/true), c.strided ? "_strided" : "");
  std::string kernel =
      kernels_.add("attention", text, w.params + ", uint64_t seed_key, uint64_t step",
                   "cudaError_t");
  double bytes = c.tensorBytes(kern::elementBytes(mrt(a.getQ()))) + bufferBytes(mrt(a.getLse()));
  launchAttention(os, a, kernel, w.hostArgs, *key, c, c.forwardFlops(), bytes);
  return success();
}

LogicalResult CudaStepEmitter::emitAttentionGrad(kern::AttentionGradOp g, llvm::raw_ostream &os,
                                                 double &flops) {
  FailureOr<std::string> type = attentionElementType(g, g.getQ());
  if (failed(type))
    return failure();
  AttentionCall c = AttentionCall::of(g);
  FailureOr<std::string> key = attentionDropoutKey(g, c);
  if (failed(key))
    return failure();
  flops += c.backwardFlops();
  SmallVector<Value> buffers = {g.getQ(),  g.getK(),  g.getV(),  g.getOut(),      g.getLse(),
                                g.getGrad(), g.getDq(), g.getDk(), g.getDv(), g.getWorkspace()};
  WrapperArguments w = wrapperArguments(
      buffers, {false, false, false, false, false, false, true, true, true, true}, names_, c,
      {0, 1, 2, 3, -1, 4, 5, 6, 7, -1});
  std::string text = llvm::formatv(
      "extern \"C\" cudaError_t @NAME@(cudaStream_t s, {0}, uint64_t seed_key, uint64_t step) "
      "{{\n  return tcc_cuda::launch_attention_backward{6}<{1}>({2}, {3}, {4}, seed_key, step, "
      "{5}, s);\n}\n",
      w.params, *type, w.launcherArgs, c.sizeArguments() + stridedLayoutArgument(c),
      c.scaleCausalRate(/*asFloat=*/true), c.deterministic ? "true" : "false",
      c.strided ? "_strided" : "");
  std::string kernel =
      kernels_.add("attention_grad", text, w.params + ", uint64_t seed_key, uint64_t step",
                   "cudaError_t");
  double bytes = c.tensorBytes(kern::elementBytes(mrt(g.getQ()))) +
                 bufferBytes(mrt(g.getLse())) + bufferBytes(mrt(g.getWorkspace()));
  launchAttention(os, g, kernel, w.hostArgs, *key, c, c.backwardFlops(), bytes);
  return success();
}

} // namespace tcc::codegen::cuda
