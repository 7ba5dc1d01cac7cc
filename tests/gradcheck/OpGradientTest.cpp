// The gradient rule of every differentiable tg op, through the real
// tg-autodiff pass, against finite differences: one small @forward per op and
// operand layout, with the op's float operands as parameters.
#include <ostream>

#include <gtest/gtest.h>

#include "dialects/tg/TgDialect.h"
#include "tests/gradcheck/GradCheck.h"
#include "tests/gradcheck/GradCheckFixture.h"

using namespace mlir;
using namespace tcc;
using namespace tcc::gradcheck;

namespace {

struct OpCase {
  std::string name; // gtest parameter name
  std::vector<ArgSpec> args;
  BodyBuilder body;
  // Redraws the arguments while false (see GradCheckOptions).
  std::function<bool(ArrayRef<Tensor>)> acceptArguments = nullptr;
};

// Both sides of relu's kink must be exercised: with every input negative the
// gradient is zero by construction and the check proves nothing.
bool firstArgHasBothSigns(ArrayRef<Tensor> args) {
  bool positive = false, negative = false;
  for (double x : args[0].data)
    (x > 0 ? positive : negative) = true;
  return positive && negative;
}

void PrintTo(const OpCase &c, std::ostream *os) { *os << c.name; }

std::string shapeName(const std::vector<int64_t> &shape) {
  if (shape.empty())
    return "scalar";
  std::string s;
  for (int64_t d : shape)
    s += (s.empty() ? "" : "x") + std::to_string(d);
  return s;
}

std::string axesName(const std::vector<int64_t> &axes) {
  std::string s;
  for (int64_t a : axes)
    s += "_" + std::to_string(a);
  return s;
}

std::vector<OpCase> matmulCases() {
  std::vector<OpCase> cases;
  for (bool transposeLhs : {false, true})
    for (bool transposeRhs : {false, true}) {
      // (M, K) = (3, 4) and (K, N) = (4, 2), stored transposed where flagged.
      std::vector<int64_t> lhs = transposeLhs ? std::vector<int64_t>{4, 3}
                                              : std::vector<int64_t>{3, 4};
      std::vector<int64_t> rhs = transposeRhs ? std::vector<int64_t>{2, 4}
                                              : std::vector<int64_t>{4, 2};
      cases.push_back(
          {std::string("matmul") + (transposeLhs ? "_lhsT" : "_lhs") +
               (transposeRhs ? "_rhsT" : "_rhs"),
           {ArgSpec::param(lhs), ArgSpec::param(rhs)},
           [=](OpBuilder &b, Location loc, ArrayRef<Value> a) {
             return matmul(b, loc, a[0], a[1], transposeLhs, transposeRhs);
           }});
    }
  return cases;
}

// add and mul over broadcast patterns: equal shapes, a bias row, scalars on
// either side, a size-1 middle dimension, both sides stretched, and a
// lower-rank operand with a size-1 dimension.
std::vector<OpCase> broadcastBinaryCases() {
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>
      shapes = {
          {{3, 4}, {3, 4}}, {{3, 4}, {4}},          {{3, 4}, {}},
          {{}, {3, 4}},     {{2, 3, 4}, {2, 1, 4}}, {{2, 1, 4}, {2, 3, 4}},
          {{3, 1}, {1, 4}}, {{2, 3, 4}, {3, 1}},    {{1}, {2, 3}}};
  std::vector<OpCase> cases;
  for (bool isAdd : {true, false})
    for (const auto &[lhs, rhs] : shapes)
      cases.push_back({std::string(isAdd ? "add_" : "mul_") + shapeName(lhs) +
                           "_and_" + shapeName(rhs),
                       {ArgSpec::param(lhs), ArgSpec::param(rhs)},
                       [=](OpBuilder &b, Location loc, ArrayRef<Value> a) {
                         return isAdd ? add(b, loc, a[0], a[1])
                                      : mul(b, loc, a[0], a[1]);
                       }});
  // A data input as one operand: only the parameter gets a gradient.
  cases.push_back({"mul_param_2x1x4_by_input_2x3x4",
                   {ArgSpec::param({2, 1, 4}), ArgSpec::input({2, 3, 4})},
                   [](OpBuilder &b, Location loc, ArrayRef<Value> a) {
                     return mul(b, loc, a[0], a[1]);
                   }});
  return cases;
}

std::vector<OpCase> reluAndLossCases() {
  return {
      {"relu_3x4",
       {ArgSpec::param({3, 4})},
       [](OpBuilder &b, Location loc, ArrayRef<Value> a) -> Value {
         return tg::ReluOp::create(b, loc, a[0].getType(), a[0]);
       },
       firstArgHasBothSigns},
      // Labels are drawn in [0, 3), the number of classes here.
      {"softmax_cross_entropy_4x3",
       {ArgSpec::param({4, 3}), ArgSpec::labels(4)},
       [](OpBuilder &b, Location loc, ArrayRef<Value> a) -> Value {
         return tg::SoftmaxCrossEntropyOp::create(
             b, loc, f64Tensor(b.getContext(), {4}), a[0], a[1]);
       }},
  };
}

std::vector<OpCase> reduceCases() {
  const std::vector<std::vector<int64_t>> axesSets = {
      {0}, {1}, {2}, {0, 2}, {1, 2}, {0, 1, 2}};
  std::vector<OpCase> cases;
  for (bool isSum : {true, false})
    for (const auto &axes : axesSets)
      for (bool keepDims : {false, true})
        cases.push_back(
            {std::string(isSum ? "reduce_sum" : "reduce_mean") + "_axes" +
                 axesName(axes) + (keepDims ? "_keep_dims" : ""),
             {ArgSpec::param({2, 3, 4})},
             [=](OpBuilder &b, Location loc, ArrayRef<Value> a) {
               return isSum ? reduceSum(b, loc, a[0], axes, keepDims)
                            : reduceMean(b, loc, a[0], axes, keepDims);
             }});
  // Reducing a size-1 axis away: the gradient is only a reshape.
  cases.push_back({"reduce_sum_size_1_axis",
                   {ArgSpec::param({2, 1, 4})},
                   [](OpBuilder &b, Location loc, ArrayRef<Value> a) {
                     return reduceSum(b, loc, a[0], {1}, /*keepDims=*/false);
                   }});
  return cases;
}

std::vector<OpCase> shapeCases() {
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>
      broadcasts = {{{4}, {3, 4}},          {{3, 1}, {3, 4}},    {{}, {2, 3}},
                    {{2, 1, 4}, {2, 3, 4}}, {{1, 3}, {2, 2, 3}}, {{1}, {5}},
                    {{3, 4}, {3, 4}}},
      reshapes = {{{2, 3, 4}, {6, 4}}, {{3, 4}, {12}}, {{12}, {2, 2, 3}},
                  {{2, 3}, {3, 2}},    {{1}, {}},      {{}, {1, 1}}};
  std::vector<OpCase> cases;
  for (const auto &[from, to] : broadcasts)
    cases.push_back(
        {"broadcast_to_" + shapeName(from) + "_to_" + shapeName(to),
         {ArgSpec::param(from)},
         [=](OpBuilder &b, Location loc, ArrayRef<Value> a) -> Value {
           return tg::BroadcastToOp::create(
               b, loc, f64Tensor(b.getContext(), to), a[0]);
         }});
  for (const auto &[from, to] : reshapes)
    cases.push_back(
        {"reshape_" + shapeName(from) + "_to_" + shapeName(to),
         {ArgSpec::param(from)},
         [=](OpBuilder &b, Location loc, ArrayRef<Value> a) -> Value {
           return tg::ReshapeOp::create(b, loc, f64Tensor(b.getContext(), to),
                                        a[0]);
         }});
  return cases;
}

std::vector<OpCase> allOpCases() {
  std::vector<OpCase> all;
  for (auto cases : {matmulCases(), broadcastBinaryCases(), reluAndLossCases(),
                     reduceCases(), shapeCases()})
    all.insert(all.end(), cases.begin(), cases.end());
  return all;
}

// A parameter read more than once: autodiff must sum the contributions.
std::vector<OpCase> fanOutCases() {
  return {
      {"mul_w_w",
       {ArgSpec::param({3, 4})},
       [](OpBuilder &b, Location loc, ArrayRef<Value> a) {
         return mul(b, loc, a[0], a[0]);
       }},
      {"add_w_w",
       {ArgSpec::param({3, 4})},
       [](OpBuilder &b, Location loc, ArrayRef<Value> a) {
         return add(b, loc, a[0], a[0]);
       }},
      {"matmul_w_wT",
       {ArgSpec::param({3, 4})},
       [](OpBuilder &b, Location loc, ArrayRef<Value> a) {
         return matmul(b, loc, a[0], a[0], false, true);
       }},
      // Two different consumers: relu(w) + w * x.
      {"relu_w_plus_w_times_x",
       {ArgSpec::param({3, 4}), ArgSpec::input({3, 4})},
       [](OpBuilder &b, Location loc, ArrayRef<Value> a) -> Value {
         Value relu = tg::ReluOp::create(b, loc, a[0].getType(), a[0]);
         return add(b, loc, relu, mul(b, loc, a[0], a[1]));
       },
       firstArgHasBothSigns},
      // The same bias broadcast twice, at different depths of the graph.
      {"bias_used_twice_with_broadcast",
       {ArgSpec::param({4}), ArgSpec::input({3, 4})},
       [](OpBuilder &b, Location loc, ArrayRef<Value> a) {
         return add(b, loc, mul(b, loc, a[1], a[0]), a[0]);
       }},
  };
}

class OpGradientTest : public GradCheckParamTest<OpCase> {};

TEST_P(OpGradientTest, MatchesFiniteDifferences) {
  const OpCase &c = GetParam();
  OwningOpRef<ModuleOp> module = buildDifferentiated(c.args, c.body);
  ASSERT_TRUE(module);
  GradCheckOptions options;
  options.acceptArguments = c.acceptArguments;
  checkGradients(*module, options);
}

std::string caseName(const ::testing::TestParamInfo<OpCase> &info) {
  return info.param.name;
}

INSTANTIATE_TEST_SUITE_P(TgOps, OpGradientTest,
                         ::testing::ValuesIn(allOpCases()), caseName);
INSTANTIATE_TEST_SUITE_P(FanOut, OpGradientTest,
                         ::testing::ValuesIn(fanOutCases()), caseName);

} // namespace
