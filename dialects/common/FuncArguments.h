// Appending arguments to a function, and the tg.hyper arguments (scalars the
// runtime passes every step: learning rate, step counter, rng seed). One
// home, so the importer (dropout's rng_seed and step) and the training passes
// (the optimizers' learning rate and step) add them the same way.
#ifndef TCC_DIALECTS_COMMON_FUNCARGUMENTS_H
#define TCC_DIALECTS_COMMON_FUNCARGUMENTS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"

namespace tcc::model {

// Appends an argument of `type` with the argument attributes `attrs`.
mlir::BlockArgument appendArgument(mlir::func::FuncOp f, mlir::Type type,
                                   mlir::DictionaryAttr attrs);

// The argument marked tg.hyper = `name`, appended (0-d tensor of
// `elementType`) when the function has none yet.
mlir::BlockArgument getOrAddHyperArgument(mlir::func::FuncOp f,
                                          llvm::StringRef name,
                                          mlir::Type elementType);

} // namespace tcc::model

#endif
