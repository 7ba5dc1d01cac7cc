//===- TgInterfaces.td - gradient interface of tg ops ---------------------===//
//
// Each differentiable op knows its vector-Jacobian product, so reverse-mode
// autodiff (passes/training/Autodiff.cpp) is one generic pass over any graph.
//
//===----------------------------------------------------------------------===//
#ifndef TCC_TG_INTERFACES
#define TCC_TG_INTERFACES

include "mlir/IR/OpBase.td"

def Tg_GradientOpInterface : OpInterface<"GradientOpInterface"> {
  let description = [{
    An op that can emit its vector-Jacobian product. Given the gradients of
    the loss with respect to the op's results (null where a result does not
    reach the loss), build ops at the builder's insertion point computing the
    gradients with respect to each operand. Operands that are not
    differentiable (integer labels, for example) get a null Value.
  }];
  let cppNamespace = "::tcc::tg";
  let methods = [
    InterfaceMethod<
      "Builds the gradients of the operands (one entry per operand, null "
      "for non-differentiable operands).",
      "::llvm::LogicalResult", "buildGradients",
      (ins "::mlir::OpBuilder &":$builder,
           "::llvm::ArrayRef<::mlir::Value>":$resultGrads,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>,
  ];
}

def Tg_ScalarOpInterface : OpInterface<"ScalarOpInterface"> {
  let description = [{
    An elementwise op whose value at each position is a scalar function of
    its operands' values at that position (operands numpy-broadcast to the
    result shape). The op builds that function from scalar arith/math ops,
    so lowering needs no per-op code: tg-lower-to-kern puts the body into a
    kern elementwise kernel, and fusion can merge bodies.

    `operands` are scalars of the operands' element types; `flatIndex` is
    the row-major position in the result (i64), for ops whose value depends
    on where it is (iota, counter-based dropout). One scalar per result is
    appended to `results`, of the result element types.
  }];
  let cppNamespace = "::tcc::tg";
  let methods = [
    InterfaceMethod<
      "Builds the scalar function at the builder's insertion point.",
      "::llvm::LogicalResult", "buildScalar",
      (ins "::mlir::OpBuilder &":$builder, "::mlir::Location":$loc,
           "::mlir::ValueRange":$operands, "::mlir::Value":$flatIndex,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$results)>,
  ];
}

#endif // TCC_TG_INTERFACES
