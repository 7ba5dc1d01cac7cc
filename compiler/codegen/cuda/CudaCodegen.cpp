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
#include "compiler/codegen/cuda/CudaCodegen.h"
#include "dialects/kern/AttentionWorkspace.h"

#include <algorithm>
#include <memory>

#include "compiler/codegen/common/EmbeddedSources.h"
#include "compiler/codegen/common/StepInterface.h"
#include "compiler/codegen/cuda/CudaStepEmitter.h"
#include "compiler/codegen/cuda/CudnnConvWorkspace.h"
#include "compiler/codegen/cuda/Fp8Gemm.h"
#include "compiler/codegen/cuda/KernelRegistry.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;

namespace tcc {
namespace {

using namespace codegen;
using namespace codegen::cuda;

std::string formatCount(double v) {
  const char *units[] = {"", "K", "M", "G", "T"};
  int u = 0;
  while (v >= 1000 && u < 4) {
    v /= 1000;
    ++u;
  }
  return llvm::formatv("{0:f1}{1}", v, units[u]).str();
}

// Where the cuDNN unit looks for libcudnn.so.9 after the loader's path: the
// toolkit's lib64 of the machine that compiled the step.
std::string cudaLibDirDefine(const std::string &dir) {
  std::string escaped;
  llvm::raw_string_ostream e(escaped);
  llvm::printEscapedString(dir, e);
  return "#define TCC_CUDA_LIB_DIR \"" + escaped + "\"\n";
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
  // Train's output scratch (none on cuda: its outputs live in the control
  // block) starts after its own plan (see outputScratchBase); eval's outputs
  // that a caller leaves NULL get a buffer of their own, allocated on the
  // first such call (host_support/run_call.h), not workspace bytes.
  int64_t planned = iface->plannedWorkspace;
  int64_t trainBase = outputScratchBase(iface->train, planned, 256);
  CudaStepEmitter train(iface->train, "train", kernels, options, gemmSites);
  if (failed(train.emit(trainBase, step.trainFlops)))
    return failure();
  CudaStepEmitter eval(iface->eval, "eval", kernels, options, gemmSites);
  if (failed(eval.emit(/*outputScratchBase=*/0, step.evalFlops))) // their own buffer
    return failure();
  // Further entries (tcc.entry): outputs a caller leaves NULL go to scratch
  // after the entry's own plan, like train's.
  std::vector<std::unique_ptr<CudaStepEmitter>> entries;
  SmallVector<double> entryFlops;
  int64_t scratchEnd = std::max(planned, trainBase + train.outputScratchBytes());
  int64_t controlBytes = std::max(train.controlBytes(), eval.controlBytes());
  int64_t reduceScratch = std::max(train.reduceScratchBytes(), eval.reduceScratchBytes());
  for (auto [k, e] : llvm::enumerate(iface->entries)) {
    int64_t base = outputScratchBase(e.f, planned, 256);
    auto emitter = std::make_unique<CudaStepEmitter>(e.f, "entry_" + e.name, kernels, options,
                                                     gemmSites);
    emitter->asEntry(*iface, static_cast<int>(k), e.name);
    double flops = 0;
    if (failed(emitter->emit(base, flops)))
      return failure();
    entryFlops.push_back(flops);
    scratchEnd = std::max(scratchEnd, base + emitter->outputScratchBytes());
    controlBytes = std::max(controlBytes, emitter->controlBytes());
    step.cudnnAttentionSites += emitter->cudnnAttentionSites();
    step.cutlassSm90Sites += emitter->cutlassSm90Sites();
    step.sm90AttentionSites += emitter->sm90AttentionSites();
    reduceScratch = std::max(reduceScratch, emitter->reduceScratchBytes());
    entries.push_back(std::move(emitter));
  }
  // The kernel list: train's launches, then eval's, then the entries'.
  std::vector<Launch> launches = train.launches();
  llvm::append_range(launches, eval.launches());
  for (const auto &e : entries)
    llvm::append_range(launches, e->launches());
  // Workspace: [plan, each entry's output scratch after its own plan]
  // [control block][cuBLASLt workspace, shared][FP8 kept casts].
  int64_t control = (scratchEnd + 255) / 256 * 256;
  int64_t gemmWorkspace = (control + controlBytes + 255) / 256 * 256;
  // Shared by cuBLASLt (which takes at most kGemmWorkspaceBytes), the
  // attention backward, sized for cuDNN's or tcc's sm90 one where that is
  // larger (kern::attentionWorkspaceBytes): they then allocate nothing,
  // cuDNN's convolutions (an estimate of their engines' workspace,
  // CudnnConvWorkspace.h), and the partials of multi-phase reductions
  // (ReducePlan). All run on the step's stream, one at a time.
  // FP8 products (--precision fp8) keep their FP8 operands after
  // cuBLASLt's part (Fp8Gemm.h).
  int64_t sharedWorkspace =
      std::max({kGemmWorkspaceBytes + fp8GemmScratchBytes(module),
                kern::attentionWorkspaceBytes(
                    iface->train, {options.cudnnAttention, options.sm90Attention}),
                options.cudnnAttention ? cudnnConvWorkspaceBytes(module) : 0, reduceScratch});
  // FP8 casts kept for later products (Fp8KeptPlan) after it: the shared
  // part is reused by cuDNN and the reductions between their readers.
  int64_t fp8Kept = (gemmWorkspace + sharedWorkspace + 255) / 256 * 256;
  int64_t fp8KeptBytes = fp8KeptCastBytes(module);
  step.workspaceBytes = fp8KeptBytes ? fp8Kept + fp8KeptBytes : gemmWorkspace + sharedWorkspace;
  step.launches = static_cast<int64_t>(launches.size());
  step.cudnnAttentionSites += train.cudnnAttentionSites() + eval.cudnnAttentionSites();
  step.cutlassSm90Sites += train.cutlassSm90Sites() + eval.cutlassSm90Sites();
  step.sm90AttentionSites += train.sm90AttentionSites() + eval.sm90AttentionSites();

  std::string src;
  llvm::raw_string_ostream s(src);
  s << "// Generated by tcc from model '" << iface->modelName << "' for target cuda ("
    << options.arch << "). Do not edit: regenerate with tcc compile.\n"
    << "// Host side: compiled by the host C++ compiler, linked with the kernel\n"
    << "// units (kernels_*.cu), the CUDA runtime and cuBLASLt.\n\n";
  // (Source paths in these banners are those from before codegen/ was split
  // by target: the generated text stays byte-identical across that move.)
  s << "// ---- step ABI (runtime/include/tcc/step_abi.h) ----\n"
    << embedded::kStepAbiHeader << "\n";
  s << "// ---- CUDA host support (compiler/codegen/cuda_host_support.h) ----\n"
    << "#define TCC_STEP_ARCH \"" << options.arch << "\"\n"

    << (step.cudnnAttentionSites ? cudaLibDirDefine(options.cudaLibDir) : std::string())
    << (options.cutlassSm90 && step.cutlassSm90Sites
            ? "#define TCC_STEP_CUTLASS_SM90 1 // the CUTLASS unit is linked in\n"
            : "")
    << (options.sm90Attention && step.sm90AttentionSites
            ? "#define TCC_STEP_SM90_ATTENTION 1 // tcc's sm90 attention units are linked in\n"
            : "")
    << embedded::kCudaHostSupport << "\n";
  s << "// ---- kernels (defined in the kernel units) ----\n";
  for (const std::string &d : kernels.decls())
    s << d << "\n";
  s << "extern \"C\" __attribute__((visibility(\"default\"))) const tcc_step_descriptor *\n"
    << "tcc_step_get_descriptor(void);\n\n";
  s << "// ---- the step ----\n";
  s << "static constexpr uint64_t tcc_control_offset = " << control << ";\n";
  s << "static constexpr uint64_t tcc_gemm_workspace_offset = " << gemmWorkspace << ";\n";
  s << "static constexpr uint64_t tcc_gemm_workspace_bytes = " << kGemmWorkspaceBytes << ";\n";
  s << "static constexpr uint64_t tcc_shared_workspace_bytes = " << sharedWorkspace << ";\n";
  if (fp8KeptBytes)
    s << "static constexpr uint64_t tcc_fp8_kept_offset = " << fp8Kept << ";\n";
  s << "\n";
  s << train.source() << eval.source();
  for (const auto &e : entries)
    s << e->source();
  emitDescriptor(s, *iface, "cuda", "  \"" + options.arch + "\",\n", step.workspaceBytes,
                 step.trainFlops, step.evalFlops, "&tcc_cuda_host::kDeviceApi", entryFlops);
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
