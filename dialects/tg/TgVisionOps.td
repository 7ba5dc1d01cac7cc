//===- TgVisionOps.td - 2-D convolution and pooling (NCHW or NHWC) -------===//
//
// Part of the tg dialect (TgOps.td includes this file). Every op works on
// NCHW tensors unless its `layout` is "NHWC" (channels-last, which
// tg-conv-layout chooses for cuDNN's tensor-core convolutions): then every
// activation is (N, H, W, C) and a convolution's weight (O, KH, KW, C /
// groups); the descriptions below name the NCHW shapes. Window attributes are pairs (height, width): stride >= 1,
// padding >= 0 (zeros, both sides), dilation >= 1. Verifiers and the
// gradient rules: TgVisionOps.cpp; the shared geometry: dialects/common/Window2d.h.
//
//===----------------------------------------------------------------------===//

def Tg_Conv2dOp : Tg_Op<"conv2d", [
    DeclareOpInterfaceMethods<Tg_GradientOpInterface>]> {
  let summary = "2-D cross-correlation, NCHW, grouped (PyTorch's conv2d without bias)";
  let description = [{
    input (N, C, H, W), weight (O, C / groups, KH, KW) (PyTorch's layout),
    result (N, O, HO, WO) with HO = (H + 2 pad - dil (KH - 1) - 1) / stride + 1
    (floor), WO likewise. Output channel o reads input channels of group
    o / (O / groups). A bias is a separate tg.add.
  }];
  let arguments = (ins Tg_FloatTensor:$input, Tg_FloatTensor:$weight,
                   DenseI64ArrayAttr:$stride, DenseI64ArrayAttr:$padding,
                   DenseI64ArrayAttr:$dilation,
                   DefaultValuedAttr<I64Attr, "1">:$groups,
                   DefaultValuedAttr<StrAttr, "\"NCHW\"">:$layout);
  let results = (outs Tg_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

// conv2d's gradients (its gradient rule emits them). Each is itself
// differentiable (a conv2d-like product), but no rule builds second
// derivatives: they carry no gradient interface.
def Tg_Conv2dInputGradOp : Tg_Op<"conv2d_input_grad", [
    DeclareOpInterfaceMethods<Tg_GradientOpInterface>]> {
  let summary = "d input of tg.conv2d (a transposed convolution of grad)";
  let description = [{
    grad (N, O, HO, WO), weight (O, C / groups, KH, KW); the result has the
    forward input's type (N, C, H, W), which the result type gives (several
    H map to one HO when stride > 1). Attributes as the forward op's. Also
    the forward op of a model's conv_transpose2d (PyTorch's ConvTranspose2d:
    its input is `grad`, its weight (C_in, C_out / groups, KH, KW) this
    op's weight), hence a gradient rule: d grad = conv2d(upstream, weight),
    d weight = conv2d_weight_grad(grad, upstream).
  }];
  let arguments = (ins Tg_FloatTensor:$grad, Tg_FloatTensor:$weight,
                   DenseI64ArrayAttr:$stride, DenseI64ArrayAttr:$padding,
                   DenseI64ArrayAttr:$dilation,
                   DefaultValuedAttr<I64Attr, "1">:$groups,
                   DefaultValuedAttr<StrAttr, "\"NCHW\"">:$layout);
  let results = (outs Tg_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $weight attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Tg_Conv2dWeightGradOp : Tg_Op<"conv2d_weight_grad"> {
  let summary = "d weight of tg.conv2d (grad correlated with the input)";
  let description = [{
    grad (N, O, HO, WO), input (N, C, H, W); the result has the weight's type
    (O, C / groups, KH, KW). Attributes as the forward op's.
  }];
  let arguments = (ins Tg_FloatTensor:$grad, Tg_FloatTensor:$input,
                   DenseI64ArrayAttr:$stride, DenseI64ArrayAttr:$padding,
                   DenseI64ArrayAttr:$dilation,
                   DefaultValuedAttr<I64Attr, "1">:$groups,
                   DefaultValuedAttr<StrAttr, "\"NCHW\"">:$layout);
  let results = (outs Tg_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $input attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

class Tg_Pool2dOp<string mnemonic> : Tg_Op<mnemonic, [
    DeclareOpInterfaceMethods<Tg_GradientOpInterface>]> {
  let arguments = (ins Tg_FloatTensor:$input, DenseI64ArrayAttr:$kernel,
                   DenseI64ArrayAttr:$stride, DenseI64ArrayAttr:$padding,
                   DefaultValuedAttr<StrAttr, "\"NCHW\"">:$layout);
  let results = (outs Tg_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Tg_MaxPool2dOp : Tg_Pool2dOp<"max_pool2d"> {
  let summary = "maximum over each KH x KW window, NCHW";
  let description = [{
    input (N, C, H, W), result (N, C, HO, WO), HO = (H + 2 pad - KH) /
    stride + 1 (floor). Padding positions never win (they are -inf, as in
    PyTorch); padding must be at most half the kernel.
  }];
}

def Tg_AvgPool2dOp : Tg_Pool2dOp<"avg_pool2d"> {
  let summary = "mean over each KH x KW window, NCHW (padding counted)";
  let description = [{
    Shapes as tg.max_pool2d. The divisor is always KH * KW: zero padding
    counts (PyTorch's default count_include_pad=True).
  }];
}

def Tg_Pool2dGradOp : Tg_Op<"pool2d_grad"> {
  let summary = "d input of tg.max_pool2d / tg.avg_pool2d";
  let description = [{
    grad (N, C, HO, WO), input (N, C, H, W) (the forward input), result of
    input's type. `mode` "max": each window's grad goes to the position of
    its maximum, the first in row-major window order on ties (PyTorch's
    CPU rule); windows that share a position add. "avg": each window's grad
    / (KH * KW) goes to each of its positions inside the input.
  }];
  let arguments = (ins Tg_FloatTensor:$grad, Tg_FloatTensor:$input,
                   StrAttr:$mode, DenseI64ArrayAttr:$kernel,
                   DenseI64ArrayAttr:$stride, DenseI64ArrayAttr:$padding,
                   DefaultValuedAttr<StrAttr, "\"NCHW\"">:$layout);
  let results = (outs Tg_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $input attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}
