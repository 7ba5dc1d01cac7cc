//===- KernVisionOps.td - 2-D convolution and pooling kernels -------------===//
//
// Part of the kern dialect (KernOps.td includes this file). NCHW buffers,
// or channels-last ones when `layout` is "NHWC" (x (N, H, W, C), w (O, KH,
// KW, C / groups));
// the tg ops (dialects/tg/TgVisionOps.td) verified the shapes, which these
// ops keep unchanged.
//
//===----------------------------------------------------------------------===//

def Kern_Conv2dOp : Kern_Op<"conv2d"> {
  let summary = "one of conv2d's three products (forward, input grad, weight grad)";
  let description = [{
    With x (N, C, H, W), w (O, C / groups, KH, KW), y (N, O, HO, WO):
    `product` "forward": out = y from a = x, b = w; "input_grad": out = dx
    from a = dy, b = w; "weight_grad": out = dw from a = dy, b = x. out is
    overwritten.
  }];
  let arguments = (ins
    Arg<Kern_FloatBuffer, "", [MemRead]>:$a,
    Arg<Kern_FloatBuffer, "", [MemRead]>:$b,
    Arg<Kern_FloatBuffer, "", [MemWrite]>:$out,
    StrAttr:$product, DenseI64ArrayAttr:$stride, DenseI64ArrayAttr:$padding,
    DenseI64ArrayAttr:$dilation, I64Attr:$groups,
    DefaultValuedAttr<StrAttr, "\"NCHW\"">:$layout);
  let assemblyFormat = [{
    $a `,` $b `into` $out attr-dict `:` type($a) `,` type($b) `->` type($out)
  }];
}

def Kern_Pool2dOp : Kern_Op<"pool2d"> {
  let summary = "max / avg pooling over KH x KW windows, or its input gradient";
  let description = [{
    x (N, C, H, W), y (N, C, HO, WO). `mode` "max" / "avg": out = y from x
    (avg divides by KH * KW, padding counted). "max_grad" / "avg_grad": out
    = dx from x and `grad` = dy (max: to the first maximum of each window).
  }];
  let arguments = (ins
    Arg<Kern_FloatBuffer, "", [MemRead]>:$input,
    Arg<Optional<Kern_FloatBuffer>, "", [MemRead]>:$grad,
    Arg<Kern_FloatBuffer, "", [MemWrite]>:$out,
    StrAttr:$mode, DenseI64ArrayAttr:$kernel, DenseI64ArrayAttr:$stride,
    DenseI64ArrayAttr:$padding, DefaultValuedAttr<StrAttr, "\"NCHW\"">:$layout);
  let assemblyFormat = [{
    $input (`grad` $grad^)? `into` $out attr-dict `:` type($input)
    (`grad` type($grad)^)? `->` type($out)
  }];
}
