// tcc: compiles a model file (.pb / .pbtxt) into a step library.
//
//   tcc compile model.pb -o step.so [--target cpu|cuda] [--arch sm_XY]
//                        [--precision P] [--fp8-keep NAMES] [--fp8-scaling S] [--jobs N] [--no-cache] [--dump-dir DIR]
//                        [--memory-budget SIZE] [--batch N|auto]
//                        [--keep-global-batch] [--loss-chunks N|auto]
//                        [--compile-to PHASE] [--cxx COMPILER] [--cpu-arch ARCH] [--no-native]
//                        [--profile]
//                        [--emit-gradients] [--deterministic]
//                        [--data-parallel] [--sync-batch-norm] [--shard-optimizer N]
//                        [--shard-parameters N]
//                        [--reduce-gradients-in computed|f32]
//                        [--loss-scale dynamic|none]
//                        [--initial-loss-scale V]
//                        [--loss-scale-growth-interval N] [-v]
//
// Exit codes: 0 success, 1 compile error (bad model, failed pass or host
// compiler), 2 usage error. This file parses the flags; the compile itself
// is compiler/driver/Compile.h, and `tcc run` is RunCommand.cpp.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "compiler/driver/Compile.h"
#include "compiler/driver/CudaCompiler.h"
#include "compiler/driver/MemoryBudget.h"
#include "compiler/pipeline/Pipeline.h"
#include "compiler/tools/tcc/ImportCommand.h"
#include "compiler/tools/tcc/RunCommand.h"
#include "support/NearestName.h"
#include <csignal>

namespace {

constexpr const char *kVersion = "0.1.0";

const char *kMainHelp = R"(tcc — compiles a model and its training step into one shared library

Usage:
  tcc compile MODEL -o OUTPUT [options]   compile MODEL (.pb binary or .pbtxt text)
  tcc run MODEL [options]                 evaluate MODEL once with the float64
                                          reference interpreter and print the results
  tcc import MODEL.onnx -o OUT.pb [options]
                                          a model file from an ONNX export (torch.onnx)
                                          plus a training recipe (loss, optimizer)
  tcc --help | -h                         this text
  tcc --version                           print the version

Run 'tcc compile --help', 'tcc run --help' or 'tcc import --help' for their options.
)";

const char *kCompileHelp = R"(Usage: tcc compile MODEL -o OUTPUT [options]

Compiles MODEL (binary .pb, or text .pbtxt/.txtpb/.textproto) into OUTPUT,
a step library that trun loads (see docs/abi.md).

Options:
  -o, --output PATH     where to write the result; '-' writes text results
                        (any --compile-to before 'library') to stdout
  --target cpu|cuda     code generation target (default: cuda when nvcc is
                        found — $TCC_NVCC, PATH, /usr/local/cuda/bin — else cpu)
  --arch sm_XY          cuda: GPU architecture (default: --gpu's, else GPU
                        0's, from nvidia-smi; sm_90 when no GPU is visible)
  --precision P         bf16 | fp16 | tf32 | fp32 | fp8 (default: bf16 for
                        cuda on sm_80 and newer, else fp32). bf16/fp16: the
                        tg-amp pass runs matrix products in 16 bits with fp32
                        accumulation and keeps losses, reductions, norms, the
                        master weights and the optimizer in fp32 (dump: NN-tg-
                        amp.mlir and NN-tg-amp-report.txt); fp16 also scales
                        the loss. tf32 (cuda): fp32 graph, matrix products
                        round inputs to TF32 (about 1e-3 relative error).
                        fp8 (cuda, sm_89 and newer): bf16, and each weight's
                        matmul whose sizes are multiples of 16 runs as a
                        cuBLASLt FP8 product (E4M3 forward, E5M2 gradients,
                        per-tensor scales, fp32 accumulation); the LM head
                        stays bf16 (the report says which products are FP8
                        and why others are not)
  --fp8-keep NAMES      with --precision fp8: comma-separated names; a matmul
                        whose node or weight name contains one stays bf16
  --fp8-scaling S       with --precision fp8: delayed (default) scales each
                        train-step cast by the largest amax of its last 16
                        casts, kept in the step state "fp8_scaling" (one read
                        of the operand; checkpointed; trun's log shows
                        saturated and flushed elements), its first cast by
                        its own amax; current scales every cast by its own
                        amax (two reads). Eval and generation: current
  --tf32                the same as --precision tf32
  --generate            a GPT-like model (token ids in, logits (B, T, V) out,
                        causal attention) also gets the KV-cache generation
                        entries prefill and decode (tg-derive-generate; trun
                        --sample uses them; dump: NN-tg-derive-generate-
                        report.txt says why a model got none)
  --no-fuse-attention   leave attention written out (matmul, mask, softmax,
                        matmul) instead of tg-fuse-attention's flash-attention
                        kernels: for comparing, or ruling the fusion out when
                        a result looks wrong (the report still lists matches)
  --cache-frozen        a model whose frozen parameters feed a trainable part
                        (a frozen encoder and a trainable head) also gets the
                        entries encode and train_cached: trun encodes each
                        sample once and trains from its cache afterwards
                        (tg-cache-frozen; dump: NN-tg-cache-frozen-report.txt
                        says what was cut, or why nothing was)
  --no-fuse-epilogue    leave each matmul's bias add, gelu and residual add as
                        separate kernels instead of tg-fuse-matmul-epilogue's
                        GEMM epilogues (before/after benchmarks; the report
                        still lists matches)
  --no-fuse-bias-grad   leave each bias gradient (a reduce_sum of dY) out of
                        its weight gradient's product: a plain GEMM and a
                        reduction kernel instead of cuBLASLt's BGRADA
                        epilogue (before/after benchmarks; the report says
                        "left out: bias-gradient fusion is off")
  --no-norm-bias-grad   sum the bias gradients of the products that write the
                        residual stream in their weight gradients' GEMMs
                        (BGRADA) like the others, instead of in the
                        layer-norm backward that writes their dY (before/
                        after benchmarks)
  --no-fuse-horizontal  one kernel per tensor for the optimizer, the weight
                        casts and the gradient norm (kern-fuse-horizontal
                        groups nothing): for comparing
  --no-remat-copies     keep every copy (an upsampling broadcast, a
                        concatenation, a transpose or slice) alive from the
                        forward to its backward reader; by default tg-remat
                        makes such a copy again before its reader where
                        that frees at least 1 MiB at the step's peak (dump:
                        NN-tg-remat-report.txt)
  --no-cudnn            cuda: attention always through tcc's flash kernels
                        and convolutions through tcc's direct kernels,
                        NCHW (default: each fused attention call and
                        convolution cuDNN can run tries cuDNN first, loaded
                        at run time; the step falls back per call where it
                        cannot, and TCC_CUDNN=0 turns it off when running)
  --no-cutlass          cuda sm_90: no CUTLASS kernels in the step (default:
                        where CUTLASS's headers are there (scripts/setup.sh)
                        and a bf16 product has an epilogue CUTLASS computes
                        (bias+GELU saving the pre-activation, the GELU
                        derivative, bias plus an f32 residual), CUTLASS's
                        Hopper kernels for it are linked in, built once per
                        machine (~1.5 minutes of nvcc on 2 cores, cached),
                        and each such product runs whichever of them and
                        cuBLASLt times faster on its first call;
                        TCC_GEMM_CUTLASS=0 turns them off when running)
  --no-sm90-attention   cuda sm_90: no tcc sm90 attention kernels in the step
                        (default: a bf16/f16 attention call of head size 64
                        or 128 that cuDNN may run links tcc's own Hopper
                        forward and backward too, built once per machine
                        (~10 s of nvcc, cached), and each such call runs
                        the sm90 kernel where it times at least 2% faster
                        than cuDNN's on its first call; a deterministic
                        backward keeps cuDNN; TCC_ATTENTION_SM90=0 turns
                        them off when running, =force on untimed)
  --no-fp8-cast-fusion  cuda, --precision fp8: launch every elementwise op,
                        norm, norm backward, rope and weight cast (default:
                        one whose 16-bit result only FP8 products read,
                        such as SwiGLU's gate x up, LLaMA's RMSNorm
                        outputs, the norm backwards' bf16 copy of dx, the
                        backward's rotations into dqkv or the weights'
                        bf16 copies, is not launched; the
                        products' FP8 cast computes it from its inputs,
                        and the kernel list says so)
  --no-channels-last    cuda: keep every convolution, pooling and batch norm
                        NCHW (default: tg-conv-layout makes a chain of them
                        channels-last where its convolutions are 16-bit
                        with channels multiples of 8 and cuDNN is used; the
                        dump NN-tg-conv-layout-report.txt says why per chain)
  --jobs N              cuda: parallel nvcc runs (default: CPU threads)
  --memory-budget SIZE|P%
                        the step must fit SIZE on the device (6GiB, 800MB,
                        bytes: units B, KB/MB/GB/TB, KiB/MiB/GiB/TiB), or
                        P% of --gpu's memory: the parameters, optimizer
                        state, inputs and the workspace train and eval share
                        (tcc compile -v prints it). When the plan needs
                        more, tg-remat recomputes forward activations in the
                        backward (cheapest per byte first; dump: NN-tg-remat-
                        report.txt) and the loss head may be chunked (see
                        --loss-chunks) until it fits; a budget that even
                        that cannot meet is an error naming what takes the
                        bytes
  --batch N|auto        compile the model at batch N (the inputs' first
                        dimension and the reshapes that start with it), or
                        with --memory-budget (or --gpu alone: its memory
                        less 1.5 GiB for the CUDA context) the largest batch
                        whose plan fits without recomputation (printed; the
                        plans at that batch and the next one decide, no
                        trial runs)
  --gpu NAME            cuda: the GPU the step is for: h100, h100-nvl, h200,
                        a100-40gb, a100-80gb, l4, rtx4090 (its memory as
                        nvidia-smi reports it; --arch defaults to its
                        architecture)
  --loss-chunks N|auto  the loss head (logits, cross-entropy and their
                        gradient) in N row chunks, so one chunk of logits is
                        live at a time (dW summed in f32 across chunks; dump:
                        NN-tg-chunk-loss-head-report.txt). 1: whole. auto
                        (default): whole, or with --memory-budget 1, 2, 4 or
                        8 chunks, whichever fits with the least time added
                        (whole with --deterministic)
  --data-parallel       the step is one rank's share of a data-parallel job:
                        its gradients and loss are averaged over the ranks
                        (tg.all_reduce, dump: NN-tg-all-reduce-gradients.mlir)
                        through the runtime's collectives (MPI on the cpu,
                        NCCL on a communication stream that overlaps the
                        backward on cuda) before clipping and the
                        optimizer; one rank: unchanged results. Train it
                        with trun --nproc N (docs/distributed.md)
  --sync-batch-norm     with --data-parallel: every batch_norm with running
                        statistics normalizes with the global batch's
                        statistics, all-reduced over the ranks in the
                        training step (torch.nn.SyncBatchNorm); eval keeps
                        the running statistics
  --shard-optimizer N   ZeRO-1, implies --data-parallel: the step runs on N
                        ranks exactly, and each keeps the optimizer state of
                        1/N of every parameter whose size N divides (its
                        gradient reduce-scattered, its shard updated, then
                        all-gathered); the rest stay whole. Optimizer memory
                        per rank about 1/N (dump:
                        NN-tg-all-reduce-gradients-report.txt)
  --shard-parameters N  ZeRO-3 / FSDP, implies --shard-optimizer N: each rank
                        also holds only 1/N of every parameter N divides,
                        and every function all-gathers a parameter (its bf16
                        cast under --precision bf16) right before each op
                        that reads it, freeing it after; for models whose
                        parameters, gradients and optimizer state do not fit
                        one GPU. Checkpoints stay whole (any world size
                        resumes). Dump: NN-tg-shard-parameters-report.txt
  --reduce-gradients-in computed|f32
                        with --data-parallel: a gradient computed in bf16
                        or f16 (a matmul's, under --precision bf16/fp16)
                        is reduced over the ranks in that type, then cast
                        to f32 for the optimizer (computed, the default:
                        half the bytes of f32), or cast first and reduced
                        in f32 (f32: the sum of the ranks' parts rounded
                        once, in f32)
  --keep-global-batch   with --batch: gradient accumulation over global /
                        batch micro-batches keeps the model's global batch
                        (auto: the largest divisor of it that fits)
  --no-cache            cuda: compile every unit (default: reuse objects from
                        $TCC_CACHE_DIR, else ~/.cache/tcc, keyed by source,
                        flags and compiler version)
  -v, --verbose         print on stderr each step function's memory plan
                        (parameters, optimizer state, inputs, outputs,
                        temporaries) and, cuda, a summary (launches,
                        kernels, units compiled / reused, seconds)
  --dump-dir DIR        write the IR after every pass as numbered files
                        (DIR/NN-<pass>.mlir), the generated source (cuda:
                        step_host.cpp, kernels_N.cu and kernels.txt, the
                        kernel list with launch shapes, FLOPs and bytes), and
                        DIR/index.txt describing each file
  --compile-to PHASE    stop after PHASE and write its output to OUTPUT:
                          import    tg IR straight from the model
                          training  + autodiff and optimizer (tg IR)
                          kern      + lowering to kern ops on buffers
                          plan      + memory plan (kern IR)
                          source    + generated C++ source (cuda: the host
                                    unit then each kernel unit)
                          library   + host compiler: step.so (default)
  --cxx COMPILER        host C++ compiler for the library (default: $CXX or c++)
  --cpu-arch ARCH       cpu: the host compiler's -march (default:
                        $TCC_CPU_ARCH, else native): x86-64-v3 for any AVX2
                        machine, none for the compiler's baseline; the
                        results of a cpu step depend on it (docs/runtime.md)
  --no-native           the same as --cpu-arch none (for a library that must
                        run on another CPU)
  --profile             cpu: a library that times its kernels: at exit the
                        process running it (trun, the Python front end)
                        prints to stderr the time per kind of kernel and the
                        40 slowest kernels, with their model nodes (a few
                        percent slower; cuda steps: trun --profile)
  --emit-gradients      the train step skips clipping and the optimizer and
                        returns each gradient as the train output
                        'grad:<param>' (parameters stay unchanged)
  --deterministic       cuda: a train step bit-identical run to run: cuDNN's
                        deterministic attention backward, and embedding
                        gradients (scatter-add) summed in the order of the
                        ids instead of with atomics (slower). cpu steps
                        always are
  --loss-scale dynamic|none
                        dynamic: loss scaling in the train step, as PyTorch's
                        GradScaler: the loss is scaled by S before the
                        backward pass, the gradients unscaled and checked;
                        a step with an inf/NaN gradient is skipped and S
                        halved, S doubles after N good steps in a row. S is
                        optimizer state (checkpointed); trun reports it and
                        the skipped steps. Works with any precision
                        (default: dynamic for --precision fp16, else none)
  --initial-loss-scale V
                        dynamic loss scaling: the first S, a number > 0 that
                        fits in f32 (default 65536 = 2^16)
  --loss-scale-growth-interval N
                        dynamic loss scaling: good steps in a row before S
                        doubles, 1 to 16777216 (default 2000)
  -h, --help            this text
)";

int usageError(const std::string &msg) {
  std::fprintf(stderr, "tcc: error: %s\n(see 'tcc compile --help')\n", msg.c_str());
  return 2;
}

int compileError(const std::string &msg) {
  std::fprintf(stderr, "tcc: error: %s\n", msg.c_str());
  return 1;
}

// Prints how a compile failed and returns the exit code: a misuse of the
// options 2, any other failure 1 (no message when MLIR diagnostics already
// printed why).
int reportCompile(const absl::Status &status) {
  if (status.ok())
    return 0;
  if (absl::IsInvalidArgument(status))
    return usageError(std::string(status.message()));
  if (status.message().empty())
    return 1;
  return compileError(std::string(status.message()));
}

// "h100, h100-nvl, h200, ...": the names --gpu takes.
std::string gpuNames() {
  std::string names;
  for (const tcc::NamedGpu &g : tcc::namedGpus())
    names += (names.empty() ? "" : ", ") + std::string(g.name);
  return names;
}

std::string shareText(double share) {
  char text[32];
  std::snprintf(text, sizeof text, "%g%%", share);
  return text;
}

int compileMain(int argc, char **argv) {
  tcc::CompileOptions args;
  bool reduceGradientsGiven = false; // --reduce-gradients-in, which needs ranks
  const tcc::NamedGpu *gpu = nullptr;   // --gpu
  std::optional<double> budgetShare;    // --memory-budget P%
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](std::string &out) -> bool {
      size_t eq = a.find('=');
      if (a.rfind("--", 0) == 0 && eq != std::string::npos) {
        out = a.substr(eq + 1);
        return true;
      }
      if (i + 1 >= argc)
        return false;
      out = argv[++i];
      return true;
    };
    std::string flag = a.substr(0, a.find('='));
    std::string v;
    if (a == "-h" || a == "--help") {
      std::fputs(kCompileHelp, stdout);
      return 0;
    } else if (flag == "-o" || flag == "--output") {
      if (!value(args.output))
        return usageError(flag + " needs a path");
    } else if (flag == "--target") {
      if (!value(args.target))
        return usageError("--target needs a value");
      if (args.target != "cpu" && args.target != "cuda")
        return usageError("unknown target '" + args.target + "' (supported: cpu, cuda)");
    } else if (flag == "--arch") {
      if (!value(args.arch))
        return usageError("--arch needs a value");
      if (!tcc::isValidCudaArch(args.arch))
        return usageError("unknown CUDA architecture '" + args.arch +
                          "' (expected sm_XY, e.g. sm_80, sm_90)");
    } else if (flag == "--jobs") {
      if (!value(v))
        return usageError("--jobs needs a number");
      char *end = nullptr;
      long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end || n < 1 || n > 1024)
        return usageError("--jobs needs a number from 1 to 1024, got '" + v + "'");
      args.jobs = static_cast<int>(n);
    } else if (flag == "--memory-budget") {
      if (!value(v))
        return usageError("--memory-budget needs a size (e.g. 6GiB)");
      std::string why;
      if (!v.empty() && v.back() == '%') {
        budgetShare = tcc::parsePercentage(v, why);
        if (!budgetShare)
          return usageError("--memory-budget " + why);
        args.memoryBudget.reset();
        continue;
      }
      std::optional<int64_t> bytes = tcc::parseByteSize(v, why);
      if (!bytes)
        return usageError("--memory-budget " + why);
      args.memoryBudget = *bytes;
      budgetShare.reset();
    } else if (flag == "--gpu") {
      if (!value(v) || v.empty())
        return usageError("--gpu needs a GPU name (" + gpuNames() + ")");
      gpu = tcc::findNamedGpu(v);
      if (!gpu)
        return usageError("unknown GPU '" + v + "' (known: " + gpuNames() +
                          "; or give --memory-budget as a size)");
    } else if (flag == "--batch") {
      if (!value(args.batch) || args.batch.empty())
        return usageError("--batch needs a number or 'auto'");
    } else if (flag == "--loss-chunks") {
      if (!value(v) || v.empty())
        return usageError("--loss-chunks needs a number or 'auto'");
      if (v != "auto") {
        char *end = nullptr;
        long n = std::strtol(v.c_str(), &end, 10);
        if (*end || n < 1 || n > 4096)
          return usageError("--loss-chunks needs 'auto' or a number from 1 to 4096, got '" + v +
                            "'");
        args.lossChunks = n;
      }
    } else if (a == "--data-parallel") {
      args.dataParallel = true;
    } else if (a == "--sync-batch-norm") {
      args.syncBatchNorm = true;
    } else if (flag == "--shard-optimizer" || flag == "--shard-parameters") {
      // Both name the ranks the step runs on; --shard-parameters shards the
      // optimizer state too (the update works on the shards ZeRO-1 makes).
      const bool params = flag == "--shard-parameters";
      if (!value(v))
        return usageError(flag + " needs the number of ranks the step will run on");
      char *end = nullptr;
      long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end || n < 1 || n > 65536)
        return usageError(flag + " needs a number of ranks from 1 to 65536, got '" + v + "'");
      const int64_t other = params ? args.shardOptimizer : args.shardParameters;
      if (other > 0 && other != n)
        return usageError("--shard-optimizer " + (params ? std::to_string(other) : v) +
                          " and --shard-parameters " + (params ? v : std::to_string(other)) +
                          " name different numbers of ranks");
      args.shardOptimizer = n;
      if (params)
        args.shardParameters = n;
      args.dataParallel = true; // sharding is data parallelism's
    } else if (flag == "--reduce-gradients-in") {
      if (!value(v) || (v != "f32" && v != "computed"))
        return usageError("--reduce-gradients-in needs 'computed' (the default: a gradient "
                          "computed in bf16 or f16 is reduced in it) or 'f32', got '" + v + "'");
      args.reduceGradientsInF32 = v == "f32";
      reduceGradientsGiven = true;
    } else if (a == "--keep-global-batch") {
      args.keepGlobalBatch = true;
    } else if (flag == "--precision") {
      if (!value(v) || v.empty())
        return usageError("--precision needs a value (bf16, fp16, tf32, fp32 or fp8)");
      if (!args.precision.empty() && args.precision != v)
        return usageError("--precision " + v + " contradicts --precision " + args.precision +
                          " (or --tf32) given before");
      args.precision = v;
    } else if (flag == "--fp8-scaling") {
      if (!value(v) || (v != "delayed" && v != "current"))
        return usageError("--fp8-scaling needs delayed or current");
      args.fp8Scaling = v;
    } else if (flag == "--fp8-keep") {
      if (!value(v) || v.empty())
        return usageError("--fp8-keep needs comma-separated names (e.g. lm_head,mlp.down)");
      args.fp8Keep = v;
    } else if (a == "--tf32") {
      if (!args.precision.empty() && args.precision != "tf32")
        return usageError("--tf32 contradicts --precision " + args.precision);
      args.precision = "tf32";
    } else if (a == "--no-fuse-attention") {
      args.fuseAttention = false;
    } else if (a == "--generate") {
      args.generate = true;
    } else if (a == "--no-fuse-epilogue") {
      args.fuseEpilogue = false;
    } else if (a == "--no-fuse-bias-grad") {
      args.fuseBiasGradient = false;
    } else if (a == "--no-norm-bias-grad") {
      args.normBiasGradient = false;
    } else if (a == "--no-cudnn") {
      args.cudnn = false;
    } else if (a == "--no-cutlass") {
      args.cutlass = false;
    } else if (a == "--no-sm90-attention") {
      args.sm90Attention = false;
    } else if (a == "--no-fp8-cast-fusion") {
      args.fp8CastFusion = false;
    } else if (a == "--no-channels-last") {
      args.channelsLast = false;
    } else if (a == "--no-fuse-horizontal") {
      args.fuseHorizontal = false;
    } else if (a == "--no-remat-copies") {
      args.rematCopies = false;
    } else if (a == "--no-cache") {
      args.useCache = false;
    } else if (a == "-v" || a == "--verbose") {
      args.verbose = true;
    } else if (flag == "--dump-dir") {
      if (!value(args.dumpDir) || args.dumpDir.empty())
        return usageError("--dump-dir needs a directory");
    } else if (flag == "--compile-to") {
      if (!value(v))
        return usageError("--compile-to needs a phase");
      auto p = tcc::parsePhase(v);
      if (!p)
        return usageError("unknown phase '" + v +
                          "' (import, training, kern, plan, source, library)");
      args.phase = *p;
    } else if (flag == "--cxx") {
      if (!value(args.cxx))
        return usageError("--cxx needs a compiler");
    } else if (a == "--no-native") {
      args.cpuArch = "none";
    } else if (a == "--profile") {
      args.profile = true;
    } else if (flag == "--cpu-arch") {
      if (!value(args.cpuArch) || args.cpuArch.empty())
        return usageError("--cpu-arch needs a CPU name (e.g. native, x86-64-v3, none)");
    } else if (a == "--emit-gradients") {
      args.emitGradients = true;
    } else if (a == "--cache-frozen") {
      args.cacheFrozen = true;
    } else if (a == "--deterministic") {
      args.deterministic = true;
    } else if (flag == "--loss-scale") {
      if (!value(v))
        return usageError("--loss-scale needs a value (dynamic, none)");
      if (v == "dynamic")
        args.lossScale = tcc::LossScaleMode::Dynamic;
      else if (v == "none")
        args.lossScale = tcc::LossScaleMode::None;
      else
        return usageError("unknown --loss-scale '" + v + "' (dynamic, none)");
    } else if (flag == "--initial-loss-scale") {
      if (!value(v))
        return usageError("--initial-loss-scale needs a number");
      char *end = nullptr;
      double scale = std::strtod(v.c_str(), &end);
      // The scale is f32 state: finite in f32, above zero.
      if (v.empty() || *end || !(scale > 0) ||
          !std::isfinite(static_cast<float>(scale)))
        return usageError("--initial-loss-scale needs a number > 0 that fits in "
                          "f32 (at most 3.4e38), got '" + v + "'");
      args.initialLossScale = scale;
    } else if (flag == "--loss-scale-growth-interval") {
      if (!value(v))
        return usageError("--loss-scale-growth-interval needs a number");
      char *end = nullptr;
      long long n = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end || n < 1 || n > tcc::training::kMaxGrowthInterval)
        return usageError("--loss-scale-growth-interval needs a whole number from "
                          "1 to " + std::to_string(tcc::training::kMaxGrowthInterval) +
                          ", got '" + v + "'");
      args.lossScaleGrowthInterval = n;
    } else if (!a.empty() && a[0] == '-' && a != "-") {
      return usageError("unknown option '" + a + "'" + tcc::DidYouMean(flag, kCompileHelp));
    } else if (args.model.empty()) {
      args.model = a;
    } else {
      return usageError("more than one model given ('" + args.model + "' and '" + a + "')");
    }
  }
  if (args.model.empty())
    return usageError("no model file given");
  if (reduceGradientsGiven && !args.dataParallel)
    return usageError("--reduce-gradients-in says how gradients are reduced over the ranks: add "
                      "--data-parallel (or --shard-optimizer N)");
  if (args.shardParameters > 0 && args.cacheFrozen)
    return usageError("--shard-parameters with --cache-frozen is not supported: each rank "
                      "would encode (and gather the frozen parameters) only on its own cache "
                      "misses; drop one of them");
  if (args.shardParameters > 0 && args.emitGradients)
    return usageError("--shard-parameters updates each parameter's shard in the step; "
                      "--emit-gradients runs no optimizer");
  if (args.shardOptimizer > 0 && args.emitGradients)
    return usageError("--shard-optimizer shards the optimizer's state; --emit-gradients runs no "
                      "optimizer");
  if (args.output.empty())
    return usageError("no output given (-o PATH)");
  if (args.target.empty())
    args.target = gpu || tcc::findNvcc() ? "cuda" : "cpu";
  if (args.target == "cpu" && !args.arch.empty())
    return usageError("--arch applies to --target cuda");
  if (args.target == "cuda" && args.profile)
    return usageError("--profile applies to --target cpu; a cuda step is profiled as it "
                      "runs: trun step.so --profile");
  if (gpu) {
    if (args.target == "cpu")
      return usageError("--gpu applies to --target cuda");
    if (args.arch.empty())
      args.arch = gpu->arch;
  }
  if (budgetShare) {
    if (!gpu)
      return usageError("--memory-budget " + shareText(*budgetShare) +
                        ": a share needs --gpu NAME (the GPU whose memory it is a share of: " +
                        gpuNames() + ")");
    args.memoryBudget = static_cast<int64_t>(*budgetShare / 100.0 * gpu->totalBytes);
  } else if (gpu && !args.memoryBudget && args.batch == "auto") {
    // --batch auto --gpu NAME: the GPU's memory less the CUDA context's.
    args.memoryBudget = gpu->totalBytes - tcc::kGpuContextReserveBytes;
  }
  if (gpu && args.memoryBudget && args.verbose)
    std::fprintf(stderr, "tcc: --gpu %s (%s, %s): the memory budget is %s\n", gpu->name,
                 gpu->what, tcc::formatBytes(gpu->totalBytes).c_str(),
                 tcc::formatBytes(*args.memoryBudget).c_str());
  if (args.target == "cuda" && args.arch.empty())
    args.arch = tcc::detectGpuArch().value_or("sm_90");
  return reportCompile(tcc::compileModel(args));
}

} // namespace

int main(int argc, char **argv) {
  // Past a file-size limit (ulimit -f) a write fails with EFBIG, which the
  // writers report naming the file (and remove their temporaries), instead
  // of SIGXFSZ ending the process mid-write.
  std::signal(SIGXFSZ, SIG_IGN);
  if (argc < 2) {
    std::fputs(kMainHelp, stderr);
    return 2;
  }
  std::string cmd = argv[1];
  if (cmd == "-h" || cmd == "--help" || cmd == "help") {
    std::fputs(kMainHelp, stdout);
    return 0;
  }
  if (cmd == "--version") {
    std::printf("tcc %s\n", kVersion);
    return 0;
  }
  if (cmd == "compile")
    return compileMain(argc - 2, argv + 2);
  if (cmd == "run")
    return tcc::runCommandMain(argc - 2, argv + 2);
  if (cmd == "import")
    return tcc::importCommandMain(argc - 2, argv + 2, argv[0]);
  std::fprintf(stderr, "tcc: error: unknown command '%s'\n", cmd.c_str());
  std::fputs(kMainHelp, stderr);
  return 2;
}
