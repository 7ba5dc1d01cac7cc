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
  // Scalar bodies of elementwise ops (ScalarOpInterface) are arith/math ops.
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect"];
}

class Tg_Op<string mnemonic, list<Trait> traits = []>
    : Op<Tg_Dialect, mnemonic, !listconcat(traits, [Pure])>;

// Structural ops take bf16 / f16 too (mixed precision); optimizer updates
// stay on f32 / f64 master weights and state.
def Tg_FloatTensor : RankedTensorOf<[F16, BF16, F32, F64]>;
def Tg_MasterFloatTensor : RankedTensorOf<[F32, F64]>;
def Tg_IndexTensor : RankedTensorOf<[I32, I64]>;
def Tg_ScalarFloatTensor : 0DTensorOf<[F16, BF16, F32, F64]>;


//===----------------------------------------------------------------------===//
// Sources
//===----------------------------------------------------------------------===//


//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//


//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//





//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//



//===----------------------------------------------------------------------===//
// Reductions and shape
//===----------------------------------------------------------------------===//





//===----------------------------------------------------------------------===//
// Optimizers
//===----------------------------------------------------------------------===//

// Op groups, one file each (with verifiers and gradients in the matching .cpp):
include "dialects/tg/TgElementwiseOps.td"
include "dialects/tg/TgStructuralOps.td"
include "dialects/tg/TgVisionOps.td"
include "dialects/tg/TgBatchNormOps.td"
include "dialects/tg/TgOptimizerOps.td"

#endif // TCC_TG_OPS
