// The reference interpreter on the structural and NN ops
// (dialects/tg/TgStructuralOps.td): hand-computed values, bad inputs, and
// the same values after tg-decompose; reduce_max's gradient at ties. Their
// gradients against finite differences: StructuralGradTest.cpp.
#include <cmath>

#include <gtest/gtest.h>

#include "dialects/common/ModelAttrs.h"
#include "dialects/tg/TgDialect.h"
#include "dialects/tg/TgStructuralBuilders.h"
#include "tests/gradcheck/GradCheck.h"
#include "tests/gradcheck/GradCheckFixture.h"

using namespace mlir;
using namespace tcc;
using namespace tcc::gradcheck;
namespace build = tcc::tg::build;

namespace {

//===----------------------------------------------------------------------===//
// The interpreter on hand-computed values and bad inputs
//===----------------------------------------------------------------------===//

// GradCheckTest's run(), with tg-decompose (without CSE) applied first
// when `decompose`.
class StructuralInterpreterTest : public GradCheckTest {
protected:
  FailureOr<std::vector<Tensor>> run(StringRef ir, std::vector<Tensor> args,
                                     bool decompose = false) {
    if (!decompose)
      return GradCheckTest::run(ir, std::move(args));
    return GradCheckTest::run(ir, std::move(args), [](ModuleOp module) {
      return runDecompose(module, /*withCse=*/false);
    });
  }
};

Tensor tensor(std::vector<int64_t> shape, std::vector<double> data) {
  return Tensor{std::move(shape), std::move(data)};
}

TEST_F(StructuralInterpreterTest, BatchedMatmulBroadcastsBatch) {
  // lhs (2, 1, 2) times rhs (2, 1): one rank-2 rhs for both matrices.
  auto r = run(R"(func.func @f(%a: tensor<2x1x2xf64>, %b: tensor<2x1xf64>) -> tensor<2x1x1xf64> {
    %0 = tg.matmul %a, %b : (tensor<2x1x2xf64>, tensor<2x1xf64>) -> tensor<2x1x1xf64>
    return %0 : tensor<2x1x1xf64>
  })",
               {tensor({2, 1, 2}, {1, 2, 3, 4}), tensor({2, 1}, {10, 100})});
  ASSERT_TRUE(succeeded(r)) << diagnostics_;
  EXPECT_EQ((*r)[0].data, (std::vector<double>{210, 430}));
}

TEST_F(StructuralInterpreterTest, ShapeOps) {
  auto r = run(R"(func.func @f(%x: tensor<2x3xf64>) -> (tensor<3x2xf64>, tensor<1x2xf64>, tensor<2x5xf64>, tensor<2x1xf64>, tensor<2x2xf64>, tensor<f64>) {
    %t = tg.transpose %x {perm = array<i64: 1, 0>} : (tensor<2x3xf64>) -> tensor<3x2xf64>
    %s = tg.slice %x {starts = array<i64: 1, 1>, ends = array<i64: 2, 3>} : (tensor<2x3xf64>) -> tensor<1x2xf64>
    %s2 = tg.slice %x {starts = array<i64: 0, 1>, ends = array<i64: 2, 3>} : (tensor<2x3xf64>) -> tensor<2x2xf64>
    %c = tg.concat %x, %s2 {axis = 1 : i64} : (tensor<2x3xf64>, tensor<2x2xf64>) -> tensor<2x5xf64>
    %p:2 = tg.split %x {axis = 1 : i64} : (tensor<2x3xf64>) -> (tensor<2x1xf64>, tensor<2x2xf64>)
    %m = tg.reduce_max %x {axes = array<i64: 0, 1>} : (tensor<2x3xf64>) -> tensor<f64>
    return %t, %s, %c, %p#0, %p#1, %m : tensor<3x2xf64>, tensor<1x2xf64>, tensor<2x5xf64>, tensor<2x1xf64>, tensor<2x2xf64>, tensor<f64>
  })",
               {tensor({2, 3}, {1, 2, 3, 4, 5, -6})});
  ASSERT_TRUE(succeeded(r)) << diagnostics_;
  EXPECT_EQ((*r)[0].data, (std::vector<double>{1, 4, 2, 5, 3, -6}));
  EXPECT_EQ((*r)[1].data, (std::vector<double>{5, -6}));
  EXPECT_EQ((*r)[2].data,
            (std::vector<double>{1, 2, 3, 2, 3, 4, 5, -6, 5, -6}));
  EXPECT_EQ((*r)[3].data, (std::vector<double>{1, 4}));
  EXPECT_EQ((*r)[4].data, (std::vector<double>{2, 3, 5, -6}));
  EXPECT_EQ((*r)[5].data, (std::vector<double>{5}));
}

TEST_F(StructuralInterpreterTest, GatherAndScatterAddAccumulateRepeatedIds) {
  auto r = run(R"(func.func @f(%t: tensor<3x2xf64>, %ids: tensor<4xi32>) -> (tensor<4x2xf64>, tensor<3x2xf64>) {
    %g = tg.gather %t, %ids : (tensor<3x2xf64>, tensor<4xi32>) -> tensor<4x2xf64>
    %s = tg.scatter_add %ids, %g : (tensor<4xi32>, tensor<4x2xf64>) -> tensor<3x2xf64>
    return %g, %s : tensor<4x2xf64>, tensor<3x2xf64>
  })",
               {tensor({3, 2}, {1, 2, 3, 4, 5, 6}), tensor({4}, {2, 0, 2, 2})});
  ASSERT_TRUE(succeeded(r)) << diagnostics_;
  EXPECT_EQ((*r)[0].data, (std::vector<double>{5, 6, 1, 2, 5, 6, 5, 6}));
  EXPECT_EQ((*r)[1].data, (std::vector<double>{1, 2, 0, 0, 15, 18}));
}

TEST_F(StructuralInterpreterTest, IdOutOfRangeIsAnError) {
  auto r = run(R"(func.func @f(%t: tensor<3x2xf64>, %ids: tensor<2xi32>) -> tensor<2x2xf64> {
    %g = tg.gather %t, %ids : (tensor<3x2xf64>, tensor<2xi32>) -> tensor<2x2xf64>
    return %g : tensor<2x2xf64>
  })",
               {Tensor::zeros({3, 2}), tensor({2}, {1, 3})});
  EXPECT_TRUE(failed(r));
  EXPECT_NE(diagnostics_.find("id 3 at position 1 is outside [0, 3)"),
            std::string::npos)
      << diagnostics_;
}

TEST_F(StructuralInterpreterTest, CausalMask) {
  // T = 2 queries over S = 3 keys: query i sees keys j <= i + 1.
  const char *ir = R"(func.func @f(%x: tensor<2x3xf64>) -> tensor<2x3xf64> {
    %m = tg.causal_mask %x {value = -1.0e+09 : f64} : tensor<2x3xf64>
    return %m : tensor<2x3xf64>
  })";
  for (bool decompose : {false, true}) {
    auto r = run(ir, {tensor({2, 3}, {1, 2, 3, 4, 5, 6})}, decompose);
    ASSERT_TRUE(succeeded(r)) << diagnostics_;
    EXPECT_EQ((*r)[0].data, (std::vector<double>{1, 2, -1e9, 4, 5, 6}))
        << (decompose ? "decomposed" : "tg.causal_mask");
  }
}

// Hand-computed: logits 0 everywhere over C = 4 classes: each counted
// position costs log 4.
TEST_F(StructuralInterpreterTest, CrossEntropyIgnoreIndex) {
  const char *ir = R"(func.func @f(%l: tensor<3x4xf64>, %t: tensor<3xi64>) -> tensor<f64> {
    %0 = tg.cross_entropy %l, %t {ignore_index = -100 : i64} : (tensor<3x4xf64>, tensor<3xi64>) -> tensor<f64>
    return %0 : tensor<f64>
  })";
  for (bool decompose : {false, true}) {
    SCOPED_TRACE(decompose ? "decomposed" : "tg.cross_entropy");
    auto r = run(ir, {Tensor::zeros({3, 4}), tensor({3}, {1, -100, 3})},
                 decompose);
    ASSERT_TRUE(succeeded(r)) << diagnostics_;
    EXPECT_NEAR((*r)[0].data[0], std::log(4.0), 1e-15);
    r = run(ir, {Tensor::zeros({3, 4}), tensor({3}, {-100, -100, -100})},
            decompose);
    ASSERT_TRUE(succeeded(r)) << diagnostics_;
    EXPECT_EQ((*r)[0].data[0], 0.0);
  }
}

// A counted target outside [0, C): the op reports it; after decomposition
// (where nothing can report) the loss is NaN, which the runtime rejects.
TEST_F(StructuralInterpreterTest, CrossEntropyTargetOutOfRange) {
  const char *ir = R"(func.func @f(%l: tensor<2x4xf64>, %t: tensor<2xi32>) -> tensor<f64> {
    %0 = tg.cross_entropy %l, %t {ignore_index = 0 : i64} : (tensor<2x4xf64>, tensor<2xi32>) -> tensor<f64>
    return %0 : tensor<f64>
  })";
  for (double bad : {4.0, -1.0}) {
    auto r = run(ir, {Tensor::zeros({2, 4}), tensor({2}, {2, bad})});
    EXPECT_TRUE(failed(r));
    EXPECT_NE(
        diagnostics_.find("is outside [0, 4) and is not the ignore_index 0"),
        std::string::npos)
        << diagnostics_;
    r = run(ir, {Tensor::zeros({2, 4}), tensor({2}, {2, bad})}, true);
    ASSERT_TRUE(succeeded(r)) << diagnostics_;
    EXPECT_TRUE(std::isnan((*r)[0].data[0]));
  }
  // Ignored positions may hold anything.
  auto r = run(ir, {Tensor::zeros({2, 4}), tensor({2}, {0, 1})}, true);
  ASSERT_TRUE(succeeded(r)) << diagnostics_;
  EXPECT_NEAR((*r)[0].data[0], std::log(4.0), 1e-15);
}

// Ties share the gradient of reduce_max equally.
TEST_F(StructuralInterpreterTest, ReduceMaxGradientSplitsTies) {
  OwningOpRef<ModuleOp> module = buildDifferentiated(
      {ArgSpec::param({2, 3})},
      [](OpBuilder &b, Location loc, ArrayRef<Value> a) {
        return build::reduceMax(b, loc, a[0], {1}, false);
      });
  ASSERT_TRUE(module);
  auto step = module->lookupSymbol<func::FuncOp>(model::kTrainStepFunc);
  auto r = interp::interpret(
      step, {tensor({2, 3}, {1, 5, 5, 7, 2, 7}), tensor({2}, {6, -4})});
  ASSERT_TRUE(succeeded(r));
  EXPECT_EQ((*r)[1].data, (std::vector<double>{0, 3, 3, -2, 0, -2}));
}

} // namespace
