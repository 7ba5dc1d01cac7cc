// A test fixture that parses a module from text and runs its @f through the
// reference interpreter; diagnostics (parse errors, the interpreter's
// errors) are collected in diagnostics_ for the test to check.
#ifndef TCC_TESTS_GRADCHECK_INTERPRETERFIXTURE_H
#define TCC_TESTS_GRADCHECK_INTERPRETERFIXTURE_H

#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "compiler/interpreter/TgInterpreter.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"
#include "tests/gradcheck/GradCheck.h"

namespace tcc::gradcheck {

class InterpreterFixture : public ::testing::Test {
protected:
  InterpreterFixture() : ctx_(makeContext()) {
    handler_.emplace(ctx_.get(), [this](mlir::Diagnostic &d) {
      diagnostics_ += d.str() + "\n";
      return mlir::success();
    });
  }

  // Parses `source` and interprets its function @f on `args`.
  mlir::FailureOr<std::vector<interp::Tensor>> run(llvm::StringRef source,
                                                   std::vector<interp::Tensor> args) {
    module_ = mlir::parseSourceString<mlir::ModuleOp>(source, ctx_.get());
    if (!module_) {
      ADD_FAILURE() << "test IR does not parse:\n" << diagnostics_;
      return mlir::failure();
    }
    auto f = module_->lookupSymbol<mlir::func::FuncOp>("f");
    if (!f) {
      ADD_FAILURE() << "test IR has no @f";
      return mlir::failure();
    }
    return interp::interpret(f, args);
  }

  std::unique_ptr<mlir::MLIRContext> ctx_;
  std::optional<mlir::ScopedDiagnosticHandler> handler_;
  std::string diagnostics_;
  mlir::OwningOpRef<mlir::ModuleOp> module_;
};

} // namespace tcc::gradcheck

#endif // TCC_TESTS_GRADCHECK_INTERPRETERFIXTURE_H
