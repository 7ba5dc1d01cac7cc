// Model node batch_norm -> tg primitives (torch.nn.BatchNorm1d / 2d,
// F.batch_norm):
//   batch_norm(x (N, C, ...), running_mean (C), running_var (C)
//              [, weight (C) [, bias (C)]])
//     f eps = 1e-5, f momentum = 0.1, s num_batches_tracked (a buffer name)
//   batch_norm(x [, weight [, bias]]) {b track_running_stats: false}
//     b sync = false: in a data-parallel training step, the statistics of
//     the global batch (torch.nn.SyncBatchNorm; dialects/tg/BatchNormSync.h)
// Statistics are per channel (dim 1) over every other dimension.
//
// Training and eval differ, so the result is a tg.train_select of
//   train: tg.batch_norm (x, weight, bias): the batch's statistics (mean_b,
//          biased var_b), its own fused gradient (TgBatchNormOps.td);
//   eval:  (x - running_mean) * rsqrt(running_var + eps) * weight + bias in
//          primitives (elementwise only),
// and the node's running statistics are updated in the training step as
// PyTorch does:
//   running_mean' = (1 - momentum) running_mean + momentum mean_b
//   running_var'  = (1 - momentum) running_var + momentum var_b n / (n - 1)
//   num_batches_tracked' = num_batches_tracked + 1
// (n = the values per channel). The running statistics must be model
// buffers (Model.buffers); the updates become results of @forward marked
// tg.updates_buffer, which tg-autodiff keeps in @train_step and
// tg-strip-train-only-ops drops from the eval function. Without
// track_running_stats both modes use the batch statistics (PyTorch's
// track_running_stats=False).
#include "dialects/common/ModelAttrs.h"
#include "dialects/common/ShapeHelpers.h"
#include "dialects/tg/BatchNormSync.h"
#include "dialects/tg/TgDialect.h"
#include "dialects/tg/TgStructuralBuilders.h"
#include "frontend/importer/NodeImporter.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <cmath>

using namespace mlir;

namespace tcc {
namespace {

// `v` if it is a model buffer (a @forward argument marked tg.buffer).
BlockArgument bufferArgument(Value v) {
  auto arg = dyn_cast<BlockArgument>(v);
  if (!arg)
    return nullptr;
  auto f = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
  if (!f || !f.getArgAttr(arg.getArgNumber(), model::kBufferAttr))
    return nullptr;
  return arg;
}

} // namespace

NodeResults importBatchNorm(NodeContext &n) {
  namespace build = tg::build;
  if (failed(n.attrs({"eps", "momentum", "track_running_stats", "num_batches_tracked", "sync"})))
    return failure();
  FailureOr<bool> sync = n.boolAttr("sync", false);
  FailureOr<double> eps = n.floatAttr("eps", 1e-5);
  FailureOr<double> momentum = n.floatAttr("momentum", 0.1);
  FailureOr<bool> track = n.boolAttr("track_running_stats", true);
  FailureOr<std::string> counter = n.stringAttr("num_batches_tracked", "");
  if (failed(eps) || failed(momentum) || failed(track) || failed(counter) || failed(sync))
    return failure();
  if (!(*eps >= 0) || !std::isfinite(*eps))
    return n.error() << "batch_norm: eps must be a finite number >= 0, got " << *eps;
  if (!(*momentum >= 0 && *momentum <= 1))
    return n.error() << "batch_norm: momentum must be in [0, 1], got " << *momentum;
  size_t stats = *track ? 2 : 0;
  if (n.operands.size() < 1 + stats || n.operands.size() > 3 + stats)
    return n.error() << "op batch_norm takes " << 1 + stats << " to " << 3 + stats
                     << " inputs (x" << (*track ? ", running_mean, running_var" : "")
                     << " [, weight [, bias]]), got " << n.operands.size();
  if (n.node.outputs_size() != 1)
    return n.error() << "op batch_norm has 1 output, got " << n.node.outputs_size();
  if (!*track && !counter->empty())
    return n.error() << "batch_norm: num_batches_tracked needs track_running_stats";
  for (size_t i = 0; i < n.operands.size(); ++i)
    if (failed(n.requireFloat(i)))
      return failure();
  RankedTensorType x = n.type(0);
  if (x.getRank() < 2)
    return n.error() << "batch_norm: input '" << n.node.inputs(0)
                     << "' must be (N, C, ...) (rank >= 2), got "
                     << tcc::formatShape(x.getShape());
  int64_t c = x.getDimSize(1);
  int64_t perChannel = x.getNumElements() / c;
  for (size_t i = 1; i < n.operands.size(); ++i) {
    RankedTensorType t = n.type(i);
    if (t.getShape() != ArrayRef<int64_t>{c} || t.getElementType() != x.getElementType())
      return n.error() << "batch_norm: input '" << n.node.inputs(i) << "' must be (" << c
                       << ") of " << x.getElementType() << " (the channels of "
                       << tcc::formatShape(x.getShape()) << "), got " << t;
  }
  Location loc = n.loc;
  OpBuilder &b = n.b;
  Type elt = x.getElementType();
  SmallVector<int64_t> channelShape(x.getRank(), 1);
  channelShape[1] = c;
  Value in = n.operands[0];
  Value epsValue = build::scalar(b, loc, elt, *eps);
  auto normalize = [&](Value mean, Value var) {
    return build::mul(b, loc, build::sub(b, loc, in, mean),
                      build::rsqrt(b, loc, build::add(b, loc, var, epsValue)));
  };
  Value weight = n.operands.size() > 1 + stats ? n.operands[1 + stats] : Value();
  Value bias = n.operands.size() > 2 + stats ? n.operands[2 + stats] : Value();
  // Training: the batch's statistics (biased variance), one fused op.
  auto channels = RankedTensorType::get({c}, build::batchNormStatsType(elt));
  auto train = tg::BatchNormOp::create(b, loc, TypeRange{x, channels, channels}, in, weight,
                                       bias, b.getF64FloatAttr(*eps));
  if (*sync)
    train->setAttr(tg::kBatchNormSyncAttr, b.getUnitAttr());
  Value mean = train.getMean(), var = train.getVar();
  Value result = train.getResult();

  if (*track) {
    if (perChannel < 2)
      return n.error() << "batch_norm: training needs more than 1 value per channel, got "
                       << tcc::formatShape(x.getShape());
    BlockArgument runMean = bufferArgument(n.operands[1]);
    BlockArgument runVar = bufferArgument(n.operands[2]);
    if (!runMean || !runVar)
      return n.error() << "batch_norm: running_mean '" << n.node.inputs(1)
                       << "' and running_var '" << n.node.inputs(2)
                       << "' must be model buffers (Model.buffers)";
    if (!n.bufferUpdates)
      return n.error() << "batch_norm: running statistics cannot be updated here";
    Value eval = build::affine(
        b, loc,
        normalize(build::reshape(b, loc, runMean, channelShape),
                  build::reshape(b, loc, runVar, channelShape)),
        weight ? build::reshape(b, loc, weight, channelShape) : Value(),
        bias ? build::reshape(b, loc, bias, channelShape) : Value());
    result = tg::TrainSelectOp::create(b, loc, result.getType(), result, eval);
    // The running statistics' updates (PyTorch: the unbiased variance).
    Value keep = build::scalar(b, loc, elt, 1.0 - *momentum);
    Value take = build::scalar(b, loc, elt, *momentum);
    Value unbiased = build::mul(
        b, loc, build::castTo(b, loc, var, elt),
        build::scalar(b, loc, elt,
                      static_cast<double>(perChannel) / static_cast<double>(perChannel - 1)));
    auto update = [&](Value running, Value batch) {
      return build::add(b, loc, build::mul(b, loc, running, keep),
                        build::mul(b, loc, batch, take));
    };
    n.bufferUpdates->push_back({runMean, update(runMean, build::castTo(b, loc, mean, elt))});
    n.bufferUpdates->push_back({runVar, update(runVar, unbiased)});
    if (!counter->empty()) {
      Value v = n.lookupValue ? n.lookupValue(*counter) : Value();
      BlockArgument count = v ? bufferArgument(v) : nullptr;
      auto type = v ? dyn_cast<RankedTensorType>(v.getType()) : nullptr;
      if (!count || type.getNumElements() != 1 || !type.getElementType().isInteger(64))
        return n.error() << "batch_norm: num_batches_tracked '" << *counter
                         << "' must be a model buffer of one I64 element";
      // Counted in f32, exact below 2^24 steps: tg's arithmetic is on
      // floats, and f64 would keep mixed precision (tg-amp) from the model.
      Type f32 = b.getF32Type();
      Value next = build::add(b, loc, build::castTo(b, loc, count, f32),
                              build::scalar(b, loc, f32, 1.0));
      n.bufferUpdates->push_back({count, build::castTo(b, loc, next, type.getElementType())});
    }
  }
  return SmallVector<Value, 1>{result};
}

} // namespace tcc
