//===- TgBatchNormOps.td - batch normalization (statistics over N, spatial) -===//
//
// Part of the tg dialect (TgOps.td includes this file). Training-mode batch
// norm: per-channel (axis 1) statistics over every other axis, so one
// channel's values are N strided runs of the spatial size S. The importer
// writes torch.nn.BatchNorm*d's training branch as tg.batch_norm (its eval
// branch, running statistics, stays in primitives); its gradient rule and
// tg-decompose write it with the two reductions below plus elementwise
// primitives, so a step reads x twice forward (statistics, normalize) and
// grad / x twice backward (sums, input gradient), with the elementwise
// neighbours (ReLU, residual add) fused into the passes that normalize.
// Verifiers, gradient rule: TgBatchNormOps.cpp; expansions:
// TgStructuralBuilders.h (batchNormNormalize, batchNormInputGrad).
//
//===----------------------------------------------------------------------===//

def Tg_BatchNormOp : Tg_Op<"batch_norm", [AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<Tg_GradientOpInterface>]> {
  let summary = "training-mode batch norm: per-channel statistics over N and the spatial axes";
  let description = [{
    input (N, C, ...) with rank >= 2; per channel c, over the n = N * S
    values of every other axis: `mean`, biased `var` (PyTorch's batch
    statistics), and `result = (x - mean) / sqrt(var + eps) * weight + bias`
    (weight, bias (C), each optional, any float type). result has input's
    type; mean and var are (C) in the statistics' type: f32 for a 16-bit
    input, else input's. mean and var feed the running statistics' update;
    their gradients (if they reach a loss) are part of the rule.
  }];
  let arguments = (ins Tg_FloatTensor:$input,
                   Optional<Tg_FloatTensor>:$weight,
                   Optional<Tg_FloatTensor>:$bias,
                   DefaultValuedAttr<F64Attr, "1e-5">:$eps);
  let results = (outs Tg_FloatTensor:$result, Tg_FloatTensor:$mean, Tg_FloatTensor:$var);
  let assemblyFormat = [{
    $input (`weight` $weight^)? (`bias` $bias^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

// The statistics pass of tg.batch_norm (tg-decompose emits it).
def Tg_BatchNormStatsOp : Tg_Op<"batch_norm_stats"> {
  let summary = "per-channel mean and biased variance of (N, C, ...) over every axis but 1";
  let description = [{
    mean and var are (C), f32 for a 16-bit input, else input's type. One
    read of input (the kernels sum x - x[0, c, 0...] and its square: the
    shift keeps the variance exact for channels whose mean is large
    against their spread).
  }];
  let arguments = (ins Tg_FloatTensor:$input);
  let results = (outs Tg_FloatTensor:$mean, Tg_FloatTensor:$var);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($mean) `,` type($var)";
  let hasVerifier = 1;
}

// The reduction pass of tg.batch_norm's gradient (its gradient rule emits it).
def Tg_BatchNormGradSumsOp : Tg_Op<"batch_norm_grad_sums"> {
  let summary = "per-channel sum(grad) and sum(grad * (x - mean) * rstd)";
  let description = [{
    grad and input (N, C, ...) of one shape (any float types); mean and
    rstd (C) of the statistics' type, which grad_sum and grad_xhat_sum (C)
    have too. They are bias_grad and weight_grad of tg.batch_norm, and the
    two terms of its input gradient.
  }];
  let arguments = (ins Tg_FloatTensor:$grad, Tg_FloatTensor:$input,
                   Tg_FloatTensor:$mean, Tg_FloatTensor:$rstd);
  let results = (outs Tg_FloatTensor:$grad_sum, Tg_FloatTensor:$grad_xhat_sum);
  let assemblyFormat = [{
    $grad `,` $input `,` $mean `,` $rstd attr-dict `:` type($grad) `,` type($input) `,`
    type($mean) `,` type($rstd) `->` type($grad_sum) `,` type($grad_xhat_sum)
  }];
  let hasVerifier = 1;
}
