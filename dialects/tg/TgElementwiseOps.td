//===- TgElementwiseOps.td - elementwise math, comparisons, constants -===//
//
// Part of the tg dialect (TgOps.td includes this file).
//
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
