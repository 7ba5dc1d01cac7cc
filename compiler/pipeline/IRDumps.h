// --dump-dir: the IR after every pass as numbered files, plus an index.
#ifndef TCC_COMPILER_PIPELINE_IRDUMPS_H
#define TCC_COMPILER_PIPELINE_IRDUMPS_H

#include <string>
#include <vector>

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"

namespace tcc {

class DumpDirectory {
public:
  // Creates `dir` (and parents); fails with a message if it cannot.
  static mlir::FailureOr<DumpDirectory> open(const std::string &dir,
                                             std::string &error);

  // Writes `NN-<stem>.<ext>` and records it in the index.
  mlir::LogicalResult write(llvm::StringRef stem, llvm::StringRef ext,
                            llvm::StringRef contents,
                            llvm::StringRef description);
  mlir::LogicalResult writeModule(llvm::StringRef stem, mlir::ModuleOp module,
                                  llvm::StringRef description);
  // Writes index.txt listing every file with what it is.
  mlir::LogicalResult writeIndex();

  // Installs an instrumentation writing the module after every pass.
  void attach(mlir::PassManager &pm);

private:
  explicit DumpDirectory(std::string dir) : dir_(std::move(dir)) {}
  std::string dir_;
  int next_ = 0;
  // After the first failed write (a full disk, ulimit -f) no more dumps are
  // tried: one error line, not one per stage.
  bool failed_ = false;
  std::vector<std::pair<std::string, std::string>> index_;
};

} // namespace tcc

#endif
