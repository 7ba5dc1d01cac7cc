#include "compiler/driver/Compile.h"

#include <cstdio>
#include <cstdlib>
#include <optional>

#include "compiler/codegen/cpu/CpuCodegen.h"
#include "compiler/codegen/cuda/CudaCodegen.h"
#include "compiler/driver/BatchSize.h"
#include "compiler/driver/CudaCompiler.h"
#include "compiler/driver/Diagnostics.h"
#include "compiler/driver/HostCompiler.h"
#include "compiler/driver/MemoryBudget.h"
#include "compiler/pipeline/IRDumps.h"
#include "dialects/kern/KernDialect.h"
#include "dialects/tg/TgDialect.h"
#include "frontend/importer/Importer.h"
#include "frontend/io/ModelFile.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"
#include "passes/Passes.h"
#include "llvm/Support/raw_ostream.h"

namespace tcc {
namespace {

// A failure MLIR diagnostics already printed (see compileModel).
absl::Status reportedByDiagnostics() { return absl::InternalError(""); }

constexpr const char *kLibraryToStdout =
    "a library cannot be written to stdout; use -o PATH";

absl::Status writeText(const std::string &path, llvm::StringRef text) {
  if (path == "-") {
    llvm::outs() << text;
    return absl::OkStatus();
  }
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (ec)
    return absl::InternalError("cannot write " + path + ": " + ec.message());
  os << text;
  // Closed here so a failed write is this error, not LLVM's "IO failure"
  // abort in the stream's destructor.
  os.close();
  if (os.has_error()) {
    std::string message = os.error().message();
    os.clear_error();
    return absl::InternalError("cannot write " + path + ": " + message);
  }
  return absl::OkStatus();
}

// Whether the step has a kern.attention (tg-fuse-attention matched).
bool hasFusedAttention(mlir::ModuleOp module) {
  bool found = false;
  module.walk([&](kern::AttentionOp) { found = true; });
  return found;
}

// The cuda target after the memory plan: generated sources, then nvcc.
absl::Status emitCuda(const CompileOptions &options, const PipelineOptions &pipelineOptions,
                      mlir::ModuleOp module, std::optional<DumpDirectory> &dumps) {
  CudaCodegenOptions codegen;
  codegen.arch = options.arch;
  codegen.tf32 = options.precision == "tf32";
  // cuDNN attention needs the frontend's headers here (the unit compiles
  // against them) and names the toolkit's lib64 as a place to find cuDNN.
  std::optional<std::string> cudnnFrontend;
  if (options.cudnn) {
    cudnnFrontend = findCudnnFrontend();
    codegen.cudnnAttention = cudnnFrontend.has_value();
    std::string ignored;
    if (std::optional<std::string> nvcc = findNvcc())
      if (std::optional<CudaToolkit> toolkit = findCudaToolkit(*nvcc, ignored))
        codegen.cudaLibDir = toolkit->lib;
  }
  // CUTLASS's Hopper epilogue GEMMs: sm_90 only, with its headers here.
  std::optional<std::string> cutlass;
  if (options.cutlass && archRunsSm90a(options.arch))
    cutlass = findCutlass();
  codegen.cutlassSm90 = cutlass.has_value();
  // tcc's own Hopper attention: sm_90 only (its units need no headers);
  // the memory of the step counted its workspace by the same flag.
  codegen.sm90Attention = pipelineOptions.sm90Attention;
  codegen.fp8CastFusion = options.fp8CastFusion;
  mlir::FailureOr<GeneratedCudaStep> step = generateCudaStep(module, codegen);
  if (mlir::failed(step))
    return reportedByDiagnostics();
  if (dumps) {
    (void)dumps->write("step_host", "cpp", step->hostSource,
                       "generated host C++ for the cuda target (launches, cuBLASLt, ABI)");
    for (size_t i = 0; i < step->kernelUnits.size(); ++i)
      (void)dumps->write("kernels_" + std::to_string(i), "cu", step->kernelUnits[i],
                         "generated CUDA kernel unit " + std::to_string(i));
    (void)dumps->write("kernels", "txt", step->kernelList,
                       "kernel list: every launch with its shape, FLOPs and bytes");
  }
  if (options.phase == Phase::Source) {
    std::string all = step->hostSource;
    for (size_t i = 0; i < step->kernelUnits.size(); ++i)
      all += "\n// ==== kernels_" + std::to_string(i) + ".cu ====\n" + step->kernelUnits[i];
    return writeText(options.output, all);
  }
  if (options.output == "-")
    return absl::InvalidArgumentError(kLibraryToStdout);
  std::optional<std::string> nvcc = findNvcc();
  if (!nvcc)
    return absl::FailedPreconditionError(
        "--target cuda needs nvcc: set TCC_NVCC, put nvcc on PATH or "
        "install the CUDA toolkit in /usr/local/cuda");
  CudaCompileOptions compile;
  compile.nvcc = *nvcc;
  compile.arch = options.arch;
  compile.hostCompiler = options.cxx;
  compile.jobs = options.jobs;
  compile.useCache = options.useCache;
  CudaCompileStats stats;
  std::string error;
  if (options.cudnn && !cudnnFrontend && hasFusedAttention(module))
    std::fprintf(stderr,
                 "tcc: warning: the cuDNN frontend's headers were not found "
                 "(scripts/setup.sh unpacks them into .deps/cudnn-frontend; or set "
                 "TCC_CUDNN_FRONTEND_INCLUDE): attention runs on tcc's flash kernels only\n");
  if (!compileCudaLibrary(step->hostSource, step->kernelUnits,
                          step->cudnnAttentionSites ? *cudnnFrontend : std::string(),
                          cutlass && step->cutlassSm90Sites ? *cutlass : std::string(),
                          codegen.sm90Attention && step->sm90AttentionSites > 0,
                          options.output, compile, stats, error))
    return absl::InternalError(error);
  if (options.verbose && step->cutlassSm90Sites)
    std::fprintf(stderr, "tcc: cuda %s: %lld epilogue products %s\n", options.arch.c_str(),
                 static_cast<long long>(step->cutlassSm90Sites),
                 cutlass ? "may run CUTLASS sm90 kernels (timed against cuBLASLt when run)"
                 : !options.cutlass ? "run on cuBLASLt (--no-cutlass)"
                 : !archRunsSm90a(options.arch)
                     ? "run on cuBLASLt (CUTLASS's kernels are sm_90 only)"
                     : "run on cuBLASLt (CUTLASS's headers not found: scripts/setup.sh unpacks "
                       "them into .deps/cutlass, or set TCC_CUTLASS_INCLUDE)");
  if (options.verbose)
    std::fprintf(stderr,
                 "tcc: cuda %s: %lld launches, %lld distinct kernels in %zu units; "
                 "%d of %d objects from the cache%s%s; %.1f s to compile and link\n",
                 options.arch.c_str(), static_cast<long long>(step->launches),
                 static_cast<long long>(step->distinctKernels), step->kernelUnits.size(),
                 stats.fromCache, stats.units, stats.cacheDir.empty() ? "" : " ",
                 stats.cacheDir.c_str(), stats.seconds);
  return absl::OkStatus();
}

// The cpu target after the memory plan: generated source, then the host
// compiler.
absl::Status emitCpu(const CompileOptions &options, mlir::ModuleOp module,
                     std::optional<DumpDirectory> &dumps) {
  mlir::FailureOr<GeneratedStep> step = generateCpuStep(module);
  if (mlir::failed(step))
    return reportedByDiagnostics();
  if (dumps)
    (void)dumps->write("step", "cpp", step->source,
                       "generated C++ for the cpu target (compiled into the library)");
  if (options.phase == Phase::Source)
    return writeText(options.output, step->source);
  if (options.output == "-")
    return absl::InvalidArgumentError(kLibraryToStdout);
  HostCompileOptions compile;
  compile.compiler = options.cxx;
  compile.cpuArch = options.cpuArch;
  // Per-kernel wall times, printed by the library at exit (cpu_prelude.h's
  // TCC_PROFILE_SCOPE).
  if (options.profile)
    compile.extraFlags.push_back("-DTCC_PROFILE");
  std::string error;
  if (!compileSharedLibrary(step->source, options.output, compile, error))
    return absl::InternalError(error);
  return absl::OkStatus();
}

// After the import (annotated with `pipelineOptions`): the pipeline, then
// the IR text or the target's output.
absl::Status compileImported(const CompileOptions &options,
                             const PipelineOptions &pipelineOptions,
                             mlir::MLIRContext &ctx, mlir::ModuleOp module,
                             std::optional<DumpDirectory> &dumps) {
  mlir::PassManager pm(&ctx);
  buildPipeline(pm, options.phase, pipelineOptions);
  if (dumps) {
    ctx.disableMultithreading(); // dumps in pass order
    dumps->attach(pm);
  }
  if (mlir::failed(pm.run(module)))
    return reportedByDiagnostics();
  if (options.phase <= Phase::Plan) {
    std::string text;
    llvm::raw_string_ostream os(text);
    module->print(os);
    return writeText(options.output, text);
  }
  if (options.memoryBudget)
    if (absl::Status s = checkMemoryBudget(module, *options.memoryBudget, pipelineOptions);
        !s.ok())
      return s;
  if (options.verbose)
    for (auto f : module.getOps<mlir::func::FuncOp>())
      if (f.getName() == "train_step" || f.getName() == "forward")
        std::fprintf(stderr, "tcc: memory plan of @%s: %s\n", f.getName().str().c_str(),
                     formatMemorySummary(summarizeMemory(f)).c_str());
  if (options.verbose && module.lookupSymbol("train_step"))
    std::fprintf(stderr, "tcc: the step needs %s\n",
                 formatStepMemory(
                     stepMemory(module, pipelineOptions))
                     .c_str());
  if (options.target == "cuda")
    return emitCuda(options, pipelineOptions, module, dumps);
  return emitCpu(options, module, dumps);
}

// --sync-batch-norm: the node attribute sync on every batch_norm that
// keeps running statistics (nn.BatchNorm*d as PyTorch's
// convert_sync_batchnorm converts them; a batch_norm without running
// statistics, as group_norm's composite makes, keeps per-rank statistics
// unless its node says sync itself).
absl::Status applySyncBatchNorm(const CompileOptions &options, const PipelineOptions &pipeline,
                                model::Model &model) {
  if (!options.syncBatchNorm)
    return absl::OkStatus();
  if (!pipeline.dataParallel)
    return absl::InvalidArgumentError(
        "--sync-batch-norm takes the statistics over the ranks of a data-parallel step: add "
        "--data-parallel (or --shard-optimizer N)");
  int marked = 0;
  for (model::Node &node : *model.mutable_nodes()) {
    if (node.op() != "batch_norm")
      continue;
    auto track = node.attrs().find("track_running_stats");
    if (track != node.attrs().end() && track->second.value_case() == model::Attribute::kB &&
        !track->second.b())
      continue;
    (*node.mutable_attrs())["sync"].set_b(true);
    ++marked;
  }
  if (marked == 0)
    return absl::InvalidArgumentError(
        "--sync-batch-norm: the model has no batch_norm with running statistics to synchronize");
  return absl::OkStatus();
}

// --batch N | auto [--keep-global-batch]: `model` rewritten to the batch
// asked for or chosen (printed on stderr).
absl::Status applyBatchOption(const CompileOptions &options, const PipelineOptions &pipeline,
                              model::Model &model) {
  if (options.batch.empty())
    return options.keepGlobalBatch
               ? absl::InvalidArgumentError("--keep-global-batch applies with --batch N or auto")
               : absl::OkStatus();
  absl::StatusOr<int64_t> from = modelBatch(model);
  if (!from.ok())
    return from.status();
  const int64_t micro = model.training().has_micro_batches() ? model.training().micro_batches() : 1;
  const int64_t global = *from * micro;
  if (options.batch == "auto") {
    if (!options.memoryBudget)
      return absl::InvalidArgumentError(
          "--batch auto needs --memory-budget SIZE or --gpu NAME (the memory the batch must fit)");
    auto import = [&](const model::Model &m, mlir::MLIRContext &ctx) {
      return importIntoContext(m, options.model, ctx);
    };
    absl::StatusOr<BatchChoice> choice =
        chooseBatch(model, import, pipeline, *options.memoryBudget, options.keepGlobalBatch,
                    options.verbose ? stderr : nullptr);
    if (!choice.ok())
      return choice.status();
    std::fprintf(stderr, "tcc: --batch auto: %s\n", choice->why.c_str());
    model = rebatch(model, *from, choice->batch, choice->microBatches);
    return absl::OkStatus();
  }
  char *end = nullptr;
  long long b = std::strtoll(options.batch.c_str(), &end, 10);
  if (*end || b < 1 || b > (1 << 24))
    return absl::InvalidArgumentError("--batch needs a positive number or 'auto', got '" +
                                      options.batch + "'");
  int32_t k = 0;
  if (options.keepGlobalBatch) {
    if (global % b)
      return absl::InvalidArgumentError(
          "--keep-global-batch: batch " + options.batch + " does not divide the global batch " +
          std::to_string(global) + " (batch x micro-batches)");
    k = static_cast<int32_t>(global / b);
  }
  model = rebatch(model, *from, b, k);
  return absl::OkStatus();
}

} // namespace

mlir::OwningOpRef<mlir::ModuleOp> importIntoContext(const model::Model &model,
                                                    const std::string &modelPath,
                                                    mlir::MLIRContext &ctx) {
  ctx.loadDialect<tg::TgDialect, kern::KernDialect, mlir::func::FuncDialect>();
  installDiagnosticPrinter(ctx, modelPath);
  return importModel(model, ctx);
}

absl::StatusOr<std::string> resolvePrecision(const CompileOptions &options) {
  bool cuda = options.target == "cuda";
  // sm_XY -> XY; bf16 and TF32 tensor cores arrived with sm_80 (Ampere).
  int sm = cuda && options.arch.size() > 3 ? std::atoi(options.arch.c_str() + 3) : 0;
  if (options.precision.empty())
    return std::string(cuda && sm >= 80 ? "bf16" : "fp32");
  if (!parsePrecision(options.precision))
    return absl::InvalidArgumentError("unknown precision '" + options.precision +
                                      "' (expected bf16, fp16, tf32, fp32 or fp8)");
  if (!options.fp8Keep.empty() && options.precision != "fp8")
    return absl::InvalidArgumentError("--fp8-keep applies only with --precision fp8");
  if (!options.fp8Scaling.empty() && options.precision != "fp8")
    return absl::InvalidArgumentError("--fp8-scaling applies only with --precision fp8");
  if (!options.fp8Scaling.empty() && options.fp8Scaling != "delayed" &&
      options.fp8Scaling != "current")
    return absl::InvalidArgumentError("unknown --fp8-scaling '" + options.fp8Scaling +
                                      "' (expected delayed or current)");
  // FP8 tensor cores arrived with sm_89 (Ada) and sm_90 (Hopper); the cpu
  // target has no FP8 products.
  if (options.precision == "fp8" && (!cuda || sm < 89))
    return absl::InvalidArgumentError(
        cuda ? "--precision fp8 needs sm_89 or newer; --arch " + options.arch +
                   " has no FP8 tensor cores (use --precision bf16)"
             : std::string("--precision fp8 applies to --target cuda (FP8 tensor-core "
                           "products on sm_89 and newer); use bf16 on the cpu"));
  if (options.precision == "tf32" && !cuda)
    return absl::InvalidArgumentError(
        "--precision tf32 applies to --target cuda (TF32 is a GPU matmul mode); "
        "use fp32 or bf16 on the cpu");
  if (cuda && sm < 80 && (options.precision == "bf16" || options.precision == "tf32"))
    return absl::InvalidArgumentError(
        "--precision " + options.precision + " needs sm_80 or newer; --arch " +
        options.arch + " has no " + options.precision +
        " tensor cores (use --precision fp16 or fp32)");
  return options.precision;
}

bool dynamicLossScalingByDefault(const CompileOptions &options) {
  // fp16's range needs the loss scaled so that small gradients survive
  // (GradScaler's default); bf16 has fp32's range and needs none.
  return options.precision == "fp16";
}

absl::StatusOr<std::optional<training::LossScalingConfig>>
resolveLossScaling(const CompileOptions &options) {
  bool dynamic = options.lossScale == LossScaleMode::Dynamic ||
                 (options.lossScale == LossScaleMode::Auto &&
                  dynamicLossScalingByDefault(options));
  if (!dynamic) {
    if (options.initialLossScale || options.lossScaleGrowthInterval)
      return absl::InvalidArgumentError(
          std::string(options.initialLossScale ? "--initial-loss-scale"
                                               : "--loss-scale-growth-interval") +
          " applies only with dynamic loss scaling (--loss-scale dynamic)");
    return std::optional<training::LossScalingConfig>();
  }
  training::LossScalingConfig config;
  if (options.initialLossScale)
    config.initScale = *options.initialLossScale;
  if (options.lossScaleGrowthInterval)
    config.growthInterval = *options.lossScaleGrowthInterval;
  if (std::string problem = training::lossScalingProblem(config); !problem.empty())
    return absl::InvalidArgumentError("loss scaling: " + problem);
  return std::optional<training::LossScalingConfig>(config);
}

absl::Status compileModel(const CompileOptions &given) {
  absl::StatusOr<std::string> precision = resolvePrecision(given);
  if (!precision.ok())
    return precision.status();
  CompileOptions options = given;
  options.precision = *precision;
  PipelineOptions pipelineOptions;
  pipelineOptions.emitGradients = options.emitGradients;
  pipelineOptions.deterministic = options.deterministic;
  pipelineOptions.cacheFrozen = options.cacheFrozen;
  pipelineOptions.precision = options.precision;
  pipelineOptions.fp8Keep = options.fp8Keep;
  pipelineOptions.fp8DelayedScaling = options.fp8Scaling != "current";
  pipelineOptions.fuseAttention = options.fuseAttention;
  pipelineOptions.generate = options.generate;
  pipelineOptions.fuseEpilogue = options.fuseEpilogue;
  pipelineOptions.fuseBiasGradient = options.fuseBiasGradient;
  pipelineOptions.normBiasGradient = options.normBiasGradient;
  pipelineOptions.fuseHorizontal = options.fuseHorizontal;
  pipelineOptions.rematCopies = options.rematCopies;
  pipelineOptions.lossChunks = options.lossChunks.value_or(1);
  pipelineOptions.dataParallel = options.dataParallel || options.shardOptimizer > 0;
  pipelineOptions.shardOptimizer = options.shardOptimizer;
  pipelineOptions.shardParameters = options.shardParameters;
  pipelineOptions.reduceGradientsInF32 = options.reduceGradientsInF32;
  pipelineOptions.target = options.target == "cuda" ? "cuda" : "cpu";
  if (options.target == "cuda")
    pipelineOptions.cudaArch = options.arch;
  // The step runs cuDNN when the frontend's headers are found here
  // (emitCuda): its convolution workspace is then part of the step's memory
  // (MemoryBudget, --batch).
  pipelineOptions.cudnn =
      options.target == "cuda" && options.cudnn && findCudnnFrontend().has_value();
  pipelineOptions.sm90Attention =
      options.target == "cuda" && options.sm90Attention && archRunsSm90a(options.arch);
  absl::StatusOr<std::optional<training::LossScalingConfig>> scaling =
      resolveLossScaling(options);
  if (!scaling.ok())
    return scaling.status();
  pipelineOptions.lossScaling = *scaling;

  absl::StatusOr<model::Model> model = LoadModelFile(options.model);
  if (!model.ok())
    return absl::InternalError(model.status().message());
  absl::StatusOr<int64_t> writtenBatch =
      options.batch.empty() ? absl::StatusOr<int64_t>(0) : modelBatch(*model);
  if (absl::Status s = applyBatchOption(options, pipelineOptions, *model); !s.ok())
    return s;
  if (absl::Status s = applySyncBatchNorm(options, pipelineOptions, *model); !s.ok())
    return s;

  std::optional<DumpDirectory> dumps;
  if (!options.dumpDir.empty()) {
    std::string error;
    auto dir = DumpDirectory::open(options.dumpDir, error);
    if (mlir::failed(dir))
      return absl::InternalError(error);
    dumps.emplace(std::move(*dir));
  }

  mlir::MLIRContext ctx;
  mlir::OwningOpRef<mlir::ModuleOp> module = importIntoContext(*model, options.model, ctx);
  if (!module) {
    // --batch rewrites the inputs and the reshapes that start with the
    // batch; a model whose shapes fold it in elsewhere (an import's
    // (B*T, V) logits) does not follow.
    absl::StatusOr<int64_t> now = modelBatch(*model);
    if (writtenBatch.ok() && *writtenBatch > 0 && now.ok() && *now != *writtenBatch)
      std::fprintf(stderr,
                   "tcc: note: --batch moved the inputs and the reshapes that start with "
                   "the batch from %lld to %lld; this model fixes its batch in other "
                   "shapes too (a model from tcc.from_torch or tcc import has its example's "
                   "shapes): write it again at batch %lld\n",
                   static_cast<long long>(*writtenBatch), static_cast<long long>(*now),
                   static_cast<long long>(*now));
    return reportedByDiagnostics();
  }
  pipelineOptions.visionOps = hasVisionOps(*module);
  // Channels-last pays through cuDNN's tensor-core convolutions.
  pipelineOptions.channelsLast =
      pipelineOptions.cudnn && options.channelsLast && pipelineOptions.visionOps;
  annotateModule(*module, pipelineOptions);
  if (dumps)
    (void)dumps->writeModule("import", *module,
                             "tg IR imported from " + options.model +
                                 " (with the module attributes of the options)");

  if (options.memoryBudget) {
    // Plans without code until one fits (tg-remat's budget), then the
    // compile below with that budget (and the dumps).
    // Chunks sum dW in another order: --deterministic keeps the results of
    // a budgeted step exactly the unconstrained step's (recomputation only).
    const bool chooseChunks = !options.lossChunks && !options.deterministic;
    absl::StatusOr<MemoryFit> fit =
        fitMemoryBudget(*module, pipelineOptions, *options.memoryBudget, chooseChunks,
                        options.verbose ? stderr : nullptr);
    if (!fit.ok()) {
      // The error names the tg-remat report: --dump-dir gets the pipeline
      // to the memory plan with everything tg-remat can drop dropped.
      if (dumps && !absl::IsInvalidArgument(fit.status())) {
        PipelineOptions most = pipelineOptions;
        most.rematBudget = 0;
        if (chooseChunks)
          most.lossChunks = 8; // what the fit tried last
        mlir::PassManager pm(&ctx);
        buildPipeline(pm, Phase::Plan, most);
        ctx.disableMultithreading();
        dumps->attach(pm);
        (void)pm.run(*module);
        (void)dumps->writeIndex();
      }
      return fit.status();
    }
    pipelineOptions.rematBudget = fit->remat;
    pipelineOptions.lossChunks = fit->lossChunks;
    if (options.verbose && (fit->remat >= 0 || fit->lossChunks > 1))
      std::fprintf(stderr,
                   "tcc: --memory-budget: loss head in %lld chunk(s), tg-remat budget %s (~%.2f "
                   "ms added at nominal rates)\n",
                   static_cast<long long>(fit->lossChunks),
                   fit->remat < 0 ? "none" : formatBytes(fit->remat).c_str(), fit->seconds * 1e3);
  }
  absl::Status status = compileImported(options, pipelineOptions, ctx, *module, dumps);
  if (dumps)
    (void)dumps->writeIndex(); // also after a failure: what was dumped so far
  return status;
}

} // namespace tcc
