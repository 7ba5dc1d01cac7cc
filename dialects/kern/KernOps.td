//===- KernOps.td - the kernel-level (kern) dialect -----------------------===//
//
// One op per kernel launch or library call. Operands are buffers (memrefs);
// ops write their output operands (destination-passing style), so the memory
// plan decides every address. Both code generators read this dialect.
//
// Elementwise work is one generic op, kern.elementwise, whose region holds
// the scalar function (arith / math ops) applied at every position; the
// structural kernels (gemm, reduce, transpose, slice, concat, gather,
// scatter_add) are one op each.
//
//===----------------------------------------------------------------------===//
#ifndef TCC_KERN_OPS
#define TCC_KERN_OPS

include "mlir/IR/OpBase.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/IR/EnumAttr.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Kern_Dialect : Dialect {
  let name = "kern";
  let summary = "tcc kernels: launches and library calls on buffers";
  let cppNamespace = "::tcc::kern";
  // Bodies of kern.elementwise are arith and math ops.
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect"];
}

class Kern_Op<string mnemonic, list<Trait> traits = []>
    : Op<Kern_Dialect, mnemonic, traits>;

// bf16 / f16 buffers: every kernel family computes them in float (codegen).
def Kern_FloatBuffer : MemRefOf<[F16, BF16, F32, F64]>;
def Kern_IndexBuffer : MemRefOf<[I32, I64]>;

def Kern_GemmOp : Kern_Op<"gemm"> {
  let summary = "out = alpha * op(a) x op(b) + beta * out, batched (BLAS gemm)";
  let description = [{
    a is (..., M, K) or (..., K, M) with transpose_a; b is (..., K, N) or
    (..., N, K) with transpose_b; out is (..., M, N). The batch dimensions
    (all but the last two) of a and b are numpy-broadcast to those of out;
    a rank-2 operand is shared by every batch. Row-major.
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

def Kern_ElementwiseOp : Kern_Op<"elementwise", [AttrSizedOperandSegments]> {
  let summary = "outputs[i] = body(inputs broadcast to the output shape [i], i)";
  let description = [{
    Every output has the same shape S; every input is numpy-broadcast to S.
    The body is the scalar function applied at each row-major position i of
    S: its block arguments are one scalar per input (the input's element
    type) followed by i as i64; it ends in kern.yield with one scalar per
    output (the outputs' element types). The body holds arith and math ops
    only.

    ```mlir
    kern.elementwise ins(%a, %b : memref<4x8xf32>, memref<8xf32>)
                     outs(%c : memref<4x8xf32>) {
    ^bb0(%x: f32, %y: f32, %i: i64):
      %s = arith.addf %x, %y : f32
      kern.yield %s : f32
    }
    ```

    Each position reads its inputs before writing its outputs, so an
    output may be the very buffer of an input of the same shape (in-place
    optimizer updates); a broadcast input must not alias an output.
  }];
  let arguments = (ins
    Arg<Variadic<AnyMemRef>, "", [MemRead]>:$inputs,
    Arg<Variadic<AnyMemRef>, "", [MemWrite]>:$outputs);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    (`ins` `(` $inputs^ `:` type($inputs) `)`)?
    `outs` `(` $outputs `:` type($outputs) `)` attr-dict-with-keyword $body
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    // The shape every output has and every input is broadcast to.
    ::llvm::ArrayRef<int64_t> getShape() {
      return ::llvm::cast<::mlir::MemRefType>(getOutputs()[0].getType())
          .getShape();
    }
    ::mlir::Block &getBodyBlock() { return getBody().front(); }
    // The block argument holding the row-major position (i64).
    ::mlir::BlockArgument getFlatIndex() {
      return getBodyBlock().getArguments().back();
    }
  }];
}

def Kern_YieldOp : Kern_Op<"yield", [Pure, Terminator, ReturnLike,
    ParentOneOf<["ElementwiseOp", "MultiElementwiseOp"]>]> {
  let summary = "the scalars a kern.elementwise body writes, one per output";
  let arguments = (ins Variadic<AnyType>:$values);
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
}

def Kern_ReduceKindAttr : I32EnumAttr<"ReduceKind",
    "how a kern.reduce combines values", [
    I32EnumAttrCase<"sum", 0>, I32EnumAttrCase<"mean", 1>,
    I32EnumAttrCase<"max", 2>]> {
  let cppNamespace = "::tcc::kern";
}

def Kern_ReduceOp : Kern_Op<"reduce"> {
  let summary = "out = sum, mean or max of input over axes";
  let description = [{
    `axes` are sorted, unique dimensions of the input. out holds the
    remaining dimensions in order (with or without size-1 placeholders for
    the reduced ones: only the element count and order matter). Input and
    out have one element type, except that a bf16 / f16 input may be
    reduced into an f32 out (tg-lower-to-kern folds tg-amp's widening cast
    of a reduction's input into the reduction: each element is loaded into
    the f32 accumulator, the values the cast would have written).
  }];
  let arguments = (ins
    Arg<Kern_FloatBuffer, "", [MemRead]>:$input,
    Arg<Kern_FloatBuffer, "", [MemWrite]>:$out,
    Kern_ReduceKindAttr:$kind,
    DenseI64ArrayAttr:$axes);
  let assemblyFormat = [{
    $kind $input `,` $out attr-dict `:` type($input) `,` type($out)
  }];
  let hasVerifier = 1;
}

def Kern_AllReduceOp : Kern_Op<"all_reduce"> {
  let summary = "buffer <- its sum or mean over the data-parallel ranks, in place";
  let description = [{
    Calls the step's collectives (tcc_step_args.collectives ->all_reduce)
    on the whole buffer; without collectives (one rank) the buffer stays.
    `reduction`: "sum" or "mean".
  }];
  let arguments = (ins Arg<AnyMemRef, "", [MemRead, MemWrite]>:$buffer, StrAttr:$reduction);
  let assemblyFormat = "$buffer attr-dict `:` type($buffer)";
}

// ZeRO-1 (tcc compile --shard-optimizer N): a shard is this rank's 1/N of
// a buffer's flattened elements, [rank * n / N, (rank + 1) * n / N); the
// rank is known only at run time. `input` and `out` never alias.
def Kern_ReduceScatterOp : Kern_Op<"reduce_scatter"> {
  let summary = "out <- this rank's shard of input's sum or mean over the ranks";
  let description = [{
    Calls tcc_collectives.reduce_scatter (input: n elements, out: n / ranks);
    without collectives (one rank, ranks = 1) out is a copy of input.
  }];
  let arguments = (ins
    Arg<Kern_FloatBuffer, "", [MemRead]>:$input,
    Arg<Kern_FloatBuffer, "", [MemWrite]>:$out,
    StrAttr:$reduction, I64Attr:$ranks);
  let assemblyFormat = [{
    $input `,` $out attr-dict `:` type($input) `,` type($out)
  }];
  let hasVerifier = 1;
}

def Kern_RankShardOp : Kern_Op<"rank_shard"> {
  let summary = "out <- a copy of this rank's shard of input";
  let arguments = (ins
    Arg<Kern_FloatBuffer, "", [MemRead]>:$input,
    Arg<Kern_FloatBuffer, "", [MemWrite]>:$out,
    I64Attr:$ranks);
  let assemblyFormat = [{
    $input `,` $out attr-dict `:` type($input) `,` type($out)
  }];
  let hasVerifier = 1;
}

def Kern_AllGatherOp : Kern_Op<"all_gather"> {
  let summary = "out <- every rank's input shard in rank order";
  let description = [{
    Calls tcc_collectives.all_gather (input: n / ranks elements, out: n);
    without collectives (one rank, ranks = 1) out is a copy of input.
  }];
  let arguments = (ins
    Arg<Kern_FloatBuffer, "", [MemRead]>:$input,
    Arg<Kern_FloatBuffer, "", [MemWrite]>:$out,
    I64Attr:$ranks);
  let assemblyFormat = [{
    $input `,` $out attr-dict `:` type($input) `,` type($out)
  }];
  let hasVerifier = 1;
}

def Kern_AllReduceBucketOp : Kern_Op<"all_reduce_bucket"> {
  let summary = "every buffer <- its sum or mean over the ranks, issued as one bucket";
  let description = [{
    What one kern.all_reduce per buffer does, in one call of the step's
    collectives (tcc_collectives.all_reduce_bucket: NCCL issues the bucket
    as one group; without that entry the step calls all_reduce per buffer).
    Made by kern-schedule-collectives from consecutive all-reduces of one
    element type and reduction. The buffers do not overlap.
  }];
  let arguments = (ins Arg<Variadic<Kern_FloatBuffer>, "", [MemRead, MemWrite]>:$buffers,
                   StrAttr:$reduction);
  let assemblyFormat = "$buffers attr-dict `:` type($buffers)";
  let hasVerifier = 1;
}

def Kern_FillOp : Kern_Op<"fill"> {
  let summary = "out[i] = value";
  let description = [{
    Integer and boolean buffers get the value converted (it must be exact).
  }];
  let arguments = (ins Arg<AnyMemRef, "", [MemWrite]>:$out, F64Attr:$value);
  let assemblyFormat = "$out attr-dict `:` type($out)";
}

def Kern_ConstantOp : Kern_Op<"constant", [Pure]> {
  let summary = "a read-only buffer holding a dense constant";
  let description = [{
    Non-splat constants: the code generator emits static storage. Nothing
    may write the result.
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs AnyMemRef:$buffer);
  let assemblyFormat = "$value attr-dict `:` type($buffer)";
  let hasVerifier = 1;
}

def Kern_TransposeOp : Kern_Op<"transpose"> {
  let summary = "out[j...] = input[i...] with out dim d = input dim perm[d]";
  let arguments = (ins
    Arg<AnyMemRef, "", [MemRead]>:$input,
    Arg<AnyMemRef, "", [MemWrite]>:$out,
    DenseI64ArrayAttr:$perm);
  let assemblyFormat = [{
    $input `,` $out attr-dict `:` type($input) `,` type($out)
  }];
  let hasVerifier = 1;
}

def Kern_SliceOp : Kern_Op<"slice"> {
  let summary = "out = input[starts[d] : starts[d] + out.shape[d]] on every dim";
  let arguments = (ins
    Arg<AnyMemRef, "", [MemRead]>:$input,
    Arg<AnyMemRef, "", [MemWrite]>:$out,
    DenseI64ArrayAttr:$starts);
  let assemblyFormat = [{
    $input `,` $out attr-dict `:` type($input) `,` type($out)
  }];
  let hasVerifier = 1;
}

def Kern_ConcatOp : Kern_Op<"concat"> {
  let summary = "out = the inputs laid end to end along `axis`";
  let arguments = (ins
    Arg<Variadic<AnyMemRef>, "", [MemRead]>:$inputs,
    Arg<AnyMemRef, "", [MemWrite]>:$out,
    I64Attr:$axis);
  let assemblyFormat = [{
    `(` $inputs `)` `into` $out attr-dict `:` `(` type($inputs) `)` `->` type($out)
  }];
  let hasVerifier = 1;
}

def Kern_GatherOp : Kern_Op<"gather"> {
  let summary = "out[n..., :] = table[ids[n...], :] (embedding lookup)";
  let description = [{
    table is (V, C...), ids any shape, out is ids.shape + (C...). The
    generated kernel fails the step (bad arguments) on an id outside [0, V).
  }];
  let arguments = (ins
    Arg<AnyMemRef, "", [MemRead]>:$table,
    Arg<Kern_IndexBuffer, "", [MemRead]>:$ids,
    Arg<AnyMemRef, "", [MemWrite]>:$out);
  let assemblyFormat = [{
    $table `,` $ids `,` $out attr-dict `:` type($table) `,` type($ids) `,` type($out)
  }];
  let hasVerifier = 1;
}

def Kern_ScatterAddOp : Kern_Op<"scatter_add"> {
  let summary = "out = 0; out[ids[n...], :] += updates[n..., :] (gather's gradient)";
  let description = [{
    out is (V, C...), ids any shape, updates is ids.shape + (C...). Repeated
    ids accumulate. Fails the step (bad arguments) on an id outside [0, V).
  }];
  let arguments = (ins
    Arg<Kern_FloatBuffer, "", [MemRead]>:$updates,
    Arg<Kern_IndexBuffer, "", [MemRead]>:$ids,
    Arg<Kern_FloatBuffer, "", [MemWrite]>:$out);
  let assemblyFormat = [{
    $updates `,` $ids `,` $out attr-dict `:` type($updates) `,` type($ids) `,` type($out)
  }];
  let hasVerifier = 1;
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
  let description = [{
    `out` may be the very buffer of `logits` (tg-lower-to-kern writes the
    gradient over logits that nothing reads afterwards): each position is
    read before it is written.
  }];
  let arguments = (ins
    Arg<Kern_FloatBuffer, "", [MemRead]>:$logits,
    Arg<Kern_IndexBuffer, "", [MemRead]>:$labels,
    Arg<Kern_FloatBuffer, "", [MemRead]>:$grad,
    Arg<Kern_FloatBuffer, "", [MemWrite]>:$out);
  let assemblyFormat = [{
    $logits `,` $labels `,` $grad `,` $out attr-dict `:` type($logits) `,` type($labels) `,` type($grad) `,` type($out)
  }];
}

// Flash attention (tg.attention / tg.attention_grad on buffers): one fused
// kernel each way, nothing of size T x S in memory. Shapes and semantics
// are tg's (dialects/tg/TgStructuralOps.td): q (B, H, T, D), k and v
// (B, Hkv, S, D), lse (B, H, T) in f32 (f64 for f64 q). rng_seed and step
// (memref<i64>, the step's hyper-parameters) are present iff
// dropout_rate > 0; the mask is tg.dropout's on a (B, H, T, S) tensor
// with the same op_id.
def Kern_SoftmaxCrossEntropyWithGradOp
    : Kern_Op<"softmax_cross_entropy_with_grad"> {
  let summary = "kern.softmax_cross_entropy and its gradient in one pass";
  let description = [{
    loss[n] = logsumexp(logits[n]) - logits[n, labels[n]] and
    out[n,c] = (softmax(logits[n])[c] - (c == labels[n])) * grad[n]: the
    two ops' results from one read of each row (kern-fuse-cross-entropy-grad
    makes it when the gradient's upstream `grad` does not depend on the
    loss, as for a mean loss). `out` may be the very buffer of `logits`
    (each row's label logit is read before the row is overwritten).
  }];
  let arguments = (ins
    Arg<Kern_FloatBuffer, "", [MemRead]>:$logits,
    Arg<Kern_IndexBuffer, "", [MemRead]>:$labels,
    Arg<Kern_FloatBuffer, "", [MemRead]>:$grad,
    Arg<Kern_FloatBuffer, "", [MemWrite]>:$loss,
    Arg<Kern_FloatBuffer, "", [MemWrite]>:$out);
  let assemblyFormat = [{
    $logits `,` $labels `,` $grad `,` $loss `,` $out attr-dict `:` type($logits) `,` type($labels) `,` type($grad) `,` type($loss) `,` type($out)
  }];
  let hasVerifier = 1;
}

def Kern_AttentionOp : Kern_Op<"attention", [AttrSizedOperandSegments]> {
  let summary = "out, lse = flash attention forward of q, k, v";
  let description = [{
    Without `layout`: q, out (B, H, T, D), k, v (B, Hkv, S, D) contiguous.
    With `layout` (kern-fold-attention-layout, dialects/kern/AttentionLayout.h):
    `sizes` = [B, H, Hkv, T, S, D] and, for q, k, v, out in turn, [offset,
    batch stride, head stride, row stride] in elements: row (b, h, i) of
    the tensor is the D contiguous elements at offset + b * batch + h * head
    + i * row of its buffer, which may have any shape (e.g. q, k, v read
    straight out of a (B, T, 3*H*D) projection, out written as (B, T, H, D)).
    lse is (B, H, T) contiguous either way.
  }];
  let arguments = (ins
    Arg<Kern_FloatBuffer, "", [MemRead]>:$q,
    Arg<Kern_FloatBuffer, "", [MemRead]>:$k,
    Arg<Kern_FloatBuffer, "", [MemRead]>:$v,
    Arg<Optional<MemRefOf<[I64]>>, "", [MemRead]>:$rng_seed,
    Arg<Optional<MemRefOf<[I64]>>, "", [MemRead]>:$step,
    Arg<Kern_FloatBuffer, "", [MemWrite]>:$out,
    Arg<MemRefOf<[F32, F64]>, "", [MemWrite]>:$lse,
    F64Attr:$scale, UnitAttr:$causal,
    DefaultValuedAttr<F64Attr, "0.0">:$dropout_rate,
    OptionalAttr<I64Attr>:$op_id,
    OptionalAttr<DenseI64ArrayAttr>:$sizes, OptionalAttr<DenseI64ArrayAttr>:$layout);
  let assemblyFormat = [{
    $q `,` $k `,` $v (`dropout` `(` $rng_seed^ `,` $step `)`)? `into` $out `,` $lse
    attr-dict `:` type($q) `,` type($k) `,` type($v) (`,` type($rng_seed)^ `,` type($step))?
    `->` type($out) `,` type($lse)
  }];
  let hasVerifier = 1;
}

def Kern_AttentionGradOp : Kern_Op<"attention_grad", [AttrSizedOperandSegments]> {
  let summary = "dq, dk, dv of kern.attention, recomputing p from lse";
  let description = [{
    Operands: the forward's q, k, v, out, lse, the gradient `grad` of out,
    the dropout operands, then the outputs dq, dk, dv (dk and dv summed
    over the query heads sharing a key/value head) and `workspace`, f32
    scratch of attentionBackwardWorkspaceFloats(...) elements
    (dialects/kern/AttentionWorkspace.h) the CUDA kernels use for row sums.
    `deterministic`: the result must be bit-identical run to run (a kernel
    may not take an order-dependent, e.g. atomic, path; today neither
    target's kernel has one). `sizes` / `layout` as on kern.attention, the
    layout listing q, k, v, out, grad, dq, dk, dv (dq, dk, dv may then be
    disjoint parts of one buffer, e.g. the (B, T, 3*H*D) gradient of a
    packed projection).
  }];
  let arguments = (ins
    Arg<Kern_FloatBuffer, "", [MemRead]>:$q,
    Arg<Kern_FloatBuffer, "", [MemRead]>:$k,
    Arg<Kern_FloatBuffer, "", [MemRead]>:$v,
    Arg<Kern_FloatBuffer, "", [MemRead]>:$out,
    Arg<MemRefOf<[F32, F64]>, "", [MemRead]>:$lse,
    Arg<Kern_FloatBuffer, "", [MemRead]>:$grad,
    Arg<Optional<MemRefOf<[I64]>>, "", [MemRead]>:$rng_seed,
    Arg<Optional<MemRefOf<[I64]>>, "", [MemRead]>:$step,
    Arg<Kern_FloatBuffer, "", [MemWrite]>:$dq,
    Arg<Kern_FloatBuffer, "", [MemWrite]>:$dk,
    Arg<Kern_FloatBuffer, "", [MemWrite]>:$dv,
    Arg<MemRefOf<[F32]>, "", [MemRead, MemWrite]>:$workspace,
    F64Attr:$scale, UnitAttr:$causal,
    DefaultValuedAttr<F64Attr, "0.0">:$dropout_rate,
    OptionalAttr<I64Attr>:$op_id, UnitAttr:$deterministic,
    OptionalAttr<DenseI64ArrayAttr>:$sizes, OptionalAttr<DenseI64ArrayAttr>:$layout);
  let assemblyFormat = [{
    $q `,` $k `,` $v `,` $out `,` $lse `,` $grad
    (`dropout` `(` $rng_seed^ `,` $step `)`)?
    `into` $dq `,` $dk `,` $dv `workspace` $workspace attr-dict `:`
    type($q) `,` type($k) `,` type($v) `,` type($out) `,` type($lse) `,` type($grad)
    (`,` type($rng_seed)^ `,` type($step))?
    `->` type($dq) `,` type($dk) `,` type($dv) `,` type($workspace)
  }];
  let hasVerifier = 1;
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

//===----------------------------------------------------------------------===//
// Positions (tg.rope; verifier in KernDialect.cpp)
//===----------------------------------------------------------------------===//

def Kern_RopeOp : Kern_Op<"rope"> {
  let summary = "out = x * cos + rotate_half(x) * sin (or its transpose)";
  let description = [{
    x and out (..., T, D), cos and sin (T, D) shared by the leading
    dimensions; rotate_half(x) = (-x[..., h:], x[..., :h]), h = D / 2.
    With `transposed`: out = x * cos + (y[..., h:], -y[..., :h]) for
    y = x * sin (the gradient of the plain rotation). One kernel; the
    tables have x's type, or f32 for bf16 / f16 x. out may not alias x.
    With `layout` (kern-fold-attention-layout; dialects/kern/RopeLayout.h):
    `sizes` = [B, H, T, D] and, for input then out, [offset, batch, head,
    row] element strides of the (B, H, T, D) tensor inside its buffer (D
    contiguous), so a rotation reads q straight from a packed projection
    and writes its gradient straight into the packed gradient.
  }];
  let arguments = (ins
    Arg<Kern_FloatBuffer, "", [MemRead]>:$input,
    Arg<Kern_FloatBuffer, "", [MemRead]>:$cos,
    Arg<Kern_FloatBuffer, "", [MemRead]>:$sin,
    Arg<Kern_FloatBuffer, "", [MemWrite]>:$out,
    DefaultValuedAttr<BoolAttr, "false">:$transposed,
    OptionalAttr<DenseI64ArrayAttr>:$sizes, OptionalAttr<DenseI64ArrayAttr>:$layout);
  let assemblyFormat = [{
    $input `,` $cos `,` $sin `,` $out attr-dict `:` type($input) `,` type($cos) `,`
    type($sin) `,` type($out)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// GEMM with an epilogue (tg.matmul_epilogue; verifier in KernDialect.cpp)
//===----------------------------------------------------------------------===//

def Kern_GemmEpilogueOp : Kern_Op<"gemm_epilogue", [AttrSizedOperandSegments]> {
  let summary = "out = act(op(a) x op(b) + bias) [+ residual], aux = the pre-activation";
  let description = [{
    One matrix product with its epilogue, all rank 2 and row-major: a is
    (M, K) or (K, M) with transpose_a, b (K, N) or (N, K) with transpose_b,
    bias (N) of out's element type. With p = op(a) x op(b) accumulated in
    f32 (f64 for f64):
      pre = p + bias;  out = act(pre) (+ residual)
    Without a bias (only with a residual and no activation): out = p +
    residual (cuBLASLt's default epilogue with beta = 1).
    `activation` is none, gelu_tanh or gelu_erf; `aux`, when present, gets
    pre in a's element type (the backward's gelu_grad reads it). out and
    residual are (M, N) of one type: a's, or f32 with 16-bit a and b (the
    residual is added in f32, cuBLASLt's C with beta = 1). Each output is
    rounded once to its type. cuda: cuBLASLt BIAS / GELU_BIAS /
    GELU_AUX_BIAS epilogues; cpu: the product, then one loop.
  }];
  let arguments = (ins
    Arg<Kern_FloatBuffer, "", [MemRead]>:$a,
    Arg<Kern_FloatBuffer, "", [MemRead]>:$b,
    Arg<Optional<Kern_FloatBuffer>, "", [MemRead]>:$bias,
    Arg<Optional<Kern_FloatBuffer>, "", [MemRead]>:$residual,
    Arg<Kern_FloatBuffer, "", [MemWrite]>:$out,
    Arg<Optional<Kern_FloatBuffer>, "", [MemWrite]>:$aux,
    BoolAttr:$transpose_a, BoolAttr:$transpose_b, StrAttr:$activation);
  let assemblyFormat = [{
    $a `,` $b (`bias` $bias^)? (`residual` $residual^ `:` type($residual))? `->`
    $out (`aux` $aux^ `:` type($aux))? attr-dict `:` type($a) `,` type($b)
    (`,` type($bias)^)? `->` type($out)
  }];
  let hasVerifier = 1;
}

def Kern_GemmDgeluOp : Kern_Op<"gemm_dgelu"> {
  let summary = "out = gelu'(pre) * (op(a) x op(b)) (tg.matmul_dgelu)";
  let description = [{
    One rank-2 row-major product (kern.gemm_epilogue's shapes) whose result
    is multiplied by the GELU derivative at `pre` ((M, N), out's type, a's
    element type); `approximate` is "tanh" or "none" (erf). cuda: cuBLASLt's
    DGELU epilogue with pre as its aux input (tanh only); cpu: the product,
    then one loop.
  }];
  let arguments = (ins
    Arg<Kern_FloatBuffer, "", [MemRead]>:$a,
    Arg<Kern_FloatBuffer, "", [MemRead]>:$b,
    Arg<Kern_FloatBuffer, "", [MemRead]>:$pre,
    Arg<Kern_FloatBuffer, "", [MemWrite]>:$out,
    BoolAttr:$transpose_a, BoolAttr:$transpose_b, StrAttr:$approximate);
  let assemblyFormat = [{
    $a `,` $b `pre` $pre `->` $out attr-dict `:` type($a) `,` type($b) `,`
    type($pre) `->` type($out)
  }];
  let hasVerifier = 1;
}

def Kern_GemmBiasGradOp : Kern_Op<"gemm_bias_grad"> {
  let summary = "out = op(a) x b, bias_grad = the sums of b over its rows (tg.matmul_bias_grad)";
  let description = [{
    One rank-2 row-major product, a (M, K) or (K, M) with transpose_a, b
    (K, N) (never transposed), out (M, N), and bias_grad (N) = sum over k
    of b[k][n]; all of a's element type, each output accumulated in f32
    (f64 for f64) and rounded once. cuda: cuBLASLt's BGRADA epilogue (b is
    cuBLAS's A; checked on the H200, which has no algorithm for it with a
    transposed b); cpu: the product, then one loop over b.
  }];
  let arguments = (ins
    Arg<Kern_FloatBuffer, "", [MemRead]>:$a,
    Arg<Kern_FloatBuffer, "", [MemRead]>:$b,
    Arg<Kern_FloatBuffer, "", [MemWrite]>:$out,
    Arg<Kern_FloatBuffer, "", [MemWrite]>:$bias_grad,
    BoolAttr:$transpose_a);
  let assemblyFormat = [{
    $a `,` $b `->` $out `,` $bias_grad attr-dict `:` type($a) `,` type($b) `->`
    type($out) `,` type($bias_grad)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Multi-tensor kernels (kern-fuse-horizontal; verifiers in KernDialect.cpp)
//===----------------------------------------------------------------------===//

def Kern_MultiElementwiseOp : Kern_Op<"multi_elementwise",
    [AttrSizedOperandSegments]> {
  let summary = "one body run over several independent (inputs, outputs) members";
  let description = [{
    `num_members` kern.elementwise kernels that share one body, as one
    launch. Operands are member-major: member m's K inputs are
    inputs[m*K .. m*K+K), its J outputs outputs[m*J .. m*J+J). Within a
    member every output has one shape S_m (members' shapes may differ) and
    every input has S_m's element count (read at the position) or a single
    element (read at 0, e.g. a learning rate). The body is a
    kern.elementwise body (K scalars, then the position within the member
    as i64; kern.yield of J scalars); slot k has one element type in every
    member. Members read and write disjoint buffers, except that an output
    may be its own member's full input (in-place updates), and any member
    may read the same single-element input.
  }];
  let arguments = (ins
    Arg<Variadic<AnyMemRef>, "", [MemRead]>:$inputs,
    Arg<Variadic<AnyMemRef>, "", [MemWrite]>:$outputs,
    I64Attr:$num_members);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    (`ins` `(` $inputs^ `:` type($inputs) `)`)?
    `outs` `(` $outputs `:` type($outputs) `)` attr-dict-with-keyword $body
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::Block &getBodyBlock() { return getBody().front(); }
    int64_t members() { return getNumMembersAttr().getInt(); }
    int64_t inputsPerMember() { return getInputs().size() / members(); }
    int64_t outputsPerMember() { return getOutputs().size() / members(); }
    ::mlir::ValueRange memberInputs(int64_t m) {
      return getInputs().slice(m * inputsPerMember(), inputsPerMember());
    }
    ::mlir::ValueRange memberOutputs(int64_t m) {
      return getOutputs().slice(m * outputsPerMember(), outputsPerMember());
    }
  }];
}

def Kern_MultiSumOp : Kern_Op<"multi_sum", [AttrSizedOperandSegments]> {
  let summary = "outputs[m] = the sum of every element of inputs[m]";
  let description = [{
    Several whole-tensor sums (the per-gradient sums of squares of a global
    gradient norm) as one kernel. Each output holds one element of its
    input's type. The CUDA kernel sums blocks of `chunk` elements into
    `partials` (one f64 per (member, chunk), members in order, at least one
    per member), then each member's partials in order: no atomics, the same
    bits every run. The CPU loop sums each input as kern.reduce does and
    leaves `partials` alone.

    With `squares`, each output is the sum of the squares of its input's
    elements: every element is widened to f32 (the outputs' type; inputs
    may be f32, bf16 or f16) and squared in f32 before it is added, the
    values a kern.elementwise square would have written for a plain sum
    to read (kern-fuse-horizontal folds such squares in: the gradient is
    read once, at its own width, and no f32 copy is written).
  }];
  let arguments = (ins
    Arg<Variadic<Kern_FloatBuffer>, "", [MemRead]>:$inputs,
    Arg<Variadic<Kern_FloatBuffer>, "", [MemWrite]>:$outputs,
    Arg<MemRefOf<[F64]>, "", [MemRead, MemWrite]>:$partials,
    I64Attr:$chunk,
    UnitAttr:$squares);
  let assemblyFormat = [{
    `(` $inputs `)` `into` `(` $outputs `)` `partials` $partials (`squares` $squares^)?
    attr-dict `:`
    `(` type($inputs) `)` `->` `(` type($outputs) `)` `,` type($partials)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    // Partials needed for inputs of these element counts.
    static int64_t partialsFor(::llvm::ArrayRef<int64_t> counts, int64_t chunk);
  }];
}

//===----------------------------------------------------------------------===//
// Normalization (tg.layer_norm / tg.rms_norm and their gradients; verifiers
// in KernNormOps.cpp)
//===----------------------------------------------------------------------===//

// One kernel per norm: x (..., C) normalized over its last axis (mean and
// biased variance, or with `rms` the mean square only), statistics in f32
// (f64 for f64 x). out may have another float type than x (a cast of the
// result folded in: the f32 residual stream normalized straight into the
// bf16 matmul operand); weight and bias are (C) of x's element type.
def Kern_LayerNormOp : Kern_Op<"layer_norm", [AttrSizedOperandSegments]> {
  let summary = "out = (x - mean) * rstd * weight + bias per row (rms: x * rstd * weight)";
  let arguments = (ins
    Arg<Kern_FloatBuffer, "", [MemRead]>:$input,
    Arg<Optional<Kern_FloatBuffer>, "", [MemRead]>:$weight,
    Arg<Optional<Kern_FloatBuffer>, "", [MemRead]>:$bias,
    Arg<Kern_FloatBuffer, "", [MemWrite]>:$out,
    F64Attr:$eps, UnitAttr:$rms);
  let assemblyFormat = [{
    $input (`weight` $weight^)? (`bias` $bias^)? `into` $out attr-dict `:`
    type($input) (`weight` type($weight)^)? (`bias` type($bias)^)? `->` type($out)
  }];
  let hasVerifier = 1;
}

def Kern_LayerNormGradOp : Kern_Op<"layer_norm_grad", [AttrSizedOperandSegments]> {
  let summary = "input_grad, weight_grad, bias_grad of kern.layer_norm";
  let description = [{
    tg.layer_norm_grad / tg.rms_norm_grad (`rms`) on buffers: the
    statistics are recomputed from input; grad may have another float type
    than input (a widening cast folded in). weight_grad and bias_grad (C)
    are sums over rows: each of the P parts of the rows writes its partial
    sums into `workspace`, (P, 2, C) f32 (f64 for f64 input), P =
    normGradParts(rows) (dialects/kern/NormWorkspace.h), and a second pass
    adds the P parts in a fixed order (deterministic, no atomics). The
    workspace is present iff a weight or bias gradient is. With `plus`,
    input_grad is the gradient plus `addend` (of input_grad's type): the
    residual stream's gradient added in the same pass (a tg.add folded in).
    With `cast`, input_grad_cast (input_grad's shape, another float type)
    gets input_grad's stored values converted once more: a tg.cast of
    the input gradient folded in (the f32 residual gradient written also as
    the bf16 operand of the matmul gradients, instead of a kernel that
    reads it back). With `sum`, input_grad_sum (C, any float type) is the
    sum over rows of the input gradient as stored (of input_grad_cast's
    values with `sum_of_cast`): a tg.reduce_sum of the input gradient
    folded in (the bias gradient of the products that write the residual
    stream, so their weight-gradient GEMMs run without cuBLASLt's slower
    BGRADA epilogue). It takes a third row of the workspace, which is then
    (P, 3, C).
  }];
  let arguments = (ins
    Arg<Kern_FloatBuffer, "", [MemRead]>:$grad,
    Arg<Kern_FloatBuffer, "", [MemRead]>:$input,
    Arg<Optional<Kern_FloatBuffer>, "", [MemRead]>:$weight,
    Arg<Optional<Kern_FloatBuffer>, "", [MemRead]>:$addend,
    Arg<Kern_FloatBuffer, "", [MemWrite]>:$input_grad,
    Arg<Optional<Kern_FloatBuffer>, "", [MemWrite]>:$input_grad_cast,
    Arg<Optional<Kern_FloatBuffer>, "", [MemWrite]>:$weight_grad,
    Arg<Optional<Kern_FloatBuffer>, "", [MemWrite]>:$bias_grad,
    Arg<Optional<Kern_FloatBuffer>, "", [MemWrite]>:$input_grad_sum,
    Arg<Optional<MemRefOf<[F32, F64]>>, "", [MemRead, MemWrite]>:$workspace,
    F64Attr:$eps, UnitAttr:$rms, UnitAttr:$sum_of_cast);
  let assemblyFormat = [{
    $grad `,` $input (`weight` $weight^)? (`plus` $addend^)? `into` $input_grad
    (`cast` $input_grad_cast^)?
    (`weight_grad` $weight_grad^)? (`bias_grad` $bias_grad^)?
    (`sum` $input_grad_sum^)?
    (`workspace` $workspace^)? attr-dict `:`
    type($grad) `,` type($input) (`weight` type($weight)^)? (`plus` type($addend)^)?
    `->` type($input_grad) (`cast` type($input_grad_cast)^)?
    (`weight_grad` type($weight_grad)^)? (`bias_grad` type($bias_grad)^)?
    (`sum` type($input_grad_sum)^)?
    (`workspace` type($workspace)^)?
  }];
  let hasVerifier = 1;
}

// Batch norm's two reductions (tg.batch_norm_stats / tg.batch_norm_grad_sums;
// verifiers in KernNormOps.cpp). input (N, C, S...) is read as C channels of
// N strided runs of S; each channel's N * S values are cut into P parts
// (batchNormParts, dialects/kern/NormWorkspace.h), P blocks each. With
// P > 1 each part's two sums go to `workspace` (P, 2, C) f32 (f64 for f64
// input) and a second pass adds the parts in a fixed order (deterministic,
// no atomics); with P = 1 there is no workspace and one pass.
def Kern_BatchNormStatsOp : Kern_Op<"batch_norm_stats"> {
  let summary = "mean, var (C) of (N, C, ...) over every axis but 1";
  let description = [{
    Sums of x - K and (x - K)^2 with K = x[0, c, 0...] (a shift from the
    channel's own values keeps E[(x-K)^2] - E[x-K]^2 from cancelling for
    channels whose mean is large against their spread); mean = K + S1 / n,
    var = max(S2 / n - (S1 / n)^2, 0). mean and var are f32 for 16-bit
    input, else input's type.
  }];
  let arguments = (ins
    Arg<Kern_FloatBuffer, "", [MemRead]>:$input,
    Arg<Kern_FloatBuffer, "", [MemWrite]>:$mean,
    Arg<Kern_FloatBuffer, "", [MemWrite]>:$var,
    Arg<Optional<MemRefOf<[F32, F64]>>, "", [MemRead, MemWrite]>:$workspace);
  let assemblyFormat = [{
    $input `into` $mean `,` $var (`workspace` $workspace^)? attr-dict `:`
    type($input) `->` type($mean) `,` type($var) (`workspace` type($workspace)^)?
  }];
  let hasVerifier = 1;
}

def Kern_BatchNormGradSumsOp : Kern_Op<"batch_norm_grad_sums"> {
  let summary = "sum(grad), sum(grad * (x - mean) * rstd) (C) per channel";
  let arguments = (ins
    Arg<Kern_FloatBuffer, "", [MemRead]>:$grad,
    Arg<Kern_FloatBuffer, "", [MemRead]>:$input,
    Arg<Kern_FloatBuffer, "", [MemRead]>:$mean,
    Arg<Kern_FloatBuffer, "", [MemRead]>:$rstd,
    Arg<Kern_FloatBuffer, "", [MemWrite]>:$grad_sum,
    Arg<Kern_FloatBuffer, "", [MemWrite]>:$grad_xhat_sum,
    Arg<Optional<MemRefOf<[F32, F64]>>, "", [MemRead, MemWrite]>:$workspace);
  let assemblyFormat = [{
    $grad `,` $input `,` $mean `,` $rstd `into` $grad_sum `,` $grad_xhat_sum
    (`workspace` $workspace^)? attr-dict `:` type($grad) `,` type($input) `,`
    type($mean) `,` type($rstd) `->` type($grad_sum) `,` type($grad_xhat_sum)
    (`workspace` type($workspace)^)?
  }];
  let hasVerifier = 1;
}

include "dialects/kern/KernVisionOps.td"

#endif // TCC_KERN_OPS
