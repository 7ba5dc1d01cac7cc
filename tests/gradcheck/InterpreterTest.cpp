// The reference interpreter itself: every op on small hand-computed examples
// (the gradient checks compare the interpreter with itself, so its forward
// values need their own check), and the errors it must report.
#include <cmath>

#include <gtest/gtest.h>

#include "interpreter/TgInterpreter.h"
#include "tests/gradcheck/GradCheck.h"
#include "tests/gradcheck/GradCheckFixture.h"

using namespace mlir;
using namespace tcc;
using tcc::interp::Tensor;

namespace {

class InterpreterTest : public gradcheck::GradCheckTest {};

void expectTensor(const Tensor &actual, std::vector<int64_t> shape,
                  std::vector<double> data) {
  EXPECT_EQ(actual.shape, shape);
  ASSERT_EQ(actual.data.size(), data.size());
  for (size_t i = 0; i < data.size(); ++i)
    EXPECT_NEAR(actual.data[i], data[i], 1e-12) << "element " << i;
}

TEST_F(InterpreterTest, MatmulInAllTransposeCombinations) {
  auto results = run(R"mlir(
    func.func @f(%a: tensor<2x2xf64>, %b: tensor<2x2xf64>,
                 %c: tensor<3x2xf64>, %d: tensor<3x1xf64>)
        -> (tensor<2x2xf64>, tensor<2x2xf64>, tensor<2x2xf64>,
            tensor<2x2xf64>, tensor<2x1xf64>) {
      %0 = tg.matmul %a, %b : (tensor<2x2xf64>, tensor<2x2xf64>) -> tensor<2x2xf64>
      %1 = tg.matmul %a, %b {transpose_lhs = true} : (tensor<2x2xf64>, tensor<2x2xf64>) -> tensor<2x2xf64>
      %2 = tg.matmul %a, %b {transpose_rhs = true} : (tensor<2x2xf64>, tensor<2x2xf64>) -> tensor<2x2xf64>
      %3 = tg.matmul %a, %b {transpose_lhs = true, transpose_rhs = true} : (tensor<2x2xf64>, tensor<2x2xf64>) -> tensor<2x2xf64>
      %4 = tg.matmul %c, %d {transpose_lhs = true} : (tensor<3x2xf64>, tensor<3x1xf64>) -> tensor<2x1xf64>
      return %0, %1, %2, %3, %4 : tensor<2x2xf64>, tensor<2x2xf64>, tensor<2x2xf64>, tensor<2x2xf64>, tensor<2x1xf64>
    })mlir",
                     {{{2, 2}, {1, 2, 3, 4}},
                      {{2, 2}, {5, 6, 7, 8}},
                      {{3, 2}, {1, 2, 3, 4, 5, 6}},
                      {{3, 1}, {1, 10, 100}}});
  ASSERT_TRUE(succeeded(results)) << diagnostics_;
  expectTensor((*results)[0], {2, 2}, {19, 22, 43, 50});
  expectTensor((*results)[1], {2, 2}, {26, 30, 38, 44});
  expectTensor((*results)[2], {2, 2}, {17, 23, 39, 53});
  expectTensor((*results)[3], {2, 2}, {23, 31, 34, 46});
  expectTensor((*results)[4], {2, 1}, {531, 642});
}

TEST_F(InterpreterTest, AddAndMulBroadcast) {
  auto results = run(R"mlir(
    func.func @f(%x: tensor<2x3xf64>, %row: tensor<3xf64>,
                 %column: tensor<2x1xf64>, %s: tensor<f64>)
        -> (tensor<2x3xf64>, tensor<2x3xf64>, tensor<2x3xf64>) {
      %0 = tg.add %x, %row : (tensor<2x3xf64>, tensor<3xf64>) -> tensor<2x3xf64>
      %1 = tg.mul %column, %x : (tensor<2x1xf64>, tensor<2x3xf64>) -> tensor<2x3xf64>
      %2 = tg.mul %s, %x : (tensor<f64>, tensor<2x3xf64>) -> tensor<2x3xf64>
      return %0, %1, %2 : tensor<2x3xf64>, tensor<2x3xf64>, tensor<2x3xf64>
    })mlir",
                     {{{2, 3}, {1, 2, 3, 4, 5, 6}},
                      {{3}, {10, 20, 30}},
                      {{2, 1}, {2, 3}},
                      Tensor::scalar(-1)});
  ASSERT_TRUE(succeeded(results)) << diagnostics_;
  expectTensor((*results)[0], {2, 3}, {11, 22, 33, 14, 25, 36});
  expectTensor((*results)[1], {2, 3}, {2, 4, 6, 12, 15, 18});
  expectTensor((*results)[2], {2, 3}, {-1, -2, -3, -4, -5, -6});
}

TEST_F(InterpreterTest, ReductionsBroadcastToAndReshape) {
  auto results = run(R"mlir(
    func.func @f(%x: tensor<2x3xf64>, %row: tensor<3xf64>)
        -> (tensor<2x1xf64>, tensor<3xf64>, tensor<f64>, tensor<2x3xf64>,
            tensor<3x2xf64>) {
      %0 = tg.reduce_sum %x {axes = array<i64: 1>, keep_dims = true} : (tensor<2x3xf64>) -> tensor<2x1xf64>
      %1 = tg.reduce_mean %x {axes = array<i64: 0>} : (tensor<2x3xf64>) -> tensor<3xf64>
      %2 = tg.reduce_sum %x {axes = array<i64: 0, 1>} : (tensor<2x3xf64>) -> tensor<f64>
      %3 = tg.broadcast_to %row : (tensor<3xf64>) -> tensor<2x3xf64>
      %4 = tg.reshape %x : (tensor<2x3xf64>) -> tensor<3x2xf64>
      return %0, %1, %2, %3, %4 : tensor<2x1xf64>, tensor<3xf64>, tensor<f64>, tensor<2x3xf64>, tensor<3x2xf64>
    })mlir",
                     {{{2, 3}, {1, 2, 3, 4, 5, 6}}, {{3}, {7, 8, 9}}});
  ASSERT_TRUE(succeeded(results)) << diagnostics_;
  expectTensor((*results)[0], {2, 1}, {6, 15});
  expectTensor((*results)[1], {3}, {2.5, 3.5, 4.5});
  expectTensor((*results)[2], {}, {21});
  expectTensor((*results)[3], {2, 3}, {7, 8, 9, 7, 8, 9});
  expectTensor((*results)[4], {3, 2}, {1, 2, 3, 4, 5, 6});
}

TEST_F(InterpreterTest, ReluAndSoftmaxCrossEntropyWithGradients) {
  auto results = run(R"mlir(
    func.func @f(%x: tensor<3xf64>, %g: tensor<3xf64>, %logits: tensor<2x2xf64>,
                 %labels: tensor<2xi32>, %rowGrad: tensor<2xf64>)
        -> (tensor<3xf64>, tensor<3xf64>, tensor<2xf64>, tensor<2x2xf64>) {
      %0 = tg.relu %x : tensor<3xf64>
      %1 = tg.relu_grad %x, %g : tensor<3xf64>
      %2 = tg.softmax_cross_entropy %logits, %labels : (tensor<2x2xf64>, tensor<2xi32>) -> tensor<2xf64>
      %3 = tg.softmax_cross_entropy_grad %logits, %labels, %rowGrad : (tensor<2x2xf64>, tensor<2xi32>, tensor<2xf64>) -> tensor<2x2xf64>
      return %0, %1, %2, %3 : tensor<3xf64>, tensor<3xf64>, tensor<2xf64>, tensor<2x2xf64>
    })mlir",
                     {{{3}, {-1, 0, 2}},
                      {{3}, {5, 6, 7}},
                      {{2, 2}, {0, 0, std::log(3.0), 0}},
                      {{2}, {1, 0}},
                      {{2}, {1, 2}}});
  ASSERT_TRUE(succeeded(results)) << diagnostics_;
  expectTensor((*results)[0], {3}, {0, 0, 2});
  expectTensor((*results)[1], {3}, {0, 0, 7});
  // Row 0: softmax (1/2, 1/2), label 1. Row 1: softmax (3/4, 1/4), label 0.
  expectTensor((*results)[2], {2}, {std::log(2.0), std::log(4.0 / 3.0)});
  expectTensor((*results)[3], {2, 2}, {0.5, -0.5, -0.5, 0.5});
}

TEST_F(InterpreterTest, ConstantsAndSgdUpdate) {
  auto results = run(R"mlir(
    func.func @f(%p: tensor<2xf64>, %g: tensor<2xf64>)
        -> (tensor<2xf32>, tensor<2xi64>, tensor<2xf64>) {
      %0 = tg.constant dense<[1.5, -2.0]> : tensor<2xf32>
      %1 = tg.constant dense<3> : tensor<2xi64>
      %lr = tg.constant dense<0.5> : tensor<f32>
      %2 = tg.sgd_update %p, %g, %lr : tensor<2xf64>, tensor<f32>
      return %0, %1, %2 : tensor<2xf32>, tensor<2xi64>, tensor<2xf64>
    })mlir",
                     {{{2}, {1, 2}}, {{2}, {4, 8}}});
  ASSERT_TRUE(succeeded(results)) << diagnostics_;
  expectTensor((*results)[0], {2}, {1.5, -2.0});
  expectTensor((*results)[1], {2}, {3, 3});
  expectTensor((*results)[2], {2}, {-1, -2});
}

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

constexpr const char *kIdentity = R"mlir(
  func.func @f(%x: tensor<2x3xf64>) -> tensor<2x3xf64> {
    return %x : tensor<2x3xf64>
  })mlir";

TEST_F(InterpreterTest, RefusesArgumentOfWrongShape) {
  EXPECT_TRUE(failed(run(kIdentity, {{{3, 2}, {1, 2, 3, 4, 5, 6}}})));
  EXPECT_NE(diagnostics_.find("argument #0 of @f must be [2, 3] (6 elements), "
                              "got [3, 2]"),
            std::string::npos)
      << diagnostics_;
}

TEST_F(InterpreterTest, RefusesDataThatDoesNotFillTheShape) {
  EXPECT_TRUE(failed(run(kIdentity, {{{2, 3}, {1, 2, 3, 4, 5}}})));
  EXPECT_NE(diagnostics_.find("got [2, 3] with 5 elements"), std::string::npos)
      << diagnostics_;
}

TEST_F(InterpreterTest, RefusesWrongArgumentCount) {
  EXPECT_TRUE(failed(run(kIdentity, {})));
  EXPECT_NE(diagnostics_.find("@f takes 1 arguments, got 0"), std::string::npos)
      << diagnostics_;
}

constexpr const char *kCrossEntropy = R"mlir(
  func.func @f(%logits: tensor<2x2xf64>, %labels: tensor<2xi32>) -> tensor<2xf64> {
    %0 = tg.softmax_cross_entropy %logits, %labels : (tensor<2x2xf64>, tensor<2xi32>) -> tensor<2xf64>
    return %0 : tensor<2xf64>
  })mlir";

TEST_F(InterpreterTest, RefusesLabelOutOfRange) {
  EXPECT_TRUE(
      failed(run(kCrossEntropy, {{{2, 2}, {0, 0, 0, 0}}, {{2}, {0, 2}}})));
  EXPECT_NE(diagnostics_.find("label 2 of row 1 is outside [0, 2)"),
            std::string::npos)
      << diagnostics_;
  diagnostics_.clear();
  EXPECT_TRUE(
      failed(run(kCrossEntropy, {{{2, 2}, {0, 0, 0, 0}}, {{2}, {-1, 0}}})));
  EXPECT_NE(diagnostics_.find("label -1 of row 0 is outside [0, 2)"),
            std::string::npos)
      << diagnostics_;
}

TEST_F(InterpreterTest, RefusesFractionalIntegerArgument) {
  EXPECT_TRUE(
      failed(run(kCrossEntropy, {{{2, 2}, {0, 0, 0, 0}}, {{2}, {0, 0.5}}})));
  EXPECT_NE(diagnostics_.find("argument #1 is an integer tensor, but element 1 "
                              "is 0.5"),
            std::string::npos)
      << diagnostics_;
}

TEST_F(InterpreterTest, ReportsUnknownOp) {
  EXPECT_TRUE(failed(run(R"mlir(
    func.func private @g(tensor<2xf64>) -> tensor<2xf64>
    func.func @f(%x: tensor<2xf64>) -> tensor<2xf64> {
      %0 = func.call @g(%x) : (tensor<2xf64>) -> tensor<2xf64>
      return %0 : tensor<2xf64>
    })mlir",
                         {{{2}, {1, 2}}})));
  EXPECT_NE(diagnostics_.find("'func.call' op is not supported by the tg "
                              "reference interpreter"),
            std::string::npos)
      << diagnostics_;
}

} // namespace
