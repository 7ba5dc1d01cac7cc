//===- KernOps.td - the kernel-level (kern) dialect -----------------------===//
//
// One op per kernel launch or library call. Operands are buffers (memrefs);
// ops write their `out` operand (destination-passing style), so the memory
// plan decides every address. Both code generators read this dialect.
//
//===----------------------------------------------------------------------===//
#ifndef TCC_KERN_OPS
#define TCC_KERN_OPS

include "mlir/IR/OpBase.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/IR/EnumAttr.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Kern_Dialect : Dialect {
  let name = "kern";
  let summary = "tcc kernels: launches and library calls on buffers";
  let cppNamespace = "::tcc::kern";
}

class Kern_Op<string mnemonic, list<Trait> traits = []>
    : Op<Kern_Dialect, mnemonic, traits>;

def Kern_FloatBuffer : MemRefOf<[F32, F64]>;
def Kern_IndexBuffer : MemRefOf<[I32, I64]>;

def Kern_GemmOp : Kern_Op<"gemm"> {
  let summary = "out = alpha * op(a) x op(b) + beta * out (BLAS gemm)";
  let description = [{
    a is (M,K) or (K,M) with transpose_a; b is (K,N) or (N,K) with
    transpose_b; out is (M,N). Row-major.
  }];
  let arguments = (ins
    Arg<Kern_FloatBuffer, "", [MemRead]>:$a,
    Arg<Kern_FloatBuffer, "", [MemRead]>:$b,
    Arg<Kern_FloatBuffer, "", [MemRead, MemWrite]>:$out,
    BoolAttr:$transpose_a, BoolAttr:$transpose_b,
    F64Attr:$alpha, F64Attr:$beta);
  let assemblyFormat = [{
    $a `,` $b `,` $out attr-dict `:` type($a) `,` type($b) `,` type($out)
  }];
  let hasVerifier = 1;
}

def Kern_ElementwiseKindAttr : I32EnumAttr<"ElementwiseKind",
    "the scalar function of an elementwise kernel", [
    I32EnumAttrCase<"add", 0>, I32EnumAttrCase<"mul", 1>,
    I32EnumAttrCase<"relu", 2>, I32EnumAttrCase<"relu_grad", 3>,
    I32EnumAttrCase<"copy", 4>]> {
  let cppNamespace = "::tcc::kern";
}

def Kern_ElementwiseOp : Kern_Op<"elementwise"> {
  let summary = "out[i] = f(inputs broadcast to out's shape)[i]";
  let description = [{
    One or two inputs, each numpy-broadcast to the shape of `out`.
    Kinds: add, mul (two inputs), relu, copy (one input),
    relu_grad (input, grad): grad where input > 0 else 0.
  }];
  let arguments = (ins
    Arg<Variadic<Kern_FloatBuffer>, "", [MemRead]>:$inputs,
    Arg<Kern_FloatBuffer, "", [MemWrite]>:$out,
    Kern_ElementwiseKindAttr:$kind);
  let assemblyFormat = [{
    $kind `(` $inputs `)` `into` $out attr-dict `:` `(` type($inputs) `)` `->` type($out)
  }];
  let hasVerifier = 1;
}

def Kern_ReduceOp : Kern_Op<"reduce"> {
  let summary = "out = sum or mean of input over axes";
  let arguments = (ins
    Arg<Kern_FloatBuffer, "", [MemRead]>:$input,
    Arg<Kern_FloatBuffer, "", [MemWrite]>:$out,
    DenseI64ArrayAttr:$axes, BoolAttr:$mean);
  let assemblyFormat = [{
    $input `,` $out attr-dict `:` type($input) `,` type($out)
  }];
  let hasVerifier = 1;
}

def Kern_FillOp : Kern_Op<"fill"> {
  let summary = "out[i] = value";
  let arguments = (ins Arg<Kern_FloatBuffer, "", [MemWrite]>:$out,
                   F64Attr:$value);
  let assemblyFormat = "$out attr-dict `:` type($out)";
}

def Kern_SoftmaxCrossEntropyOp : Kern_Op<"softmax_cross_entropy"> {
  let summary = "loss[n] = logsumexp(logits[n]) - logits[n, labels[n]]";
  let description = [{
    logits (N,C), labels (N), loss (N). The generated kernel checks labels
    are in [0, C) and fails the step otherwise.
  }];
  let arguments = (ins
    Arg<Kern_FloatBuffer, "", [MemRead]>:$logits,
    Arg<Kern_IndexBuffer, "", [MemRead]>:$labels,
    Arg<Kern_FloatBuffer, "", [MemWrite]>:$loss);
  let assemblyFormat = [{
    $logits `,` $labels `,` $loss attr-dict `:` type($logits) `,` type($labels) `,` type($loss)
  }];
}

def Kern_SoftmaxCrossEntropyGradOp : Kern_Op<"softmax_cross_entropy_grad"> {
  let summary = "out[n,c] = (softmax(logits[n])[c] - (c == labels[n])) * grad[n]";
  let arguments = (ins
    Arg<Kern_FloatBuffer, "", [MemRead]>:$logits,
    Arg<Kern_IndexBuffer, "", [MemRead]>:$labels,
    Arg<Kern_FloatBuffer, "", [MemRead]>:$grad,
    Arg<Kern_FloatBuffer, "", [MemWrite]>:$out);
  let assemblyFormat = [{
    $logits `,` $labels `,` $grad `,` $out attr-dict `:` type($logits) `,` type($labels) `,` type($grad) `,` type($out)
  }];
}

def Kern_SgdUpdateOp : Kern_Op<"sgd_update", [AllTypesMatch<["param", "grad"]>]> {
  let summary = "param -= learning_rate * grad, in place";
  let arguments = (ins
    Arg<Kern_FloatBuffer, "", [MemRead, MemWrite]>:$param,
    Arg<Kern_FloatBuffer, "", [MemRead]>:$grad,
    Arg<Kern_FloatBuffer, "", [MemRead]>:$learning_rate);
  let assemblyFormat = [{
    $param `,` $grad `,` $learning_rate attr-dict `:` type($param) `,` type($learning_rate)
  }];
}

def Kern_AllocOp : Kern_Op<"alloc"> {
  let summary = "a temporary buffer, placed in the workspace by kern-plan-memory";
  let results = (outs Res<AnyMemRef, "", [MemAlloc]>:$buffer);
  let assemblyFormat = "attr-dict `:` type($buffer)";
}

def Kern_WorkspaceViewOp : Kern_Op<"workspace_view", [Pure]> {
  let summary = "the buffer at `offset` bytes into the step's workspace";
  let arguments = (ins I64Attr:$offset);
  let results = (outs AnyMemRef:$buffer);
  let assemblyFormat = "$offset attr-dict `:` type($buffer)";
}

def Kern_ReshapeOp : Kern_Op<"reshape", [Pure]> {
  let summary = "the same contiguous buffer seen with another shape (no copy)";
  let arguments = (ins AnyMemRef:$input);
  let results = (outs AnyMemRef:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
}

#endif // TCC_KERN_OPS
