//===- TgOptimizerOps.td - optimizer updates and training-level ops -===//
//
// Part of the tg dialect (TgOps.td includes this file).
//
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
