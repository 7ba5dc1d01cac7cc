// tcc's compilation of a model file, front to back, in one place: import
// (tg) -> the pipeline up to --compile-to's phase -> CPU or CUDA source ->
// the host compiler or nvcc, with --dump-dir dumps on the way. The CPU and
// CUDA targets share every step up to code generation. `tcc compile` only
// parses its flags into CompileOptions; `tcc run` shares importIntoContext.
#ifndef TCC_COMPILER_DRIVER_COMPILE_H
#define TCC_COMPILER_DRIVER_COMPILE_H

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compiler/pipeline/Pipeline.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

namespace tcc {

namespace model {
class Model;
}

// tcc compile --loss-scale: Auto is the precision's default
// (dynamicLossScalingByDefault).
enum class LossScaleMode { Auto, None, Dynamic };

struct CompileOptions {
  std::string model;          // .pb or .pbtxt file
  std::string output;         // "-": stdout (text phases, before library)
  std::string target;         // "cuda", else the cpu target
  std::string arch;           // cuda: "sm_XY"
  std::string dumpDir;        // empty: no dumps
  std::string cxx;            // host C++ compiler; empty: $CXX, else c++
  Phase phase = Phase::Library; // --compile-to
  std::string cpuArch;        // cpu: -march (see HostCompileOptions::cpuArch)
  bool profile = false;       // cpu: --profile, the library built with -DTCC_PROFILE
  bool emitGradients = false; // see PipelineOptions
  bool deterministic = false; // see PipelineOptions
  bool cacheFrozen = false;   // --cache-frozen: the entries encode / train_cached
  // --precision: "bf16", "fp16", "tf32", "fp32" or "fp8"; empty: the
  // target's default (cuda sm_80+: bf16; older GPUs and cpu: fp32). See
  // resolvePrecision.
  std::string precision;
  std::string fp8Keep; // --fp8-keep: names of matmuls fp8 leaves in bf16
  // --fp8-scaling: "delayed" (default with fp8: the train step's casts
  // scale by an amax history in the step state) or "current".
  std::string fp8Scaling;
  bool fuseAttention = true;  // false: --no-fuse-attention
  bool generate = false;      // --generate: the KV-cache entries prefill / decode
  bool fuseEpilogue = true;   // false: --no-fuse-epilogue
  bool fuseBiasGradient = true; // false: --no-fuse-bias-grad
  bool normBiasGradient = true; // false: --no-norm-bias-grad
  bool fuseHorizontal = true; // false: --no-fuse-horizontal
  bool rematCopies = true;    // false: --no-remat-copies
  bool cudnn = true;          // cuda: attention, convolutions try cuDNN first; false: --no-cudnn
  bool cutlass = true;        // cuda sm_90: CUTLASS epilogue GEMMs as candidates; false: --no-cutlass
  bool sm90Attention = true;  // cuda sm_90: tcc's sm90 attention as a candidate; false: --no-sm90-attention
  bool fp8CastFusion = true;  // cuda fp8: casts compute their elementwise and norm inputs; false: --no-fp8-cast-fusion
  bool channelsLast = true;   // cuda with cuDNN: NHWC conv chains; false: --no-channels-last
  bool useCache = true;       // cuda: reuse objects from the nvcc cache
  bool verbose = false;       // cuda: a summary line on stderr
  int jobs = 0;               // cuda: parallel compiles; 0: CPU threads
  std::optional<int64_t> memoryBudget; // --memory-budget: bytes the plan must fit
  // --batch: "" (the model's), "auto" (the largest that fits the budget
  // without recomputation: compiler/driver/BatchSize.h) or a number.
  std::string batch;
  bool keepGlobalBatch = false; // --keep-global-batch: micro-batches keep the global batch
  // --loss-chunks: the loss head in this many row chunks (1: whole); unset
  // ("auto"): chosen by --memory-budget's fit, else whole.
  std::optional<int64_t> lossChunks;
  // --data-parallel: the step is one rank's share of a data-parallel job
  // (tg-all-reduce-gradients).
  bool dataParallel = false;
  // --sync-batch-norm: every batch_norm with running statistics takes its
  // statistics over the ranks (the node attribute sync; needs dataParallel).
  bool syncBatchNorm = false;
  // --shard-optimizer N: ZeRO-1 over exactly N ranks (0: not sharded).
  int64_t shardOptimizer = 0;
  // --shard-parameters N: ZeRO-3 over exactly N ranks (with shardOptimizer
  // = N; 0: parameters whole on every rank).
  int64_t shardParameters = 0;
  // --reduce-gradients-in f32: gradients computed in bf16/f16 are reduced
  // over the ranks in f32 (default: in the precision they were computed in).
  bool reduceGradientsInF32 = false;
  LossScaleMode lossScale = LossScaleMode::Auto;  // --loss-scale
  std::optional<double> initialLossScale;         // --initial-loss-scale
  std::optional<int64_t> lossScaleGrowthInterval; // --loss-scale-growth-interval
};

// Whether --loss-scale Auto means dynamic loss scaling for `options`: the
// one place that ties loss scaling to the training precision (fp16 needs
// it; bf16, tf32 and fp32 do not).
bool dynamicLossScalingByDefault(const CompileOptions &options);

// The loss scaling `options` ask for (nullopt: none). Loss-scaling values
// without dynamic loss scaling are an InvalidArgument error.
absl::StatusOr<std::optional<training::LossScalingConfig>>
resolveLossScaling(const CompileOptions &options);

// Compiles `options.model` to `options.output`. An InvalidArgument error is
// a misuse of the options (tcc exits 2); any other error is a failed compile
// (exit 1). An error with an empty message was already reported by MLIR
// diagnostics, printed as they came (installDiagnosticPrinter).
absl::Status compileModel(const CompileOptions &options);

// The precision a compile with `options` uses: the default when none was
// given, or InvalidArgument naming the flag when the target cannot run it
// (an unknown name, bf16/tf32 before sm_80, tf32 on the cpu).
absl::StatusOr<std::string> resolvePrecision(const CompileOptions &options);

// Prepares `ctx` the way every tcc command uses it (the tg, kern and func
// dialects loaded, diagnostics printed naming `modelPath`) and imports
// `model` into it. Null when the import failed; the diagnostics said why.
mlir::OwningOpRef<mlir::ModuleOp> importIntoContext(const model::Model &model,
                                                    const std::string &modelPath,
                                                    mlir::MLIRContext &ctx);

} // namespace tcc

#endif
