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

#endif // TCC_TG_INTERFACES
