#include "compiler/pipeline/IRDumps.h"

#include "passes/Passes.h"

#include "mlir/IR/OperationSupport.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

namespace tcc {

mlir::FailureOr<DumpDirectory> DumpDirectory::open(const std::string &dir,
                                                   std::string &error) {
  if (std::error_code ec = llvm::sys::fs::create_directories(dir)) {
    error = "cannot create dump directory '" + dir + "': " + ec.message();
    return mlir::failure();
  }
  // Remove dumps of an earlier run so the numbering is never mixed.
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec;
       it.increment(ec)) {
    llvm::StringRef file = llvm::sys::path::filename(it->path());
    if (file.size() > 3 && isdigit(file[0]) && isdigit(file[1]) && file[2] == '-')
      llvm::sys::fs::remove(it->path());
  }
  return DumpDirectory(dir);
}

mlir::LogicalResult DumpDirectory::write(llvm::StringRef stem,
                                         llvm::StringRef ext,
                                         llvm::StringRef contents,
                                         llvm::StringRef description) {
  std::string file = llvm::formatv("{0:02}-{1}.{2}", next_++, stem, ext).str();
  if (failed_)
    return mlir::failure();
  std::error_code ec;
  llvm::raw_fd_ostream os(dir_ + "/" + file, ec);
  if (ec) {
    llvm::errs() << "tcc: error: cannot write dump " << dir_ << "/" << file
                 << ": " << ec.message() << " (no further dumps are written)\n";
    failed_ = true;
    return mlir::failure();
  }
  os << contents;
  // Closed here so a failed write is this error, not LLVM's "IO failure"
  // abort in the stream's destructor.
  os.close();
  if (os.has_error()) {
    llvm::errs() << "tcc: error: cannot write dump " << dir_ << "/" << file
                 << ": " << os.error().message() << " (no further dumps are written)\n";
    os.clear_error();
    llvm::sys::fs::remove(dir_ + "/" + file);
    failed_ = true;
    return mlir::failure();
  }
  index_.push_back({file, description.str()});
  return mlir::success();
}

mlir::LogicalResult DumpDirectory::writeModule(llvm::StringRef stem,
                                               mlir::ModuleOp module,
                                               llvm::StringRef description) {
  std::string text;
  llvm::raw_string_ostream os(text);
  // Locations in their parseable form (loc("fc1"), #loc aliases at the
  // end), not the pretty one: a dump must replay with tcc-opt.
  module->print(os, mlir::OpPrintingFlags().enableDebugInfo(
                        /*enable=*/true, /*prettyForm=*/false));
  return write(stem, "mlir", text, description);
}

mlir::LogicalResult DumpDirectory::writeIndex() {
  if (failed_)
    return mlir::failure();
  std::error_code ec;
  llvm::raw_fd_ostream os(dir_ + "/index.txt", ec);
  if (ec)
    return mlir::failure();
  os << "# tcc dump: one file per stage, in pipeline order\n";
  for (auto &[file, what] : index_)
    os << llvm::formatv("{0,-36} {1}\n", file, what);
  os.close();
  if (os.has_error()) {
    os.clear_error();
    return mlir::failure();
  }
  return mlir::success();
}

namespace {
// The passes whose decisions --dump-dir also writes as a table, next to the
// pass's IR dump (NN-<pass>-report.txt).
struct PassReport {
  const char *pass;
  void (*write)(mlir::ModuleOp, llvm::raw_ostream &);
  const char *what;
};
const PassReport kPassReports[] = {
    {"tg-fuse-rms-norm", writeRmsNormFusionReport,
     "tg-fuse-rms-norm's decisions: each RMSNorm written out fused into tg.rms_norm or not "
     "and why"},
    {"tg-fuse-attention", writeAttentionFusionReport,
     "tg-fuse-attention's decisions: each softmax fused or not and why"},
    {"tg-cache-rope", writeCacheRopeReport,
     "tg-cache-rope's decisions: tables cached, rotations fused, what was left and why"},
    {"tg-fuse-matmul-epilogue", writeMatmulEpilogueReport,
     "tg-fuse-matmul-epilogue's decisions: each matmul fused with its epilogue or not and why"},
    {"kern-fuse-elementwise", writeFuseElementwiseReport,
     "kern-fuse-elementwise's decisions: kernels linked through reshapes and the one shape "
     "each cluster computes in"},
    {"kern-fold-attention-layout", writeAttentionLayoutReport,
     "kern-fold-attention-layout's decisions: each attention tensor's copies folded into "
     "strides or kept and why"},
    {"kern-fuse-horizontal", writeFuseHorizontalReport,
     "kern-fuse-horizontal's decisions: the groups, the kernels refused and why"},
    {"kern-plan-memory", writeMemoryPlanReport,
     "kern-plan-memory's plan: each temporary's offset, bytes and live range, the arguments "
     "outside the arena, the overlap check"},
    {"tg-cache-frozen", writeCacheFrozenReport,
     "tg-cache-frozen's decision: the frozen encoder cut off as @encode / @train_cached "
     "(values, bytes per sample, FLOPs saved) or why nothing was cut"},
    {"tg-remat", writeRematReport,
     "tg-remat's decisions: each value recomputed (bytes freed, FLOPs added), the largest "
     "left at the peak and why"},
    {"tg-chunk-loss-head", writeChunkLossHeadReport,
     "tg-chunk-loss-head's decisions: each loss head computed in row chunks (logits bytes "
     "before and after, time added) or not and why"},
    {"tg-all-reduce-gradients", writeAllReduceGradientsReport,
     "tg-all-reduce-gradients' decisions: each gradient reduced in the bf16 / f16 it was "
     "computed in, or (--reduce-gradients-in f32) whose late casts moved up to where it is "
     "computed, and with --shard-optimizer each gradient reduce-scattered (its optimizer state "
     "sharded) or kept whole and why"},
    {"tg-shard-parameters", writeShardParametersReport,
     "tg-shard-parameters' decisions: each parameter sharded over the ranks and the ops "
     "its all-gathers feed, or kept whole and why"},
    {"kern-schedule-collectives", writeScheduleCollectivesReport,
     "kern-schedule-collectives' decisions: each all-reduce moved to right after its "
     "gradient is final, and the kernels it now overlaps"},
    {"tg-amp", writeAmpReport, "tg-amp's decisions: each op's precision and why"},
    {"tg-derive-generate", writeDeriveGenerateReport,
     "tg-derive-generate's decisions: the KV-cache entries @prefill / @decode derived from "
     "@forward, or why not"},
    {"tg-conv-layout", writeConvLayoutReport,
     "tg-conv-layout's decisions: each chain of convolutions and pooling ops, its layout and why"},
};

class DumpAfterEachPass : public mlir::PassInstrumentation {
public:
  explicit DumpAfterEachPass(DumpDirectory &dir) : dir_(dir) {}
  void runAfterPass(mlir::Pass *pass, mlir::Operation *op) override {
    auto module = llvm::dyn_cast<mlir::ModuleOp>(op);
    if (!module)
      module = op->getParentOfType<mlir::ModuleOp>();
    (void)dir_.writeModule(pass->getArgument(), module,
                           ("after pass " + pass->getArgument() + ": " +
                            pass->getDescription())
                               .str());
    for (const PassReport &r : kPassReports) {
      if (pass->getArgument() != r.pass)
        continue;
      std::string report;
      llvm::raw_string_ostream os(report);
      r.write(module, os);
      if (report.empty()) // nothing to report for this module (e.g. no sharding)
        continue;
      (void)dir_.write(std::string(r.pass) + "-report", "txt", report, r.what);
    }
  }

private:
  DumpDirectory &dir_;
};
} // namespace

void DumpDirectory::attach(mlir::PassManager &pm) {
  pm.addInstrumentation(std::make_unique<DumpAfterEachPass>(*this));
}

} // namespace tcc
