//===- TgOps.td - the tensor-graph (tg) dialect ---------------------------===//
//
// Ops on ranked, statically shaped tensors with value semantics: the
// vocabulary models are written in, plus the ops training passes introduce
// (*_grad, sgd_update). Verifiers check shapes and dtypes; locations carry the
// model's node names, so an error names the offending node.
//
//===----------------------------------------------------------------------===//
#ifndef TCC_TG_OPS
#define TCC_TG_OPS

include "mlir/IR/OpBase.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "dialects/tg/TgInterfaces.td"

def Tg_Dialect : Dialect {
  let name = "tg";
  let summary = "tcc tensor graph: models and training steps on tensors";
  let cppNamespace = "::tcc::tg";
  let hasConstantMaterializer = 1;
}

class Tg_Op<string mnemonic, list<Trait> traits = []>
    : Op<Tg_Dialect, mnemonic, !listconcat(traits, [Pure])>;

def Tg_FloatTensor : RankedTensorOf<[F32, F64]>;
def Tg_IndexTensor : RankedTensorOf<[I32, I64]>;
def Tg_ScalarFloatTensor : 0DTensorOf<[F32, F64]>;

//===----------------------------------------------------------------------===//
// Sources
//===----------------------------------------------------------------------===//

def Tg_ConstantOp : Tg_Op<"constant", [ConstantLike,
    AllTypesMatch<["value", "result"]>]> {
  let summary = "a constant tensor";
  let description = [{
    `%c = tg.constant dense<1.0> : tensor<f32>`. Autodiff uses splat
    constants for the seed gradient and for scale factors.
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Linear algebra
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

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

class Tg_BroadcastBinaryOp<string mnemonic, list<Trait> traits = []>
    : Tg_Op<mnemonic, !listconcat(traits, [
        DeclareOpInterfaceMethods<Tg_GradientOpInterface>])> {
  let description = [{
    Elementwise with numpy-style broadcasting: shapes are aligned at the
    trailing dimension; each pair of sizes must be equal or one of them 1.
    The result type must be the broadcast shape.
  }];
  let arguments = (ins Tg_FloatTensor:$lhs, Tg_FloatTensor:$rhs);
  let results = (outs Tg_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Tg_AddOp : Tg_BroadcastBinaryOp<"add", [Commutative]> {
  let summary = "elementwise sum with broadcasting (e.g. adding a bias)";
}
def Tg_MulOp : Tg_BroadcastBinaryOp<"mul", [Commutative]> {
  let summary = "elementwise product with broadcasting";
}

def Tg_ReluOp : Tg_Op<"relu", [SameOperandsAndResultType,
    DeclareOpInterfaceMethods<Tg_GradientOpInterface>]> {
  let summary = "max(x, 0)";
  let arguments = (ins Tg_FloatTensor:$input);
  let results = (outs Tg_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Tg_ReluGradOp : Tg_Op<"relu_grad", [SameOperandsAndResultType]> {
  let summary = "gradient of relu: grad where input > 0, else 0";
  let arguments = (ins Tg_FloatTensor:$input, Tg_FloatTensor:$grad);
  let results = (outs Tg_FloatTensor:$result);
  let assemblyFormat = "$input `,` $grad attr-dict `:` type($result)";
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

//===----------------------------------------------------------------------===//
// Reductions and shape
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

//===----------------------------------------------------------------------===//
// Optimizers
//===----------------------------------------------------------------------===//

def Tg_SgdUpdateOp : Tg_Op<"sgd_update", [
    AllTypesMatch<["param", "grad", "result"]>]> {
  let summary = "param - learning_rate * grad";
  let arguments = (ins Tg_FloatTensor:$param, Tg_FloatTensor:$grad,
                   Tg_ScalarFloatTensor:$learning_rate);
  let results = (outs Tg_FloatTensor:$result);
  let assemblyFormat = [{
    $param `,` $grad `,` $learning_rate attr-dict `:` type($result) `,` type($learning_rate)
  }];
}

#endif // TCC_TG_OPS
