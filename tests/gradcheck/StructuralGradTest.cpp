// The structural and NN ops (dialects/tg/TgStructuralOps.td):
//  - every gradient rule, through the real tg-autodiff pass, against finite
//    differences of @forward on the reference interpreter;
//  - tg-decompose: @forward and @train_step compute the same values before
//    and after the rewrite (float64, tight tolerance);
//  - a tiny GPT of models/ against finite differences, before and after
//    tg-decompose.
// The interpreter on these ops: StructuralInterpreterTest.cpp.
#include <cmath>
#include <limits>
#include <ostream>

#include <gtest/gtest.h>

#include "dialects/common/ModelAttrs.h"
#include "dialects/tg/TgDialect.h"
#include "dialects/tg/TgStructuralBuilders.h"
#include "frontend/importer/Importer.h"
#include "models/Gpt.h"
#include "passes/Passes.h"
#include "tests/gradcheck/GradCheck.h"
#include "tests/gradcheck/GradCheckFixture.h"

using namespace mlir;
using namespace tcc;
using namespace tcc::gradcheck;
namespace build = tcc::tg::build;

namespace {

struct OpCase {
  std::string name; // gtest parameter name
  std::vector<ArgSpec> args;
  BodyBuilder body;
  int64_t numClasses = 3; // range of integer arguments (ids, targets)
  std::function<bool(ArrayRef<Tensor>)> acceptArguments = nullptr;
  std::set<int64_t> zeroGradientParams = {};
};

void PrintTo(const OpCase &c, std::ostream *os) { *os << c.name; }

ArgSpec ids(std::vector<int64_t> shape) {
  return {ArgSpec::Kind::Labels, std::move(shape)};
}

std::string shapeName(ArrayRef<int64_t> shape) {
  if (shape.empty())
    return "scalar";
  std::string s;
  for (int64_t d : shape)
    s += (s.empty() ? "" : "x") + std::to_string(d);
  return s;
}

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

//===----------------------------------------------------------------------===//
// Cases
//===----------------------------------------------------------------------===//

std::vector<OpCase> matmulCases() {
  // (lhs, rhs) as op(lhs) (..., M, K) x op(rhs) (..., K, N), M=3, K=4, N=2;
  // stored transposed where flagged.
  struct Layout {
    std::string name;
    std::vector<int64_t> lhsBatch, rhsBatch;
  };
  const std::vector<Layout> layouts = {
      {"batched", {2}, {2}},
      {"rank2_rhs", {2, 2}, {}},        // a linear layer on (B, T, C)
      {"rank2_lhs", {}, {2}},           // one matrix times a batch
      {"broadcast_batch", {2, 1}, {3}}, // (2, 1) x (3) -> (2, 3)
      {"size1_batch", {1}, {2}},
  };
  std::vector<OpCase> cases;
  for (const Layout &layout : layouts)
    for (bool tl : {false, true})
      for (bool tr : {false, true}) {
        std::vector<int64_t> lhs = layout.lhsBatch, rhs = layout.rhsBatch;
        lhs.push_back(tl ? 4 : 3);
        lhs.push_back(tl ? 3 : 4);
        rhs.push_back(tr ? 2 : 4);
        rhs.push_back(tr ? 4 : 2);
        cases.push_back({"matmul_" + layout.name + (tl ? "_lhsT" : "_lhs") +
                             (tr ? "_rhsT" : "_rhs"),
                         {ArgSpec::param(lhs), ArgSpec::param(rhs)},
                         [=](OpBuilder &b, Location loc, ArrayRef<Value> a) {
                           return build::matmul(b, loc, a[0], a[1], tl, tr);
                         }});
      }
  // A batched data input times a weight: only the weight gets a gradient.
  cases.push_back({"matmul_input_times_rank2_weight",
                   {ArgSpec::input({2, 3, 4}), ArgSpec::param({4, 5})},
                   [](OpBuilder &b, Location loc, ArrayRef<Value> a) {
                     return build::matmul(b, loc, a[0], a[1], false, false);
                   }});
  return cases;
}

std::vector<OpCase> reduceMaxCases() {
  const std::vector<std::vector<int64_t>> axesSets = {
      {0}, {1}, {2}, {0, 2}, {1, 2}, {0, 1, 2}};
  std::vector<OpCase> cases;
  for (const auto &axes : axesSets)
    for (bool keepDims : {false, true}) {
      std::string name = "reduce_max_axes";
      for (int64_t a : axes)
        name += "_" + std::to_string(a);
      cases.push_back({name + (keepDims ? "_keep_dims" : ""),
                       {ArgSpec::param({2, 3, 4})},
                       [=](OpBuilder &b, Location loc, ArrayRef<Value> a) {
                         return build::reduceMax(b, loc, a[0], axes, keepDims);
                       }});
    }
  return cases;
}

std::vector<OpCase> softmaxCases() {
  std::vector<OpCase> cases;
  for (int64_t axis : {0, 1, 2})
    for (bool logarithm : {false, true})
      cases.push_back(
          {std::string(logarithm ? "log_softmax" : "softmax") + "_axis_" +
               std::to_string(axis),
           {ArgSpec::param({2, 3, 4})},
           [=](OpBuilder &b, Location loc, ArrayRef<Value> a) -> Value {
             auto axisAttr = b.getI64IntegerAttr(axis);
             if (logarithm)
               return tg::LogSoftmaxOp::create(b, loc, a[0].getType(), a[0],
                                               axisAttr);
             return tg::SoftmaxOp::create(b, loc, a[0].getType(), a[0],
                                          axisAttr);
           }});
  return cases;
}

Value crossEntropy(OpBuilder &b, Location loc, Value logits, Value targets,
                   std::optional<int64_t> ignore) {
  return tg::CrossEntropyOp::create(
      b, loc, RankedTensorType::get({}, typeOf(logits).getElementType()),
      logits, targets, ignore ? b.getI64IntegerAttr(*ignore) : IntegerAttr());
}

// Targets (args[1]) with at least one ignored and one counted position.
bool someIgnoredSomeCounted(ArrayRef<Tensor> args) {
  bool ignored = false, counted = false;
  for (double t : args[1].data)
    (t == 1.0 ? ignored : counted) = true;
  return ignored && counted;
}

std::vector<OpCase> lossCases() {
  std::vector<OpCase> cases;
  cases.push_back({"cross_entropy_2x3x5",
                   {ArgSpec::param({2, 3, 5}), ids({2, 3})},
                   [](OpBuilder &b, Location loc, ArrayRef<Value> a) {
                     return crossEntropy(b, loc, a[0], a[1], std::nullopt);
                   },
                   /*numClasses=*/5});
  cases.push_back({"cross_entropy_rows_4x3",
                   {ArgSpec::param({4, 3}), ids({4})},
                   [](OpBuilder &b, Location loc, ArrayRef<Value> a) {
                     return crossEntropy(b, loc, a[0], a[1], std::nullopt);
                   }});
  cases.push_back({"cross_entropy_ignore_index",
                   {ArgSpec::param({2, 4, 3}), ids({2, 4})},
                   [](OpBuilder &b, Location loc, ArrayRef<Value> a) {
                     return crossEntropy(b, loc, a[0], a[1], 1);
                   },
                   /*numClasses=*/3, someIgnoredSomeCounted});
  // Every target is 0 = ignore_index: the loss is 0 and so is the gradient.
  cases.push_back({"cross_entropy_all_ignored",
                   {ArgSpec::param({2, 3}), ids({2})},
                   [](OpBuilder &b, Location loc, ArrayRef<Value> a) {
                     return crossEntropy(b, loc, a[0], a[1], 0);
                   },
                   /*numClasses=*/1, nullptr, /*zeroGradientParams=*/{0}});
  // The usual composition: log_softmax then the mean of picked entries.
  cases.push_back({"log_softmax_then_cross_entropy",
                   {ArgSpec::param({3, 4}), ids({3})},
                   [](OpBuilder &b, Location loc, ArrayRef<Value> a) -> Value {
                     Value y = tg::LogSoftmaxOp::create(
                         b, loc, a[0].getType(), a[0], b.getI64IntegerAttr(1));
                     return crossEntropy(b, loc, y, a[1], std::nullopt);
                   },
                   /*numClasses=*/4});
  return cases;
}

std::vector<OpCase> normCases() {
  std::vector<OpCase> cases;
  for (int inputs : {1, 2, 3})
    cases.push_back(
        {"layer_norm_" + std::string(inputs == 1   ? "plain"
                                     : inputs == 2 ? "weight"
                                                   : "weight_bias"),
         inputs == 1   ? std::vector<ArgSpec>{ArgSpec::param({2, 3, 5})}
         : inputs == 2 ? std::vector<ArgSpec>{ArgSpec::param({2, 3, 5}),
                                              ArgSpec::param({5})}
                       : std::vector<ArgSpec>{ArgSpec::param({2, 3, 5}),
                                              ArgSpec::param({5}),
                                              ArgSpec::param({5})},
         [=](OpBuilder &b, Location loc, ArrayRef<Value> a) -> Value {
           return tg::LayerNormOp::create(
               b, loc, a[0].getType(), a[0], inputs > 1 ? a[1] : Value(),
               inputs > 2 ? a[2] : Value(), b.getF64FloatAttr(1e-5));
         }});
  for (bool weight : {false, true})
    cases.push_back(
        {std::string("rms_norm_") + (weight ? "weight" : "plain"),
         weight ? std::vector<ArgSpec>{ArgSpec::param({3, 4}),
                                       ArgSpec::param({4})}
                : std::vector<ArgSpec>{ArgSpec::param({3, 4})},
         [=](OpBuilder &b, Location loc, ArrayRef<Value> a) -> Value {
           return tg::RmsNormOp::create(b, loc, a[0].getType(), a[0],
                                        weight ? a[1] : Value(),
                                        b.getF64FloatAttr(1e-6));
         }});
  // A bias without a weight.
  cases.push_back({"layer_norm_bias",
                   {ArgSpec::param({3, 4}), ArgSpec::param({4})},
                   [](OpBuilder &b, Location loc, ArrayRef<Value> a) -> Value {
                     return tg::LayerNormOp::create(b, loc, a[0].getType(), a[0], Value(),
                                                    a[1], b.getF64FloatAttr(1e-5));
                   }});
  // A frozen weight: only the input gets a gradient.
  cases.push_back({"layer_norm_frozen_weight",
                   {ArgSpec::param({3, 4}), ArgSpec::frozen({4})},
                   [](OpBuilder &b, Location loc, ArrayRef<Value> a) -> Value {
                     return tg::LayerNormOp::create(b, loc, a[0].getType(),
                                                    a[0], a[1], Value(),
                                                    b.getF64FloatAttr(1e-5));
                   }});
  return cases;
}

Value causalMask(OpBuilder &b, Location loc, Value x, double value) {
  return tg::CausalMaskOp::create(b, loc, x.getType(), x,
                                  b.getF64FloatAttr(value));
}

std::vector<OpCase> attentionCases() {
  std::vector<OpCase> cases;
  for (auto shape : std::vector<std::vector<int64_t>>{
           {2, 3, 3}, {2, 3, 5}, {4, 2}, {2, 2, 3, 3}})
    cases.push_back({"causal_mask_" + shapeName(shape),
                     {ArgSpec::param(shape)},
                     [](OpBuilder &b, Location loc, ArrayRef<Value> a) {
                       return causalMask(b, loc, a[0], 0.5);
                     }});
  // Attention scores: softmax over keys of masked scores (-inf).
  cases.push_back(
      {"softmax_of_causal_mask",
       {ArgSpec::param({2, 4, 4})},
       [](OpBuilder &b, Location loc, ArrayRef<Value> a) -> Value {
         Value masked =
             causalMask(b, loc, a[0], -std::numeric_limits<double>::infinity());
         return tg::SoftmaxOp::create(b, loc, masked.getType(), masked,
                                      b.getI64IntegerAttr(2));
       }});
  return cases;
}

Value gather(OpBuilder &b, Location loc, Value table, Value indices) {
  SmallVector<int64_t> shape(typeOf(indices).getShape());
  llvm::append_range(shape, typeOf(table).getShape().drop_front());
  return tg::GatherOp::create(
      b, loc, RankedTensorType::get(shape, typeOf(table).getElementType()),
      table, indices);
}

std::vector<OpCase> embeddingCases() {
  // 8 ids over 5 rows: some row repeats, so its gradient must accumulate.
  return {
      {"gather_5x3_by_2x4_ids",
       {ArgSpec::param({5, 3}), ids({2, 4})},
       [](OpBuilder &b, Location loc, ArrayRef<Value> a) {
         return gather(b, loc, a[0], a[1]);
       },
       /*numClasses=*/5},
      {"gather_rank3_table",
       {ArgSpec::param({4, 2, 3}), ids({6})},
       [](OpBuilder &b, Location loc, ArrayRef<Value> a) {
         return gather(b, loc, a[0], a[1]);
       },
       /*numClasses=*/4},
      {"scatter_add_2x4_ids_into_5x3",
       {ids({2, 4}), ArgSpec::param({2, 4, 3})},
       [](OpBuilder &b, Location loc, ArrayRef<Value> a) -> Value {
         return tg::ScatterAddOp::create(
             b, loc, f64Tensor(b.getContext(), {5, 3}), a[0], a[1]);
       },
       /*numClasses=*/5},
  };
}

std::vector<OpCase> shapeCases() {
  std::vector<OpCase> cases;
  for (auto perm : std::vector<std::vector<int64_t>>{
           {2, 0, 1}, {1, 0, 2}, {0, 1, 2}, {2, 1, 0}})
    cases.push_back({"transpose_" + shapeName(perm),
                     {ArgSpec::param({2, 3, 4})},
                     [=](OpBuilder &b, Location loc, ArrayRef<Value> a) {
                       return build::transpose(b, loc, a[0], perm);
                     }});
  struct SliceCase {
    std::vector<int64_t> shape, starts, ends;
  };
  for (const SliceCase &s : std::vector<SliceCase>{
           {{4, 5}, {1, 0}, {3, 4}},
           {{2, 3, 4}, {0, 1, 1}, {2, 2, 4}},
           {{6}, {2}, {5}},
           {{3, 4}, {0, 0}, {3, 4}}})
    cases.push_back({"slice_" + shapeName(s.shape) + "_from_" +
                         shapeName(s.starts) + "_to_" + shapeName(s.ends),
                     {ArgSpec::param(s.shape)},
                     [=](OpBuilder &b, Location loc, ArrayRef<Value> a) {
                       return build::slice(b, loc, a[0], s.starts, s.ends);
                     }});
  cases.push_back({"concat_axis_1",
                   {ArgSpec::param({2, 3}), ArgSpec::param({2, 4})},
                   [](OpBuilder &b, Location loc, ArrayRef<Value> a) {
                     return build::concat(b, loc, {a[0], a[1]}, 1);
                   }});
  cases.push_back({"concat_three_axis_0_with_input",
                   {ArgSpec::param({1, 3}), ArgSpec::input({2, 3}),
                    ArgSpec::param({3, 3})},
                   [](OpBuilder &b, Location loc, ArrayRef<Value> a) {
                     return build::concat(b, loc, {a[0], a[1], a[2]}, 0);
                   }});
  cases.push_back({"concat_single",
                   {ArgSpec::param({2, 3})},
                   [](OpBuilder &b, Location loc, ArrayRef<Value> a) {
                     return build::concat(b, loc, {a[0]}, 1);
                   }});
  cases.push_back({"concat_same_value_twice",
                   {ArgSpec::param({2, 3})},
                   [](OpBuilder &b, Location loc, ArrayRef<Value> a) {
                     return build::concat(b, loc, {a[0], a[0]}, 0);
                   }});
  // Pieces used in another order, one not at all (autodiff gives it zeros).
  cases.push_back(
      {"split_2_2_1_one_unused",
       {ArgSpec::param({5, 4})},
       [](OpBuilder &b, Location loc, ArrayRef<Value> a) -> Value {
         auto f64 = [&](std::vector<int64_t> s) {
           return f64Tensor(b.getContext(), s);
         };
         auto split = tg::SplitOp::create(
             b, loc, TypeRange{f64({2, 4}), f64({2, 4}), f64({1, 4})}, a[0],
             b.getI64IntegerAttr(0));
         return build::concat(b, loc, {split.getResult(2), split.getResult(0)},
                              0);
       }});
  cases.push_back(
      {"split_axis_1_all_used",
       {ArgSpec::param({2, 5})},
       [](OpBuilder &b, Location loc, ArrayRef<Value> a) -> Value {
         auto split = tg::SplitOp::create(
             b, loc,
             TypeRange{f64Tensor(b.getContext(), {2, 3}),
                       f64Tensor(b.getContext(), {2, 2})},
             a[0], b.getI64IntegerAttr(1));
         return build::mul(
             b, loc, build::slice(b, loc, split.getResult(0), {0, 0}, {2, 2}),
             split.getResult(1));
       }});
  return cases;
}

std::vector<OpCase> allCases() {
  std::vector<OpCase> all;
  for (auto cases : {matmulCases(), reduceMaxCases(), softmaxCases(),
                     lossCases(), normCases(), attentionCases(),
                     embeddingCases(), shapeCases()})
    all.insert(all.end(), cases.begin(), cases.end());
  return all;
}

std::string caseName(const ::testing::TestParamInfo<OpCase> &info) {
  return info.param.name;
}

//===----------------------------------------------------------------------===//
// Gradients against finite differences
//===----------------------------------------------------------------------===//

class StructuralGradientTest : public GradCheckParamTest<OpCase> {};

TEST_P(StructuralGradientTest, MatchesFiniteDifferences) {
  const OpCase &c = GetParam();
  OwningOpRef<ModuleOp> module = buildDifferentiated(c.args, c.body);
  ASSERT_TRUE(module);
  GradCheckOptions options;
  options.numClasses = c.numClasses;
  options.acceptArguments = c.acceptArguments;
  options.zeroGradientParams = c.zeroGradientParams;
  checkGradients(*module, options);
}

INSTANTIATE_TEST_SUITE_P(Structural, StructuralGradientTest,
                         ::testing::ValuesIn(allCases()), caseName);

//===----------------------------------------------------------------------===//
// tg-decompose: same functions before and after
//===----------------------------------------------------------------------===//

bool hasComposite(ModuleOp module) {
  bool found = false;
  module.walk([&](Operation *op) {
    found |= isa<tg::SoftmaxOp, tg::LogSoftmaxOp, tg::CrossEntropyOp,
                 tg::CausalMaskOp, tg::SplitOp>(op);
  });
  return found;
}

class DecomposeTest : public GradCheckParamTest<OpCase> {};

// @forward and @train_step (whose gradients hold composites too) give the
// same results before and after tg-decompose (+ CSE, as in the pipeline).
TEST_P(DecomposeTest, SameFunctionsBeforeAndAfter) {
  const OpCase &c = GetParam();
  OwningOpRef<ModuleOp> module = buildDifferentiated(c.args, c.body);
  ASSERT_TRUE(module);
  OwningOpRef<ModuleOp> decomposed = module->clone();
  ASSERT_TRUE(succeeded(runDecompose(*decomposed, /*withCse=*/true)));
  EXPECT_FALSE(hasComposite(*decomposed));

  expectSameFunctions(*module, *decomposed, seed(), c.numClasses,
                      c.acceptArguments);
}

std::vector<OpCase> compositeCases() {
  std::vector<OpCase> composite;
  for (auto cases : {softmaxCases(), lossCases(), normCases(), attentionCases(),
                     shapeCases()})
    for (const OpCase &c : cases)
      if (c.name.find("softmax") != std::string::npos ||
          c.name.find("cross_entropy") != std::string::npos ||
          c.name.find("causal") != std::string::npos ||
          c.name.find("split") != std::string::npos)
        composite.push_back(c);
  return composite;
}

INSTANTIATE_TEST_SUITE_P(Composite, DecomposeTest,
                         ::testing::ValuesIn(compositeCases()), caseName);

//===----------------------------------------------------------------------===//
// A whole (tiny) GPT of models/: every parameter against finite differences
//===----------------------------------------------------------------------===//

struct GptCase {
  std::string name;
  models::GptOptions::Norm norm;
  models::GptOptions::Mlp mlp;
  bool tied;
};

void PrintTo(const GptCase &c, std::ostream *os) { *os << c.name; }

class TinyGptGradientTest : public GradCheckParamTest<GptCase> {};

// Embedding, layer/rms norm, batched matmuls, split, transpose, causal
// mask, softmax and cross_entropy together, through the real importer and
// tg-autodiff; then the same after tg-decompose + CSE.
TEST_P(TinyGptGradientTest, MatchesFiniteDifferences) {
  const GptCase &c = GetParam();
  models::GptOptions options;
  options.vocab = 7;
  options.context = 4;
  options.layers = 1;
  options.width = 8;
  options.heads = 2;
  options.batch = 2;
  options.norm = c.norm;
  options.mlp = c.mlp;
  options.tiedEmbeddings = c.tied;
  ASSERT_EQ(models::validateGptOptions(options), "");
  OwningOpRef<ModuleOp> module =
      importModel(models::buildGpt(options), context());
  ASSERT_TRUE(module) << "the tiny GPT does not import";
  ASSERT_TRUE(differentiate(*module));
  GradCheckOptions check;
  check.numClasses = options.vocab;
  std::vector<ParamGradient> before = checkGradients(*module, check);
  EXPECT_FALSE(before.empty());

  // Decomposed: the same gradients (on the same random arguments).
  ASSERT_TRUE(succeeded(runDecompose(*module, /*withCse=*/true)));
  EXPECT_FALSE(hasComposite(*module));
  std::vector<ParamGradient> after = checkGradients(*module, check);
  ASSERT_EQ(before.size(), after.size());
  // Rounding differs between the composite and the expanded evaluation and
  // grows through the layers (~1e-12 seen); a wrong expansion is off by far
  // more.
  for (size_t i = 0; i < before.size(); ++i)
    EXPECT_LE(maxRelativeDifference(before[i].analytic, after[i].analytic),
              1e-9)
        << before[i].name;
}

INSTANTIATE_TEST_SUITE_P(
    Gpt, TinyGptGradientTest,
    ::testing::Values(GptCase{"layer_norm_gelu_tied",
                              models::GptOptions::Norm::Layer,
                              models::GptOptions::Mlp::Gelu, true},
                      GptCase{"rms_norm_swiglu_untied",
                              models::GptOptions::Norm::Rms,
                              models::GptOptions::Mlp::SwiGlu, false}),
    [](const ::testing::TestParamInfo<GptCase> &info) {
      return info.param.name;
    });

} // namespace
