// pb -> tg for the training recipe: the optimizer, the learning-rate
// schedule, gradient clipping and micro-batches of `model.training`, checked
// and recorded as module attributes (names in dialects/common/ModelAttrs.h)
// for the training passes, the code generator and, through the step
// descriptor, the runtime.
#ifndef TCC_FRONTEND_IMPORTER_IMPORTTRAINING_H
#define TCC_FRONTEND_IMPORTER_IMPORTTRAINING_H

#include "mlir/IR/BuiltinOps.h"

namespace tcc {
namespace model {
class Model;
}

// Validates model.training (except the loss, which the graph import checks)
// and sets tg.optimizer, tg.lr_schedule, tg.grad_clip and tg.micro_batches on
// `module`. Errors are emitted as "training: ..." diagnostics.
mlir::LogicalResult importTrainingRecipe(const model::Model &model,
                                         mlir::ModuleOp module);

} // namespace tcc

#endif
