// tg.attention and tg.attention_grad on the reference interpreter
// (interpreter/InterpretAttentionOps.cpp):
//  - the fused op against its written-out form (matmul, scale, causal_mask,
//    softmax, dropout, matmul; key/value heads broadcast over their query
//    heads), forward and lse, in float64 to 1e-12; fully masked rows;
//  - tg-autodiff's attention_grad against finite differences of the fused
//    forward, and against the gradients of the written-out form;
//  - 16-bit inputs: the result rounded once, lse kept in f32.
// Shapes cover causal and not, T != S, grouped (H 4, Hkv 2) and multi-query
// (Hkv 1) heads, dropout and a non-default scale.
#include <cmath>
#include <limits>
#include <ostream>

#include <gtest/gtest.h>

#include "interpreter/InterpreterSupport.h"
#include "dialects/tg/TgDialect.h"
#include "dialects/tg/TgStructuralBuilders.h"
#include "mlir/IR/Verifier.h"
#include "tests/gradcheck/GradCheck.h"
#include "tests/gradcheck/GradCheckFixture.h"

using namespace mlir;
using namespace tcc;
using namespace tcc::gradcheck;
namespace build = tcc::tg::build;

namespace {

constexpr double kMinusInfinity = -std::numeric_limits<double>::infinity();
// The dropout key of every case: the mask is fixed, so the function is
// differentiable and both forms draw the same mask.
constexpr int64_t kRngSeed = 1234, kStep = 7, kOpId = 99;

struct AttentionCase {
  std::string name; // gtest parameter name
  int64_t batch, heads, kvHeads, queries, keys, headDim;
  double scale;
  bool causal;
  double dropoutRate;

  std::vector<int64_t> qShape() const { return {batch, heads, queries, headDim}; }
  std::vector<int64_t> kvShape() const { return {batch, kvHeads, keys, headDim}; }
  // Query rows that see no key: causal with more queries than keys.
  int64_t emptyRows() const {
    return causal && queries > keys ? queries - keys : 0;
  }
};

void PrintTo(const AttentionCase &c, std::ostream *os) { *os << c.name; }

std::string caseName(const ::testing::TestParamInfo<AttentionCase> &info) {
  return info.param.name;
}

const std::vector<AttentionCase> &attentionCases() {
  static const std::vector<AttentionCase> cases = {
      {"mha_T4_S4", 2, 2, 2, 4, 4, 3, 0.5, false, 0.0},
      {"mha_causal_T4_S4", 2, 2, 2, 4, 4, 3, 0.5, true, 0.0},
      {"gqa_causal_T3_S5", 2, 4, 2, 3, 5, 3, 0.7, true, 0.0},
      {"gqa_T3_S5", 1, 4, 2, 3, 5, 4, 0.3, false, 0.0},
      {"mqa_causal_T4_S4", 2, 3, 1, 4, 4, 3, 1.3, true, 0.0},
      {"gqa_causal_dropout_T3_S5", 2, 4, 2, 3, 5, 3, 0.6, true, 0.3},
      {"mqa_dropout_T5_S3", 1, 2, 1, 5, 3, 3, 0.9, false, 0.5},
  };
  return cases;
}

// Causal with T > S: the first T - S query rows of each head see no key.
const std::vector<AttentionCase> &emptyRowCases() {
  static const std::vector<AttentionCase> cases = {
      {"causal_T5_S3", 2, 2, 2, 5, 3, 3, 0.5, true, 0.0},
      {"gqa_causal_dropout_T5_S3", 1, 4, 2, 5, 3, 3, 0.8, true, 0.2},
  };
  return cases;
}

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

// The dropout operands (constants) when the case drops, else null.
std::pair<Value, Value> dropoutOperands(OpBuilder &b, Location loc,
                                        const AttentionCase &c) {
  if (c.dropoutRate <= 0)
    return {};
  return {build::scalar(b, loc, b.getI64Type(), kRngSeed),
          build::scalar(b, loc, b.getI64Type(), kStep)};
}

// tg.attention of the case: (result, lse).
std::pair<Value, Value> fusedAttention(OpBuilder &b, Location loc, Value q,
                                       Value k, Value v, const AttentionCase &c) {
  auto [seed, step] = dropoutOperands(b, loc, c);
  Type elem = typeOf(q).getElementType();
  auto lseType = RankedTensorType::get(
      {c.batch, c.heads, c.queries}, elem.isF64() ? elem : b.getF32Type());
  auto op = tg::AttentionOp::create(
      b, loc, q.getType(), lseType, q, k, v, seed, step,
      b.getF64FloatAttr(c.scale), c.causal ? b.getUnitAttr() : nullptr,
      b.getF64FloatAttr(c.dropoutRate),
      c.dropoutRate > 0 ? b.getI64IntegerAttr(kOpId) : nullptr);
  return {op.getResult(), op.getLse()};
}

// The same attention written out with the T x S matrices. Query heads are
// (Hkv, G) with G = H / Hkv, so q (B, H, T, D) is seen as (B, Hkv, G, T, D)
// and k, v as (B, Hkv, 1, S, D): the matmuls broadcast each key/value head
// over its G query heads. Returns (result, log(sum(exp(masked scores)))).
std::pair<Value, Value> writtenOutAttention(OpBuilder &b, Location loc, Value q,
                                            Value k, Value v,
                                            const AttentionCase &c) {
  int64_t group = c.heads / c.kvHeads;
  Value q5 = build::reshape(b, loc, q,
                            {c.batch, c.kvHeads, group, c.queries, c.headDim});
  Value k5 = build::reshape(b, loc, k, {c.batch, c.kvHeads, 1, c.keys, c.headDim});
  Value v5 = build::reshape(b, loc, v, {c.batch, c.kvHeads, 1, c.keys, c.headDim});
  Value products = build::matmul(b, loc, q5, k5, false, /*transposeRhs=*/true);
  Value scores = build::mul(
      b, loc,
      build::reshape(b, loc, products, {c.batch, c.heads, c.queries, c.keys}),
      build::scalar(b, loc, b.getF64Type(), c.scale));
  if (c.causal)
    scores = tg::CausalMaskOp::create(b, loc, scores.getType(), scores,
                                      b.getF64FloatAttr(kMinusInfinity));
  Value lse = build::log(
      b, loc, build::reduceSum(b, loc, build::exp(b, loc, scores), {3}, false));
  Value probabilities = tg::SoftmaxOp::create(b, loc, scores.getType(), scores,
                                              b.getI64IntegerAttr(3));
  if (c.dropoutRate > 0) {
    auto [seed, step] = dropoutOperands(b, loc, c);
    probabilities = tg::DropoutOp::create(
        b, loc, probabilities.getType(), probabilities, seed, step,
        b.getF64FloatAttr(c.dropoutRate), b.getI64IntegerAttr(kOpId));
  }
  Value p5 = build::reshape(b, loc, probabilities,
                            {c.batch, c.kvHeads, group, c.queries, c.keys});
  Value out = build::matmul(b, loc, p5, v5, false, false);
  return {build::reshape(b, loc, out, {c.batch, c.heads, c.queries, c.headDim}),
          lse};
}

class AttentionTest : public GradCheckParamTest<AttentionCase> {
protected:
  // @f(q, k, v) -> (fused result, fused lse, written-out result, written-out
  // lse), all f64; null (with a test failure) when it does not verify.
  OwningOpRef<ModuleOp> buildBothForms(const AttentionCase &c) {
    OpBuilder b(&context());
    Location loc = b.getUnknownLoc();
    OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
    auto q = f64Tensor(&context(), c.qShape());
    auto kv = f64Tensor(&context(), c.kvShape());
    auto f = func::FuncOp::create(loc, "f", b.getFunctionType({q, kv, kv}, {}));
    module->push_back(f);
    b.setInsertionPointToStart(f.addEntryBlock());
    Value args[] = {f.getArgument(0), f.getArgument(1), f.getArgument(2)};
    auto [fused, fusedLse] = fusedAttention(b, loc, args[0], args[1], args[2], c);
    auto [plain, plainLse] =
        writtenOutAttention(b, loc, args[0], args[1], args[2], c);
    SmallVector<Value> results = {fused, fusedLse, plain, plainLse};
    func::ReturnOp::create(b, loc, results);
    f.setType(b.getFunctionType(f.getArgumentTypes(),
                                ValueRange(results).getTypes()));
    if (failed(verify(*module))) {
      ADD_FAILURE() << "the test module does not verify:\n" << diagnostics_;
      return nullptr;
    }
    return module;
  }

  // Interprets buildBothForms(c)'s @f on random q, k, v.
  FailureOr<std::vector<Tensor>> runBothForms(const AttentionCase &c) {
    module_ = buildBothForms(c);
    if (!module_)
      return failure();
    auto f = module_->lookupSymbol<func::FuncOp>("f");
    std::mt19937_64 rng(seed());
    auto results = interp::interpret(f, randomArguments(f, rng, 1));
    if (failed(results))
      ADD_FAILURE() << "interpreter failed:\n" << diagnostics_;
    return results;
  }

  // @forward around `body` (q, k, v trainable) through tg-autodiff.
  OwningOpRef<ModuleOp> differentiated(const AttentionCase &c, bool fused) {
    return buildDifferentiated(
        {ArgSpec::param(c.qShape()), ArgSpec::param(c.kvShape()),
         ArgSpec::param(c.kvShape())},
        [&c, fused](OpBuilder &b, Location loc, ArrayRef<Value> a) {
          return fused ? fusedAttention(b, loc, a[0], a[1], a[2], c).first
                       : writtenOutAttention(b, loc, a[0], a[1], a[2], c).first;
        });
  }
};

// |a - b| / max(1, |b|) over the rows of (B, H, T, width) tensors whose
// query index is at least `firstRow` (width 1 for lse).
double maxRowDifference(const Tensor &a, const Tensor &b, int64_t queries,
                        int64_t width, int64_t firstRow) {
  double worst = 0;
  for (int64_t i = 0; i < a.numElements(); ++i) {
    if ((i / width) % queries < firstRow)
      continue;
    double diff = a.data[i] == b.data[i] ? 0.0 : std::abs(a.data[i] - b.data[i]);
    worst = std::max(worst, diff / std::max(1.0, std::abs(b.data[i])));
  }
  return worst;
}

TEST_P(AttentionTest, ForwardMatchesWrittenOutForm) {
  const AttentionCase &c = GetParam();
  auto r = runBothForms(c);
  ASSERT_TRUE(succeeded(r));
  const Tensor &fused = (*r)[0], &fusedLse = (*r)[1], &plain = (*r)[2],
               &plainLse = (*r)[3];
  EXPECT_LE(maxRowDifference(fused, plain, c.queries, c.headDim, 0), 1e-12);
  EXPECT_LE(maxRowDifference(fusedLse, plainLse, c.queries, 1, 0), 1e-12);
  for (double x : fusedLse.data)
    EXPECT_TRUE(std::isfinite(x));
}

TEST_P(AttentionTest, GradientsMatchFiniteDifferences) {
  OwningOpRef<ModuleOp> module = differentiated(GetParam(), /*fused=*/true);
  ASSERT_TRUE(module);
  int attentionGrads = 0;
  module->walk([&](tg::AttentionGradOp) { ++attentionGrads; });
  EXPECT_EQ(attentionGrads, 1);
  checkGradients(*module);
}

TEST_P(AttentionTest, GradientsMatchWrittenOutForm) {
  OwningOpRef<ModuleOp> plain = differentiated(GetParam(), /*fused=*/false);
  OwningOpRef<ModuleOp> fused = differentiated(GetParam(), /*fused=*/true);
  ASSERT_TRUE(plain && fused);
  expectSameFunctions(*plain, *fused, seed(), /*numClasses=*/1);
}

INSTANTIATE_TEST_SUITE_P(Attention, AttentionTest,
                         ::testing::ValuesIn(attentionCases()), caseName);

class AttentionEmptyRowTest : public AttentionTest {};

// The first T - S query rows see no key: result 0, lse -inf; the other
// rows match the written-out form (whose softmax is NaN on the empty rows).
TEST_P(AttentionEmptyRowTest, EmptyRowsGiveZeroAndMinusInfinity) {
  const AttentionCase &c = GetParam();
  ASSERT_GT(c.emptyRows(), 0);
  auto r = runBothForms(c);
  ASSERT_TRUE(succeeded(r));
  const Tensor &fused = (*r)[0], &fusedLse = (*r)[1], &plain = (*r)[2],
               &plainLse = (*r)[3];
  for (int64_t row = 0; row < fusedLse.numElements(); ++row) {
    bool empty = row % c.queries < c.emptyRows();
    EXPECT_EQ(fusedLse.data[row] == kMinusInfinity, empty) << "row " << row;
    for (int64_t d = 0; empty && d < c.headDim; ++d)
      EXPECT_EQ(fused.data[row * c.headDim + d], 0.0) << "row " << row;
  }
  EXPECT_LE(maxRowDifference(fused, plain, c.queries, c.headDim, c.emptyRows()),
            1e-12);
  EXPECT_LE(maxRowDifference(fusedLse, plainLse, c.queries, 1, 0), 1e-12);
}

// Empty rows contribute nothing: their gradients are 0, the rest match
// finite differences.
TEST_P(AttentionEmptyRowTest, GradientsMatchFiniteDifferences) {
  const AttentionCase &c = GetParam();
  OwningOpRef<ModuleOp> module = differentiated(c, /*fused=*/true);
  ASSERT_TRUE(module);
  std::vector<ParamGradient> grads = checkGradients(*module);
  ASSERT_EQ(grads.size(), 3u);
  const Tensor &dq = grads[0].analytic;
  for (int64_t i = 0; i < dq.numElements(); ++i) {
    bool emptyRow = (i / c.headDim) % c.queries < c.emptyRows();
    EXPECT_TRUE(!emptyRow || dq.data[i] == 0.0) << "dq element " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Attention, AttentionEmptyRowTest,
                         ::testing::ValuesIn(emptyRowCases()), caseName);

//===----------------------------------------------------------------------===//
// 16-bit inputs
//===----------------------------------------------------------------------===//

// A bf16 attention computes in float64 from its bf16 operands and rounds
// its result once; lse (f32) is not rounded to bf16. So the bf16 op gives
// exactly the f64 op's values on the same (bf16-representable) inputs,
// with the result rounded to bf16.
class AttentionBf16Test : public GradCheckTest {};

TEST_F(AttentionBf16Test, RoundsResultOnceAndKeepsLse) {
  const char *ir = R"mlir(
    func.func @f(%q: tensor<1x2x3x4xbf16>, %k: tensor<1x1x5x4xbf16>, %v: tensor<1x1x5x4xbf16>,
                 %q64: tensor<1x2x3x4xf64>, %k64: tensor<1x1x5x4xf64>, %v64: tensor<1x1x5x4xf64>)
        -> (tensor<1x2x3x4xbf16>, tensor<1x2x3xf32>, tensor<1x2x3x4xf64>, tensor<1x2x3xf64>) {
      %o, %l = tg.attention %q, %k, %v {scale = 0.5 : f64, causal} : (tensor<1x2x3x4xbf16>, tensor<1x1x5x4xbf16>, tensor<1x1x5x4xbf16>) -> (tensor<1x2x3x4xbf16>, tensor<1x2x3xf32>)
      %o64, %l64 = tg.attention %q64, %k64, %v64 {scale = 0.5 : f64, causal} : (tensor<1x2x3x4xf64>, tensor<1x1x5x4xf64>, tensor<1x1x5x4xf64>) -> (tensor<1x2x3x4xf64>, tensor<1x2x3xf64>)
      return %o, %l, %o64, %l64 : tensor<1x2x3x4xbf16>, tensor<1x2x3xf32>, tensor<1x2x3x4xf64>, tensor<1x2x3xf64>
    })mlir";
  std::mt19937_64 rng(seed());
  std::uniform_real_distribution<double> value(-1.5, 1.5);
  std::vector<Tensor> args;
  for (std::vector<int64_t> shape :
       {std::vector<int64_t>{1, 2, 3, 4}, {1, 1, 5, 4}, {1, 1, 5, 4}}) {
    Tensor t = Tensor::zeros(shape);
    for (double &x : t.data) // bf16 values, so both ops see the same inputs
      x = interp::roundTo(value(rng), APFloat::BFloat());
    args.push_back(t);
  }
  for (int i = 0; i < 3; ++i)
    args.push_back(args[i]);
  auto r = run(ir, args);
  ASSERT_TRUE(succeeded(r)) << diagnostics_;
  const Tensor &o = (*r)[0], &lse = (*r)[1], &o64 = (*r)[2], &lse64 = (*r)[3];
  bool someRounded = false;
  for (int64_t i = 0; i < o.numElements(); ++i) {
    EXPECT_EQ(o.data[i], interp::roundTo(o64.data[i], APFloat::BFloat()))
        << "element " << i;
    someRounded |= o.data[i] != o64.data[i];
  }
  EXPECT_TRUE(someRounded) << "no result needed rounding: the test is vacuous";
  EXPECT_EQ(lse.data, lse64.data);
}

} // namespace
