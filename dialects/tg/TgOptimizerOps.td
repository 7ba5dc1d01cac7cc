//===- TgOptimizerOps.td - optimizer updates and training-level ops -===//
//
// Part of the tg dialect (TgOps.td includes this file).
//
// The update ops follow PyTorch's optimizers exactly (same formulas, same
// order of operations), so a compiled run can be compared with a PyTorch one
// step by step. They are elementwise (ScalarOpInterface: the per-step scalars
// learning_rate and step broadcast to every position), so lowering needs no
// per-op code and fusion can merge them with the gradient computation.
//
//===----------------------------------------------------------------------===//

// The optimizer step counter, a per-step scalar (tg.hyper = "step").
def Tg_StepTensor : 0DTensorOf<[I64]>, BuildableType<
    "::mlir::RankedTensorType::get({}, $_builder.getIntegerType(64))">;

def Tg_SgdUpdateOp : Tg_Op<"sgd_update", [
    AllTypesMatch<["param", "grad", "result"]>,
    DeclareOpInterfaceMethods<Tg_ScalarOpInterface>]> {
  let summary = "param - learning_rate * (grad + weight_decay * param)";
  let description = [{
    Plain SGD, as torch.optim.SGD without momentum: the weight decay is L2,
    added to the gradient (0 by default, and then left out of the printed
    op).
  }];
  let arguments = (ins Tg_MasterFloatTensor:$param, Tg_MasterFloatTensor:$grad,
                   Tg_ScalarFloatTensor:$learning_rate,
                   DefaultValuedAttr<F64Attr, "0.0">:$weight_decay);
  let results = (outs Tg_MasterFloatTensor:$result);
  let assemblyFormat = [{
    $param `,` $grad `,` $learning_rate attr-dict `:` type($result) `,` type($learning_rate)
  }];
  let hasVerifier = 1;
}

def Tg_MomentumUpdateOp : Tg_Op<"momentum_update", [
    AllTypesMatch<["param", "grad", "momentum_buffer", "new_param",
                   "new_momentum_buffer"]>,
    DeclareOpInterfaceMethods<Tg_ScalarOpInterface>]> {
  let summary = "SGD with momentum (torch.optim.SGD, dampening 0, no nesterov)";
  let description = [{
    ```
    d    = grad + weight_decay * param
    buf' = momentum * buf + d
    p'   = param - learning_rate * buf'
    ```
    With the buffer starting at zeros, the first step gives buf' = d
    exactly, as PyTorch's lazily created buffer does.
  }];
  let arguments = (ins Tg_MasterFloatTensor:$param, Tg_MasterFloatTensor:$grad,
                   Tg_MasterFloatTensor:$momentum_buffer,
                   Tg_ScalarFloatTensor:$learning_rate,
                   F64Attr:$momentum,
                   DefaultValuedAttr<F64Attr, "0.0">:$weight_decay);
  let results = (outs Tg_MasterFloatTensor:$new_param,
                      Tg_MasterFloatTensor:$new_momentum_buffer);
  let assemblyFormat = [{
    $param `,` $grad `,` $momentum_buffer `,` $learning_rate attr-dict `:`
    type($param) `,` type($learning_rate)
  }];
  let hasVerifier = 1;
}

def Tg_AdamWUpdateOp : Tg_Op<"adamw_update", [
    AllTypesMatch<["param", "grad", "m", "v", "new_param", "new_m", "new_v"]>,
    DeclareOpInterfaceMethods<Tg_ScalarOpInterface>]> {
  let summary = "AdamW (torch.optim.AdamW, amsgrad off)";
  let description = [{
    With t = step + 1 (step is the 0-based optimizer step) and the per-step
    scalars computed in f64, then rounded to the element type as PyTorch
    does with its Python-float coefficients:
    ```
    p1    = param * (1 - lr * weight_decay)          decoupled weight decay
    m'    = m * beta1 + grad * (1 - beta1)
    v'    = v * beta2 + grad * grad * (1 - beta2)
    denom = sqrt(v') / sqrt(1 - beta2^t) + eps
    p'    = p1 - (lr / (1 - beta1^t)) * (m' / denom)
    ```
  }];
  let arguments = (ins Tg_MasterFloatTensor:$param, Tg_MasterFloatTensor:$grad,
                   Tg_MasterFloatTensor:$m, Tg_MasterFloatTensor:$v,
                   Tg_ScalarFloatTensor:$learning_rate, Tg_StepTensor:$step,
                   F64Attr:$beta1, F64Attr:$beta2, F64Attr:$eps,
                   DefaultValuedAttr<F64Attr, "0.0">:$weight_decay);
  let results = (outs Tg_MasterFloatTensor:$new_param, Tg_MasterFloatTensor:$new_m,
                      Tg_MasterFloatTensor:$new_v);
  let assemblyFormat = [{
    $param `,` $grad `,` $m `,` $v `,` $learning_rate `,` $step attr-dict `:`
    type($param) `,` type($learning_rate)
  }];
  let hasVerifier = 1;
}
