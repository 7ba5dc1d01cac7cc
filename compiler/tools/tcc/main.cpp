// tcc: compiles a model file (.pb / .pbtxt) into a step library.
//
//   tcc compile model.pb -o step.so [--target cpu|cuda] [--arch sm_XY]
//                        [--tf32] [--jobs N] [--no-cache] [--dump-dir DIR]
//                        [--compile-to PHASE] [--cxx COMPILER] [--no-native]
//                        [--emit-gradients] [-v]
//
// Exit codes: 0 success, 1 compile error (bad model, failed pass or host
// compiler), 2 usage error.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "compiler/codegen/cpu/CpuCodegen.h"
#include "compiler/codegen/cuda/CudaCodegen.h"
#include "compiler/driver/CudaCompiler.h"
#include "compiler/driver/HostCompiler.h"
#include "compiler/pipeline/IRDumps.h"
#include "compiler/pipeline/Pipeline.h"
#include "compiler/tools/tcc/Diagnostics.h"
#include "compiler/tools/tcc/RunCommand.h"
#include "dialects/kern/KernDialect.h"
#include "dialects/tg/TgDialect.h"
#include "frontend/importer/Importer.h"
#include "frontend/io/ModelFile.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

namespace {

constexpr const char *kVersion = "0.1.0";

const char *kMainHelp = R"(tcc — compiles a model and its training step into one shared library

Usage:
  tcc compile MODEL -o OUTPUT [options]   compile MODEL (.pb binary or .pbtxt text)
  tcc run MODEL [options]                 evaluate MODEL once with the float64
                                          reference interpreter and print the results
  tcc --help | -h                         this text
  tcc --version                           print the version

Run 'tcc compile --help' or 'tcc run --help' for their options.
)";

const char *kCompileHelp = R"(Usage: tcc compile MODEL -o OUTPUT [options]

Compiles MODEL (binary .pb, or text .pbtxt/.txtpb/.textproto) into OUTPUT,
a step library that trun loads (see docs/abi.md).

Options:
  -o, --output PATH     where to write the result; '-' writes text results
                        (any --compile-to before 'library') to stdout
  --target cpu|cuda     code generation target (default: cuda when nvcc is
                        found — $TCC_NVCC, PATH, /usr/local/cuda/bin — else cpu)
  --arch sm_XY          cuda: GPU architecture (default: GPU 0's, from
                        nvidia-smi; sm_90 when no GPU is visible)
  --tf32                cuda: fp32 matrix products may round inputs to TF32
                        (tensor cores; about 1e-3 relative error per product)
  --jobs N              cuda: parallel nvcc runs (default: CPU threads)
  --no-cache            cuda: compile every unit (default: reuse objects from
                        $TCC_CACHE_DIR, else ~/.cache/tcc, keyed by source,
                        flags and compiler version)
  -v, --verbose         cuda: print a summary (launches, kernels, units
                        compiled / reused, seconds) on stderr
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
  --no-native           do not pass -march=native to the host compiler
                        (for a library that must run on another CPU)
  --emit-gradients      the train step skips clipping and the optimizer and
                        returns each gradient as the train output
                        'grad:<param>' (parameters stay unchanged)
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

struct CompileArgs {
  std::string model, output, target, arch, dumpDir, cxx;
  tcc::Phase phase = tcc::Phase::Library;
  bool native = true;
  bool emitGradients = false;
  bool tf32 = false, useCache = true, verbose = false;
  int jobs = 0;
};

bool writeText(const std::string &path, llvm::StringRef text, std::string &error) {
  if (path == "-") {
    llvm::outs() << text;
    return true;
  }
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (ec) {
    error = "cannot write " + path + ": " + ec.message();
    return false;
  }
  os << text;
  return true;
}

// The cuda target after the memory plan: generated sources, then nvcc.
int emitCuda(const CompileArgs &args, mlir::ModuleOp module,
             std::optional<tcc::DumpDirectory> &dumps) {
  std::string error;
  tcc::CudaCodegenOptions codegen;
  codegen.arch = args.arch;
  codegen.tf32 = args.tf32;
  mlir::FailureOr<tcc::GeneratedCudaStep> step = tcc::generateCudaStep(module, codegen);
  if (mlir::failed(step))
    return 1;
  if (dumps) {
    (void)dumps->write("step_host", "cpp", step->hostSource,
                       "generated host C++ for the cuda target (launches, cuBLASLt, ABI)");
    for (size_t i = 0; i < step->kernelUnits.size(); ++i)
      (void)dumps->write("kernels_" + std::to_string(i), "cu", step->kernelUnits[i],
                         "generated CUDA kernel unit " + std::to_string(i));
    (void)dumps->write("kernels", "txt", step->kernelList,
                       "kernel list: every launch with its shape, FLOPs and bytes");
  }
  if (args.phase == tcc::Phase::Source) {
    std::string all = step->hostSource;
    for (size_t i = 0; i < step->kernelUnits.size(); ++i)
      all += "\n// ==== kernels_" + std::to_string(i) + ".cu ====\n" + step->kernelUnits[i];
    return writeText(args.output, all, error) ? 0 : compileError(error);
  }
  if (args.output == "-")
    return usageError("a library cannot be written to stdout; use -o PATH");
  std::optional<std::string> nvcc = tcc::findNvcc();
  if (!nvcc)
    return compileError("--target cuda needs nvcc: set TCC_NVCC, put nvcc on PATH or "
                        "install the CUDA toolkit in /usr/local/cuda");
  tcc::CudaCompileOptions options;
  options.nvcc = *nvcc;
  options.arch = args.arch;
  options.hostCompiler = args.cxx;
  options.jobs = args.jobs;
  options.useCache = args.useCache;
  tcc::CudaCompileStats stats;
  if (!tcc::compileCudaLibrary(step->hostSource, step->kernelUnits, args.output, options,
                               stats, error))
    return compileError(error);
  if (args.verbose)
    std::fprintf(stderr,
                 "tcc: cuda %s: %lld launches, %lld distinct kernels in %zu units; "
                 "%d of %d objects from the cache%s%s; %.1f s to compile and link\n",
                 args.arch.c_str(), static_cast<long long>(step->launches),
                 static_cast<long long>(step->distinctKernels), step->kernelUnits.size(),
                 stats.fromCache, stats.units, stats.cacheDir.empty() ? "" : " ",
                 stats.cacheDir.c_str(), stats.seconds);
  return 0;
}

int runCompile(const CompileArgs &args) {
  absl::StatusOr<tcc::model::Model> model = tcc::LoadModelFile(args.model);
  if (!model.ok())
    return compileError(std::string(model.status().message()));

  std::optional<tcc::DumpDirectory> dumps;
  if (!args.dumpDir.empty()) {
    std::string error;
    auto dir = tcc::DumpDirectory::open(args.dumpDir, error);
    if (mlir::failed(dir))
      return compileError(error);
    dumps.emplace(std::move(*dir));
  }

  mlir::MLIRContext ctx;
  ctx.loadDialect<tcc::tg::TgDialect, tcc::kern::KernDialect,
                  mlir::func::FuncDialect>();
  tcc::installDiagnosticPrinter(ctx, args.model);
  mlir::OwningOpRef<mlir::ModuleOp> module = tcc::importModel(*model, ctx);
  if (!module)
    return 1; // the diagnostic handler printed why
  if (dumps)
    (void)dumps->writeModule("import", *module, "tg IR imported from " + args.model);

  mlir::PassManager pm(&ctx);
  tcc::PipelineOptions pipelineOptions;
  pipelineOptions.emitGradients = args.emitGradients;
  tcc::buildPipeline(pm, args.phase, pipelineOptions);
  if (dumps) {
    ctx.disableMultithreading(); // dumps in pass order
    dumps->attach(pm);
  }
  if (mlir::failed(pm.run(*module))) {
    if (dumps)
      (void)dumps->writeIndex();
    return 1;
  }

  std::string error;
  auto finish = [&](int rc) {
    if (dumps)
      (void)dumps->writeIndex();
    return rc;
  };
  if (args.phase <= tcc::Phase::Plan) {
    std::string text;
    llvm::raw_string_ostream os(text);
    module->print(os);
    return finish(writeText(args.output, text, error) ? 0 : compileError(error));
  }

  if (args.target == "cuda")
    return finish(emitCuda(args, *module, dumps));

  mlir::FailureOr<tcc::GeneratedStep> step = tcc::generateCpuStep(*module);
  if (mlir::failed(step))
    return finish(1);
  if (dumps)
    (void)dumps->write("step", "cpp", step->source,
                       "generated C++ for the cpu target (compiled into the library)");
  if (args.phase == tcc::Phase::Source)
    return finish(writeText(args.output, step->source, error) ? 0 : compileError(error));

  if (args.output == "-")
    return finish(usageError("a library cannot be written to stdout; use -o PATH"));
  tcc::HostCompileOptions options;
  options.compiler = args.cxx;
  options.nativeArch = args.native;
  if (!tcc::compileSharedLibrary(step->source, args.output, options, error))
    return finish(compileError(error));
  return finish(0);
}

int compileMain(int argc, char **argv) {
  CompileArgs args;
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
    } else if (a == "--tf32") {
      args.tf32 = true;
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
      args.native = false;
    } else if (a == "--emit-gradients") {
      args.emitGradients = true;
    } else if (!a.empty() && a[0] == '-' && a != "-") {
      return usageError("unknown option '" + a + "'");
    } else if (args.model.empty()) {
      args.model = a;
    } else {
      return usageError("more than one model given ('" + args.model + "' and '" + a + "')");
    }
  }
  if (args.model.empty())
    return usageError("no model file given");
  if (args.output.empty())
    return usageError("no output given (-o PATH)");
  if (args.target.empty())
    args.target = tcc::findNvcc() ? "cuda" : "cpu";
  if (args.target == "cpu" && (!args.arch.empty() || args.tf32))
    return usageError("--arch and --tf32 apply to --target cuda");
  if (args.target == "cuda" && args.arch.empty())
    args.arch = tcc::detectGpuArch().value_or("sm_90");
  return runCompile(args);
}

} // namespace

int main(int argc, char **argv) {
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
  std::fprintf(stderr, "tcc: error: unknown command '%s'\n", cmd.c_str());
  std::fputs(kMainHelp, stderr);
  return 2;
}
