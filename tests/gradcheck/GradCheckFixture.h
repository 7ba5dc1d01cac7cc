// The one fixture of the gradient-check tests. Each test gets:
//  - seed(): its random seed (TCC_GRADCHECK_SEED or a fresh one), traced on
//    every failure as "seed N (rerun with TCC_GRADCHECK_SEED=N)";
//  - context(): an MLIRContext with tg and func loaded, whose diagnostics
//    are collected in diagnostics_ (and printed when the test fails);
//  - parse()/run(): a module from text, and its @f on the reference
//    interpreter;
//  - buildDifferentiated()/differentiate(): a @forward from GradCheck.h's
//    builders through tg-autodiff, for checkGradients (finite differences
//    against @train_step) or the test's own expectations.
// GradCheckTest is the plain fixture; GradCheckParamTest<P> the one of
// value-parameterized tests.
#ifndef TCC_TESTS_GRADCHECK_GRADCHECKFIXTURE_H
#define TCC_TESTS_GRADCHECK_GRADCHECKFIXTURE_H

#include <functional>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "interpreter/TgInterpreter.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"
#include "tests/gradcheck/GradCheck.h"

namespace tcc::gradcheck {

template <typename Base> class GradCheckFixture : public Base {
protected:
  GradCheckFixture()
      : seed_(testSeed()), seedTrace_(__FILE__, __LINE__, seedMessage(seed_)),
        ctx_(makeContext()) {
    handler_.emplace(ctx_.get(), [this](mlir::Diagnostic &d) {
      diagnostics_ += d.str() + "\n";
      return mlir::success();
    });
  }

  // Diagnostics are collected rather than printed; a failing test shows them.
  void TearDown() override {
    if (this->HasFailure() && !diagnostics_.empty())
      std::cerr << "MLIR diagnostics of this test:\n" << diagnostics_;
  }

  uint64_t seed() const { return seed_; }
  mlir::MLIRContext &context() { return *ctx_; }

  // Parses `source` (diagnostics_ then holds only this parse's errors).
  mlir::OwningOpRef<mlir::ModuleOp> parse(llvm::StringRef source) {
    diagnostics_.clear();
    auto module = mlir::parseSourceString<mlir::ModuleOp>(source, ctx_.get());
    if (!module)
      ADD_FAILURE() << "test IR does not parse:\n" << diagnostics_;
    return module;
  }

  // Parses `source` into module_, applies `transform` (e.g. runDecompose)
  // and interprets its function @f on `args`; diagnostics_ holds this run's
  // errors only.
  mlir::FailureOr<std::vector<interp::Tensor>>
  run(llvm::StringRef source, std::vector<interp::Tensor> args,
      const std::function<mlir::LogicalResult(mlir::ModuleOp)> &transform =
          {}) {
    module_ = parse(source);
    if (!module_)
      return mlir::failure();
    auto f = module_->lookupSymbol<mlir::func::FuncOp>("f");
    if (!f) {
      ADD_FAILURE() << "test IR has no @f";
      return mlir::failure();
    }
    if (transform && failed(transform(*module_)))
      return mlir::failure();
    return interp::interpret(f, args);
  }

  // Runs tg-autodiff (and tg-sgd-update with `withSgd`) on `module`; a
  // failure is a test failure showing the passes' diagnostics.
  bool differentiate(mlir::ModuleOp module, bool withSgd = false) {
    if (succeeded(runTrainingPasses(module, withSgd)))
      return true;
    ADD_FAILURE() << "the training passes failed:\n" << diagnostics_;
    return false;
  }

  // @forward(args..., cotangent) around `body` (buildForwardModule) after
  // tg-autodiff; null (with a test failure) when either step fails.
  mlir::OwningOpRef<mlir::ModuleOp>
  buildDifferentiated(llvm::ArrayRef<ArgSpec> args, const BodyBuilder &body) {
    mlir::OwningOpRef<mlir::ModuleOp> module =
        buildForwardModule(*ctx_, args, body);
    if (!module) {
      ADD_FAILURE() << "the test @forward does not verify:\n" << diagnostics_;
      return nullptr;
    }
    if (!differentiate(*module))
      return nullptr;
    return module;
  }

  // checkGradients on this test's seed.
  std::vector<ParamGradient>
  checkGradients(mlir::ModuleOp module, const GradCheckOptions &options = {}) {
    return gradcheck::checkGradients(module, seed_, options);
  }

  const uint64_t seed_;
  ::testing::ScopedTrace seedTrace_;
  std::unique_ptr<mlir::MLIRContext> ctx_;
  std::optional<mlir::ScopedDiagnosticHandler> handler_;
  std::string diagnostics_;
  mlir::OwningOpRef<mlir::ModuleOp> module_; // the last run()'s
};

using GradCheckTest = GradCheckFixture<::testing::Test>;
template <typename Param>
using GradCheckParamTest = GradCheckFixture<::testing::TestWithParam<Param>>;

} // namespace tcc::gradcheck

#endif // TCC_TESTS_GRADCHECK_GRADCHECKFIXTURE_H
