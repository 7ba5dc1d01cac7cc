// tg.attention -> kern.attention (out and lse buffers); tg.attention_grad ->
// kern.attention_grad (dq, dk, dv and an f32 workspace buffer of
// attentionBackwardWorkspaceFloats elements). All are kern.allocs, so
// kern-plan-memory places the lse and the workspace like any temporary:
// nothing of size B*H*T*S exists.
#include "passes/lowering/LowerAttention.h"
#include "passes/lowering/LoweringContext.h"

#include "dialects/kern/AttentionWorkspace.h"
#include "dialects/kern/KernDialect.h"
#include "dialects/tg/TgDialect.h"

using namespace mlir;

namespace tcc {

namespace {

Value resultBuffer(AttentionLoweringContext &ctx, Location loc, Value tensor) {
  Value b = ctx.allocate(loc, bufferTypeOf(tensor.getType()));
  ctx.buffers[tensor] = b;
  return b;
}

Value optionalBuffer(AttentionLoweringContext &ctx, Value tensor) {
  return tensor ? ctx.bufferOf(tensor) : Value();
}

} // namespace

LogicalResult lowerAttentionOp(Operation *op, AttentionLoweringContext &ctx) {
  OpBuilder &b = ctx.builder;
  Location loc = op->getLoc();
  if (auto a = dyn_cast<tg::AttentionOp>(op)) {
    Value q = ctx.bufferOf(a.getQ()), k = ctx.bufferOf(a.getK()), v = ctx.bufferOf(a.getV());
    Value seed = optionalBuffer(ctx, a.getRngSeed()), step = optionalBuffer(ctx, a.getStep());
    Value out = resultBuffer(ctx, loc, a.getResult());
    Value lse = resultBuffer(ctx, loc, a.getLse());
    kern::AttentionOp::create(b, loc, q, k, v, seed, step, out, lse, a.getScaleAttr(),
                              a.getCausalAttr(), a.getDropoutRateAttr(), a.getOpIdAttr(),
                              /*sizes=*/nullptr, /*layout=*/nullptr);
    return success();
  }
  if (auto g = dyn_cast<tg::AttentionGradOp>(op)) {
    Value q = ctx.bufferOf(g.getQ()), k = ctx.bufferOf(g.getK()), v = ctx.bufferOf(g.getV());
    Value out = ctx.bufferOf(g.getOut()), lse = ctx.bufferOf(g.getLse());
    Value grad = ctx.bufferOf(g.getGrad());
    Value seed = optionalBuffer(ctx, g.getRngSeed()), step = optionalBuffer(ctx, g.getStep());
    Value dq = resultBuffer(ctx, loc, g.getDq());
    Value dk = resultBuffer(ctx, loc, g.getDk());
    Value dv = resultBuffer(ctx, loc, g.getDv());
    auto qt = cast<RankedTensorType>(g.getQ().getType());
    auto kt = cast<RankedTensorType>(g.getK().getType());
    int64_t floats = kern::attentionBackwardWorkspaceFloats(
        qt.getDimSize(0), qt.getDimSize(1), kt.getDimSize(1), qt.getDimSize(2),
        kt.getDimSize(2), qt.getDimSize(3), ctx.deterministic);
    Value workspace =
        ctx.allocate(loc, MemRefType::get({floats}, Float32Type::get(op->getContext())));
    kern::AttentionGradOp::create(
        b, loc, q, k, v, out, lse, grad, seed, step, dq, dk, dv, workspace, g.getScaleAttr(),
        g.getCausalAttr(), g.getDropoutRateAttr(), g.getOpIdAttr(),
        ctx.deterministic ? b.getUnitAttr() : UnitAttr(), /*sizes=*/nullptr, /*layout=*/nullptr);
    return success();
  }
  return op->emitError("tg-lower-to-kern: not an attention op: ") << op->getName();
}

} // namespace tcc
