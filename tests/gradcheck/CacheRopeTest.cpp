// tg.rope and tg-cache-rope on the reference interpreter: the op's gradient
// (both forms, with respect to x and to the tables) against finite
// differences, and tg-cache-rope keeps the meaning of a model: the module
// with the tables cached and the rotation fused computes the same loss and
// gradients as the one written out in primitives, on fresh random inputs.
#include <gtest/gtest.h>

#include <cmath>

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

// The model's tables (models/Gpt.cpp, ropeTables) in f64: angle[t, i] =
// t * theta^(-2i / D) over (T, D / 2); returns {cos half, sin half}.
std::pair<Value, Value> halfTables(OpBuilder &b, Location loc, int64_t t, int64_t d) {
  auto type = f64Tensor(b.getContext(), {t, d / 2});
  Value pos = build::iota(b, loc, type, 0), idx = build::iota(b, loc, type, 1);
  Value k = build::scalar(b, loc, b.getF64Type(), -2.0 * std::log(10000.0) / d);
  Value angle = build::mul(b, loc, pos, build::exp(b, loc, build::mul(b, loc, idx, k)));
  return {tg::CosOp::create(b, loc, type, angle), tg::SinOp::create(b, loc, type, angle)};
}

// rotate_half(x) = concat(-x[..., h:], x[..., :h]).
Value rotateHalf(OpBuilder &b, Location loc, Value x) {
  auto shape = cast<RankedTensorType>(x.getType()).getShape();
  int64_t last = shape.size() - 1, h = shape.back() / 2;
  return build::concat(b, loc,
                       {build::neg(b, loc, build::sliceAxis(b, loc, x, last, h, h)),
                        build::sliceAxis(b, loc, x, last, 0, h)},
                       last);
}

// Form A, as tcc-models gpt --positions rope writes it, on x (B, H, T, D).
Value formA(OpBuilder &b, Location loc, Value x, Value cos, Value sin) {
  return build::add(b, loc, build::mul(b, loc, x, cos),
                    build::mul(b, loc, rotateHalf(b, loc, x), sin));
}

struct Shape {
  int64_t b, h, t, d;
};

class RopeGradient : public GradCheckParamTest<bool> {};

// x, cos and sin are all parameters, so every gradient of the rule is
// checked (the transposed rotation for x, the reductions for the tables).
TEST_P(RopeGradient, MatchesFiniteDifferences) {
  bool transposed = GetParam();
  OwningOpRef<ModuleOp> module = buildDifferentiated(
      {ArgSpec::param({2, 3, 4, 6}), ArgSpec::param({4, 6}), ArgSpec::param({4, 6})},
      [&](OpBuilder &b, Location loc, ArrayRef<Value> a) -> Value {
        return tg::RopeOp::create(b, loc, a[0].getType(), a[0], a[1], a[2],
                                  b.getBoolAttr(transposed));
      });
  ASSERT_TRUE(module);
  checkGradients(*module);
}

INSTANTIATE_TEST_SUITE_P(Forms, RopeGradient, ::testing::Values(false, true));

using CacheRope = GradCheckTest;

// The transposed rope undoes the plain one when cos^2 + sin^2 = 1 (a real
// rotation: pairs (j, j + h) share an angle): the interpreter's rules are
// each other's inverse.
TEST_F(CacheRope, TransposedRopeInvertsTheRotation) {
  OwningOpRef<ModuleOp> module = parse(R"mlir(
    func.func @f(%x: tensor<2x4x6xf64>) -> tensor<2x4x6xf64> {
      %p = tg.iota {axis = 0 : i64} : tensor<4x3xf64>
      %i = tg.iota {axis = 1 : i64} : tensor<4x3xf64>
      %a = tg.mul %p, %i : (tensor<4x3xf64>, tensor<4x3xf64>) -> tensor<4x3xf64>
      %ch = tg.cos %a : tensor<4x3xf64>
      %sh = tg.sin %a : tensor<4x3xf64>
      %c = tg.concat %ch, %ch {axis = 1 : i64} : (tensor<4x3xf64>, tensor<4x3xf64>) -> tensor<4x6xf64>
      %s = tg.concat %sh, %sh {axis = 1 : i64} : (tensor<4x3xf64>, tensor<4x3xf64>) -> tensor<4x6xf64>
      %y = tg.rope %x, %c, %s : (tensor<2x4x6xf64>, tensor<4x6xf64>, tensor<4x6xf64>) -> tensor<2x4x6xf64>
      %z = tg.rope %y, %c, %s {transposed = true} : (tensor<2x4x6xf64>, tensor<4x6xf64>, tensor<4x6xf64>) -> tensor<2x4x6xf64>
      return %z : tensor<2x4x6xf64>
    })mlir");
  ASSERT_TRUE(module);
  Tensor x = Tensor::zeros({2, 4, 6});
  for (int64_t i = 0; i < x.numElements(); ++i)
    x.data[i] = std::sin(1.7 * i + 0.3);
  FailureOr<std::vector<Tensor>> out =
      interp::interpret(module->lookupSymbol<func::FuncOp>("f"), {x});
  ASSERT_TRUE(succeeded(out));
  EXPECT_LT(maxRelativeDifference((*out)[0], x), 1e-12);
}

// Caches the tables, fuses the rotation, and changes nothing else.
void expectCachedAndFused(uint64_t seed, OwningOpRef<ModuleOp> original,
                          int64_t ropes, int64_t constants) {
  ASSERT_TRUE(original);
  OwningOpRef<ModuleOp> fused = original->clone();
  PassManager pm(fused->getContext());
  pm.addPass(createTgCacheRope());
  ASSERT_TRUE(succeeded(pm.run(*fused)));
  EXPECT_EQ(countOps(*fused, "tg.rope"), ropes);
  EXPECT_EQ(countOps(*fused, "tg.sin") + countOps(*fused, "tg.cos") + countOps(*fused, "tg.exp"), 0)
      << "the tables are constants now";
  int64_t dense = 0;
  fused->walk([&](tg::ConstantOp c) {
    dense += !cast<DenseElementsAttr>(c.getValue()).isSplat();
  });
  EXPECT_EQ(dense, constants);
  OwningOpRef<ModuleOp> before = original->clone();
  ASSERT_TRUE(runTrainingPasses(*before).succeeded());
  ASSERT_TRUE(runTrainingPasses(*fused).succeeded());
  EXPECT_EQ(countOps(*fused, "tg.rope"), 3 * ropes) << "@forward, @train_step and its gradient";
  expectSameFunctions(*before, *fused, seed, 3);
}

TEST_F(CacheRope, FormASameFunction) {
  Shape s{2, 3, 5, 8};
  expectCachedAndFused(
      seed(),
      buildForwardModule(context(), {ArgSpec::param({s.b, s.h, s.t, s.d})},
                         [&](OpBuilder &b, Location loc, ArrayRef<Value> a) -> Value {
                           auto [c, sn] = halfTables(b, loc, s.t, s.d);
                           Value cos = build::concat(b, loc, {c, c}, 1);
                           Value sin = build::concat(b, loc, {sn, sn}, 1);
                           return formA(b, loc, a[0], cos, sin);
                         }),
      /*ropes=*/1, /*constants=*/2);
}

// concat(x1*c - x2*s, x2*c + x1*s) on (T, D/2) tables, with the products
// in the other order and the halves from a split.
TEST_F(CacheRope, FormBSameFunction) {
  Shape s{2, 2, 4, 6};
  expectCachedAndFused(
      seed(),
      buildForwardModule(
          context(), {ArgSpec::param({s.b, s.h, s.t, s.d})},
          [&](OpBuilder &b, Location loc, ArrayRef<Value> a) -> Value {
            auto [c, sn] = halfTables(b, loc, s.t, s.d);
            auto halfType = f64Tensor(b.getContext(), {s.b, s.h, s.t, s.d / 2});
            auto halves = tg::SplitOp::create(b, loc, TypeRange{halfType, halfType}, a[0],
                                              b.getI64IntegerAttr(3));
            Value x1 = halves.getResult(0), x2 = halves.getResult(1);
            Value lo = build::sub(b, loc, build::mul(b, loc, c, x1), build::mul(b, loc, x2, sn));
            Value hi = build::add(b, loc, build::mul(b, loc, sn, x1), build::mul(b, loc, x2, c));
            return build::concat(b, loc, {lo, hi}, 3);
          }),
      /*ropes=*/1, /*constants=*/2);
}

// Tables computed from a parameter are not cached, but the rotation still
// fuses and the tables get their gradients through tg.rope's rule.
TEST_F(CacheRope, TablesFromAParameterStillFuseWithGradients) {
  OwningOpRef<ModuleOp> original = buildForwardModule(
      context(), {ArgSpec::param({2, 4, 6}), ArgSpec::param({4, 6})},
      [&](OpBuilder &b, Location loc, ArrayRef<Value> a) -> Value {
        auto type = f64Tensor(b.getContext(), {4, 6});
        Value cos = tg::CosOp::create(b, loc, type, a[1]);
        Value sin = tg::SinOp::create(b, loc, type, a[1]);
        return formA(b, loc, a[0], cos, sin);
      });
  ASSERT_TRUE(original);
  OwningOpRef<ModuleOp> fused = original->clone();
  PassManager pm(fused->getContext());
  pm.addPass(createTgCacheRope());
  ASSERT_TRUE(succeeded(pm.run(*fused)));
  EXPECT_EQ(countOps(*fused, "tg.rope"), 1);
  ASSERT_TRUE(runTrainingPasses(*original).succeeded());
  ASSERT_TRUE(runTrainingPasses(*fused).succeeded());
  expectSameFunctions(*original, *fused, seed(), 3);
  checkGradients(*fused);
}

} // namespace
