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
  std::error_code ec;
  llvm::raw_fd_ostream os(dir_ + "/" + file, ec);
  if (ec) {
    llvm::errs() << "tcc: error: cannot write dump " << dir_ << "/" << file
                 << ": " << ec.message() << "\n";
    return mlir::failure();
  }
  os << contents;
  index_.push_back({file, description.str()});
  return mlir::success();
}

mlir::LogicalResult DumpDirectory::writeModule(llvm::StringRef stem,
                                               mlir::ModuleOp module,
                                               llvm::StringRef description) {
  std::string text;
  llvm::raw_string_ostream os(text);
  module->print(os, mlir::OpPrintingFlags().enableDebugInfo(true, true));
  return write(stem, "mlir", text, description);
}

mlir::LogicalResult DumpDirectory::writeIndex() {
  std::error_code ec;
  llvm::raw_fd_ostream os(dir_ + "/index.txt", ec);
  if (ec)
    return mlir::failure();
  os << "# tcc dump: one file per stage, in pipeline order\n";
  for (auto &[file, what] : index_)
    os << llvm::formatv("{0,-36} {1}\n", file, what);
  return mlir::success();
}

namespace {
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
    if (pass->getArgument() == "tg-fuse-attention") {
      std::string report;
      llvm::raw_string_ostream os(report);
      writeAttentionFusionReport(module, os);
      (void)dir_.write("tg-fuse-attention-report", "txt", report,
                       "tg-fuse-attention's decisions: each softmax fused or "
                       "not and why");
    }
    if (pass->getArgument() == "tg-cache-rope") {
      std::string report;
      llvm::raw_string_ostream os(report);
      writeCacheRopeReport(module, os);
      (void)dir_.write("tg-cache-rope-report", "txt", report,
                       "tg-cache-rope's decisions: tables cached, rotations fused, "
                       "what was left and why");
    }
    if (pass->getArgument() == "tg-fuse-matmul-epilogue") {
      std::string report;
      llvm::raw_string_ostream os(report);
      writeMatmulEpilogueReport(module, os);
      (void)dir_.write("tg-fuse-matmul-epilogue-report", "txt", report,
                       "tg-fuse-matmul-epilogue's decisions: each matmul fused "
                       "with its epilogue or not and why");
    }
    if (pass->getArgument() == "kern-fold-attention-layout") {
      std::string report;
      llvm::raw_string_ostream os(report);
      writeAttentionLayoutReport(module, os);
      (void)dir_.write("kern-fold-attention-layout-report", "txt", report,
                       "kern-fold-attention-layout's decisions: each attention "
                       "tensor's copies folded into strides or kept and why");
    }
    if (pass->getArgument() == "kern-fuse-horizontal") {
      std::string report;
      llvm::raw_string_ostream os(report);
      writeFuseHorizontalReport(module, os);
      (void)dir_.write("kern-fuse-horizontal-report", "txt", report,
                       "kern-fuse-horizontal's decisions: the groups, the kernels "
                       "refused and why");
    }
    if (pass->getArgument() == "kern-plan-memory") {
      std::string report;
      llvm::raw_string_ostream os(report);
      writeMemoryPlanReport(module, os);
      (void)dir_.write("kern-plan-memory-report", "txt", report,
                       "kern-plan-memory's plan: each temporary's offset, bytes and "
                       "live range, the arguments outside the arena, the overlap check");
    }
    if (pass->getArgument() == "tg-amp") {
      std::string report;
      llvm::raw_string_ostream os(report);
      writeAmpReport(module, os);
      (void)dir_.write("tg-amp-report", "txt", report,
                       "tg-amp's decisions: each op's precision and why");
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
