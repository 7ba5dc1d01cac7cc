// tg.layer_norm / tg.rms_norm -> kern.layer_norm; tg.layer_norm_grad /
// tg.rms_norm_grad -> kern.layer_norm_grad with a (P, 2, C) partial-sum
// workspace (NormWorkspace.h) when weight or bias gradients are wanted. The
// workspace is a kern.alloc, placed by kern-plan-memory like any temporary.
// A residual add of the input gradient folds in as the kernel's `plus`, a
// float cast of the (summed) input gradient as its `cast` output, and a
// reduce_sum over the rows of either (a bias gradient) as its `sum` output.
// tg.batch_norm_stats / tg.batch_norm_grad_sums -> kern.batch_norm_stats /
// kern.batch_norm_grad_sums, with a (P, 2, C) workspace when the channels
// are cut into P > 1 parts (batchNormParts).
#include "passes/lowering/LowerNorms.h"

#include "dialects/kern/KernDialect.h"
#include "dialects/kern/NormWorkspace.h"
#include "dialects/tg/TgDialect.h"

using namespace mlir;

namespace tcc {

namespace {

bool isFloatTensor(Value v) {
  return isa<FloatType>(cast<RankedTensorType>(v.getType()).getElementType());
}

bool isNorm(Operation *op) { return isa<tg::LayerNormOp, tg::RmsNormOp>(op); }

// A cast that is the only user of a norm's result: the norm writes its type.
bool castOfNormResult(tg::CastOp c) {
  Value in = c.getInput();
  return in.getDefiningOp() && isNorm(in.getDefiningOp()) && in.hasOneUse() &&
         isFloatTensor(c.getResult());
}

// The value a norm's result is stored as: its only cast, or itself.
Value storedNormResult(Value result) {
  if (result.hasOneUse())
    if (auto c = dyn_cast<tg::CastOp>(*result.getUsers().begin()))
      if (castOfNormResult(c))
        return c.getResult();
  return result;
}

Value gradOperand(Operation *op) {
  if (auto g = dyn_cast<tg::LayerNormGradOp>(op))
    return g.getGrad();
  if (auto g = dyn_cast<tg::RmsNormGradOp>(op))
    return g.getGrad();
  return Value();
}

// A float-to-float cast read only as the `grad` of norm gradient ops.
bool castReadAsNormGrad(tg::CastOp c) {
  if (!isFloatTensor(c.getInput()) || c.getResult().use_empty())
    return false;
  for (OpOperand &use : c.getResult().getUses()) {
    Value grad = gradOperand(use.getOwner());
    if (!grad || use.getOperandNumber() != 0 || grad != c.getResult())
      return false;
  }
  return true;
}

Value inputGradOf(Operation *op) {
  if (auto g = dyn_cast<tg::LayerNormGradOp>(op))
    return g.getInputGrad();
  if (auto g = dyn_cast<tg::RmsNormGradOp>(op))
    return g.getInputGrad();
  return Value();
}

// A tg.add of a norm gradient's input_grad (its only use) and a value of
// the same type computed before the gradient op: the residual stream's
// gradient, added by the norm kernel itself. Returns that other operand.
Value residualAddend(tg::AddOp add) {
  for (int side = 0; side < 2; ++side) {
    Value mine = add->getOperand(side), other = add->getOperand(1 - side);
    Operation *grad = mine.getDefiningOp();
    if (!grad || inputGradOf(grad) != mine || !mine.hasOneUse() || mine == other)
      continue;
    if (other.getType() != mine.getType() || add.getType() != mine.getType())
      continue;
    Operation *def = other.getDefiningOp();
    bool before = def ? def->getBlock() == grad->getBlock() && def->isBeforeInBlock(grad)
                      : cast<BlockArgument>(other).getOwner() == grad->getBlock();
    if (before)
      return other;
  }
  return Value();
}

// The add folded into a norm gradient's input_grad, or null. When both
// operands are norm input gradients (two norms of one input), the add folds
// into one of them only: the other's input gradient is that one's addend.
tg::AddOp foldedResidualAdd(Value inputGrad) {
  if (!inputGrad.hasOneUse())
    return tg::AddOp();
  auto add = dyn_cast<tg::AddOp>(*inputGrad.getUsers().begin());
  if (!add)
    return tg::AddOp();
  Value addend = residualAddend(add);
  return addend && addend != inputGrad ? add : tg::AddOp();
}

// The value a norm gradient's input gradient is stored as: the folded
// residual add's result, or the input gradient itself; null for a value
// that is neither.
Value storedGradOf(Value v) {
  if (Operation *def = v.getDefiningOp()) {
    if (inputGradOf(def) == v && !foldedResidualAdd(v))
      return v;
    if (auto add = dyn_cast<tg::AddOp>(def))
      if (residualAddend(add))
        return v;
  }
  return Value();
}

// The float-to-float cast of a stored input gradient that the norm kernel
// writes as well (`cast`): the first in the block of its float casts, when
// that one is not already read through its source (castReadAsNormGrad).
tg::CastOp foldedGradCast(Value stored) {
  tg::CastOp first;
  for (Operation *user : stored.getUsers())
    if (auto c = dyn_cast<tg::CastOp>(user))
      if (c.getInput() == stored && isFloatTensor(c.getResult()) &&
          (!first || c->isBeforeInBlock(first)))
        first = c;
  return first && !castReadAsNormGrad(first) ? first : tg::CastOp();
}

bool castOfNormGradResult(tg::CastOp c) {
  Value stored = storedGradOf(c.getInput());
  return stored && foldedGradCast(stored) == c;
}

// A reduce_sum of `v` over every axis but the last (keep_dims or not).
tg::ReduceSumOp firstColumnSumOf(Value v) {
  auto type = cast<RankedTensorType>(v.getType());
  if (type.getRank() < 2)
    return tg::ReduceSumOp();
  auto allButLast = llvm::to_vector(llvm::seq<int64_t>(0, type.getRank() - 1));
  tg::ReduceSumOp first;
  for (Operation *user : v.getUsers())
    if (auto sum = dyn_cast<tg::ReduceSumOp>(user))
      if (sum.getAxes() == ArrayRef<int64_t>(allButLast) && (!first || sum->isBeforeInBlock(first)))
        first = sum;
  return first;
}

// The column sum of a stored input gradient that the norm kernel adds up
// as well (`sum`): the first reduce_sum over its rows of the folded cast's
// values, else of the stored values; `ofCast` says which.
tg::ReduceSumOp foldedGradSum(Value stored, bool &ofCast) {
  ofCast = false;
  if (tg::CastOp c = foldedGradCast(stored))
    if (tg::ReduceSumOp sum = firstColumnSumOf(c.getResult())) {
      ofCast = true;
      return sum;
    }
  return firstColumnSumOf(stored);
}

// Whether `sum` is folded into the norm gradient that stores its input.
bool sumOfNormGradResult(tg::ReduceSumOp sum) {
  Value in = sum.getInput();
  if (auto c = in.getDefiningOp<tg::CastOp>(); c && castOfNormGradResult(c))
    in = c.getInput();
  Value stored = storedGradOf(in);
  bool ofCast;
  return stored && foldedGradSum(stored, ofCast) == sum;
}

// The buffer a norm gradient reads as `grad`: a folded cast's source.
Value gradBuffer(NormLoweringContext &ctx, Value grad) {
  if (auto c = grad.getDefiningOp<tg::CastOp>())
    if (castReadAsNormGrad(c))
      return ctx.bufferOf(c.getInput());
  return ctx.bufferOf(grad);
}

Value resultBuffer(NormLoweringContext &ctx, Location loc, Value tensor) {
  if (!tensor)
    return Value();
  Value b = ctx.allocate(loc, bufferTypeOf(tensor.getType()));
  ctx.buffers[tensor] = b;
  return b;
}

Value optionalBuffer(NormLoweringContext &ctx, Value tensor) {
  return tensor ? ctx.bufferOf(tensor) : Value();
}

LogicalResult lowerForward(NormLoweringContext &ctx, Operation *op, Value input, Value weight,
                           Value bias, FloatAttr eps, bool rms) {
  Location loc = op->getLoc();
  Value x = ctx.bufferOf(input), w = optionalBuffer(ctx, weight), b = optionalBuffer(ctx, bias);
  Value out = resultBuffer(ctx, loc, storedNormResult(op->getResult(0)));
  kern::LayerNormOp::create(ctx.builder, loc, x, w, b, out, eps,
                            rms ? ctx.builder.getUnitAttr() : UnitAttr());
  return success();
}

LogicalResult lowerGrad(NormLoweringContext &ctx, Operation *op, Value grad, Value input,
                        Value weight, Value inputGrad, Value weightGrad, Value biasGrad,
                        FloatAttr eps, bool rms) {
  Location loc = op->getLoc();
  Value g = gradBuffer(ctx, grad), x = ctx.bufferOf(input), w = optionalBuffer(ctx, weight);
  Value addend;
  Value storedGrad = inputGrad;
  if (tg::AddOp add = foldedResidualAdd(inputGrad)) {
    addend = ctx.bufferOf(residualAddend(add));
    storedGrad = add.getResult();
  }
  Value dx = resultBuffer(ctx, loc, storedGrad);
  tg::CastOp gradCast = foldedGradCast(storedGrad);
  Value dxCast = gradCast ? resultBuffer(ctx, loc, gradCast.getResult()) : Value();
  Value dw = resultBuffer(ctx, loc, weightGrad), db = resultBuffer(ctx, loc, biasGrad);
  bool sumOfCast = false;
  tg::ReduceSumOp gradSum = foldedGradSum(storedGrad, sumOfCast);
  Value dxSum = gradSum ? resultBuffer(ctx, loc, gradSum.getResult()) : Value();
  Value workspace;
  if (dw || db || dxSum) {
    auto xt = cast<RankedTensorType>(input.getType());
    int64_t c = xt.getShape().back(), rows = c == 0 ? 0 : xt.getNumElements() / c;
    Type acc = xt.getElementType().isF64() ? xt.getElementType()
                                           : Float32Type::get(op->getContext());
    workspace = ctx.allocate(
        loc, MemRefType::get({kern::normGradParts(rows), kern::normGradSlots(dxSum != nullptr), c},
                             acc));
  }
  UnitAttr unit = ctx.builder.getUnitAttr();
  kern::LayerNormGradOp::create(ctx.builder, loc, g, x, w, addend, dx, dxCast, dw, db, dxSum,
                                workspace, eps, rms ? unit : UnitAttr(),
                                sumOfCast ? unit : UnitAttr());
  return success();
}

// The (P, 2, C) partial sums of a batch-norm reduction over `input`, or
// null when one part per channel does.
Value batchNormWorkspace(NormLoweringContext &ctx, Location loc, Value input) {
  auto xt = cast<RankedTensorType>(input.getType());
  kern::BatchNormDims d =
      kern::batchNormDims(xt.getDimSize(0), xt.getDimSize(1), xt.getNumElements());
  if (d.parts == 1)
    return Value();
  return ctx.allocate(loc, MemRefType::get({d.parts, 2, d.c},
                                           kern::batchNormStatsType(xt.getElementType())));
}

LogicalResult lowerBatchNormStats(NormLoweringContext &ctx, tg::BatchNormStatsOp op) {
  Location loc = op.getLoc();
  Value x = ctx.bufferOf(op.getInput());
  Value mean = resultBuffer(ctx, loc, op.getMean()), var = resultBuffer(ctx, loc, op.getVar());
  kern::BatchNormStatsOp::create(ctx.builder, loc, x, mean, var,
                                 batchNormWorkspace(ctx, loc, op.getInput()));
  return success();
}

LogicalResult lowerBatchNormGradSums(NormLoweringContext &ctx, tg::BatchNormGradSumsOp op) {
  Location loc = op.getLoc();
  Value g = ctx.bufferOf(op.getGrad()), x = ctx.bufferOf(op.getInput());
  Value mean = ctx.bufferOf(op.getMean()), rstd = ctx.bufferOf(op.getRstd());
  Value sum = resultBuffer(ctx, loc, op.getGradSum());
  Value dot = resultBuffer(ctx, loc, op.getGradXhatSum());
  kern::BatchNormGradSumsOp::create(ctx.builder, loc, g, x, mean, rstd, sum, dot,
                                    batchNormWorkspace(ctx, loc, op.getInput()));
  return success();
}

} // namespace

bool foldsIntoNormGradient(Operation *op) {
  auto sum = dyn_cast<tg::ReduceSumOp>(op);
  return sum && sumOfNormGradResult(sum);
}

bool isLoweredAsNorm(Operation *op) {
  if (isa<tg::BatchNormStatsOp, tg::BatchNormGradSumsOp>(op))
    return true;
  if (isNorm(op) || isa<tg::LayerNormGradOp, tg::RmsNormGradOp>(op))
    return true;
  if (auto add = dyn_cast<tg::AddOp>(op))
    return static_cast<bool>(residualAddend(add));
  if (auto sum = dyn_cast<tg::ReduceSumOp>(op))
    return sumOfNormGradResult(sum);
  auto c = dyn_cast<tg::CastOp>(op);
  return c && (castOfNormResult(c) || castReadAsNormGrad(c) || castOfNormGradResult(c));
}

LogicalResult lowerNormOp(Operation *op, NormLoweringContext &ctx) {
  if (auto s = dyn_cast<tg::BatchNormStatsOp>(op))
    return lowerBatchNormStats(ctx, s);
  if (auto s = dyn_cast<tg::BatchNormGradSumsOp>(op))
    return lowerBatchNormGradSums(ctx, s);
  if (auto n = dyn_cast<tg::LayerNormOp>(op))
    return lowerForward(ctx, op, n.getInput(), n.getWeight(), n.getBias(), n.getEpsAttr(),
                        /*rms=*/false);
  if (auto n = dyn_cast<tg::RmsNormOp>(op))
    return lowerForward(ctx, op, n.getInput(), n.getWeight(), Value(), n.getEpsAttr(),
                        /*rms=*/true);
  if (auto g = dyn_cast<tg::LayerNormGradOp>(op))
    return lowerGrad(ctx, op, g.getGrad(), g.getInput(), g.getWeight(), g.getInputGrad(),
                     g.getWeightGrad(), g.getBiasGrad(), g.getEpsAttr(), /*rms=*/false);
  if (auto g = dyn_cast<tg::RmsNormGradOp>(op))
    return lowerGrad(ctx, op, g.getGrad(), g.getInput(), g.getWeight(), g.getInputGrad(),
                     g.getWeightGrad(), Value(), g.getEpsAttr(), /*rms=*/true);
  if (isa<tg::CastOp, tg::AddOp, tg::ReduceSumOp>(op) && isLoweredAsNorm(op))
    return success(); // folded into the norm kernel (it wrote or reads the buffer)
  return op->emitError("tg-lower-to-kern: not a norm op: ") << op->getName();
}

} // namespace tcc
