// Batch norm's training-mode gradient (frontend/importer/ImportBatchNorm.cpp
// writes the node in tg primitives): the same composition — per-channel
// batch mean and biased variance over every dim but 1, tg.train_select of
// the batch-statistics and the running-statistics normalizations, then
// weight and bias — through the real tg-autodiff pass, against central
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
    SmallVector<int64_t> axes, channelShape(xt.getRank(), 1);
    channelShape[1] = channels;
    for (int64_t d = 0; d < xt.getRank(); ++d)
      if (d != 1)
        axes.push_back(d);
    Value epsValue = build::scalar(b, loc, xt.getElementType(), eps);
    auto normalize = [&](Value mean, Value var) {
      return build::mul(b, loc, build::sub(b, loc, a[0], mean),
                        build::rsqrt(b, loc, build::add(b, loc, var, epsValue)));
    };
    Value mean = build::reduceMean(b, loc, a[0], axes, true);
    Value centered = build::sub(b, loc, a[0], mean);
    Value var = build::reduceMean(b, loc, build::mul(b, loc, centered, centered), axes, true);
    Value eval = normalize(build::reshape(b, loc, a[1], channelShape),
                           build::reshape(b, loc, a[2], channelShape));
    Value train = normalize(mean, var);
    Value y = tg::TrainSelectOp::create(b, loc, train.getType(), train, eval);
    if (!c.affine)
      return y;
    return build::affine(b, loc, y, build::reshape(b, loc, a[3], channelShape),
                         build::reshape(b, loc, a[4], channelShape));
  };
  OwningOpRef<ModuleOp> module = buildDifferentiated(args, body);
  ASSERT_TRUE(module);
  checkGradients(*module, GradCheckOptions());
}

INSTANTIATE_TEST_SUITE_P(
    BatchNorm, BatchNormGradientTest,
    ::testing::Values(BatchNormCase{"nc", {6, 3}, true},
                      BatchNormCase{"ncl_no_affine", {3, 2, 4}, false},
                      BatchNormCase{"nchw", {2, 3, 3, 2}, true}),
    [](const ::testing::TestParamInfo<BatchNormCase> &info) { return info.param.name; });

} // namespace
