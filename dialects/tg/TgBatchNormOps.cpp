// Verifiers and the gradient rule of the batch-norm ops (TgBatchNormOps.td).
// The gradient is one reduction pass (tg.batch_norm_grad_sums) and an
// elementwise input gradient (build::batchNormInputGrad), not autodiff of
// the written-out statistics (which took ~11 passes over the activations).
#include "dialects/tg/TgDialect.h"

#include "dialects/common/ShapeHelpers.h"
#include "dialects/tg/BatchNormSync.h"
#include "dialects/tg/TgStructuralBuilders.h"
#include "dialects/tg/TgTypeHelpers.h"
#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace tcc::tg;

namespace tcc::tg {

// input (N, C, ...) rank >= 2; each of `channels` (C) of the statistics'
// type of input (f32 for 16 bits, else input's).
static LogicalResult verifyChannelVectors(Operation *op, Value input,
                                          ArrayRef<std::pair<StringRef, Value>> channels) {
  auto x = rtt(input);
  if (x.getRank() < 2)
    return op->emitOpError("input must be (N, C, ...) (rank >= 2), got ")
           << tcc::formatShape(x.getShape());
  Type stats = build::batchNormStatsType(x.getElementType());
  int64_t c = x.getDimSize(1);
  for (auto [name, v] : channels) {
    auto t = rtt(v);
    if (t.getShape() != ArrayRef<int64_t>{c} || t.getElementType() != stats)
      return op->emitOpError() << name << " must be (" << c << ") of " << stats
                               << " (the channels of " << tcc::formatShape(x.getShape())
                               << "), got " << t;
  }
  return success();
}

LogicalResult BatchNormOp::verify() {
  if (getResult().getType() != getInput().getType())
    return emitOpError("result must have the input's type ") << getInput().getType();
  if (failed(verifyChannelVectors(*this, getInput(), {{"mean", getMean()}, {"var", getVar()}})))
    return failure();
  int64_t c = rtt(getInput()).getDimSize(1);
  for (auto [name, v] : {std::pair<StringRef, Value>{"weight", getWeight()}, {"bias", getBias()}})
    if (v && rtt(v).getShape() != ArrayRef<int64_t>{c})
      return emitOpError() << name << " must be (" << c << "), got "
                           << tcc::formatShape(rtt(v).getShape());
  if (!(getEps().convertToDouble() >= 0))
    return emitOpError("eps must be >= 0");
  return success();
}

LogicalResult BatchNormStatsOp::verify() {
  return verifyChannelVectors(*this, getInput(), {{"mean", getMean()}, {"var", getVar()}});
}

LogicalResult BatchNormGradSumsOp::verify() {
  if (rtt(getGrad()).getShape() != rtt(getInput()).getShape())
    return emitOpError("grad must have the input's shape ")
           << tcc::formatShape(rtt(getInput()).getShape()) << ", got "
           << tcc::formatShape(rtt(getGrad()).getShape());
  return verifyChannelVectors(*this, getInput(),
                              {{"mean", getMean()},
                               {"rstd", getRstd()},
                               {"grad_sum", getGradSum()},
                               {"grad_xhat_sum", getGradXhatSum()}});
}

// With x_hat = (x - mean) * rstd and n values per channel:
//   d bias = sum(g), d weight = sum(g * x_hat)          (tg.batch_norm_grad_sums)
//   d x    = rstd * weight * (g - sum(g) / n - x_hat * sum(g * x_hat) / n)
// plus, when the statistics themselves reach a loss,
//   d x   += d mean / n + d var * 2 (x - mean) / n.
LogicalResult BatchNormOp::buildGradients(OpBuilder &b, ArrayRef<Value> resultGrads,
                                          SmallVectorImpl<Value> &operandGrads) {
  Location loc = getLoc();
  Value x = getInput(), weight = getWeight(), bias = getBias();
  auto xt = rtt(x);
  Type stats = build::batchNormStatsType(xt.getElementType());
  double n = static_cast<double>(xt.getNumElements() / std::max<int64_t>(1, xt.getDimSize(1)));
  Value rstd = build::batchNormRstd(b, loc, getVar(), getEps().convertToDouble());
  Value dx, dweight, dbias;
  if (Value g = resultGrads[0]) {
    auto sums = BatchNormGradSumsOp::create(b, loc, TypeRange{getMean().getType(), getMean().getType()},
                                            g, x, getMean(), rstd);
    // Synchronized (BatchNormSync.h): the input gradient takes the global
    // sums, the weight and bias gradients this rank's.
    auto [gradSum, gradXhatSum] =
        syncsOverRanks(getOperation(), /*inTrainStepOnly=*/false)
            ? globalGradSums(b, loc, sums.getGradSum(), sums.getGradXhatSum())
            : std::pair<Value, Value>{sums.getGradSum(), sums.getGradXhatSum()};
    dx = build::batchNormInputGrad(b, loc, g, x, getMean(), rstd, weight, gradSum, gradXhatSum);
    if (weight)
      dweight = build::castTo(b, loc, sums.getGradXhatSum(), rtt(weight).getElementType());
    if (bias)
      dbias = build::castTo(b, loc, sums.getGradSum(), rtt(bias).getElementType());
  }
  int64_t rank = xt.getRank();
  Value extra;
  if (Value dmean = resultGrads[1])
    extra = build::mul(b, loc, build::perChannel(b, loc, dmean, rank),
                       build::scalar(b, loc, stats, 1.0 / n));
  if (Value dvar = resultGrads[2]) {
    Value centered = build::sub(b, loc, build::castTo(b, loc, x, stats),
                                build::perChannel(b, loc, getMean(), rank));
    Value term = build::mul(b, loc, centered,
                            build::mul(b, loc, build::perChannel(b, loc, dvar, rank),
                                       build::scalar(b, loc, stats, 2.0 / n)));
    extra = extra ? build::add(b, loc, extra, term) : term;
  }
  if (extra) {
    Value sum = dx ? build::add(b, loc, build::castTo(b, loc, dx, stats), extra) : extra;
    dx = build::castTo(b, loc, sum, xt.getElementType());
    if (rtt(dx).getShape() != xt.getShape())
      dx = BroadcastToOp::create(b, loc, xt, dx);
  }
  operandGrads.push_back(dx);
  if (weight)
    operandGrads.push_back(dweight);
  if (bias)
    operandGrads.push_back(dbias);
  return success();
}

} // namespace tcc::tg
