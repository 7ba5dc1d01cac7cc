// kern.attention / kern.attention_grad: calls of the prelude's flash-
// attention launchers (tcc_cuda::launch_attention_forward / _backward, in
// the cuda/prelude attention pieces) through a generated wrapper per shape.
// The launchers return a cudaError_t, which the host body turns into a
// step failure naming the launch, as after_launch does for other kernels.
//
// cuDNN: a call cuDNN may run (cudnnAttentionSite) gets a file-scope
// tcc_cuda_host::AttentionSite, prepared before the entry's first call
// (host_support/attention.h); the host line runs cuDNN when the site's plan
// was built, else the wrapper.
//
// tcc's sm90 kernels (cuda/sm90/): with CudaCodegenOptions::sm90Attention a
// 16-bit site of head size 64 or 128 that cuDNN may run is also a site of
// theirs: its host line calls tcc_cuda_host::sm90_attention_forward /
// _backward (host_support/attention_sm90_choice.h) with the cuDNN-or-flash
// call as a lambda, and the first call times the two on the call's
// operands. The site's declaration in step_host.cpp lists its candidates.
//
// Dropout: the launchers take the seed key (rng_seed ^ mix64(op_id)) and the
// step by value, read on the host from tcc_step_args. A CUDA graph captures
// launch arguments, so an entry with attention dropout refuses capture
// (tcc_cuda_host::refuse_graph_capture) and runs its kernels one by one.
#include "compiler/codegen/cuda/CudaStepEmitter.h"

#include "compiler/codegen/common/AttentionCall.h"

#include <cstdio>

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
                                      double flops, double bytes,
                                      const std::string &cudnnCall,
                                      const std::string &sm90Call) {
  int32_t id = nextId();
  std::string call;
  if (!cudnnCall.empty()) // (never with dropout: no capture to refuse)
    call += cudnnCall + " else ";
  if (c.rngSeed)
    call += llvm::formatv("if (int32_t rc = tcc_cuda_host::refuse_graph_capture(s, {0})) "
                          "return rc;\n  ",
                          id)
                .str();
  call += llvm::formatv("if (cudaError_t e = {0}(s{1}, {2}); e != cudaSuccess) "
                        "return tcc_cuda_host::cuda_error(e, tcc_cuda_host::where({3}).c_str());",
                        kernel, hostArgs, dropoutKey, id)
              .str();
  if (!sm90Call.empty()) // sm90Call's last argument: the other call, as a lambda
    call = "if (int32_t rc = " + sm90Call + ", [&]() -> int32_t {\n    " + call +
           "\n    return 0;\n  })) return rc;";
  launch(os, op, kernel, call, c.shapeText(), flops, bytes);
}

std::string CudaStepEmitter::sm90AttentionRefusal(const AttentionCall &c, bool backward) const {
  if (!options_.sm90Attention)
    return "the target is not sm_90, or --no-sm90-attention";
  if (backward && c.deterministic)
    return "a deterministic backward (tcc sm90 sums dq with atomics)";
  return "";
}

// cuDNN may run a call the flash kernels also run (so a site it declines at
// run time has them): no dropout, bf16 or f16, head size 64 or 128.
CudaStepEmitter::CudnnAttentionSite
CudaStepEmitter::cudnnAttentionSite(Operation *op, const AttentionCall &c, Type element,
                                    bool backward) {
  if (!options_.cudnnAttention || c.rngSeed || !(element.isBF16() || element.isF16()) ||
      (c.dim != 64 && c.dim != 128))
    return {};
  std::string site = llvm::formatv("tcc_{0}_attention_{1}", entry_, nextId()).str();
  char scale[64]; // exact, as the launchers' float
  std::snprintf(scale, sizeof scale, "%af", static_cast<double>(static_cast<float>(c.scale)));
  std::string refusal = sm90AttentionRefusal(c, backward);
  std::string candidates =
      refusal.empty() ? "cuDNN (else tcc flash), timed on the first call against tcc sm90"
                      : "cuDNN, else tcc flash; not tcc sm90: " + refusal;
  attentionDecls_ += llvm::formatv(
      "// {0}\n// candidates: {10}\nstatic tcc_cuda_host::AttentionSite {1} = {{{{{2}, {3}, {4}, {9}, {5}, {6}, "
      "{7}}, {8}};\n",
      locName(op->getLoc()), site, backward ? "true" : "false",
      element.isF16() ? "true" : "false", c.causal ? "true" : "false", c.sizeArguments(),
      scale, c.layoutInitializer(), nextId(), c.deterministic ? "true" : "false", candidates);
  attentionSites_.push_back(site);
  if (refusal.empty())
    ++sm90AttentionSites_;
  return {site, refusal.empty()};
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
  std::string cudnnCall;
  CudnnAttentionSite site = cudnnAttentionSite(a, c, mrt(a.getQ()).getElementType(), false);
  std::string sm90Call;
  if (!site.name.empty()) {
    cudnnCall = llvm::formatv("if ({0}.cudnn) {{ if (int32_t rc = "
                              "tcc_cuda_host::cudnn_attention_forward({0}, s{1}, ws + "
                              "tcc_gemm_workspace_offset, tcc_shared_workspace_bytes)) return rc; }",
                              site.name, w.hostArgs)
                    .str();
    if (site.sm90)
      sm90Call = "tcc_cuda_host::sm90_attention_forward(" + site.name + ", s" + w.hostArgs;
  }
  launchAttention(os, a, kernel, w.hostArgs, *key, c, c.forwardFlops(), bytes, cudnnCall,
                  sm90Call);
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
  std::string cudnnCall, sm90Call;
  CudnnAttentionSite site = cudnnAttentionSite(g, c, mrt(g.getQ()).getElementType(), true);
  if (!site.name.empty()) {
    // q, k, v, out, dout, lse, dq, dk, dv (the wrapper's order: q, k, v,
    // out, lse, dout, dq, dk, dv, workspace).
    auto arg = [&](Value v, int tensor) {
      return ", " + names_(v) + (tensor < 0 ? "" : c.offsetSuffix(tensor));
    };
    std::string args = arg(g.getQ(), 0) + arg(g.getK(), 1) + arg(g.getV(), 2) +
                       arg(g.getOut(), 3) + arg(g.getGrad(), 4) + arg(g.getLse(), -1) +
                       arg(g.getDq(), 5) + arg(g.getDk(), 6) + arg(g.getDv(), 7);
    cudnnCall = llvm::formatv("if ({0}.cudnn) {{ if (int32_t rc = "
                              "tcc_cuda_host::cudnn_attention_backward({0}, s{1}, ws + "
                              "tcc_gemm_workspace_offset, tcc_shared_workspace_bytes)) return rc; }",
                              site.name, args)
                    .str();
    if (site.sm90)
      sm90Call = "tcc_cuda_host::sm90_attention_backward(" + site.name + ", s" + args +
                 ", ws + tcc_gemm_workspace_offset, tcc_shared_workspace_bytes";
  }
  launchAttention(os, g, kernel, w.hostArgs, *key, c, c.backwardFlops(), bytes, cudnnCall,
                  sm90Call);
  return success();
}

} // namespace tcc::codegen::cuda
