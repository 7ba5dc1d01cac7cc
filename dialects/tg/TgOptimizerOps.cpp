// Verifiers of the optimizer ops (TgOptimizerOps.td). sgd_update is fully
// described by its ODS constraints; new optimizer ops add their checks here.
#include "dialects/tg/TgDialect.h"

using namespace mlir;
using namespace tcc::tg;
