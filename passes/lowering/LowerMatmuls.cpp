// tg.matmul and the fused products -> kern GEMM ops (LowerMatmuls.h).
#include "passes/lowering/LowerMatmuls.h"

#include "dialects/common/ModelAttrs.h"
#include "dialects/kern/KernDialect.h"
#include "dialects/tg/TgDialect.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace tcc {

namespace {

// `buffer` seen as the (rows, columns) matrix of its last dimension.
Value matrixView(OpBuilder &b, Location loc, Value buffer, int64_t columns) {
  auto t = cast<MemRefType>(buffer.getType());
  if (t.getRank() == 2)
    return buffer;
  auto matrix = MemRefType::get({t.getNumElements() / columns, columns},
                                t.getElementType());
  return kern::ReshapeOp::create(b, loc, matrix, buffer);
}

// One (batch * M, K) x (K, N) product with its epilogue: the batch of a
// shared weight folds into the rows (tg-fuse-matmul-epilogue fuses
// nothing else).
// The (batch * M, K) and (K, N) matrix views of a fused product's lhs and
// rhs; fails (with an error on `op`) unless rhs is one weight matrix and
// a batched lhs is untransposed.
FailureOr<std::pair<Value, Value>> foldedOperands(BufferLoweringContext &ctx, Operation *op,
                                                  Value lhsValue, Value rhsValue,
                                                  bool transposeLhs) {
  auto lhs = cast<RankedTensorType>(lhsValue.getType());
  auto rhs = cast<RankedTensorType>(rhsValue.getType());
  if (llvm::any_of(rhs.getShape().drop_back(2), [](int64_t d) { return d != 1; }) ||
      (transposeLhs && lhs.getRank() > 2))
    return op->emitError("tg-lower-to-kern: ")
           << op->getName() << " needs one weight matrix and an untransposed batched lhs";
  Location loc = op->getLoc();
  Value a = ctx.bufferOf(lhsValue);
  if (lhs.getRank() > 2)
    a = matrixView(ctx.builder, loc, a, lhs.getShape().back());
  return std::make_pair(
      a, matrixView(ctx.builder, loc, ctx.bufferOf(rhsValue), rhs.getShape().back()));
}

LogicalResult lowerMatmulEpilogue(tg::MatmulEpilogueOp m, BufferLoweringContext &ctx) {
  Location loc = m.getLoc();
  FailureOr<std::pair<Value, Value>> ab =
      foldedOperands(ctx, m, m.getLhs(), m.getRhs(), m.getTransposeLhs());
  if (failed(ab))
    return failure();
  auto [a, b] = *ab;
  int64_t n = cast<RankedTensorType>(m.getResult().getType()).getShape().back();
  Value out = ctx.allocate(loc, bufferTypeOf(m.getResult().getType()));
  Value residual = m.getResidual() ? matrixView(ctx.builder, loc, ctx.bufferOf(m.getResidual()), n)
                                   : Value();
  Value aux;
  if (Value pre = m.getPreActivation(); pre && !pre.use_empty()) {
    Value preBuffer = ctx.allocate(loc, bufferTypeOf(pre.getType()));
    ctx.buffers[pre] = preBuffer;
    aux = matrixView(ctx.builder, loc, preBuffer, n);
  }
  auto gemm = kern::GemmEpilogueOp::create(
      ctx.builder, loc, a, b, m.getBias() ? ctx.bufferOf(m.getBias()) : Value(), residual, matrixView(ctx.builder, loc, out, n), aux,
      ctx.builder.getBoolAttr(m.getTransposeLhs()), ctx.builder.getBoolAttr(m.getTransposeRhs()),
      ctx.builder.getStringAttr(m.getActivation()));
  if (auto fp8 = m->getAttr(model::kFp8Attr)) // a residual-only epilogue (Fp8Gemm.h)
    gemm->setAttr(model::kFp8GemmAttr, fp8);
  ctx.buffers[m.getResult()] = out;
  return success();
}

// gelu'(pre) * product: one (batch * M, K) x (K, N) product, as above.
LogicalResult lowerMatmulDgelu(tg::MatmulDgeluOp m, BufferLoweringContext &ctx) {
  Location loc = m.getLoc();
  FailureOr<std::pair<Value, Value>> ab =
      foldedOperands(ctx, m, m.getLhs(), m.getRhs(), m.getTransposeLhs());
  if (failed(ab))
    return failure();
  auto [a, b] = *ab;
  int64_t n = cast<RankedTensorType>(m.getResult().getType()).getShape().back();
  Value out = ctx.allocate(loc, bufferTypeOf(m.getResult().getType()));
  kern::GemmDgeluOp::create(ctx.builder, loc, a, b, matrixView(ctx.builder, loc, ctx.bufferOf(m.getPre()), n),
                            matrixView(ctx.builder, loc, out, n), ctx.builder.getBoolAttr(m.getTransposeLhs()),
                            ctx.builder.getBoolAttr(m.getTransposeRhs()),
                            ctx.builder.getStringAttr(m.getApproximate()));
  ctx.buffers[m.getResult()] = out;
  return success();
}

// dW = op(lhs) x rhs and db = the sums of rhs over its rows: one product
// (rank-2 operands, the op's verifier).
LogicalResult lowerMatmulBiasGrad(tg::MatmulBiasGradOp m, BufferLoweringContext &ctx) {
  Location loc = m.getLoc();
  Value out = ctx.allocate(loc, bufferTypeOf(m.getResult().getType()));
  Value grad = ctx.allocate(loc, bufferTypeOf(m.getBiasGrad().getType()));
  kern::GemmBiasGradOp::create(ctx.builder, loc, ctx.bufferOf(m.getLhs()), ctx.bufferOf(m.getRhs()), out, grad,
                               ctx.builder.getBoolAttr(m.getTransposeLhs()));
  ctx.buffers[m.getResult()] = out;
  ctx.buffers[m.getBiasGrad()] = grad;
  return success();
}

// One plain product; tg-amp's fp8 decision travels to codegen (Fp8Gemm.h).
LogicalResult lowerMatmul(tg::MatmulOp m, BufferLoweringContext &ctx) {
  Location loc = m.getLoc();
  Value out = ctx.allocate(loc, bufferTypeOf(m.getResult().getType()));
  auto gemm = kern::GemmOp::create(ctx.builder, loc, ctx.bufferOf(m.getLhs()),
                                   ctx.bufferOf(m.getRhs()), out, m.getTransposeLhsAttr(),
                                   m.getTransposeRhsAttr(), ctx.builder.getF64FloatAttr(1.0),
                                   ctx.builder.getF64FloatAttr(0.0));
  if (auto fp8 = m->getAttr(model::kFp8Attr))
    gemm->setAttr(model::kFp8GemmAttr, fp8);
  ctx.buffers[m.getResult()] = out;
  return success();
}

} // namespace

bool isLoweredAsMatmul(Operation *op) {
  return isa<tg::MatmulOp, tg::MatmulEpilogueOp, tg::MatmulDgeluOp, tg::MatmulBiasGradOp>(op);
}

LogicalResult lowerMatmulOp(Operation *op, BufferLoweringContext &ctx) {
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](tg::MatmulOp m) { return lowerMatmul(m, ctx); })
      .Case([&](tg::MatmulEpilogueOp m) { return lowerMatmulEpilogue(m, ctx); })
      .Case([&](tg::MatmulDgeluOp m) { return lowerMatmulDgelu(m, ctx); })
      .Case([&](tg::MatmulBiasGradOp m) { return lowerMatmulBiasGrad(m, ctx); })
      .Default([](Operation *other) {
        return other->emitError("tg-lower-to-kern: not a matrix product: ")
               << other->getName();
      });
}

} // namespace tcc
