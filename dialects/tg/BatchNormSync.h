// Synchronized batch norm (torch.nn.SyncBatchNorm) for data-parallel
// steps: a tg.batch_norm marked with the unit attribute kBatchNormSyncAttr
// takes its statistics over the global batch, all the ranks' rows, in
// @train_step of a data-parallel module (tcc compile --data-parallel).
//
// The ranks' shares of the batch are equal (data parallelism's rows), so
// with n values per channel on each rank:
//   mean_g = mean over ranks of mean_r                     (an all-reduce)
//   var_g  = mean over ranks of var_r + (mean_r - mean_g)^2 (an all-reduce)
// the second being exact (Chan's combination of equal counts: no
// cancellation, both terms >= 0). tg-decompose writes this after
// tg.batch_norm_stats. In the backward, the input gradient's two sums
// are the global ones: their mean over the ranks (one all-reduce of the
// two, concatenated) divided by the local n is the global sum divided by
// the global count, as rstd * w * (g - sum(g)/n - x_hat sum(g x_hat)/n)
// needs; the weight and bias gradients stay this rank's own sums, which
// tg-all-reduce-gradients averages like every gradient (PyTorch's
// SyncBatchNorm + DDP compute the same).
//
// Elsewhere (eval; without --data-parallel tcc compile drops the mark) a
// marked batch norm is an ordinary one; PyTorch's SyncBatchNorm likewise
// syncs only in training.
// The running variance's n / (n - 1) uses this rank's n (PyTorch's the
// global count: a difference below 1 / n relative).
#ifndef TCC_DIALECTS_TG_BATCHNORMSYNC_H
#define TCC_DIALECTS_TG_BATCHNORMSYNC_H

#include "dialects/common/ModelAttrs.h"
#include "dialects/tg/TgDialect.h"
#include "dialects/tg/TgStructuralBuilders.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace tcc::tg {

// On a tg.batch_norm: take the statistics over the data-parallel ranks.
inline constexpr llvm::StringLiteral kBatchNormSyncAttr = "tg.sync_ranks";

// Whether `bn` synchronizes: marked, and (for its forward statistics,
// which tg-decompose writes in every function) in @train_step. Its gradient
// rule, which runs only to build @train_step's backward (on the op in a
// copy of @forward), asks with inTrainStepOnly false. The marks live only
// in data-parallel modules: tcc compile removes them otherwise
// (annotateModule, compiler/pipeline/Pipeline.cpp).
inline bool syncsOverRanks(mlir::Operation *bn, bool inTrainStepOnly = true) {
  if (!bn->hasAttr(kBatchNormSyncAttr))
    return false;
  auto f = bn->getParentOfType<mlir::func::FuncOp>();
  return !inTrainStepOnly || (f && f.getSymName() == model::kTrainStepFunc);
}

inline mlir::Value allReduceMean(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v) {
  return AllReduceOp::create(b, loc, v.getType(), v, b.getStringAttr("mean"));
}

// (mean_r, var_r) of this rank -> (mean_g, var_g) of the global batch.
inline std::pair<mlir::Value, mlir::Value>
globalBatchNormStats(mlir::OpBuilder &b, mlir::Location loc, mlir::Value mean,
                     mlir::Value var) {
  mlir::Value globalMean = allReduceMean(b, loc, mean);
  mlir::Value apart = build::sub(b, loc, mean, globalMean);
  mlir::Value spread = build::add(b, loc, var, build::mul(b, loc, apart, apart));
  return {globalMean, allReduceMean(b, loc, spread)};
}

// The two (C) gradient sums -> their means over the ranks, in one
// all-reduce.
inline std::pair<mlir::Value, mlir::Value>
globalGradSums(mlir::OpBuilder &b, mlir::Location loc, mlir::Value gradSum,
               mlir::Value gradXhatSum) {
  int64_t c = mlir::cast<mlir::RankedTensorType>(gradSum.getType()).getDimSize(0);
  mlir::Value both =
      allReduceMean(b, loc, build::concat(b, loc, mlir::ValueRange{gradSum, gradXhatSum}, 0));
  return {build::sliceAxis(b, loc, both, 0, 0, c), build::sliceAxis(b, loc, both, 0, c, c)};
}

} // namespace tcc::tg

#endif // TCC_DIALECTS_TG_BATCHNORMSYNC_H
