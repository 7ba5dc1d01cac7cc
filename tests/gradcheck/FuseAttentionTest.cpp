// tg-fuse-attention keeps the meaning of the model: for each way of writing
// attention the pass recognizes (the GPT form, a divide after the mask with
// k transposed explicitly, the scale on q with an additive mask, a select
// mask, grouped heads by 5-D broadcasting and by broadcast_to, multi-query,
// causal and not, dropout with a fixed key), the module the pass fused and
// the written-out original compute the same loss, gradients and eval
// function on the float64 reference interpreter (random inputs, 1e-12).
// Both go through tg-autodiff and tg-strip-train-only-ops, so @forward
// checks the eval form (the fused op's dropout turned off) and @train_step
// the dropout masks and tg.attention_grad.
#include <cmath>
#include <limits>
#include <ostream>

#include <gtest/gtest.h>

#include "dialects/tg/TgStructuralBuilders.h"
#include "mlir/IR/Builders.h"
#include "mlir/Pass/PassManager.h"
#include "passes/Passes.h"
#include "tests/gradcheck/GradCheck.h"
#include "tests/gradcheck/GradCheckFixture.h"

using namespace mlir;
using namespace tcc;
using namespace tcc::gradcheck;
namespace build = tcc::tg::build;

namespace {

constexpr double kMinusInfinity = -std::numeric_limits<double>::infinity();

enum class Form {
  Gpt,              // mul after the product, causal_mask
  DivAfterMask,     // tg.transpose of k, causal_mask, then div
  ScaleOnQAdditive, // q * c before the product, additive 0/-inf constant
  SelectMask,       // select(lower-triangular, scores, -inf)
  Gqa5d,            // q (B, Hkv, G, T, D), k/v (B, Hkv, 1, S, D)
  RepeatKv,         // k/v reshape + broadcast_to + reshape to H heads
};

struct FusionCase {
  std::string name;
  Form form;
  int64_t batch, heads, kvHeads, queries, keys, headDim;
  bool causal;
  double dropoutRate;
};

void PrintTo(const FusionCase &c, std::ostream *os) { *os << c.name; }

std::string caseName(const ::testing::TestParamInfo<FusionCase> &info) {
  return info.param.name;
}

// A (T, S) f64 constant: `inside` where key j is visible to query i
// (causal: j <= i + S - T), `outside` elsewhere.
Value triangle(OpBuilder &b, Location loc, const FusionCase &c, Type elem,
               Attribute inside, Attribute outside) {
  auto type = RankedTensorType::get({c.queries, c.keys}, elem);
  SmallVector<Attribute> values;
  for (int64_t i = 0; i < c.queries; ++i)
    for (int64_t j = 0; j < c.keys; ++j)
      values.push_back(j <= i + (c.keys - c.queries) ? inside : outside);
  return tg::ConstantOp::create(b, loc, type, DenseElementsAttr::get(type, values));
}

// Attention of the case written out from primitives; args are q, k, v in
// the layout of the form. Returns the (batch..., T, D) result.
Value writeAttention(OpBuilder &b, Location loc, ArrayRef<Value> args,
                     const FusionCase &c) {
  double scale = 1.0 / std::sqrt(static_cast<double>(c.headDim));
  Type f64 = b.getF64Type();
  Value q = args[0], k = args[1], v = args[2];
  Value scores;
  switch (c.form) {
  case Form::Gpt:
  case Form::Gqa5d:
    scores = build::mul(b, loc, build::matmul(b, loc, q, k, false, true),
                        build::scalar(b, loc, f64, scale));
    if (c.causal)
      scores = tg::CausalMaskOp::create(b, loc, scores.getType(), scores,
                                        b.getF64FloatAttr(kMinusInfinity));
    break;
  case Form::DivAfterMask: {
    int64_t r = cast<RankedTensorType>(k.getType()).getRank();
    SmallVector<int64_t> perm;
    for (int64_t i = 0; i < r; ++i)
      perm.push_back(i < r - 2 ? i : (i == r - 2 ? r - 1 : r - 2));
    scores = build::matmul(b, loc, q, build::transpose(b, loc, k, perm), false,
                           false);
    if (c.causal)
      scores = tg::CausalMaskOp::create(b, loc, scores.getType(), scores,
                                        b.getF64FloatAttr(kMinusInfinity));
    scores = build::div(b, loc, scores, build::scalar(b, loc, f64, 1.0 / scale));
    break;
  }
  case Form::ScaleOnQAdditive:
    scores = build::matmul(
        b, loc, build::mul(b, loc, build::scalar(b, loc, f64, scale), q), k,
        false, true);
    if (c.causal)
      scores = build::add(b, loc, scores,
                          triangle(b, loc, c, f64, b.getF64FloatAttr(0.0),
                                   b.getF64FloatAttr(kMinusInfinity)));
    break;
  case Form::SelectMask:
    scores = build::mul(b, loc, build::matmul(b, loc, q, k, false, true),
                        build::scalar(b, loc, f64, scale));
    if (c.causal)
      scores = build::select(
          b, loc,
          triangle(b, loc, c, b.getI1Type(), b.getBoolAttr(true),
                   b.getBoolAttr(false)),
          scores, build::scalar(b, loc, f64, kMinusInfinity));
    break;
  case Form::RepeatKv: {
    int64_t group = c.heads / c.kvHeads;
    auto expand = [&](Value x) {
      Value x5 = build::reshape(b, loc, x,
                                {c.batch, c.kvHeads, 1, c.keys, c.headDim});
      auto wide = RankedTensorType::get(
          {c.batch, c.kvHeads, group, c.keys, c.headDim}, f64);
      Value b5 = tg::BroadcastToOp::create(b, loc, wide, x5);
      return build::reshape(b, loc, b5, {c.batch, c.heads, c.keys, c.headDim});
    };
    k = expand(k);
    v = expand(v);
    scores = build::mul(b, loc, build::matmul(b, loc, q, k, false, true),
                        build::scalar(b, loc, f64, scale));
    if (c.causal)
      scores = tg::CausalMaskOp::create(b, loc, scores.getType(), scores,
                                        b.getF64FloatAttr(kMinusInfinity));
    break;
  }
  }
  int64_t axis = cast<RankedTensorType>(scores.getType()).getRank() - 1;
  Value p = tg::SoftmaxOp::create(b, loc, scores.getType(), scores,
                                  b.getI64IntegerAttr(axis));
  if (c.dropoutRate > 0) // a fixed key: seed, step and op id are constants
    p = tg::DropoutOp::create(b, loc, p.getType(), p,
                              build::scalar(b, loc, b.getI64Type(), 1234),
                              build::scalar(b, loc, b.getI64Type(), 7),
                              b.getF64FloatAttr(c.dropoutRate),
                              b.getI64IntegerAttr(99));
  return build::matmul(b, loc, p, v, false, false);
}

// q, k, v as the form's user writes them.
std::vector<ArgSpec> argumentsOf(const FusionCase &c) {
  if (c.form == Form::Gqa5d) {
    int64_t group = c.heads / c.kvHeads;
    return {ArgSpec::param({c.batch, c.kvHeads, group, c.queries, c.headDim}),
            ArgSpec::param({c.batch, c.kvHeads, 1, c.keys, c.headDim}),
            ArgSpec::param({c.batch, c.kvHeads, 1, c.keys, c.headDim})};
  }
  return {ArgSpec::param({c.batch, c.heads, c.queries, c.headDim}),
          ArgSpec::param({c.batch, c.kvHeads, c.keys, c.headDim}),
          ArgSpec::param({c.batch, c.kvHeads, c.keys, c.headDim})};
}

const std::vector<FusionCase> &fusionCases() {
  static const std::vector<FusionCase> cases = {
      {"gpt_causal", Form::Gpt, 2, 3, 3, 4, 4, 5, true, 0.0},
      {"gpt_causal_dropout", Form::Gpt, 2, 2, 2, 5, 5, 3, true, 0.3},
      {"gpt_not_causal_T3_S5", Form::Gpt, 1, 2, 2, 3, 5, 4, false, 0.0},
      {"div_after_mask_causal_T3_S5", Form::DivAfterMask, 2, 2, 2, 3, 5, 3, true, 0.0},
      {"div_not_causal", Form::DivAfterMask, 1, 3, 3, 4, 4, 2, false, 0.0},
      {"scale_on_q_additive_T2_S4", Form::ScaleOnQAdditive, 2, 2, 2, 2, 4, 3, true, 0.0},
      {"select_mask_dropout", Form::SelectMask, 1, 2, 2, 4, 4, 3, true, 0.5},
      {"gqa_5d_causal", Form::Gqa5d, 2, 4, 2, 4, 4, 3, true, 0.0},
      {"gqa_5d_dropout_T3_S5", Form::Gqa5d, 1, 6, 2, 3, 5, 2, false, 0.2},
      {"mqa_5d_causal", Form::Gqa5d, 2, 3, 1, 4, 4, 3, true, 0.0},
      {"repeat_kv_causal_dropout", Form::RepeatKv, 2, 4, 2, 4, 4, 3, true, 0.25},
  };
  return cases;
}

class FuseAttentionTest : public GradCheckParamTest<FusionCase> {
protected:
  // tg-autodiff then tg-strip-train-only-ops, as the pipeline runs them.
  bool train(ModuleOp module) {
    PassManager pm(&context());
    pm.addPass(createTgAutodiff());
    pm.addPass(createTgStripTrainOnlyOps());
    if (succeeded(pm.run(module)))
      return true;
    ADD_FAILURE() << "the training passes failed:\n" << diagnostics_;
    return false;
  }
};

TEST_P(FuseAttentionTest, FusedModuleComputesTheWrittenOutFunction) {
  const FusionCase &c = GetParam();
  OwningOpRef<ModuleOp> original = buildForwardModule(
      context(), argumentsOf(c),
      [&c](OpBuilder &b, Location loc, ArrayRef<Value> a) {
        return writeAttention(b, loc, a, c);
      });
  ASSERT_TRUE(original) << diagnostics_;
  OwningOpRef<ModuleOp> fused = original->clone();
  PassManager pm(&context());
  pm.addPass(createTgFuseAttention());
  ASSERT_TRUE(succeeded(pm.run(*fused))) << diagnostics_;
  ASSERT_EQ(countOps(*fused, "tg.attention"), 1) << "the case is not fused";
  EXPECT_EQ(countOps(*fused, "tg.softmax"), 0);
  EXPECT_EQ(countOps(*fused, "tg.dropout"), 0);

  ASSERT_TRUE(train(*original));
  ASSERT_TRUE(train(*fused));
  EXPECT_EQ(countOps(*fused, "tg.attention_grad"), 1);
  EXPECT_EQ(countOps(*fused, "tg.softmax"), 0) << "the backward recomputes p";
  expectSameFunctions(*original, *fused, seed(), 1);
}

INSTANTIATE_TEST_SUITE_P(Forms, FuseAttentionTest,
                         ::testing::ValuesIn(fusionCases()), caseName);

} // namespace
