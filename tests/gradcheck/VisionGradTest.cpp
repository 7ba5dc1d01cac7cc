// The 2-D convolution and pooling ops (dialects/tg/TgVisionOps.td): their
// gradient rules (tg.conv2d_input_grad / conv2d_weight_grad, tg.pool2d_grad;
// tg.conv2d_input_grad as conv_transpose2d's forward op: conv2d and
// conv2d_weight_grad),
// through the real tg-autodiff pass, against central finite differences of
// @forward on the float64 reference interpreter, fresh random inputs each
// run (TCC_GRADCHECK_SEED replays one). The interpreter's forward values are
// checked against PyTorch in tests/python/vision_torch_parity_test.py.
#include <algorithm>
#include <ostream>

#include <gtest/gtest.h>

#include "dialects/tg/TgDialect.h"
#include "tests/gradcheck/GradCheck.h"
#include "tests/gradcheck/GradCheckFixture.h"

using namespace mlir;
using namespace tcc;
using namespace tcc::gradcheck;

namespace {

struct VisionCase {
  std::string name;
  std::vector<ArgSpec> args;
  BodyBuilder body;
  bool maxPool = false; // reject inputs with near ties (the argmax may flip)
};

void PrintTo(const VisionCase &c, std::ostream *os) { *os << c.name; }

int64_t outSize(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
  return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

// conv2d of x (n, c, h, w) with weight (o, c / g, kh, kw).
VisionCase conv(std::string name, std::vector<int64_t> x, std::vector<int64_t> w,
                std::vector<int64_t> stride, std::vector<int64_t> pad,
                std::vector<int64_t> dil, int64_t groups) {
  std::vector<int64_t> y = {x[0], w[0], outSize(x[2], w[2], stride[0], pad[0], dil[0]),
                            outSize(x[3], w[3], stride[1], pad[1], dil[1])};
  return {"conv2d_" + name,
          {ArgSpec::param(x), ArgSpec::param(w)},
          [=](OpBuilder &b, Location loc, ArrayRef<Value> a) -> Value {
            return tg::Conv2dOp::create(b, loc, f64Tensor(b.getContext(), y), a[0], a[1],
                                        b.getDenseI64ArrayAttr(stride),
                                        b.getDenseI64ArrayAttr(pad),
                                        b.getDenseI64ArrayAttr(dil),
                                        b.getI64IntegerAttr(groups));
          }};
}

// conv_transpose2d of x (n, c_in, h, w) with weight (c_in, c_out / g, kh,
// kw): tg.conv2d_input_grad with the (n, c_out, ho, wo) result whose
// convolution by the same weight gives back (h, w); op = output_padding.
VisionCase convTranspose(std::string name, std::vector<int64_t> x, std::vector<int64_t> w,
                         std::vector<int64_t> stride, std::vector<int64_t> pad,
                         std::vector<int64_t> dil, int64_t groups, std::vector<int64_t> op) {
  std::vector<int64_t> y = {x[0], w[1] * groups,
                            (x[2] - 1) * stride[0] - 2 * pad[0] + dil[0] * (w[2] - 1) + op[0] + 1,
                            (x[3] - 1) * stride[1] - 2 * pad[1] + dil[1] * (w[3] - 1) + op[1] + 1};
  return {"conv_transpose2d_" + name,
          {ArgSpec::param(x), ArgSpec::param(w)},
          [=](OpBuilder &b, Location loc, ArrayRef<Value> a) -> Value {
            return tg::Conv2dInputGradOp::create(
                b, loc, f64Tensor(b.getContext(), y), a[0], a[1], b.getDenseI64ArrayAttr(stride),
                b.getDenseI64ArrayAttr(pad), b.getDenseI64ArrayAttr(dil),
                b.getI64IntegerAttr(groups), b.getStringAttr("NCHW"));
          }};
}

VisionCase pool(std::string name, bool max, std::vector<int64_t> x, std::vector<int64_t> k,
                std::vector<int64_t> stride, std::vector<int64_t> pad) {
  std::vector<int64_t> y = {x[0], x[1], outSize(x[2], k[0], stride[0], pad[0], 1),
                            outSize(x[3], k[1], stride[1], pad[1], 1)};
  return {std::string(max ? "max_pool2d_" : "avg_pool2d_") + name,
          {ArgSpec::param(x)},
          [=](OpBuilder &b, Location loc, ArrayRef<Value> a) -> Value {
            auto type = f64Tensor(b.getContext(), y);
            auto ka = b.getDenseI64ArrayAttr(k), sa = b.getDenseI64ArrayAttr(stride),
                 pa = b.getDenseI64ArrayAttr(pad);
            if (max)
              return tg::MaxPool2dOp::create(b, loc, type, a[0], ka, sa, pa);
            return tg::AvgPool2dOp::create(b, loc, type, a[0], ka, sa, pa);
          },
          max};
}

std::vector<VisionCase> cases() {
  return {
      conv("plain", {2, 3, 6, 6}, {4, 3, 3, 3}, {1, 1}, {0, 0}, {1, 1}, 1),
      conv("stride2_pad1", {1, 2, 7, 7}, {3, 2, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 1),
      conv("dilation2", {1, 2, 7, 6}, {2, 2, 3, 3}, {1, 1}, {2, 1}, {2, 2}, 1),
      conv("groups2", {1, 4, 5, 6}, {6, 2, 3, 2}, {1, 2}, {1, 0}, {1, 1}, 2),
      conv("depthwise", {2, 3, 5, 5}, {3, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 3),
      conv("stride2_uneven", {1, 2, 8, 7}, {2, 2, 2, 3}, {2, 3}, {0, 1}, {1, 1}, 1),
      convTranspose("2x2_s2", {2, 3, 3, 4}, {3, 2, 2, 2}, {2, 2}, {0, 0}, {1, 1}, 1, {0, 0}),
      convTranspose("k3_s2_pad1_outpad1_groups2", {1, 4, 3, 3}, {4, 3, 3, 3}, {2, 2}, {1, 1},
                    {1, 1}, 2, {1, 1}),
      convTranspose("dilated_uneven", {1, 2, 4, 3}, {2, 3, 3, 2}, {1, 2}, {2, 0}, {2, 1}, 1,
                    {0, 1}),
      pool("k2_s2", true, {2, 2, 6, 6}, {2, 2}, {2, 2}, {0, 0}),
      pool("k3_s2_pad1", true, {1, 3, 7, 6}, {3, 3}, {2, 2}, {1, 1}),
      pool("k3x2_s1x2", true, {1, 2, 5, 6}, {3, 2}, {1, 2}, {0, 1}),
      pool("k2_s2", false, {2, 2, 6, 6}, {2, 2}, {2, 2}, {0, 0}),
      pool("k3_s2_pad1", false, {1, 3, 7, 6}, {3, 3}, {2, 2}, {1, 1}),
      pool("k3x2_s1x2_overlap", false, {1, 2, 5, 6}, {3, 2}, {1, 2}, {1, 1}),
  };
}

class VisionGradientTest : public GradCheckParamTest<VisionCase> {};

TEST_P(VisionGradientTest, MatchesFiniteDifferences) {
  const VisionCase &c = GetParam();
  OwningOpRef<ModuleOp> module = buildDifferentiated(c.args, c.body);
  ASSERT_TRUE(module);
  GradCheckOptions options;
  if (c.maxPool)
    options.acceptArguments = [](ArrayRef<Tensor> args) {
      // A window maximum within a few finite-difference steps of another
      // value could change sides under the perturbation.
      std::vector<double> v = args[0].data;
      std::sort(v.begin(), v.end());
      for (size_t i = 1; i < v.size(); ++i)
        if (v[i] - v[i - 1] < 1e-4)
          return false;
      return true;
    };
  checkGradients(*module, options);
}

INSTANTIATE_TEST_SUITE_P(
    Vision, VisionGradientTest, ::testing::ValuesIn(cases()),
    [](const ::testing::TestParamInfo<VisionCase> &info) { return info.param.name; });

} // namespace
