//===- TgStructuralOps.td - linear algebra, reductions, shapes, NN ops -===//
//
// Part of the tg dialect (TgOps.td includes this file).
//
// Axis attributes are normalized (non-negative) here; the importer turns the
// model file's negative axes into these. Composite NN ops (softmax,
// log_softmax, cross_entropy, causal_mask, split) are rewritten into
// primitives by tg-decompose (passes/lowering/Decompose.cpp) after
// autodiff, so lowering sees fewer kinds of ops. layer_norm, rms_norm and
// their gradients stay whole: each lowers to one fused kernel.
//
//===----------------------------------------------------------------------===//

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

def Tg_MatmulOp : Tg_Op<"matmul", [
    DeclareOpInterfaceMethods<Tg_GradientOpInterface>]> {
  let summary = "batched matrix product with optional transposes";
  let description = [{
    `result = op(lhs) x op(rhs)` on the last two dimensions, where op
    transposes them when the flag is set: op(lhs) is (..., M, K), op(rhs) is
    (..., K, N) and the result is (batch..., M, N). The leading (batch)
    dimensions broadcast like numpy's matmul; in particular a rank-2 rhs is
    shared by every matrix of a batched lhs.
  }];
  let arguments = (ins Tg_FloatTensor:$lhs, Tg_FloatTensor:$rhs,
                   DefaultValuedAttr<BoolAttr, "false">:$transpose_lhs,
                   DefaultValuedAttr<BoolAttr, "false">:$transpose_rhs);
  let results = (outs Tg_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Tg_MatmulEpilogueOp : Tg_Op<"matmul_epilogue", [AttrSizedOperandSegments]> {
  let summary = "matmul with its bias, activation and residual add fused (one GEMM)";
  let description = [{
    With p = matmul(lhs, rhs) (tg.matmul's transposes and shapes; p is
    (batch..., M, N) of the operands' element type P) and `bias` (N):

      pre    = p + bias                        (broadcast over the rows;
                                                pre = p without a bias)
      act    = pre, gelu_tanh(pre) or gelu_erf(pre)   (`activation`)
      result = act                              (no residual; type of p)
      result = residual + act                   (residual: p's shape, its own
                                                 float type R, e.g. f32 with
                                                 bf16 operands)
      result = pre in f32                       (16-bit operands, no residual
                                                 and no activation: the
                                                 accumulator kept, as
                                                 tg-chunk-loss-head's dW sums)

    `bias` has the result's element type (P, or R with a residual). It
    may be left out only with a residual and no activation (a bias-free
    layer's product added to the residual stream, as in LLaMA).
    `pre_activation` (only with an activation) is `pre`, of p's type: what
    the backward's gelu_grad reads. Everything is computed in the
    accumulator's precision (f32 for 16-bit and f32 operands, f64 for f64)
    and rounded once to each result's type, where the unfused graph rounds
    after each op.

    tg-fuse-matmul-epilogue creates this op after the training recipe
    (autodiff has already run), so it has no gradient rule: tg-autodiff
    refuses it. Lowered to kern.gemm_epilogue (cuBLASLt epilogues on cuda,
    a product plus an epilogue loop on cpu).
  }];
  let arguments = (ins Tg_FloatTensor:$lhs, Tg_FloatTensor:$rhs,
                   Optional<Tg_FloatTensor>:$bias, Optional<Tg_FloatTensor>:$residual,
                   DefaultValuedAttr<BoolAttr, "false">:$transpose_lhs,
                   DefaultValuedAttr<BoolAttr, "false">:$transpose_rhs,
                   DefaultValuedAttr<StrAttr, "\"none\"">:$activation);
  let results = (outs Tg_FloatTensor:$result,
                      Optional<Tg_FloatTensor>:$pre_activation);
  let assemblyFormat = [{
    $lhs `,` $rhs (`bias` $bias^)? (`residual` $residual^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Tg_MatmulDgeluOp : Tg_Op<"matmul_dgelu"> {
  let summary = "gelu_grad(pre, matmul(lhs, rhs)) as one GEMM (the backward's GELU epilogue)";
  let description = [{
    result = gelu'(pre) * matmul(lhs, rhs): tg.gelu_grad of the product (the
    upstream gradient) at the saved pre-activation `pre`, which has the
    product's shape and type. `approximate` is tg.gelu's ("tanh" or "none",
    the erf form). Computed in the accumulator's precision, rounded once.
    tg-fuse-matmul-epilogue creates it after autodiff (no gradient rule:
    tg-autodiff refuses it); lowered to kern.gemm_dgelu (cuBLASLt's DGELU
    epilogue reading pre as its aux matrix; cpu: product + one loop).
  }];
  let arguments = (ins Tg_FloatTensor:$lhs, Tg_FloatTensor:$rhs,
                   Tg_FloatTensor:$pre,
                   DefaultValuedAttr<BoolAttr, "false">:$transpose_lhs,
                   DefaultValuedAttr<BoolAttr, "false">:$transpose_rhs,
                   DefaultValuedAttr<StrAttr, "\"none\"">:$approximate);
  let results = (outs Tg_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs `pre` $pre attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Tg_MatmulBiasGradOp : Tg_Op<"matmul_bias_grad"> {
  let summary = "a weight gradient and its bias gradient from one GEMM";
  let description = [{
    result = matmul(lhs, rhs) (tg.matmul's transposes; lhs and rhs rank 2,
    rhs not transposed: (K, N)) and bias_grad (N) = the sum of rhs over its
    K rows: the backward's dW = X^T dY of a linear layer and the bias
    gradient db = sum over the rows of dY, which reads the same dY. Both
    results have the operands' element type; each is accumulated in the
    accumulator's precision (f32 for 16-bit and f32 operands, f64 for f64)
    and rounded once. tg-fuse-matmul-epilogue creates it after autodiff
    from a tg.matmul and the tg.reduce_sum of its rhs over the rows (no
    gradient rule: tg-autodiff refuses it); lowered to kern.gemm_bias_grad
    (cuBLASLt's BGRADA epilogue on cuda: tcc's B is cuBLAS's A; cpu: the
    product plus one loop over rhs).
  }];
  let arguments = (ins Tg_FloatTensor:$lhs, Tg_FloatTensor:$rhs,
                   DefaultValuedAttr<BoolAttr, "false">:$transpose_lhs);
  let results = (outs Tg_FloatTensor:$result, Tg_FloatTensor:$bias_grad);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

def Tg_SoftmaxCrossEntropyOp : Tg_Op<"softmax_cross_entropy", [
    DeclareOpInterfaceMethods<Tg_GradientOpInterface>]> {
  let summary = "per-row cross-entropy of softmax(logits) against integer labels";
  let description = [{
    logits is (N, C), labels is (N) with values in [0, C); the result (N) is
    `logsumexp(logits[n]) - logits[n, labels[n]]`. Labels get no gradient.
  }];
  let arguments = (ins Tg_FloatTensor:$logits, Tg_IndexTensor:$labels);
  let results = (outs Tg_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $labels attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Tg_AllReduceOp : Tg_Op<"all_reduce", [AllTypesMatch<["input", "result"]>]> {
  let summary = "the sum or mean of a tensor over the data-parallel ranks";
  let description = [{
    result = the `reduction` ("sum" or "mean") over the ranks of each rank's
    `input`, elementwise: the same tensor on every rank. Made by
    tg-all-reduce-gradients on @train_step's gradients and loss (tcc
    compile --data-parallel); the step calls the runtime's collectives
    (tcc_step_abi.h: tcc_collectives), and with none (one rank) the result
    is the input. The reference interpreter is one rank: the identity. No
    gradient rule (made after autodiff).
  }];
  let arguments = (ins Tg_FloatTensor:$input, StrAttr:$reduction);
  let results = (outs Tg_FloatTensor:$result);
  let assemblyFormat = [{
    $input attr-dict `:` type($input)
  }];
  let hasVerifier = 1;
}

// ZeRO-1 (tcc compile --shard-optimizer N): made by tg-all-reduce-gradients
// and the optimizer passes, after autodiff (no gradient rules). A shard is
// this rank's 1/N of a tensor's flattened elements: elements
// [rank * n / N, (rank + 1) * n / N) of n; `ranks` (N) must divide n. The
// rank is known only at run time (tcc_collectives.rank). The reference
// interpreter is one rank: it runs these ops with ranks = 1 only.
def Tg_ReduceScatterOp : Tg_Op<"reduce_scatter"> {
  let summary = "this rank's shard of the sum or mean over the ranks";
  let description = [{
    result (1-D, n / ranks elements) = this rank's shard of the
    `reduction` ("sum" or "mean") over the ranks of each rank's `input`
    (n elements). Calls tcc_collectives.reduce_scatter.
  }];
  let arguments = (ins Tg_FloatTensor:$input, StrAttr:$reduction, I64Attr:$ranks);
  let results = (outs Tg_FloatTensor:$result);
  let assemblyFormat = [{
    $input attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Tg_RankShardOp : Tg_Op<"rank_shard"> {
  let summary = "this rank's shard of a tensor (no exchange)";
  let description = [{
    result (1-D, n / ranks elements) = elements [rank * n / ranks,
    (rank + 1) * n / ranks) of the flattened `input` (n elements): the part
    of a parameter whose optimizer update this rank owns.
  }];
  let arguments = (ins Tg_FloatTensor:$input, I64Attr:$ranks);
  let results = (outs Tg_FloatTensor:$result);
  let assemblyFormat = [{
    $input attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Tg_AllGatherOp : Tg_Op<"all_gather"> {
  let summary = "every rank's shard, concatenated in rank order";
  let description = [{
    result (any shape of n elements) = the ranks' `input` shards (1-D,
    n / ranks elements each) in rank order, reshaped: the updated parameter
    from each rank's updated shard. Calls tcc_collectives.all_gather.
  }];
  let arguments = (ins Tg_FloatTensor:$input, I64Attr:$ranks);
  let results = (outs Tg_FloatTensor:$result);
  let assemblyFormat = [{
    $input attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Tg_SoftmaxCrossEntropyGradOp : Tg_Op<"softmax_cross_entropy_grad"> {
  let summary = "d(loss)/d(logits): (softmax(logits) - onehot(labels)) * grad[n]";
  let arguments = (ins Tg_FloatTensor:$logits, Tg_IndexTensor:$labels,
                   Tg_FloatTensor:$grad);
  let results = (outs Tg_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $labels `,` $grad attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Tg_CrossEntropyOp : Tg_Op<"cross_entropy", [
    DeclareOpInterfaceMethods<Tg_GradientOpInterface>]> {
  let summary = "mean cross-entropy of softmax(logits) against integer targets";
  let description = [{
    logits is (..., C), targets is (...) with values in [0, C). The scalar
    result is the mean of `logsumexp(logits[p]) - logits[p, targets[p]]`
    over the positions p whose target differs from `ignore_index` (when
    set). When every position is ignored the loss is 0 (and so is the
    gradient). Targets get no gradient.
  }];
  let arguments = (ins Tg_FloatTensor:$logits, Tg_IndexTensor:$targets,
                   OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Tg_ScalarFloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $targets attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    // ignore_index as a signed value, when set.
    std::optional<int64_t> ignoreIndex() {
      if (auto attr = getIgnoreIndexAttr())
        return attr.getInt();
      return std::nullopt;
    }
  }];
}

//===----------------------------------------------------------------------===//
// Normalization and attention
//===----------------------------------------------------------------------===//

class Tg_AxisOp<string mnemonic> : Tg_Op<mnemonic, [SameOperandsAndResultType,
    DeclareOpInterfaceMethods<Tg_GradientOpInterface>]> {
  let arguments = (ins Tg_FloatTensor:$input, I64Attr:$axis);
  let results = (outs Tg_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Tg_SoftmaxOp : Tg_AxisOp<"softmax"> {
  let summary = "exp(x) / sum(exp(x)) along `axis`";
}

def Tg_LogSoftmaxOp : Tg_AxisOp<"log_softmax"> {
  let summary = "x - log(sum(exp(x))) along `axis`";
}

def Tg_LayerNormOp : Tg_Op<"layer_norm", [AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<Tg_GradientOpInterface>]> {
  let summary = "normalization over the last axis, optional scale and shift";
  let description = [{
    `(x - mean(x)) / sqrt(var(x) + eps) * weight + bias` over the last axis
    (biased variance, like PyTorch). weight and bias are (C), C the size of
    the last axis; each is optional.
  }];
  let arguments = (ins Tg_FloatTensor:$input,
                   Optional<Tg_FloatTensor>:$weight,
                   Optional<Tg_FloatTensor>:$bias,
                   DefaultValuedAttr<F64Attr, "1e-5">:$eps);
  let results = (outs Tg_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`weight` $weight^)? (`bias` $bias^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Tg_RmsNormOp : Tg_Op<"rms_norm", [
    DeclareOpInterfaceMethods<Tg_GradientOpInterface>]> {
  let summary = "x / sqrt(mean(x^2) + eps) * weight over the last axis";
  let description = [{
    weight is (C), C the size of the last axis, and optional.
  }];
  let arguments = (ins Tg_FloatTensor:$input,
                   Optional<Tg_FloatTensor>:$weight,
                   DefaultValuedAttr<F64Attr, "1e-6">:$eps);
  let results = (outs Tg_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`weight` $weight^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

// The fused gradients of layer_norm / rms_norm (their gradient rules emit
// them; TgStructuralGradients.cpp). The statistics are recomputed from
// `input`: the forward op keeps its single result.
def Tg_LayerNormGradOp : Tg_Op<"layer_norm_grad", [AttrSizedResultSegments]> {
  let summary = "d input, d weight, d bias of tg.layer_norm from d result";
  let description = [{
    With x_hat = (x - mean(x)) * r, r = 1 / sqrt(var(x) + eps) over the last
    axis and dx_hat = grad * weight (grad without weight):
    `input_grad = r * (dx_hat - mean(dx_hat) - x_hat * mean(dx_hat * x_hat))`;
    `weight_grad` = sum over rows of grad * x_hat, `bias_grad` = sum over rows
    of grad, each present when asked for (result types). grad has input's
    shape and any float type (tg-amp's 16-bit gradients are read as they
    are); input_grad has input's type; weight, weight_grad and bias_grad are
    (C) of input's element type. Math in f32 (f64 for f64 input).
  }];
  let arguments = (ins Tg_FloatTensor:$grad, Tg_FloatTensor:$input,
                   Optional<Tg_FloatTensor>:$weight, F64Attr:$eps);
  let results = (outs Tg_FloatTensor:$input_grad,
                  Optional<Tg_FloatTensor>:$weight_grad,
                  Optional<Tg_FloatTensor>:$bias_grad);
  let assemblyFormat = [{
    $grad `,` $input (`weight` $weight^)? attr-dict `:` type($grad) `,` type($input)
    (`weight` type($weight)^)? `->` type($input_grad) (`weight_grad` type($weight_grad)^)?
    (`bias_grad` type($bias_grad)^)?
  }];
  let hasVerifier = 1;
}

def Tg_RmsNormGradOp : Tg_Op<"rms_norm_grad"> {
  let summary = "d input, d weight of tg.rms_norm from d result";
  let description = [{
    With x_hat = x * r, r = 1 / sqrt(mean(x^2) + eps) over the last axis and
    dx_hat = grad * weight (grad without weight):
    `input_grad = r * (dx_hat - x_hat * mean(dx_hat * x_hat))`;
    `weight_grad` (present when asked for) = sum over rows of grad * x_hat.
    Types as tg.layer_norm_grad.
  }];
  let arguments = (ins Tg_FloatTensor:$grad, Tg_FloatTensor:$input,
                   Optional<Tg_FloatTensor>:$weight, F64Attr:$eps);
  let results = (outs Tg_FloatTensor:$input_grad,
                  Optional<Tg_FloatTensor>:$weight_grad);
  let assemblyFormat = [{
    $grad `,` $input (`weight` $weight^)? attr-dict `:` type($grad) `,` type($input)
    (`weight` type($weight)^)? `->` type($input_grad) (`weight_grad` type($weight_grad)^)?
  }];
  let hasVerifier = 1;
}

def Tg_CausalMaskOp : Tg_Op<"causal_mask", [SameOperandsAndResultType,
    DeclareOpInterfaceMethods<Tg_GradientOpInterface>]> {
  let summary = "sets the future positions of attention scores to `value`";
  let description = [{
    input is (..., T, S); position (i, j) of the last two dimensions becomes
    `value` (default -inf) where j > i + (S - T), so query i (the last T of
    S positions) sees keys up to its own position. Other positions are kept.
  }];
  let arguments = (ins Tg_FloatTensor:$input,
      DefaultValuedAttr<F64Attr, "-std::numeric_limits<double>::infinity()">:$value);
  let results = (outs Tg_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

// Flash attention: introduced by tg-fuse-attention (passes/fusion) from the
// written-out matmul / scale / mask / softmax / dropout / matmul chain.
class Tg_AttentionBase<string mnemonic, list<Trait> traits = []>
    : Tg_Op<mnemonic, !listconcat(traits, [AttrSizedOperandSegments])> {
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    // True when the op drops attention probabilities (rate > 0).
    bool hasDropout() { return getDropoutRate().convertToDouble() > 0; }
  }];
}

def Tg_AttentionOp : Tg_AttentionBase<"attention", [
    DeclareOpInterfaceMethods<Tg_GradientOpInterface>]> {
  let summary = "scaled dot-product attention, without the T x S matrices";
  let description = [{
    q is (B, H, T, D), k and v are (B, Hkv, S, D) with H a multiple of Hkv:
    query head h reads key/value head h / (H / Hkv) (grouped / multi-query
    attention; Hkv = H is ordinary multi-head attention). With
    `s[b,h,i,j] = scale * sum_d q[b,h,i,d] k[b,h',j,d]`:
    - `causal`: key j is masked for query i when j > i + (S - T), as
      tg.causal_mask (the last T of S positions);
    - `p = softmax_j(s)` over the unmasked keys;
    - dropout (`dropout_rate` > 0, with the `rng_seed` / `step` operands and
      `op_id`): p[b,h,i,j] is kept exactly where tg.dropout with the same
      operands and attributes keeps element ((b*H + h)*T + i)*S + j of a
      (B, H, T, S) tensor, and scaled by 1 / (1 - rate);
    - `result = p @ v`, (B, H, T, D), of q's type;
    - `lse[b,h,i] = log(sum_j exp(s[b,h,i,j]))` over the unmasked keys of
      the undropped scores, (B, H, T) in f32 (f64 when q is f64); -inf for
      a fully masked row, whose result is 0.
    lse is saved for attention_grad, which recomputes p from it: nothing of
    size T x S is stored.
  }];
  let arguments = (ins Tg_FloatTensor:$q, Tg_FloatTensor:$k, Tg_FloatTensor:$v,
                   Optional<Tg_I64ScalarTensor>:$rng_seed,
                   Optional<Tg_I64ScalarTensor>:$step,
                   F64Attr:$scale, UnitAttr:$causal,
                   DefaultValuedAttr<F64Attr, "0.0">:$dropout_rate,
                   OptionalAttr<I64Attr>:$op_id);
  let results = (outs Tg_FloatTensor:$result, Tg_FloatTensor:$lse);
  let assemblyFormat = [{
    $q `,` $k `,` $v (`dropout` `(` $rng_seed^ `,` $step `)`)? attr-dict `:`
    functional-type(operands, results)
  }];
}

def Tg_AttentionGradOp : Tg_AttentionBase<"attention_grad"> {
  let summary = "gradients of tg.attention from its saved lse (no T x S buffers)";
  let description = [{
    Operands: tg.attention's q, k, v, its result `out` and `lse`, and the
    gradient `grad` of its result; attributes and dropout operands are the
    attention's. Results: dq (q's type), dk and dv (k's and v's types; with
    grouped heads, summed over the query heads sharing a key/value head).
    With p recomputed from lse and P' its dropped, scaled form:
    dv = P'^T grad, dP' = grad v^T, dp = dropout(dP'),
    ds = p * (dp - rowsum(grad * out)), dq = scale * ds k, dk = scale * ds^T q.
  }];
  let arguments = (ins Tg_FloatTensor:$q, Tg_FloatTensor:$k, Tg_FloatTensor:$v,
                   Tg_FloatTensor:$out, Tg_FloatTensor:$lse,
                   Tg_FloatTensor:$grad,
                   Optional<Tg_I64ScalarTensor>:$rng_seed,
                   Optional<Tg_I64ScalarTensor>:$step,
                   F64Attr:$scale, UnitAttr:$causal,
                   DefaultValuedAttr<F64Attr, "0.0">:$dropout_rate,
                   OptionalAttr<I64Attr>:$op_id);
  let results = (outs Tg_FloatTensor:$dq, Tg_FloatTensor:$dk,
                      Tg_FloatTensor:$dv);
  let assemblyFormat = [{
    $q `,` $k `,` $v `,` $out `,` $lse `,` $grad
    (`dropout` `(` $rng_seed^ `,` $step `)`)? attr-dict `:`
    functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------===//
// Embeddings
//===----------------------------------------------------------------------===//

def Tg_GatherOp : Tg_Op<"gather", [
    DeclareOpInterfaceMethods<Tg_GradientOpInterface>]> {
  let summary = "rows of a table picked by integer ids (embedding lookup)";
  let description = [{
    table is (V, D...), ids is (I...) with values in [0, V); the result is
    (I..., D...) with `result[i, d] = table[ids[i], d]`. The table's
    gradient is a scatter_add; ids get none.
  }];
  let arguments = (ins AnyRankedTensor:$table, Tg_IndexTensor:$ids);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $table `,` $ids attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Tg_ScatterAddOp : Tg_Op<"scatter_add", [
    DeclareOpInterfaceMethods<Tg_GradientOpInterface>]> {
  let summary = "sums rows of updates into a zero table at integer ids";
  let description = [{
    ids is (I...) with values in [0, V), updates is (I..., D...); the result
    (V, D...) starts at zero and `result[ids[i], d] += updates[i, d]`, so
    repeated ids accumulate. The gradient of gather.
  }];
  let arguments = (ins Tg_IndexTensor:$ids, Tg_FloatTensor:$updates);
  let results = (outs Tg_FloatTensor:$result);
  let assemblyFormat = [{
    $ids `,` $updates attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

class Tg_ReduceOp<string mnemonic> : Tg_Op<mnemonic, [
    DeclareOpInterfaceMethods<Tg_GradientOpInterface>]> {
  let description = [{
    Reduces over `axes` (sorted, unique, in range). With keep_dims the
    reduced dimensions stay as size 1, otherwise they are removed.
  }];
  let arguments = (ins Tg_FloatTensor:$input, DenseI64ArrayAttr:$axes,
                   DefaultValuedAttr<BoolAttr, "false">:$keep_dims);
  let results = (outs Tg_FloatTensor:$result);
  let assemblyFormat = [{
    $input attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Tg_ReduceSumOp : Tg_ReduceOp<"reduce_sum"> {
  let summary = "sum over axes";
}

def Tg_ReduceMeanOp : Tg_ReduceOp<"reduce_mean"> {
  let summary = "mean over axes";
}

def Tg_ReduceMaxOp : Tg_ReduceOp<"reduce_max"> {
  let summary = "maximum over axes";
  let description = [{
    The gradient goes to the positions holding the maximum; when several
    positions tie, they share it equally.
  }];
}

//===----------------------------------------------------------------------===//
// Shapes
//===----------------------------------------------------------------------===//

def Tg_BroadcastToOp : Tg_Op<"broadcast_to", [
    DeclareOpInterfaceMethods<Tg_GradientOpInterface>]> {
  let summary = "numpy-style broadcast to the result shape";
  let arguments = (ins Tg_FloatTensor:$input);
  let results = (outs Tg_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Tg_ReshapeOp : Tg_Op<"reshape", [
    DeclareOpInterfaceMethods<Tg_GradientOpInterface>]> {
  let summary = "same elements in row-major order, new shape";
  let arguments = (ins AnyRankedTensor:$input);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Tg_TransposeOp : Tg_Op<"transpose", [
    DeclareOpInterfaceMethods<Tg_GradientOpInterface>]> {
  let summary = "permutes dimensions: result dimension i is input dimension perm[i]";
  let arguments = (ins AnyRankedTensor:$input, DenseI64ArrayAttr:$perm);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Tg_SliceOp : Tg_Op<"slice", [
    DeclareOpInterfaceMethods<Tg_GradientOpInterface>]> {
  let summary = "the box [starts, ends) of the input, step 1";
  let description = [{
    One start and one end per dimension, 0 <= start < end <= size; the
    result has sizes ends - starts. The gradient pads with zeros.
  }];
  let arguments = (ins AnyRankedTensor:$input, DenseI64ArrayAttr:$starts,
                   DenseI64ArrayAttr:$ends);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Tg_ConcatOp : Tg_Op<"concat", [
    DeclareOpInterfaceMethods<Tg_GradientOpInterface>]> {
  let summary = "joins one or more tensors along `axis`";
  let description = [{
    Inputs have one element type and equal sizes except along `axis`.
  }];
  let arguments = (ins Variadic<AnyRankedTensor>:$inputs, I64Attr:$axis);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $inputs attr-dict `:` functional-type($inputs, results)
  }];
  let hasVerifier = 1;
}

def Tg_SplitOp : Tg_Op<"split", [
    DeclareOpInterfaceMethods<Tg_GradientOpInterface>]> {
  let summary = "cuts a tensor along `axis` into consecutive pieces";
  let description = [{
    The result types give the pieces' sizes along `axis`; they add up to the
    input's size, and every other dimension is the input's.
  }];
  let arguments = (ins AnyRankedTensor:$input, I64Attr:$axis);
  let results = (outs Variadic<AnyRankedTensor>:$pieces);
  let assemblyFormat = [{
    $input attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Positions (tg-cache-rope; verifier and gradient in TgPositionOps.cpp)
//===----------------------------------------------------------------------===//

def Tg_RopeOp : Tg_Op<"rope", [
    DeclareOpInterfaceMethods<Tg_GradientOpInterface>]> {
  let summary = "rotary position embedding: x * cos + rotate_half(x) * sin";
  let description = [{
    x is (..., T, D) with D even; cos and sin are (T, D), shared by every
    leading index of x. With h = D / 2 and rotate_half(x) = concat(-x[...,
    h:], x[..., :h]) on the last axis:

      result = x * cos + rotate_half(x) * sin            (transposed = false)
      result = x * cos + rotate_half_T(x * sin)          (transposed = true)

    where rotate_half_T(y) = concat(y[..., h:], -y[..., :h]) is the
    transpose of rotate_half. The transposed form is the vector-Jacobian
    product of the plain one with respect to x (and the other way round), so
    the gradient of a rope is one rope. cos and sin have x's element type,
    or f32 when x is bf16 / f16 (the tables are then read in f32). tg-cache-rope
    creates this op from the rotation written out in primitives.
  }];
  let arguments = (ins Tg_FloatTensor:$input, Tg_FloatTensor:$cos,
                   Tg_FloatTensor:$sin,
                   DefaultValuedAttr<BoolAttr, "false">:$transposed);
  let results = (outs Tg_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $cos `,` $sin attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Train / eval switch (batch norm; gradient in TgStructuralGradients.cpp)
//===----------------------------------------------------------------------===//

def Tg_TrainSelectOp : Tg_Op<"train_select", [
    AllTypesMatch<["train", "eval", "result"]>,
    DeclareOpInterfaceMethods<Tg_GradientOpInterface>]> {
  let summary = "the train value in the training step, the eval value in eval";
  let description = [{
    A value that differs between training and evaluation (batch norm
    normalizes with the batch's statistics while training and with its
    running statistics in eval). The importer writes both computations;
    tg-strip-train-only-ops replaces the op by `eval` in @forward and by
    `train` in @train_step (after tg-autodiff), so no later pass, and no
    kernel, sees it. Until then (tcc run --function gradients, the
    interpreter) it is `train`: @forward is written with training semantics.
    Gradient: to `train` only.
  }];
  let arguments = (ins AnyRankedTensor:$train, AnyRankedTensor:$eval);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$train `,` $eval attr-dict `:` type($result)";
}
