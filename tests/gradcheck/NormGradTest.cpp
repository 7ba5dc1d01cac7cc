// The fused norm gradients (tg.layer_norm_grad, tg.rms_norm_grad) equal
// their primitive expansion (build::normGradExpansion, what the gradient
// rules emitted before) in float64 on the reference interpreter, with and
// without weight / bias gradients, and with a bf16 grad as tg-amp's
// training steps produce it (x f32 there; f64 here, the grad read from its
// rounded bf16 values by both). Finite-difference checks of the rules that
// emit them are in StructuralGradTest.cpp (normCases).
#include <gtest/gtest.h>

#include "interpreter/TgInterpreter.h"
#include "dialects/tg/TgStructuralBuilders.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
#include "tests/gradcheck/GradCheck.h"
#include "tests/gradcheck/GradCheckFixture.h"

using namespace mlir;
using namespace tcc;
using namespace tcc::gradcheck;
using tcc::interp::Tensor;

namespace {

struct NormGradCase {
  std::string name;
  bool centered, weight, bias, bf16Grad;
};

class NormGradTest : public GradCheckParamTest<NormGradCase> {};

// @f(x, w, g) -> (fused results..., expansion results...), x (2, 3, 5).
TEST_P(NormGradTest, FusedOpEqualsThePrimitiveExpansion) {
  const NormGradCase &c = GetParam();
  MLIRContext &ctx = context();
  OpBuilder b(&ctx);
  Location loc = b.getUnknownLoc();
  auto x = f64Tensor(&ctx, {2, 3, 5}), w = f64Tensor(&ctx, {5});
  Type gradType = c.bf16Grad ? Type(RankedTensorType::get({2, 3, 5}, b.getBF16Type())) : Type(x);
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(module->getBody());
  auto f = func::FuncOp::create(b, loc, "f", b.getFunctionType({x, w, gradType}, {}));
  Block *body = f.addEntryBlock();
  b.setInsertionPointToEnd(body);
  Value xv = body->getArgument(0), wv = c.weight ? body->getArgument(1) : Value();
  Value g = body->getArgument(2);
  const double eps = 1e-5;
  SmallVector<Value> results;
  if (c.centered) {
    auto op = tg::LayerNormGradOp::create(b, loc, x, c.weight ? Type(w) : Type(),
                                          c.bias ? Type(w) : Type(), g, xv, wv,
                                          b.getF64FloatAttr(eps));
    results.append(op->result_begin(), op->result_end());
  } else {
    auto op = tg::RmsNormGradOp::create(b, loc, x, c.weight ? Type(w) : Type(), g, xv, wv,
                                        b.getF64FloatAttr(eps));
    results.append(op->result_begin(), op->result_end());
  }
  size_t fused = results.size();
  SmallVector<Value> expanded =
      tg::build::normGradExpansion(b, loc, g, xv, wv, c.bias, eps, c.centered);
  ASSERT_EQ(expanded.size(), fused);
  results.append(expanded);
  func::ReturnOp::create(b, loc, results);
  f.setFunctionType(b.getFunctionType({x, w, gradType}, TypeRange(ValueRange(results))));
  ASSERT_TRUE(succeeded(mlir::verify(*module))) << diagnostics_;

  std::mt19937_64 rng(seed());
  std::vector<Tensor> args = randomArguments(f, rng, /*numClasses=*/3);
  FailureOr<std::vector<Tensor>> out = interp::interpret(f, args);
  ASSERT_TRUE(succeeded(out)) << diagnostics_;
  for (size_t i = 0; i < fused; ++i)
    EXPECT_LE(maxRelativeDifference((*out)[i], (*out)[fused + i]), 1e-12)
        << "result " << i << " of " << c.name;
}

std::vector<NormGradCase> cases() {
  std::vector<NormGradCase> all;
  for (bool bf16Grad : {false, true}) {
    std::string grad = bf16Grad ? "_bf16_grad" : "";
    for (bool weight : {false, true}) {
      for (bool bias : {false, true})
        all.push_back({std::string("layer_norm") + (weight ? "_weight" : "") +
                           (bias ? "_bias" : "") + grad,
                       true, weight, bias, bf16Grad});
      all.push_back({std::string("rms_norm") + (weight ? "_weight" : "") + grad, false, weight,
                     false, bf16Grad});
    }
  }
  return all;
}

INSTANTIATE_TEST_SUITE_P(
    Norms, NormGradTest, ::testing::ValuesIn(cases()),
    [](const ::testing::TestParamInfo<NormGradCase> &info) { return info.param.name; });

} // namespace
