// Type-inferring builders for tg ops, and the primitive expansions of the
// composite NN ops (softmax, log_softmax, cross_entropy, layer_norm,
// rms_norm, causal_mask, split).
//
// The expansions are shared by tg-decompose (passes/lowering/Decompose.cpp)
// and by the gradient rules in TgStructuralGradients.cpp: a gradient that needs,
// say, the normalized input of a layer_norm rebuilds it with the very ops
// the decomposition of the forward op emits, so CSE after tg-decompose
// merges the two copies.
#ifndef TCC_DIALECTS_TG_TGSTRUCTURALBUILDERS_H
#define TCC_DIALECTS_TG_TGSTRUCTURALBUILDERS_H

#include <optional>

#include "dialects/tg/TgDialect.h"
#include "mlir/IR/Builders.h"

namespace tcc::tg {

// The result shape of a (batched) matmul: broadcast batch dimensions, then
// (M, N); nullopt when ranks are < 2, K differs or batches do not broadcast.
std::optional<llvm::SmallVector<int64_t>>
matmulShape(llvm::ArrayRef<int64_t> lhs, llvm::ArrayRef<int64_t> rhs,
            bool transposeLhs, bool transposeRhs);

namespace build {

mlir::RankedTensorType tensorOf(llvm::ArrayRef<int64_t> shape,
                                mlir::Type elementType);
// A splat constant of `type` (float or integer element type).
mlir::Value splat(mlir::OpBuilder &b, mlir::Location loc,
                  mlir::RankedTensorType type, double value);
// A 0-d constant of `elementType`.
mlir::Value scalar(mlir::OpBuilder &b, mlir::Location loc,
                   mlir::Type elementType, double value);

// `x` converted to `elementType` (tg.cast; `x` itself when it has that type).
mlir::Value castTo(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                   mlir::Type elementType);
// bf16 and f16: stored in 16 bits; their statistics (softmax sums, norm
// moments) are computed in f32 by the expansions below.
bool isHalfFloat(mlir::Type elementType);

// Elementwise ops; binary ones broadcast like numpy.
mlir::Value add(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                mlir::Value y);
mlir::Value sub(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                mlir::Value y);
mlir::Value mul(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                mlir::Value y);
mlir::Value div(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                mlir::Value y);
mlir::Value maximum(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                    mlir::Value y);
mlir::Value neg(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x);
mlir::Value exp(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x);
mlir::Value log(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x);
mlir::Value rsqrt(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x);
// Comparisons: an i1 tensor of the broadcast shape.
mlir::Value equal(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                  mlir::Value y);
mlir::Value notEqual(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                     mlir::Value y);
mlir::Value less(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                 mlir::Value y);
mlir::Value greater(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                    mlir::Value y);
mlir::Value greaterEqual(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                         mlir::Value y);
// cond ? x : y, broadcasting all three.
mlir::Value select(mlir::OpBuilder &b, mlir::Location loc, mlir::Value cond,
                   mlir::Value x, mlir::Value y);
// 1.0 where `cond`, else 0.0, as `elementType`.
mlir::Value indicator(mlir::OpBuilder &b, mlir::Location loc, mlir::Value cond,
                      mlir::Type elementType);
// Positions along `axis` of a tensor of `type`.
mlir::Value iota(mlir::OpBuilder &b, mlir::Location loc,
                 mlir::RankedTensorType type, int64_t axis);

// Structural ops.
mlir::Value matmul(mlir::OpBuilder &b, mlir::Location loc, mlir::Value lhs,
                   mlir::Value rhs, bool transposeLhs, bool transposeRhs);
mlir::Value reduceSum(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                      llvm::ArrayRef<int64_t> axes, bool keepDims);
mlir::Value reduceMean(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                       llvm::ArrayRef<int64_t> axes, bool keepDims);
mlir::Value reduceMax(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                      llvm::ArrayRef<int64_t> axes, bool keepDims);
// Sum of every element: a 0-d tensor.
mlir::Value reduceAll(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x);
mlir::Value reshape(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                    llvm::ArrayRef<int64_t> shape);
mlir::Value transpose(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                      llvm::ArrayRef<int64_t> perm);
mlir::Value slice(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                  llvm::ArrayRef<int64_t> starts, llvm::ArrayRef<int64_t> ends);
// `x` along `axis` from `start`, `size` long; other dimensions whole.
mlir::Value sliceAxis(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                      int64_t axis, int64_t start, int64_t size);
mlir::Value concat(mlir::OpBuilder &b, mlir::Location loc,
                   mlir::ValueRange inputs, int64_t axis);
// `x` placed at `starts` in zeros of `type` (the gradient of a slice).
mlir::Value padWithZeros(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                         mlir::RankedTensorType type,
                         llvm::ArrayRef<int64_t> starts);

//===----------------------------------------------------------------------===//
// Expansions of the composite ops into primitives
//===----------------------------------------------------------------------===//

// softmax along `axis`: e / sum(e) with e = exp(x - max(x)). A bf16/f16 `x`
// is expanded in f32 (max, exponentials and sum in f32) and the result
// rounded to x's type once; so is log_softmax.
mlir::Value softmax(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                    int64_t axis);
// log_softmax along `axis`: (x - max(x)) - log(sum(exp(x - max(x)))).
mlir::Value logSoftmax(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                       int64_t axis);

// The pieces of cross_entropy(logits (..., C), targets (...)) that its
// value and its gradient share.
struct CrossEntropyParts {
  mlir::Value oneHot;      // (..., C): 1.0 at [p, targets[p]]
  mlir::Value weights;     // (..., 1): 1.0 where counted; null without ignore_index
  mlir::Value denominator; // scalar: positions counted, at least 1
};
CrossEntropyParts crossEntropyParts(mlir::OpBuilder &b, mlir::Location loc,
                                    mlir::Value logits, mlir::Value targets,
                                    std::optional<int64_t> ignoreIndex);
// The loss: -sum(log_softmax(logits) * oneHot * weights) / denominator, or
// NaN when a counted target lies outside [0, C) (after decomposition nothing
// else could report it; the loss check of the runtime then fails the step).
mlir::Value crossEntropy(mlir::OpBuilder &b, mlir::Location loc,
                         mlir::Value logits, mlir::Value targets,
                         std::optional<int64_t> ignoreIndex);

// layer_norm and rms_norm over the last axis, without weight and bias:
// `normalized` = x_hat, and `invStd` the (..., 1) factor that made it.
struct NormParts {
  mlir::Value normalized;
  mlir::Value invStd;
};
NormParts layerNormParts(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                         double eps);
NormParts rmsNormParts(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                       double eps);
// The primitive expansion of tg.layer_norm_grad (centered) and
// tg.rms_norm_grad: {input_grad, weight_grad (with a weight), bias_grad
// (with withBias)}, computed in x's type (grad is cast to it). The fused
// ops are checked against it (tests/gradcheck/NormGradTest.cpp).
llvm::SmallVector<mlir::Value> normGradExpansion(mlir::OpBuilder &b, mlir::Location loc,
                                                 mlir::Value grad, mlir::Value x,
                                                 mlir::Value weight, bool withBias,
                                                 double eps, bool centered);
// tg.batch_norm's pieces (TgBatchNormOps.td), x (N, C, ...): the
// statistics' element type (f32 for 16-bit x, else x's), a (C) vector
// reshaped to (1, C, 1, ...) of rank `rank`, rstd = rsqrt(var + eps) (C),
// the normalized and scaled x (computed in the statistics' type, stored in
// x's), and the input gradient given tg.batch_norm_grad_sums' two sums.
// weight / bias may be null.
mlir::Type batchNormStatsType(mlir::Type inputElement);
mlir::Value perChannel(mlir::OpBuilder &b, mlir::Location loc, mlir::Value vector,
                       int64_t rank);
mlir::Value batchNormRstd(mlir::OpBuilder &b, mlir::Location loc, mlir::Value var, double eps);
mlir::Value batchNormNormalize(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                               mlir::Value mean, mlir::Value rstd, mlir::Value weight,
                               mlir::Value bias);
mlir::Value batchNormInputGrad(mlir::OpBuilder &b, mlir::Location loc, mlir::Value grad,
                               mlir::Value x, mlir::Value mean, mlir::Value rstd,
                               mlir::Value weight, mlir::Value gradSum,
                               mlir::Value gradXhatSum);
// x_hat * weight + bias, each optional (null).
mlir::Value affine(mlir::OpBuilder &b, mlir::Location loc, mlir::Value normalized,
                   mlir::Value weight, mlir::Value bias);

// causal_mask through iota, compare and select.
mlir::Value causalMask(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                       double value);

// split as one slice per piece.
llvm::SmallVector<mlir::Value> splitIntoSlices(mlir::OpBuilder &b,
                                              mlir::Location loc,
                                              mlir::Value x, int64_t axis,
                                              mlir::TypeRange pieceTypes);

} // namespace build
} // namespace tcc::tg

#endif
