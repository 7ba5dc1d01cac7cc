//===- TgStructuralOps.td - linear algebra, reductions, shapes, NN ops -===//
//
// Part of the tg dialect (TgOps.td includes this file).
//
//===----------------------------------------------------------------------===//

def Tg_MatmulOp : Tg_Op<"matmul", [
    DeclareOpInterfaceMethods<Tg_GradientOpInterface>]> {
  let summary = "matrix product with optional transposes";
  let description = [{
    `result = op(lhs) x op(rhs)` where op transposes when the flag is set.
    lhs is (M, K) or (K, M) with transpose_lhs; rhs is (K, N) or (N, K) with
    transpose_rhs; result is (M, N).
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
