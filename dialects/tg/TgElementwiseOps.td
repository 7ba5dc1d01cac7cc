//===- TgElementwiseOps.td - elementwise math, comparisons, constants -===//
//
// Part of the tg dialect (TgOps.td includes this file).
//
// Every op here whose value at a position depends only on its operands at
// that position (after numpy broadcasting) and on the position itself
// implements ScalarOpInterface: its scalar body is built from arith/math
// ops, so lowering and fusion need no per-op code.
//
//===----------------------------------------------------------------------===//

// Element types of this group. Floats include the half types (casts and
// mixed precision); i1 is the boolean of comparisons and select.
def Tg_AnyFloatTensor : RankedTensorOf<[F16, BF16, F32, F64]>;
def Tg_BoolTensor : RankedTensorOf<[I1]>;
def Tg_ValueTensor : RankedTensorOf<[F16, BF16, F32, F64, I1, I32, I64]>;
// The per-step hyper-parameters dropout reads (rng_seed, step): tensor<i64>.
def Tg_I64ScalarTensor : 0DTensorOf<[I64]>, BuildableType<
    "::mlir::RankedTensorType::get({}, $_builder.getIntegerType(64))">;

//===----------------------------------------------------------------------===//
// Sources
//===----------------------------------------------------------------------===//

def Tg_ConstantOp : Tg_Op<"constant", [ConstantLike,
    AllTypesMatch<["value", "result"]>,
    DeclareOpInterfaceMethods<Tg_GradientOpInterface>]> {
  let summary = "a constant tensor";
  let description = [{
    `%c = tg.constant dense<1.0> : tensor<f32>`. Autodiff uses splat
    constants for the seed gradient and for scale factors; models use them
    through the `constant` node (splats of any dtype, bool as i1).
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Tg_IotaOp : Tg_Op<"iota", [
    DeclareOpInterfaceMethods<Tg_GradientOpInterface>,
    DeclareOpInterfaceMethods<Tg_ScalarOpInterface>]> {
  let summary = "the index along `axis` at every position";
  let description = [{
    `%i = tg.iota {axis = 1} : tensor<2x3xi64>` is [[0, 1, 2], [0, 1, 2]].
    Integer or float result (not i1). Not differentiable: it has no operands.
  }];
  let arguments = (ins I64Attr:$axis);
  let results = (outs Tg_ValueTensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Unary float math
//===----------------------------------------------------------------------===//

class Tg_UnaryFloatOp<string mnemonic, list<Trait> traits = []>
    : Tg_Op<mnemonic, !listconcat(traits, [SameOperandsAndResultType,
        DeclareOpInterfaceMethods<Tg_GradientOpInterface>,
        DeclareOpInterfaceMethods<Tg_ScalarOpInterface>])> {
  let arguments = (ins Tg_AnyFloatTensor:$input);
  let results = (outs Tg_AnyFloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Tg_NegOp : Tg_UnaryFloatOp<"neg"> { let summary = "-x"; }
def Tg_ExpOp : Tg_UnaryFloatOp<"exp"> { let summary = "e^x"; }
def Tg_LogOp : Tg_UnaryFloatOp<"log"> { let summary = "natural logarithm"; }
def Tg_SqrtOp : Tg_UnaryFloatOp<"sqrt"> { let summary = "square root"; }
def Tg_RsqrtOp : Tg_UnaryFloatOp<"rsqrt"> { let summary = "1 / sqrt(x)"; }
def Tg_TanhOp : Tg_UnaryFloatOp<"tanh"> { let summary = "hyperbolic tangent"; }
def Tg_SigmoidOp : Tg_UnaryFloatOp<"sigmoid"> {
  let summary = "1 / (1 + e^-x)";
}
def Tg_ReluOp : Tg_UnaryFloatOp<"relu"> {
  let summary = "x if x > 0 else 0";
}
def Tg_SiluOp : Tg_UnaryFloatOp<"silu"> { let summary = "x * sigmoid(x)"; }
def Tg_SinOp : Tg_UnaryFloatOp<"sin"> { let summary = "sine"; }
def Tg_CosOp : Tg_UnaryFloatOp<"cos"> { let summary = "cosine"; }

def Tg_GeluOp : Tg_UnaryFloatOp<"gelu"> {
  let summary = "Gaussian error linear unit";
  let description = [{
    approximate = "none" (default): `0.5 x (1 + erf(x / sqrt(2)))`;
    approximate = "tanh" (GPT-2):
    `0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))`, as in PyTorch.
  }];
  let arguments = (ins Tg_AnyFloatTensor:$input,
                   DefaultValuedStrAttr<StrAttr, "none">:$approximate);
  let hasVerifier = 1;
}

def Tg_PowOp : Tg_UnaryFloatOp<"pow"> {
  let summary = "x^exponent for a constant exponent";
  let description = [{
    Like C `pow`: a negative x with a non-integer exponent gives NaN.
  }];
  let arguments = (ins Tg_AnyFloatTensor:$input, F64Attr:$exponent);
}

//===----------------------------------------------------------------------===//
// Binary float math with broadcasting
//===----------------------------------------------------------------------===//

class Tg_BroadcastBinaryOp<string mnemonic, list<Trait> traits = []>
    : Tg_Op<mnemonic, !listconcat(traits, [
        DeclareOpInterfaceMethods<Tg_GradientOpInterface>,
        DeclareOpInterfaceMethods<Tg_ScalarOpInterface>])> {
  let description = [{
    Elementwise with numpy-style broadcasting: shapes are aligned at the
    trailing dimension; each pair of sizes must be equal or one of them 1.
    The result type must be the broadcast shape.
  }];
  let arguments = (ins Tg_AnyFloatTensor:$lhs, Tg_AnyFloatTensor:$rhs);
  let results = (outs Tg_AnyFloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Tg_AddOp : Tg_BroadcastBinaryOp<"add", [Commutative]> {
  let summary = "elementwise sum with broadcasting (e.g. adding a bias)";
}

def Tg_SubOp : Tg_BroadcastBinaryOp<"sub"> {
  let summary = "elementwise difference with broadcasting";
}

def Tg_MulOp : Tg_BroadcastBinaryOp<"mul", [Commutative]> {
  let summary = "elementwise product with broadcasting";
}

def Tg_DivOp : Tg_BroadcastBinaryOp<"div"> {
  let summary = "elementwise quotient with broadcasting";
}

def Tg_MaxOp : Tg_BroadcastBinaryOp<"max", [Commutative]> {
  let summary = "elementwise maximum with broadcasting (NaN propagates)";
  let description = [{
    Gradient: to the larger operand; on a tie each operand gets half (as in
    PyTorch's torch.maximum).
  }];
}

def Tg_MinOp : Tg_BroadcastBinaryOp<"min", [Commutative]> {
  let summary = "elementwise minimum with broadcasting (NaN propagates)";
  let description = [{
    Gradient: to the smaller operand; on a tie each operand gets half (as in
    PyTorch's torch.minimum).
  }];
}

//===----------------------------------------------------------------------===//
// Comparisons, select, cast
//===----------------------------------------------------------------------===//

class Tg_CompareOp<string mnemonic, list<Trait> traits = []>
    : Tg_Op<mnemonic, !listconcat(traits, [
        DeclareOpInterfaceMethods<Tg_ScalarOpInterface>])> {
  let description = [{
    Compares two tensors of one element type (float, integer or i1, where
    false < true) with numpy broadcasting; the result is i1 of the
    broadcast shape. Floats compare like IEEE: every comparison with NaN
    is false except not_equal. No gradient (the result is boolean).
  }];
  let arguments = (ins Tg_ValueTensor:$lhs, Tg_ValueTensor:$rhs);
  let results = (outs Tg_BoolTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Tg_EqualOp : Tg_CompareOp<"equal", [Commutative]> {
  let summary = "lhs == rhs";
}
def Tg_NotEqualOp : Tg_CompareOp<"not_equal", [Commutative]> {
  let summary = "lhs != rhs";
}
def Tg_LessOp : Tg_CompareOp<"less"> { let summary = "lhs < rhs"; }
def Tg_LessEqualOp : Tg_CompareOp<"less_equal"> { let summary = "lhs <= rhs"; }
def Tg_GreaterOp : Tg_CompareOp<"greater"> { let summary = "lhs > rhs"; }
def Tg_GreaterEqualOp : Tg_CompareOp<"greater_equal"> {
  let summary = "lhs >= rhs";
}

def Tg_SelectOp : Tg_Op<"select", [
    DeclareOpInterfaceMethods<Tg_GradientOpInterface>,
    DeclareOpInterfaceMethods<Tg_ScalarOpInterface>]> {
  let summary = "condition ? true_value : false_value, with broadcasting";
  let description = [{
    All three operands broadcast (numpy) to the result shape; both values
    and the result have one element type. Float values get the gradient
    where they were selected; the condition gets none.
  }];
  let arguments = (ins Tg_BoolTensor:$condition, Tg_ValueTensor:$true_value,
                   Tg_ValueTensor:$false_value);
  let results = (outs Tg_ValueTensor:$result);
  let assemblyFormat = [{
    $condition `,` $true_value `,` $false_value attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Tg_CastOp : Tg_Op<"cast", [
    DeclareOpInterfaceMethods<Tg_GradientOpInterface>,
    DeclareOpInterfaceMethods<Tg_ScalarOpInterface>]> {
  let summary = "converts each element to the result's element type";
  let description = [{
    Same shape. Float to float rounds to nearest even; float to integer
    truncates toward zero (out-of-range values are undefined); integer to
    float rounds to nearest; to i1: x != 0; from i1: 0 or 1. The gradient of
    a float-to-float cast is the gradient cast back; other casts have none.
  }];
  let arguments = (ins Tg_ValueTensor:$input);
  let results = (outs Tg_ValueTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Randomness
//===----------------------------------------------------------------------===//

def Tg_DropoutOp : Tg_Op<"dropout", [
    AllTypesMatch<["input", "result"]>,
    DeclareOpInterfaceMethods<Tg_GradientOpInterface>,
    DeclareOpInterfaceMethods<Tg_ScalarOpInterface>]> {
  let summary = "zeroes elements with probability `rate`, scales the rest";
  let description = [{
    At row-major position i: keep iff
    `uniform01(rng_seed ^ mix64(op_id), step, i) >= rate`, then
    `x * (1 / (1 - rate))`, else 0 (runtime/include/tcc/counter_rng.h has
    the exact formula). The mask is a pure function of (rng_seed, step,
    op_id, i): the gradient is a dropout of the incoming gradient with the
    same operands and attributes, i.e. the same mask. `rng_seed` and `step`
    are the function arguments marked tg.hyper = "rng_seed" / "step";
    tg-strip-train-only-ops removes dropout from the eval function.
  }];
  let arguments = (ins Tg_AnyFloatTensor:$input, Tg_I64ScalarTensor:$rng_seed,
                   Tg_I64ScalarTensor:$step, F64Attr:$rate, I64Attr:$op_id);
  let results = (outs Tg_AnyFloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $rng_seed `,` $step attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Gradient helpers
//===----------------------------------------------------------------------===//

def Tg_ReluGradOp : Tg_Op<"relu_grad", [SameOperandsAndResultType,
    DeclareOpInterfaceMethods<Tg_ScalarOpInterface>]> {
  let summary = "gradient of relu: grad where input > 0, else 0";
  let arguments = (ins Tg_AnyFloatTensor:$input, Tg_AnyFloatTensor:$grad);
  let results = (outs Tg_AnyFloatTensor:$result);
  let assemblyFormat = "$input `,` $grad attr-dict `:` type($result)";
}

def Tg_GeluGradOp : Tg_Op<"gelu_grad", [SameOperandsAndResultType,
    DeclareOpInterfaceMethods<Tg_ScalarOpInterface>]> {
  let summary = "gradient of gelu: grad * gelu'(input)";
  let description = [{
    approximate = "none": `grad * (Phi(x) + x phi(x))` with the standard
    normal cdf Phi and pdf phi; "tanh": the derivative of the tanh form.
  }];
  let arguments = (ins Tg_AnyFloatTensor:$input, Tg_AnyFloatTensor:$grad,
                   DefaultValuedStrAttr<StrAttr, "none">:$approximate);
  let results = (outs Tg_AnyFloatTensor:$result);
  let assemblyFormat = "$input `,` $grad attr-dict `:` type($result)";
  let hasVerifier = 1;
}
