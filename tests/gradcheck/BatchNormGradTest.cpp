// Batch norm's training-mode gradient (frontend/importer/ImportBatchNorm.cpp
// writes the node as tg.batch_norm, whose rule is one reduction and an
// elementwise input gradient): the same composition — tg.train_select of
// tg.batch_norm (batch statistics, weight and bias) and the running-
// statistics normalization in primitives — through the real tg-autodiff
// pass, against central
// finite differences of @forward on the float64 reference interpreter
// (which evaluates tg.train_select as its train operand, as the training
// step does). The batch statistics' own gradient terms are what make batch
// norm's input gradient differ from a per-element affine map; the running
// statistics (frozen here, as buffers are) must get no gradient. The
// compiled step against PyTorch: tests/torch_import/batch_norm_parity_test.py.
#include <ostream>

#include <gtest/gtest.h>

#include "dialects/tg/TgDialect.h"
#include "dialects/tg/TgStructuralBuilders.h"
#include "tests/gradcheck/GradCheck.h"
#include "tests/gradcheck/GradCheckFixture.h"

using namespace mlir;
using namespace tcc;
using namespace tcc::gradcheck;

namespace {

struct BatchNormCase {
  std::string name;
  std::vector<int64_t> x;
  bool affine;
  bool statsInLoss = false; // the batch mean and variance reach the loss too
};

void PrintTo(const BatchNormCase &c, std::ostream *os) { *os << c.name; }

class BatchNormGradientTest : public GradCheckParamTest<BatchNormCase> {};

TEST_P(BatchNormGradientTest, MatchesFiniteDifferences) {
  const BatchNormCase &c = GetParam();
  int64_t channels = c.x[1];
  std::vector<ArgSpec> args = {ArgSpec::param(c.x), ArgSpec::frozen({channels}),
                               ArgSpec::frozen({channels})};
  if (c.affine) {
    args.push_back(ArgSpec::param({channels}));
    args.push_back(ArgSpec::param({channels}));
  }
  const double eps = 1e-5;
  BodyBuilder body = [&](OpBuilder &b, Location loc, ArrayRef<Value> a) -> Value {
    namespace build = tg::build;
    auto xt = cast<RankedTensorType>(a[0].getType());
    SmallVector<int64_t> channelShape(xt.getRank(), 1);
    channelShape[1] = channels;
    Value epsValue = build::scalar(b, loc, xt.getElementType(), eps);
    auto normalize = [&](Value mean, Value var) {
      return build::mul(b, loc, build::sub(b, loc, a[0], mean),
                        build::rsqrt(b, loc, build::add(b, loc, var, epsValue)));
    };
    Value weight = c.affine ? a[3] : Value(), bias = c.affine ? a[4] : Value();
    auto channelType = RankedTensorType::get({channels}, xt.getElementType());
    auto train = tg::BatchNormOp::create(b, loc, TypeRange{xt, channelType, channelType}, a[0],
                                         weight, bias, b.getF64FloatAttr(eps));
    Value eval = normalize(build::reshape(b, loc, a[1], channelShape),
                           build::reshape(b, loc, a[2], channelShape));
    if (c.affine)
      eval = build::affine(b, loc, eval, build::reshape(b, loc, a[3], channelShape),
                           build::reshape(b, loc, a[4], channelShape));
    Value y = tg::TrainSelectOp::create(b, loc, xt, train.getResult(), eval);
    if (!c.statsInLoss)
      return y;
    // y + 0.5 mean + 0.25 var per channel: the statistics' own terms.
    Value stats = build::add(
        b, loc,
        build::mul(b, loc, build::reshape(b, loc, train.getMean(), channelShape),
                   build::scalar(b, loc, xt.getElementType(), 0.5)),
        build::mul(b, loc, build::reshape(b, loc, train.getVar(), channelShape),
                   build::scalar(b, loc, xt.getElementType(), 0.25)));
    return build::add(b, loc, y, stats);
  };
  OwningOpRef<ModuleOp> module = buildDifferentiated(args, body);
  ASSERT_TRUE(module);
  checkGradients(*module, GradCheckOptions());
}

INSTANTIATE_TEST_SUITE_P(
    BatchNorm, BatchNormGradientTest,
    ::testing::Values(BatchNormCase{"nc", {6, 3}, true},
                      BatchNormCase{"ncl_no_affine", {3, 2, 4}, false},
                      BatchNormCase{"nchw", {2, 3, 3, 2}, true},
                      BatchNormCase{"stats_in_loss", {3, 2, 2, 2}, true, true}),
    [](const ::testing::TestParamInfo<BatchNormCase> &info) { return info.param.name; });

} // namespace
